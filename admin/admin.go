package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/password"
)

// Prefix is where the API lives; New's routes are full paths under it.
const Prefix = "/admin/v1"

// Applier is the write path (fsm.Applier). A non-nil error means the write
// was not committed, or its fate is unknown.
type Applier = fsm.Applier

// Keys manages the signing keys (implemented by package keys, adapted by
// package node).
type Keys interface {
	// Rotate adds a new key: signing once the JWKS cache lifetime has passed
	// (state "next"), or at once when immediate (state "active").
	Rotate(ctx context.Context, immediate bool) (KeyInfo, error)
	// List returns every published key.
	List() ([]KeyInfo, error)
}

// KeyInfo describes a signing key; State is "next", "active" or "retired".
type KeyInfo struct {
	Kid         string     `json:"kid"`
	State       string     `json:"state"`
	CreatedAt   time.Time  `json:"created_at"`
	ActivatesAt *time.Time `json:"activates_at,omitempty"`
	RetiredAt   *time.Time `json:"retired_at,omitempty"`
}

// Cluster reports the cluster's membership (implemented by package cluster,
// adapted by package node).
type Cluster interface {
	Status(ctx context.Context) (ClusterStatus, error)
	// RemoveNode takes a dead node out of the raft configuration. Errors
	// that are the caller's to fix are *ClusterError.
	RemoveNode(ctx context.Context, id string) error
	// SetVoter makes a member a voter (promote) or a non-voter, an edge
	// replica (demote). Errors that are the caller's to fix are
	// *ClusterError.
	SetVoter(ctx context.Context, id string, voter bool) error
	// Backup writes a consistent copy of the whole state (a bbolt file) to
	// w, including every write acknowledged anywhere before the call. Any
	// node serves it.
	Backup(ctx context.Context, w io.Writer) error
	// Restore replaces the state of the whole cluster with a backup read
	// from r. A file that is not a usable state file, and a node that
	// cannot run the restore (not the leader), are *ClusterError.
	Restore(ctx context.Context, r io.Reader) error
}

// ClusterError is a refusal of a cluster operation with its answer: for
// example NOT_FOUND for an unknown node, CONFLICT for a node still alive.
type ClusterError struct {
	Status  int
	Code    string
	Message string
}

func (e *ClusterError) Error() string { return e.Message }

// ClusterStatus is the answer of GET /cluster.
type ClusterStatus struct {
	Leader  string          `json:"leader"`
	Members []ClusterMember `json:"members"`
	// StateFormat is the state format the cluster runs (the one its state
	// holds); Mixed says its members announce different versions or
	// formats (a rolling upgrade under way): writes newer than
	// StateFormat are refused until every member runs the newer version.
	StateFormat int  `json:"state_format"`
	Mixed       bool `json:"mixed"`
}

// ClusterMember is one node of ClusterStatus.
type ClusterMember struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	GossipAddr string `json:"gossip_addr"`
	HTTPAddr   string `json:"http_addr"`
	State      string `json:"state"`
	Voter      bool   `json:"voter"`
	// AppliedIndex, AppliedLag (behind the leader) and LastContactMs (with
	// the leader, 0 for the leader); -1 when unknown.
	AppliedIndex  int64 `json:"applied_index"`
	AppliedLag    int64 `json:"applied_lag"`
	LastContactMs int64 `json:"last_contact_ms"`
	// Version is the oidcd version the member announces ("" when it
	// announces none, or is not seen); StateFormat the newest state
	// format it applies (1, fsm.FormatBase, for a member of a release
	// before the gate or one not seen).
	Version     string `json:"version"`
	StateFormat int    `json:"state_format"`
}

// Config wires the API to one node.
type Config struct {
	State   *fsm.State       // local read view (required)
	Applier Applier          // replicated writes (required)
	Keys    Keys             // nil: the key routes answer 503
	Cluster Cluster          // nil: GET /cluster answers 503
	Node    func() NodeInfo  // the answering node, for GET /status; nil: only its applied index
	Hasher  *password.Hasher // default DefaultParams, GOMAXPROCS at once
	Now     func() time.Time // default time.Now
	Logger  *slog.Logger     // default discards
	NewID   func() string    // default a random (v4) UUID
	// TokenHash returns HashToken of the admin token; default reads the
	// replicated hash from State. An empty hash lets no request in.
	TokenHash func() string
	// KEK seals TOTP secrets and messages to people before they are
	// replicated (nil: the clear marker, see internal/kek).
	KEK *kek.KEK
	// Issuer names the provider in authenticator apps (its host) and in
	// messages, and is the base of the links they carry.
	Issuer string
	// MaxSnapshotBytes caps the body of POST /snapshot; default
	// DefaultMaxSnapshotBytes.
	MaxSnapshotBytes int64
	// OnVerify, when set, hears each GET /audit/verify's verdict (the
	// verify-failure metric).
	OnVerify func(ok bool)
	// Guard counts credential guesses per client address. A node makes
	// one and gives it to every route that takes a credential (this API
	// and the console's token form); nil: New makes one of its own.
	Guard *Guard
	// ReadIndex makes reads linearizable: it returns once this node has
	// applied every write acknowledged anywhere in the cluster before the
	// call (a raft read index), or an error when no leader can vouch for
	// that, within a deadline of its own. Every GET calls it first unless
	// the caller asks for ?stale=true (see read). Nil: local reads (one
	// node, or a test, where they are already current).
	ReadIndex func(ctx context.Context) error
	// People checks a person's access token presented as the bearer
	// credential (issued to ClientID); nil: only the token and API keys
	// are accepted.
	People PersonTokens
	// AdminACR is the least acr a person's access token must carry to
	// administer (--admin-acr; default the second-factor acr).
	AdminACR string
	// Mail: the provider sends mail to people (node.Config.MailEnabled:
	// --smtp-url or --email-outbox). Without it the routes that send mail
	// (POST /invitations, POST /users/{id}/verify-email) answer 409
	// CONFLICT and send nothing (mail.go). Issuer is then the base of the
	// links they send, and KEK seals the messages.
	Mail bool
}

type api struct {
	Config
}

// New returns the admin API. Its routes are full paths under Prefix, so the
// caller mounts it as mux.Handle(admin.Prefix+"/", h). The caller adds
// httpx.Correlation around it; panics are turned into 500 envelopes here.
func New(cfg Config) http.Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NewID == nil {
		cfg.NewID = uuid.NewString
	}
	if cfg.Hasher == nil {
		cfg.Hasher = password.New(password.DefaultParams(), runtime.GOMAXPROCS(0))
	}
	if cfg.MaxSnapshotBytes <= 0 {
		cfg.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	if cfg.TokenHash == nil {
		st := cfg.State
		cfg.TokenHash = func() string {
			h, _ := st.AdminTokenHash() // a read error lets nobody in
			return h
		}
	}
	if cfg.Guard == nil {
		cfg.Guard = NewGuard(cfg.Now)
	}
	a := &api{Config: cfg}
	mux := http.NewServeMux()
	a.routes(mux)
	return httpx.Recover(cfg.Logger)(a.authenticate(mux))
}

// route is one path and its handlers by method.
type route struct {
	path    string
	methods map[string]http.HandlerFunc
}

// Routes lists the admin API's operations as "METHOD /path" (under
// Prefix), for the check that docs/openapi/admin.json describes each.
func Routes() []string {
	var out []string
	for _, rt := range (&api{}).table() {
		for m := range rt.methods {
			out = append(out, m+" "+rt.path)
		}
	}
	slices.Sort(out)
	return out
}

func (a *api) routes(mux *http.ServeMux) {
	for _, rt := range a.table() {
		var allow []string
		for m, h := range rt.methods {
			// Every route is authorized (authz.go): a GET after its read
			// index, so it decides on a current state.
			h = a.authorize(m, rt.path, h)
			if m == http.MethodGet {
				h = a.read(rt.path, h) // linearizable unless ?stale=true (linearize.go)
			}
			mux.HandleFunc(m+" "+Prefix+rt.path, h)
			allow = append(allow, m)
		}
		if _, ok := rt.methods["GET"]; ok {
			allow = append(allow, "HEAD")
		}
		slices.Sort(allow)
		// The other methods get a 405 envelope instead of the mux's
		// plain-text one. Each is named: a pattern without a method would
		// conflict with a route of the same shape ("/users/import" with
		// "GET /users/{id}").
		notAllowed := methodNotAllowed(strings.Join(allow, ", "))
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"} {
			if !slices.Contains(allow, m) {
				mux.HandleFunc(m+" "+Prefix+rt.path, notAllowed)
			}
		}
	}
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound, "no such route")
	})
}

// table is every route and its handlers by method.
func (a *api) table() []route {
	return []route{
		{"/organizations", map[string]http.HandlerFunc{"GET": a.listOrgs, "POST": a.createOrg}},
		{"/organizations/{id}", map[string]http.HandlerFunc{"GET": a.getOrg, "PATCH": a.updateOrg, "DELETE": a.deleteOrg}},
		{"/users", map[string]http.HandlerFunc{"GET": a.listUsers, "POST": a.createUser}},
		{"/users/import", map[string]http.HandlerFunc{"POST": a.importUsers}},
		{"/users/{id}", map[string]http.HandlerFunc{"GET": a.getUser, "PATCH": a.updateUser, "DELETE": a.deleteUser}},
		{"/users/{id}/totp", map[string]http.HandlerFunc{"POST": a.enrollTOTP, "DELETE": a.removeTOTP}},
		{"/users/{id}/recovery-codes", map[string]http.HandlerFunc{"POST": a.newRecoveryCodes}},
		{"/users/{id}/factors", map[string]http.HandlerFunc{"GET": a.getFactors}},
		{"/users/{id}/lockouts", map[string]http.HandlerFunc{"DELETE": a.clearUserLockouts}},
		{"/users/{id}/verify-email", map[string]http.HandlerFunc{"POST": a.verifyEmail}},
		{"/invitations", map[string]http.HandlerFunc{"GET": a.listInvitations, "POST": a.createInvitation}},
		{"/invitations/{id}", map[string]http.HandlerFunc{"GET": a.getInvitation, "DELETE": a.deleteInvitation}},
		{"/lockouts", map[string]http.HandlerFunc{"GET": a.listLockouts}},
		{"/lockouts/{key}", map[string]http.HandlerFunc{"DELETE": a.clearLockout}},
		{"/memberships", map[string]http.HandlerFunc{"GET": a.listMemberships, "POST": a.createMembership}},
		{"/memberships/{id}", map[string]http.HandlerFunc{"GET": a.getMembership, "PATCH": a.updateMembership, "DELETE": a.deleteMembership}},
		{"/clients", map[string]http.HandlerFunc{"GET": a.listClients, "POST": a.createClient}},
		{"/clients/{id}", map[string]http.HandlerFunc{"GET": a.getClient, "PATCH": a.updateClient, "DELETE": a.deleteClient}},
		{"/directories", map[string]http.HandlerFunc{"GET": a.listDirectories, "POST": a.createDirectory}},
		{"/directories/{id}", map[string]http.HandlerFunc{"GET": a.getDirectory, "PATCH": a.updateDirectory, "DELETE": a.deleteDirectory}},
		{"/identity-providers", map[string]http.HandlerFunc{"GET": a.listIdentityProviders, "POST": a.createIdentityProvider}},
		{"/identity-providers/{id}", map[string]http.HandlerFunc{"GET": a.getIdentityProvider, "PATCH": a.updateIdentityProvider, "DELETE": a.deleteIdentityProvider}},
		{"/users/{id}/identities", map[string]http.HandlerFunc{"GET": a.listIdentities}},
		{"/users/{id}/identities/{identity_id}", map[string]http.HandlerFunc{"DELETE": a.unlinkIdentity}},
		{"/keys", map[string]http.HandlerFunc{"GET": a.listKeys}},
		{"/keys/rotate", map[string]http.HandlerFunc{"POST": a.rotateKey}},
		{"/cluster", map[string]http.HandlerFunc{"GET": a.clusterStatus}},
		{"/cluster/nodes/{id}", map[string]http.HandlerFunc{"DELETE": a.removeNode}},
		{"/cluster/members/{id}/promote", map[string]http.HandlerFunc{"POST": a.setVoter(true)}},
		{"/cluster/members/{id}/demote", map[string]http.HandlerFunc{"POST": a.setVoter(false)}},
		{"/snapshot", map[string]http.HandlerFunc{"GET": a.backup, "POST": a.restore}},
		{"/status", map[string]http.HandlerFunc{"GET": a.status}},
		{"/audit", map[string]http.HandlerFunc{"GET": a.listAudit}},
		{"/audit/verify", map[string]http.HandlerFunc{"GET": a.verifyAudit}},
		{"/admins", map[string]http.HandlerFunc{"GET": a.listAdmins, "POST": a.createAdmin}},
		{"/admins/{id}", map[string]http.HandlerFunc{"DELETE": a.deleteAdmin}},
		{"/api-keys", map[string]http.HandlerFunc{"GET": a.listAPIKeys, "POST": a.createAPIKey}},
		{"/api-keys/{id}", map[string]http.HandlerFunc{"DELETE": a.deleteAPIKey}},
		{"/admin-token", map[string]http.HandlerFunc{"POST": a.replaceAdminToken}},
		{"/branding", map[string]http.HandlerFunc{"GET": a.getBranding, "PUT": a.putBranding}},
	}
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		httpx.WriteError(w, r, http.StatusMethodNotAllowed, httpx.CodeBadRequest, "method not allowed; allowed: "+allow)
	}
}

// authenticate resolves the bearer credential to a Credential
// (credential_check.go: the admin token, an API key or a person's access
// token) before any route runs, and puts it in the request's context
// (WithCredential). What the credential may do is not decided here.
func (a *api) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", "Bearer")
			httpx.WriteError(w, r, http.StatusUnauthorized, httpx.CodeUnauthorized, "admin token required")
			return
		}
		// The attempt is counted before the credential is compared, and
		// given back only when it proved genuine (Guard).
		if !a.Guard.Reserve(r) {
			w.Header().Set("Retry-After", a.Guard.RetryAfter())
			httpx.WriteError(w, r, http.StatusTooManyRequests, httpx.CodeRateLimited, "too many admin credential attempts from this address; try again later")
			return
		}
		cred, indexed, refused := a.resolve(r, token)
		if refused != nil {
			if refused.release {
				a.Guard.Release(r)
			}
			a.Logger.Info("admin: refused credential", "status", refused.status, "remote", httpx.ClientAddr(r), "path", httpx.LogValue(r.URL.Path),
				"correlation_id", httpx.CorrelationID(r.Context()))
			refused.write(w, r)
			return
		}
		a.Guard.Release(r)
		ctx := WithCredential(r.Context(), cred)
		if indexed {
			ctx = withReadIndexed(ctx)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bearer extracts the token of an "Authorization: Bearer <token>" header;
// the scheme is case-insensitive (RFC 9110 11.1).
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// now is the clock, in UTC so stamped times read the same everywhere.
func (a *api) now() time.Time { return a.Now().UTC() }

// apply proposes cmd and answers the failure cases itself; ok reports
// whether the caller should write the success answer.
//
// Mapping: an Applier error is answered by applyFailed (409 for a write
// the cluster's state format cannot take yet, 503 otherwise). In Result.Err, a
// *fsm.NotFoundError names a record that the body refers to (a
// membership's user_id, a client's organization_id): that is the caller's
// input pointing nowhere, answered 422 VALIDATION_ERROR with a detail on
// the field, while the path's own record (DELETE /memberships/{id} of a
// missing one) is a bare fsm.ErrNotFound answered 404. Conflicts are 409.
func (a *api) apply(w http.ResponseWriter, r *http.Request, cmd fsm.Command) (fsm.Result, bool) {
	return a.commit(w, r, a.stamp(r, cmd))
}

// applyAs is apply with the audit event ev instead of r's admin event
// (mailEvent: an invitation sent, an address check).
func (a *api) applyAs(w http.ResponseWriter, r *http.Request, cmd fsm.Command, ev fsm.Audit) (fsm.Result, bool) {
	return a.commit(w, r, fsm.StampIn(r.Context(), cmd, a.now(), ev))
}

// commit proposes the stamped cmd and answers the failure cases as apply
// says.
func (a *api) commit(w http.ResponseWriter, r *http.Request, cmd fsm.Command) (fsm.Result, bool) {
	return a.commitWith(w, r, cmd, nil)
}

// commitWith is commit with answered, when not nil, offered a refusal in
// Result.Err first: it reports whether it answered it itself (a create's
// replay, idempotency.go).
func (a *api) commitWith(w http.ResponseWriter, r *http.Request, cmd fsm.Command, answered func(fsm.Result) bool) (fsm.Result, bool) {
	res, err := a.Applier.Apply(r.Context(), cmd)
	if err != nil {
		a.applyFailed(w, r, "apply "+cmd.Type.String(), err)
		return res, false
	}
	if res.Err == nil {
		return res, true
	}
	if answered != nil && answered(res) {
		return res, false
	}
	var nf *fsm.NotFoundError
	var ce *fsm.ConflictError
	switch {
	case errors.As(res.Err, &nf):
		httpx.WriteError(w, r, http.StatusUnprocessableEntity, httpx.CodeValidation, "a referenced record does not exist",
			httpx.Detail{Field: nf.Field, Message: "no such record", Code: "not_found"})
	case errors.Is(res.Err, fsm.ErrNotFound):
		notFound(w, r)
	case errors.As(res.Err, &ce):
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict, conflictMessage(ce.Field),
			httpx.Detail{Field: ce.Field, Message: "already in use", Code: "conflict"})
	case errors.Is(res.Err, fsm.ErrConflict):
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict, "conflict")
	case errors.Is(res.Err, fsm.ErrLocked):
		w.Header().Set("Retry-After", strconv.Itoa(int(AdminMailWindow/time.Second)))
		httpx.WriteError(w, r, http.StatusTooManyRequests, httpx.CodeRateLimited,
			fmt.Sprintf("this address has been sent %d messages by administrators within an hour; try again later", AdminMailLimit))
	default:
		a.Logger.Error("admin: unexpected apply outcome", "type", cmd.Type.String(), "err", res.Err,
			"correlation_id", httpx.CorrelationID(r.Context()))
		httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "internal error")
	}
	return res, false
}

func conflictMessage(field string) string {
	switch field {
	case "updated_at":
		return "the record changed since it was read; read it again and retry"
	case "org_id":
		return "the user is already a member of this organization"
	case "role":
		return "the person holds this role already"
	case "organization_id":
		return "the person is org_admin of another organization; an administrator is org_admin of one organization at most"
	default:
		return field + " is already in use"
	}
}

// applyFailed answers for an error of the Applier (or of a write another
// package proposes, a key rotation):
//
//   - *fsm.FormatError: the write needs a newer state format than the
//     cluster runs (a rolling upgrade under way, docs/operators/upgrades.md)
//     and was refused before it was proposed: 409 CONFLICT naming the
//     feature and, one detail each, the members to upgrade first. It is
//     the operator's to act on, not a fault: logged at Info.
//   - fsm.ErrMaybeApplied: the write was sent and its fate is unknown (the
//     leader went away after the append): 503 saying it may have been
//     applied, and how to find out.
//   - anything else: nothing was committed, 503 "try again".
func (a *api) applyFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	var fe *fsm.FormatError
	switch {
	case errors.As(err, &fe):
		a.Logger.Info("admin: "+what+" refused: the cluster's state format is older than it needs", "err", err,
			"correlation_id", httpx.CorrelationID(r.Context()))
		details := make([]httpx.Detail, 0, len(fe.Members))
		for _, m := range fe.Members {
			details = append(details, httpx.Detail{Field: "members", Message: m + " runs an older release: upgrade it first", Code: "needs_upgrade"})
		}
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict, formatRefusal(fe), details...)
	case errors.Is(err, fsm.ErrFormat):
		a.Logger.Info("admin: "+what+" refused: the cluster's state format is older than it needs", "err", err,
			"correlation_id", httpx.CorrelationID(r.Context()))
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict,
			"this write needs a newer state format than the cluster runs: nothing was written; send it again once every node runs the newer release")
	case errors.Is(err, fsm.ErrMaybeApplied):
		a.Logger.Warn("admin: "+what+": the write may have been applied", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		w.Header().Set("Retry-After", "1")
		httpx.WriteError(w, r, http.StatusServiceUnavailable, httpx.CodeUnavailable, maybeAppliedMessage(r))
	default:
		a.unavailable(w, r, what, err)
	}
}

// formatRefusal is the message of a FormatError's 409, for an operator:
// what needs which format and release, what the cluster runs, whom to
// upgrade, and that nothing was written.
func formatRefusal(fe *fsm.FormatError) string {
	s := fmt.Sprintf("%s needs state format %d", fe.Feature, fe.Need)
	if v := fsm.FormatRelease(fe.Need); v != "" {
		s += " (oidcd " + v + " or newer on every node)"
	}
	s += fmt.Sprintf("; the cluster runs format %d", fe.Have)
	if len(fe.Members) > 0 {
		s += "; upgrade first: " + strings.Join(fe.Members, ", ")
	}
	return s + ". Nothing was written: send it again once every node runs the newer release"
}

// maybeAppliedMessage is the message of the 503 for a write whose fate is
// unknown: how to find out depends on whether the request can be sent
// again safely (a create with an Idempotency-Key, idempotency.go).
func maybeAppliedMessage(r *http.Request) string {
	const lost = "the leader went away after the write was sent: it may have been applied. "
	if idempotencyKeyOf(r) != "" {
		return lost + "Read it back, or retry with the same Idempotency-Key (if it was applied, the retry answers the record it made)"
	}
	return lost + "Read it back before you send it again"
}

// unavailable answers 503: the cluster could not commit, or the local state
// could not be read.
func (a *api) unavailable(w http.ResponseWriter, r *http.Request, what string, err error) {
	a.Logger.Warn("admin: "+what+" failed", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
	w.Header().Set("Retry-After", "1")
	httpx.WriteError(w, r, http.StatusServiceUnavailable, httpx.CodeUnavailable, "cluster unavailable, try again")
}

// readFailed answers for an error of a State read of the path's record.
func (a *api) readFailed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, fsm.ErrNotFound) {
		notFound(w, r)
		return
	}
	a.unavailable(w, r, "read state", err)
}

func notFound(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound, "not found")
}

// valueOr returns res.Value when the Applier handed back the record itself;
// otherwise (a forwarded write whose value came back in another shape) it
// reads the record from the local state, which already reflects the write.
func valueOr[T any](res fsm.Result, read func() (T, error)) (T, error) {
	if v, ok := res.Value.(T); ok {
		return v, nil
	}
	return read()
}

// pathUUID reads the {id} path value, answering 400 when it is not a UUID.
func pathUUID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		writeInvalid(w, r, []httpx.Detail{{Field: "id", Message: "must be a UUID", Code: "invalid_uuid"}})
		return "", false
	}
	return strings.ToLower(id), true
}

// decode reads a JSON body, answering for a body that cannot be used.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	err := httpx.DecodeJSON(w, r, v)
	if err == nil {
		return true
	}
	httpx.WriteBodyError(w, r, err)
	return false
}

// errNotWired is logged when an optional dependency was not configured.
var errNotWired = errors.New("admin: not configured")
