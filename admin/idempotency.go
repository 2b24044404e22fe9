package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Idempotency-Key (docs/operators/admin.md). Every POST that creates a
// record under a new id accepts the header; with it, the id is not random
// but derived (idempotentID) from the credential that asks, the route and
// the key. So a retry of a create that was applied (one answered 503
// "may have been applied", a timeout, a retry through another node) meets
// the record the first one made: the state machine refuses the second
// under the same id, and the handler answers the first answer again
// (replay). No key is stored anywhere: the id is the memory, and the
// record's own fields tell whether the retry is the same request. A key is
// thus good for as long as its record exists; one reused for another body
// is refused, 422.
//
// POST /users/import needs none: it is idempotent by address (a person
// already there is "exists"). A client given its own client_id is
// identified by it: its retry meets 409 on client_id, whatever the key.

// Headers of an idempotent create.
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

// MaxIdempotencyKey bounds the key's length.
const MaxIdempotencyKey = 255

// idempotencyNamespace is the UUIDv5 namespace of derived ids. Fixed for
// good: changing it would make every retry of a create sent before the
// change create a second record.
var idempotencyNamespace = uuid.MustParse("5f0c7d2e-8a41-4b6e-9c3d-1e2f4a6b8c90")

// validIdempotencyKey: 1 to MaxIdempotencyKey printable ASCII characters,
// no spaces (a UUID, a ULID, a job name and attempt all fit).
func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// idempotencyKey reads the request's Idempotency-Key ("" without one),
// answering 400 for a malformed one (ok false).
func idempotencyKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	vs := r.Header.Values(HeaderIdempotencyKey)
	switch {
	case len(vs) == 0:
		return "", true
	case len(vs) > 1 || !validIdempotencyKey(vs[0]):
		writeInvalid(w, r, []httpx.Detail{{Field: HeaderIdempotencyKey, Code: codeInvalid,
			Message: "must be given once, 1 to 255 printable ASCII characters without spaces"}})
		return "", false
	}
	return vs[0], true
}

type idempotencyCtxKey struct{}

// withReplay is r carrying rp's key, so that the answers of its write can
// say a retry is safe (maybeAppliedMessage), and rp; a request without a
// key is r and nil.
func withReplay(r *http.Request, rp *replay) (*http.Request, *replay) {
	if rp.key == "" {
		return r, nil
	}
	return r.WithContext(context.WithValue(r.Context(), idempotencyCtxKey{}, rp.key)), rp
}

// idempotencyKeyOf is the Idempotency-Key of r's create ("": none, or a
// route that takes none).
func idempotencyKeyOf(r *http.Request) string {
	k, _ := r.Context().Value(idempotencyCtxKey{}).(string)
	return k
}

// credentialName names the credential a derived id belongs to: the
// break-glass token (one credential however often it is replaced), an
// API key by its id, a person by their sub. Two credentials never share
// a name, so never an id.
func credentialName(c Credential) string {
	switch c.Kind {
	case CredentialAPIKey:
		return "api_key:" + c.ID
	case CredentialPerson:
		return "person:" + c.Sub
	}
	return c.Kind
}

// idempotentID is the id a create with key makes: a UUIDv5 of the
// credential, the route ("POST /admin/v1/organizations") and the key, NUL
// apart (a key holds none).
func idempotentID(c Credential, route, key string) string {
	return uuid.NewSHA1(idempotencyNamespace, []byte(credentialName(c)+"\x00"+route+"\x00"+key)).String()
}

// createID is the id of the record r creates: derived from key when the
// request has one, else a new random one.
func (a *api) createID(r *http.Request, key string) string {
	if key == "" {
		return a.NewID()
	}
	route := r.Pattern
	if route == "" {
		route = r.Method + " " + r.URL.Path
	}
	return idempotentID(credentialOf(r), route, key)
}

// replay is how a create with an Idempotency-Key answers a retry that
// finds the record the key made.
type replay struct {
	key string // "": the request has none, and nothing is replayed
	id  string // the derived id
	// read reads the record with id and returns the create's answer for
	// it as it is now, and whether the record is what this request
	// makes (the fields the request set that identify it);
	// fsm.ErrNotFound when there is none.
	read func() (out any, same bool, err error)
	// shownOnce, for a create whose answer showed a secret once: the
	// 409's message for a retry, given the record's id. The secret is
	// not kept, so it cannot be shown again.
	shownOnce func(id string) string
}

// replayed answers a retry whose record exists, and reports whether it
// answered: 201 with the record as it is now (Idempotent-Replayed: true);
// 422 when the record is not what this request makes (the key was used
// for another request); 409 for a record whose secret its first answer
// showed. No record: false, and the create proceeds.
func (a *api) replayed(w http.ResponseWriter, r *http.Request, rp *replay) bool {
	if rp == nil || rp.key == "" {
		return false
	}
	out, same, err := rp.read()
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return false
	case err != nil:
		a.unavailable(w, r, "read state", err)
	case !same:
		httpx.WriteError(w, r, http.StatusUnprocessableEntity, httpx.CodeUnprocessble,
			"this Idempotency-Key was used for another request (or the record it created has changed since): send a new key for a new record",
			httpx.Detail{Field: HeaderIdempotencyKey, Message: "was used for another request", Code: "reused"})
	case rp.shownOnce != nil:
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict, rp.shownOnce(rp.id),
			httpx.Detail{Field: HeaderIdempotencyKey, Message: "created " + rp.id + " already; its secret is not shown again", Code: "secret_shown_once"})
	default:
		a.Logger.Info("admin: idempotent create replayed", "route", r.Pattern, "id", rp.id,
			"correlation_id", httpx.CorrelationID(r.Context()))
		w.Header().Set(HeaderIdempotentReplayed, "true")
		httpx.WriteJSON(w, http.StatusCreated, out)
	}
	return true
}

// applyCreate proposes a create: with a key, a record already there
// under the derived id (read first, the fast path, or met by the state
// machine's conflict on the id when two retries race) is answered by
// replayed; without one, or when there is none, it is apply.
func (a *api) applyCreate(w http.ResponseWriter, r *http.Request, cmd fsm.Command, rp *replay) (fsm.Result, bool) {
	if a.replayed(w, r, rp) {
		return fsm.Result{}, false
	}
	return a.commitCreate(w, r, a.stamp(r, cmd), rp)
}

// commitCreate is commit, but a conflict on the id of a create with a key
// is the record of an earlier try: replayed answers it.
func (a *api) commitCreate(w http.ResponseWriter, r *http.Request, cmd fsm.Command, rp *replay) (fsm.Result, bool) {
	return a.commitWith(w, r, cmd, func(res fsm.Result) bool {
		var ce *fsm.ConflictError
		return rp != nil && rp.key != "" && errors.As(res.Err, &ce) && (ce.Field == "id" || ce.Field == "client_id") &&
			a.replayed(w, r, rp)
	})
}

// shownOnceMessage is the 409 of a retry of a create whose answer showed
// a secret once: what was created, by whom, and how to get a new secret.
func shownOnceMessage(what, id, secret, renew string) string {
	return "the " + what + " " + id + " was created by an earlier request with this Idempotency-Key; its " + secret +
		" was shown only once, in that request's answer, and cannot be shown again (if that answer was lost, so is the " + secret +
		"): " + renew
}
