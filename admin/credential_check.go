package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
)

// How a bearer credential becomes a Credential (authenticate, admin.go).
// The kinds are tried in this order, each ruling itself out cheaply:
//
//  1. The break-glass token: compared in constant time with the hash in
//     this node's state (Config.TokenHash). It acts as RoleAdmin.
//  2. An API key, recognised by its form, oidcd_ak_<id>_<secret>: the id
//     locates the one record to compare with (no scan), after a read
//     index, so a key deleted through any node is refused by the next
//     request here. A key past its expires_at is refused like a wrong one.
//     Read with it, in the same read, are what made it (fsm.APIKeyLineage:
//     the keys that made it, at most fsm.MaxAPIKeyChain, and the grants
//     of the person who made the first): a key acts only while its maker
//     holds the authority for it now (InForce), else it is refused as a
//     key that is gone. A key made by the token costs no more reads.
//  3. With Config.People set, a person's access token: the provider must
//     find it active and issued to ClientID (another application's token
//     is refused, 401), its acr must meet the required one (403 FORBIDDEN
//     otherwise: the person is known, the sign-in too weak), and, read
//     after a read index, the person must hold a grant (403 otherwise).
//
// Every attempt is counted by the Guard before any comparison and given
// back once the credential proved genuine, whatever its kind: a wrong
// token, key or access token uses up the address's allowance alike.

// apiKeyPrefix begins every API key.
const apiKeyPrefix = "oidcd_ak_"

// newAPIKey returns a new key for the record id, and the hash to store:
// apiKeyPrefix, the id, "_" and 256 random bits (base64url). The id makes
// the key self-locating; only the secret part makes it unguessable.
func newAPIKey(id string) (key, hash string) {
	key = apiKeyPrefix + id + "_" + randomString()
	return key, password.HashSecret(key)
}

// parseAPIKey returns the record id of a bearer of the API key form.
func parseAPIKey(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, apiKeyPrefix)
	if !ok || len(rest) < 38 || rest[36] != '_' || !isUUID(rest[:36]) {
		return "", false
	}
	return rest[:36], true
}

// acrMeets reports whether a token's acr satisfies the required one:
// equal to it, or the second-factor acr, which is stronger than either
// single factor (password, or a code sent to the phone). The two single
// factors do not stand in for each other. An empty requirement is the
// second factor's.
func acrMeets(acr, required string) bool {
	if required == "" {
		required = authn.ACRMFA
	}
	switch {
	case acr == required:
		return true
	case acr == authn.ACRMFA:
		return required == authn.ACRPwd || required == authn.ACRPhone
	}
	return false
}

// roleRank orders roles from the widest: a person's widest grant is the
// one in force.
var roleRank = map[string]int{RoleAdmin: 3, RoleAuditor: 2, RoleOrgAdmin: 1}

// widestGrant is the grant in force among a person's grants (oldest
// first): the widest role, admin over auditor over org_admin. The state
// holds at most one grant per role, and org_admin for one organization,
// so the choice is never between two organizations.
func widestGrant(gs []fsm.AdminGrant) (fsm.AdminGrant, bool) {
	var best fsm.AdminGrant
	for _, g := range gs {
		if roleRank[g.Role] > roleRank[best.Role] {
			best = g
		}
	}
	return best, best.Role != ""
}

// refusal is an answer authenticate gives instead of running the route.
// release: the guard's attempt is given back, because the credential
// proved genuine (a known person whose sign-in is too weak, or who holds
// no grant) or could not be checked at all (503): neither is a guess.
type refusal struct {
	status  int
	code    string
	message string
	release bool
}

func (f *refusal) write(w http.ResponseWriter, r *http.Request) {
	switch f.status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	case http.StatusForbidden:
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	httpx.WriteError(w, r, f.status, f.code, f.message)
}

var (
	refuseInvalid = &refusal{status: http.StatusUnauthorized, code: httpx.CodeUnauthorized, message: "invalid admin token"}
	refuseKey     = &refusal{status: http.StatusUnauthorized, code: httpx.CodeUnauthorized, message: "invalid or expired API key"}
	// refuseMakerGone: the key's maker no longer holds the authority for
	// it. The write that took it away ends such a key, so this is what a
	// state reached some other way answers: as a key that is gone.
	refuseMakerGone = &refusal{status: http.StatusUnauthorized, code: httpx.CodeUnauthorized,
		message: "this API key's maker no longer holds the authority for it (its grant was removed or narrowed, or the key that made it is gone): make a new key"}
	refuseClient = &refusal{status: http.StatusUnauthorized, code: httpx.CodeUnauthorized,
		message: "the access token was not issued to " + ClientID + "; sign in through the console or oidcd admin login"}
	refuseACR = &refusal{status: http.StatusForbidden, code: httpx.CodeForbidden, release: true,
		message: "this sign-in is not strong enough to administer: a second factor is needed; sign in again with it"}
	refuseNoGrant = &refusal{status: http.StatusForbidden, code: httpx.CodeForbidden, release: true,
		message: "this person holds no administrator grant"}
	refuseUnavailable = &refusal{status: http.StatusServiceUnavailable, code: httpx.CodeUnavailable, release: true,
		message: "cannot check the credential against the cluster (no leader reachable); try again"}
	// refuseUnconfirmedRead is a linearizable read whose read index,
	// taken for the credential, could not be had: the answer the read
	// itself would give (read, linearize.go).
	refuseUnconfirmedRead = &refusal{status: http.StatusServiceUnavailable, code: httpx.CodeUnavailable, release: true,
		message: msgNoReadIndex}
)

// resolve turns a bearer credential into a Credential, or the refusal to
// answer. indexed: a read index was taken for it (linearize).
func (a *api) resolve(r *http.Request, token string) (c Credential, indexed bool, f *refusal) {
	if tokenMatches(token, a.TokenHash()) {
		return a.confirmToken(r, token)
	}
	if id, ok := parseAPIKey(token); ok {
		c, f = a.resolveKey(r, id, token)
		return c, a.ReadIndex != nil, f
	}
	if a.People != nil {
		c, f = a.resolvePerson(r, token)
		return c, a.ReadIndex != nil && f == nil, f
	}
	return Credential{}, false, refuseInvalid
}

// confirmToken confirms that a break-glass token this node's copy of the
// state holds is still the cluster's: POST /admin-token replaces it, and
// the old one must stop working at once on every node, also on one that
// has not yet applied the replacement. So the hash is read again after a
// read index, which the route's own linearizable read then reuses (a
// write pays one read index for it). Two kinds of read keep the local
// answer: a read of the node's own copy (?stale), which asks for exactly
// that, and the routes that describe the answering node (/status,
// /cluster, /audit/verify), which a node cut off from the leader must
// still answer; neither writes anything.
func (a *api) confirmToken(r *http.Request, token string) (Credential, bool, *refusal) {
	c := Credential{Kind: CredentialToken, Role: RoleAdmin}
	if a.ReadIndex == nil || nodeOwnRead(r) {
		return c, false, nil
	}
	if f := a.linearize(r); f != nil {
		return Credential{}, false, f
	}
	if !tokenMatches(token, a.TokenHash()) {
		return Credential{}, false, refuseInvalid
	}
	return c, true, nil
}

// nodeOwnRead reports whether r reads the answering node's own copy: a
// GET (or HEAD) with ?stale (whose value read checks), or of a route
// that describes the node (readModes' nodeLocal).
func nodeOwnRead(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if q := r.URL.Query(); q.Has(staleParam) && q.Get(staleParam) != "false" {
		return true
	}
	mode, ok := readModes[strings.TrimPrefix(r.URL.Path, Prefix)]
	return ok && mode == nodeLocal
}

func (a *api) resolveKey(r *http.Request, id, key string) (Credential, *refusal) {
	if f := a.linearize(r); f != nil {
		return Credential{}, f
	}
	l, err := a.State.APIKeyLineage(id)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return Credential{}, refuseKey
	case err != nil:
		a.Logger.Warn("admin: read an API key", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		return Credential{}, refuseUnavailable
	}
	k, now := l.Keys[0], a.now()
	switch {
	case !password.VerifySecret(key, k.Hash) || !now.Before(k.ExpiresAt):
		return Credential{}, refuseKey
	case !l.InForce(now):
		return Credential{}, refuseMakerGone
	}
	return Credential{Kind: CredentialAPIKey, ID: k.ID, Role: k.Role, OrgID: k.OrgID, keyExpires: k.ExpiresAt, keyDepth: len(l.Keys)}, nil
}

func (a *api) resolvePerson(r *http.Request, token string) (Credential, *refusal) {
	pt, err := a.People.Check(r.Context(), token)
	switch {
	case err != nil:
		a.Logger.Warn("admin: check an access token", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		return Credential{}, refuseUnavailable
	case !pt.Active || pt.Sub == "":
		return Credential{}, refuseInvalid
	case pt.ClientID != ClientID:
		return Credential{}, refuseClient
	case !acrMeets(pt.ACR, a.AdminACR):
		return Credential{}, refuseACR
	}
	if f := a.linearize(r); f != nil {
		return Credential{}, f
	}
	gs, err := a.State.AdminGrantsOfUser(pt.Sub)
	if err != nil {
		a.Logger.Warn("admin: read a person's grants", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		return Credential{}, refuseUnavailable
	}
	g, ok := widestGrant(gs)
	if !ok {
		return Credential{}, refuseNoGrant
	}
	return Credential{Kind: CredentialPerson, Sub: pt.Sub, Role: g.Role, OrgID: g.OrgID}, nil
}

// linearize waits for a read index (Config.ReadIndex) before a grant or a
// key is read. authenticate then marks the request's context (withRead
// Indexed) so that the route's own read (read, linearize.go) does not
// take a second one: the first was taken after the request began, which
// is all a linearizable read needs.
func (a *api) linearize(r *http.Request) *refusal {
	if a.ReadIndex == nil {
		return nil
	}
	if err := a.ReadIndex(r.Context()); err != nil {
		a.Logger.Warn("admin: read index for a credential failed", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return refuseUnconfirmedRead
		}
		return refuseUnavailable
	}
	return nil
}

// readIndexedKey marks a request context in which a read index was taken.
type readIndexedKey struct{}

func withReadIndexed(ctx context.Context) context.Context {
	return context.WithValue(ctx, readIndexedKey{}, true)
}

// readIndexed reports whether a read index was taken for the request.
func readIndexed(ctx context.Context) bool { v, _ := ctx.Value(readIndexedKey{}).(bool); return v }

// credentialDetail is the audit detail value naming who acted
// (fsm.DetailCredential): the kind and, for a person, their sub, for a
// key its id. Never a secret.
func credentialDetail(c Credential) string {
	v := struct {
		Kind string `json:"kind"`
		Sub  string `json:"sub,omitempty"`
		ID   string `json:"id,omitempty"`
	}{Kind: c.Kind}
	switch c.Kind {
	case CredentialPerson:
		v.Sub = c.Sub
	case CredentialAPIKey:
		v.ID = c.ID
	}
	b, _ := json.Marshal(v) // strings only: cannot fail
	return string(b)
}
