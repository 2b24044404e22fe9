package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// lossyApplier applies each command and then, while lose is set, reports
// that it lost sight of it: the leader went away after the append.
type lossyApplier struct {
	next fsm.Applier
	lose atomic.Bool
}

func (l *lossyApplier) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	res, err := l.next.Apply(ctx, cmd)
	if err == nil && l.lose.Load() {
		return fsm.Result{}, fmt.Errorf("cluster: leader lost after the append: %w", fsm.ErrMaybeApplied)
	}
	return res, err
}

// sendAs sends a request made with credential c through the API's routes
// (authorized, without authenticate), with the header pairs of hdr.
func (e *env) sendAs(c Credential, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	mux := http.NewServeMux()
	a := e.bareAPI()
	a.Applier = e.cfg.Applier
	a.routes(mux)
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	r = r.WithContext(WithCredential(r.Context(), c))
	w := httptest.NewRecorder()
	httpx.Correlation(mux).ServeHTTP(w, r)
	return w
}

// createRoute is one POST that creates a record under a new id.
type createRoute struct {
	name  string
	path  string
	creds [2]Credential // two credentials that may use it
	// body is a valid body, another record for each n; other is one for
	// the same n that makes another record (the fields that identify it
	// differ).
	body, other func(n int) string
	idField     string // the id in the answer
	secret      bool   // the first answer shows a secret once: a retry is 409
}

// idOf is the id of a create's answer.
func idOf(t *testing.T, w *httptest.ResponseRecorder, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("decode %s: %v", w.Body, err)
	}
	id, _ := m[field].(string)
	if id == "" {
		t.Fatalf("answer %s: no %s", w.Body, field)
	}
	return id
}

// idempotencyEnv is an API that sends mail (invitations), whose Applier
// can lose sight of its writes, with the records the creates refer to.
func idempotencyEnv(t *testing.T) (*env, *lossyApplier, []createRoute) {
	lossy := &lossyApplier{}
	e := newEnv(t, withMail, func(c *Config) { lossy.next = c.Applier; c.Applier = lossy })
	org, org2 := e.createOrg("idem"), e.createOrg("idem-2")
	var users []string
	for i := range 40 {
		users = append(users, e.createUser(fmt.Sprintf(`{"email":"person%d@example.com"}`, i)).ID)
	}
	// A key made by a key records its maker, which must exist and needs
	// the newest state format.
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	ak := e.createKey(`{"name":"idem","role":"admin","expires_in":31536000}`)
	admins := [2]Credential{
		{Kind: CredentialToken, Role: RoleAdmin},
		{Kind: CredentialAPIKey, ID: ak.ID, Role: RoleAdmin, keyExpires: ak.ExpiresAt, keyDepth: 1},
	}
	orgAdmins := [2]Credential{
		{Kind: CredentialPerson, Sub: uuid.NewString(), Role: RoleOrgAdmin, OrgID: org.ID},
		{Kind: CredentialAPIKey, ID: uuid.NewString(), Role: RoleOrgAdmin, OrgID: org.ID},
	}
	const dir = `{"name":%q,"url":%q,"bind_dn":"cn=x,dc=example","bind_password":"x","user_base":"dc=example","user_filter":"(mail=%%s)","id_attribute":"entryUUID"}`
	routes := []createRoute{
		{name: "organization", path: "/organizations", creds: admins, idField: "id",
			body:  func(n int) string { return fmt.Sprintf(`{"slug":"org-%d","name":"Org %d"}`, n, n) },
			other: func(n int) string { return fmt.Sprintf(`{"slug":"org-%d","name":"Another %d"}`, n, n) }},
		{name: "user", path: "/users", creds: admins, idField: "id",
			body: func(n int) string {
				return fmt.Sprintf(`{"email":"new%d@example.com","password":"correct horse battery"}`, n)
			},
			other: func(n int) string { return fmt.Sprintf(`{"email":"other%d@example.com"}`, n) }},
		{name: "user of an org_admin", path: "/users", creds: orgAdmins, idField: "id",
			body:  func(n int) string { return fmt.Sprintf(`{"email":"member%d@example.com"}`, n) },
			other: func(n int) string { return fmt.Sprintf(`{"email":"othermember%d@example.com"}`, n) }},
		{name: "membership", path: "/memberships", creds: admins, idField: "id",
			body:  func(n int) string { return fmt.Sprintf(`{"user_id":%q,"org_id":%q}`, users[n], org.ID) },
			other: func(n int) string { return fmt.Sprintf(`{"user_id":%q,"org_id":%q}`, users[n], org2.ID) }},
		{name: "public client", path: "/clients", creds: admins, idField: "client_id",
			body: func(n int) string {
				return clientJSON(org.ID, map[string]any{"name": fmt.Sprintf("App %d", n), "type": "public"})
			},
			other: func(n int) string {
				return clientJSON(org.ID, map[string]any{"name": fmt.Sprintf("App %d", n), "type": "public", "redirect_uris": []string{"https://other.example/cb"}})
			}},
		{name: "confidential client", path: "/clients", creds: admins, idField: "client_id", secret: true,
			body: func(n int) string { return clientJSON(org.ID, map[string]any{"name": fmt.Sprintf("Backend %d", n)}) },
			other: func(n int) string {
				return clientJSON(org.ID, map[string]any{"name": fmt.Sprintf("Other backend %d", n)})
			}},
		{name: "grant", path: "/admins", creds: admins, idField: "id",
			body:  func(n int) string { return fmt.Sprintf(`{"user_id":%q,"role":"auditor"}`, users[n]) },
			other: func(n int) string { return fmt.Sprintf(`{"user_id":%q,"role":"admin"}`, users[n]) }},
		{name: "api key", path: "/api-keys", creds: admins, idField: "id", secret: true,
			body:  func(n int) string { return fmt.Sprintf(`{"name":"ci %d","role":"auditor","expires_in":3600}`, n) },
			other: func(n int) string { return fmt.Sprintf(`{"name":"ci %d","role":"admin","expires_in":3600}`, n) }},
		{name: "invitation", path: "/invitations", creds: admins, idField: "id",
			body: func(n int) string {
				return fmt.Sprintf(`{"email":"invitee%d@example.com","organization_id":%q}`, n, org.ID)
			},
			other: func(n int) string {
				return fmt.Sprintf(`{"email":"invitee%d@example.com","organization_id":%q}`, n, org2.ID)
			}},
		{name: "directory", path: "/directories", creds: admins, idField: "id",
			body:  func(n int) string { return fmt.Sprintf(dir, fmt.Sprintf("Dir %d", n), "ldaps://127.0.0.1:1") },
			other: func(n int) string { return fmt.Sprintf(dir, fmt.Sprintf("Dir %d", n), "ldaps://127.0.0.1:2") }},
	}
	return e, lossy, routes
}

// TestIdempotencyKeyOnEveryCreate walks every create with an
// Idempotency-Key: the same key twice makes one record, answered again
// 201 with Idempotent-Replayed (409 for one whose secret the first answer
// showed); the same key with another body is 422; two credentials with
// one key make two records; a malformed key is 400; a retry of a create
// that was applied though the Applier said it may not have been (503)
// meets the record; and two retries that race past the read meet it
// through the state machine's conflict on the id.
func TestIdempotencyKeyOnEveryCreate(t *testing.T) {
	e, lossy, routes := idempotencyEnv(t)
	n := 0
	next := func() int { n++; return n }
	key := func() string { return "key-" + uuid.NewString() }

	// wantReplay checks a retry's answer: the record of first, again.
	wantReplay := func(t *testing.T, rt createRoute, first string, retry *httptest.ResponseRecorder) {
		t.Helper()
		if rt.secret {
			env := checkEnvelope(t, retry, http.StatusConflict, httpx.CodeConflict)
			if !strings.Contains(env.Message, first) || !strings.Contains(env.Message, "shown only once") || !strings.Contains(env.Message, "DELETE /admin/v1/") {
				t.Errorf("message: got %q, want the record's id, that its secret was shown once, and how to get a new one", env.Message)
			}
			if !hasDetail(env, HeaderIdempotencyKey, "secret_shown_once") {
				t.Errorf("details: got %+v, want %s secret_shown_once", env.Details, HeaderIdempotencyKey)
			}
			if strings.Contains(retry.Body.String(), `"client_secret"`) || strings.Contains(retry.Body.String(), apiKeyPrefix) {
				t.Errorf("answer %s shows a secret", retry.Body)
			}
			return
		}
		if retry.Code != http.StatusCreated {
			t.Fatalf("retry: got %d %s, want 201", retry.Code, retry.Body)
		}
		if got := retry.Header().Get(HeaderIdempotentReplayed); got != "true" {
			t.Errorf("%s: got %q, want %q", HeaderIdempotentReplayed, got, "true")
		}
		if got := idOf(t, retry, rt.idField); got != first {
			t.Errorf("retry: got id %s, want %s (the first create's)", got, first)
		}
	}

	for _, rt := range routes {
		n = 0 // the bodies of each route make records of their own
		path := Prefix + rt.path
		c := rt.creds[0]
		t.Run(rt.name+"/same key twice", func(t *testing.T) {
			k, i := key(), next()
			first := e.sendAs(c, "POST", path, rt.body(i), HeaderIdempotencyKey, k)
			if first.Code != http.StatusCreated || first.Header().Get(HeaderIdempotentReplayed) != "" {
				t.Fatalf("first: got %d %s (replayed %q), want 201, not replayed", first.Code, first.Body, first.Header().Get(HeaderIdempotentReplayed))
			}
			id := idOf(t, first, rt.idField)
			if want := idempotentID(c, "POST "+path, k); id != want {
				t.Errorf("id: got %s, want the derived %s", id, want)
			}
			before := e.app.FSM.Applied()
			retry := e.sendAs(c, "POST", path, rt.body(i), HeaderIdempotencyKey, k)
			wantReplay(t, rt, id, retry)
			if !rt.secret && retry.Body.String() != first.Body.String() {
				t.Errorf("retry: got %s, want the first answer %s", retry.Body, first.Body)
			}
			if got := e.app.FSM.Applied(); got != before {
				t.Errorf("applied index: got %d, want %d (nothing proposed for a retry)", got, before)
			}
			if strings.Contains(first.Body.String(), "client_secret") != (rt.name == "confidential client") {
				t.Errorf("first answer %s: client_secret shown wrongly", first.Body)
			}
		})
		t.Run(rt.name+"/same key, another body", func(t *testing.T) {
			k, i := key(), next()
			if w := e.sendAs(c, "POST", path, rt.body(i), HeaderIdempotencyKey, k); w.Code != http.StatusCreated {
				t.Fatalf("first: got %d %s", w.Code, w.Body)
			}
			before := e.app.FSM.Applied()
			env := checkEnvelope(t, e.sendAs(c, "POST", path, rt.other(i), HeaderIdempotencyKey, k), http.StatusUnprocessableEntity, httpx.CodeUnprocessble)
			if !strings.Contains(env.Message, "used for another request") || !hasDetail(env, HeaderIdempotencyKey, "reused") {
				t.Errorf("got %q %+v, want the key's reuse named", env.Message, env.Details)
			}
			if got := e.app.FSM.Applied(); got != before {
				t.Errorf("applied index: got %d, want %d", got, before)
			}
		})
		t.Run(rt.name+"/two credentials, one key", func(t *testing.T) {
			k := key()
			a := e.sendAs(rt.creds[0], "POST", path, rt.body(next()), HeaderIdempotencyKey, k)
			b := e.sendAs(rt.creds[1], "POST", path, rt.body(next()), HeaderIdempotencyKey, k)
			if a.Code != http.StatusCreated || b.Code != http.StatusCreated || b.Header().Get(HeaderIdempotentReplayed) != "" {
				t.Fatalf("got %d %s and %d %s, want two records created", a.Code, a.Body, b.Code, b.Body)
			}
			if idOf(t, a, rt.idField) == idOf(t, b, rt.idField) {
				t.Errorf("both credentials got the id %s", idOf(t, a, rt.idField))
			}
		})
		t.Run(rt.name+"/malformed key", func(t *testing.T) {
			before := e.app.FSM.Applied()
			for _, hdr := range [][]string{
				{HeaderIdempotencyKey, ""},
				{HeaderIdempotencyKey, "has a space"},
				{HeaderIdempotencyKey, "tab\there"},
				{HeaderIdempotencyKey, "ключ"},
				{HeaderIdempotencyKey, strings.Repeat("k", MaxIdempotencyKey+1)},
				{HeaderIdempotencyKey, "one", HeaderIdempotencyKey, "two"},
			} {
				env := checkEnvelope(t, e.sendAs(c, "POST", path, rt.body(next()), hdr...), http.StatusBadRequest, httpx.CodeValidation)
				if !hasDetail(env, HeaderIdempotencyKey, codeInvalid) {
					t.Errorf("%q: details %+v, want %s invalid", hdr, env.Details, HeaderIdempotencyKey)
				}
			}
			if got := e.app.FSM.Applied(); got != before {
				t.Errorf("applied index: got %d, want %d", got, before)
			}
			// The longest key and every printable character are fine
			// (each route's own: two entries share POST /clients).
			tag := uuid.NewString()
			if w := e.sendAs(c, "POST", path, rt.body(next()), HeaderIdempotencyKey, tag+strings.Repeat("k", MaxIdempotencyKey-len(tag))); w.Code != http.StatusCreated {
				t.Errorf("a key of %d: got %d %s, want 201", MaxIdempotencyKey, w.Code, w.Body)
			}
			if w := e.sendAs(c, "POST", path, rt.body(next()), HeaderIdempotencyKey, tag+"!~\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}"); w.Code != http.StatusCreated {
				t.Errorf("a key of punctuation: got %d %s, want 201", w.Code, w.Body)
			}
		})
		t.Run(rt.name+"/retry after maybe applied", func(t *testing.T) {
			k, i := key(), next()
			lossy.lose.Store(true)
			first := e.sendAs(c, "POST", path, rt.body(i), HeaderIdempotencyKey, k)
			lossy.lose.Store(false)
			env := checkEnvelope(t, first, http.StatusServiceUnavailable, httpx.CodeUnavailable)
			if !strings.Contains(env.Message, "may have been applied") || !strings.Contains(env.Message, "same Idempotency-Key") {
				t.Errorf("message: got %q, want it to say the write may have been applied and that a retry with the key is safe", env.Message)
			}
			if got := first.Header().Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After: got %q, want 1", got)
			}
			before := e.app.FSM.Applied()
			wantReplay(t, rt, idempotentID(c, "POST "+path, k), e.sendAs(c, "POST", path, rt.body(i), HeaderIdempotencyKey, k))
			if got := e.app.FSM.Applied(); got != before {
				t.Errorf("applied index: got %d, want %d (the retry found the record)", got, before)
			}
		})
		t.Run(rt.name+"/retries race", func(t *testing.T) {
			// The other retry commits between this one's read and its
			// proposal: the state machine refuses the id, and this one
			// answers the record.
			k, i := key(), next()
			var other *httptest.ResponseRecorder
			e.hook.mu.Lock()
			e.hook.before = func() { other = e.sendAs(c, "POST", path, rt.body(i), HeaderIdempotencyKey, k) }
			e.hook.mu.Unlock()
			w := e.sendAs(c, "POST", path, rt.body(i), HeaderIdempotencyKey, k)
			if other == nil || other.Code != http.StatusCreated {
				t.Fatalf("the other retry: got %v, want 201", other)
			}
			wantReplay(t, rt, idOf(t, other, rt.idField), w)
			if rt.name == "invitation" {
				// The retries committed one message between them.
				pending, err := e.state.PendingEmails(1000)
				if err != nil {
					t.Fatal(err)
				}
				sent := 0
				for _, m := range pending {
					if m.To == fmt.Sprintf("invitee%d@example.com", i) {
						sent++
					}
				}
				if sent != 1 {
					t.Errorf("messages to the invitee: got %d, want 1", sent)
				}
			}
		})
	}

	// Without the header nothing changes: random ids, a second create is
	// a second record (or a conflict on a unique field).
	a := e.sendAs(routes[0].creds[0], "POST", Prefix+"/organizations", `{"slug":"plain","name":"Plain"}`)
	b := e.sendAs(routes[0].creds[0], "POST", Prefix+"/organizations", `{"slug":"plain","name":"Plain"}`)
	if a.Code != http.StatusCreated || b.Code != http.StatusConflict || a.Header().Get(HeaderIdempotentReplayed) != "" {
		t.Errorf("without a key: got %d then %d, want 201 then 409 on the slug", a.Code, b.Code)
	}
}

// TestIdempotencyKeyThroughAuthenticate: the credential authenticate
// resolves is the one the id is derived from: the admin token's requests
// share ids whatever node or token value, an API key's are its own.
func TestIdempotencyKeyThroughAuthenticate(t *testing.T) {
	e := newEnv(t)
	const k = "nightly-42"
	first := e.do("POST", "/admin/v1/organizations", `{"slug":"a","name":"A"}`, HeaderIdempotencyKey, k)
	if first.Code != http.StatusCreated {
		t.Fatalf("got %d %s", first.Code, first.Body)
	}
	tokenID := idempotentID(Credential{Kind: CredentialToken}, "POST /admin/v1/organizations", k)
	if got := idOf(t, first, "id"); got != tokenID {
		t.Errorf("id: got %s, want %s", got, tokenID)
	}
	key := e.createKey(`{"name":"ci","role":"admin","expires_in":3600}`)
	w := e.do("POST", "/admin/v1/organizations", `{"slug":"a","name":"A"}`, "Authorization", "Bearer "+key.Key, HeaderIdempotencyKey, k)
	// Another credential: another id, so the slug conflicts (409), not a replay.
	checkEnvelope(t, w, http.StatusConflict, httpx.CodeConflict)
	w = e.do("POST", "/admin/v1/organizations", `{"slug":"b","name":"B"}`, "Authorization", "Bearer "+key.Key, HeaderIdempotencyKey, k)
	if got, want := idOf(t, w, "id"), idempotentID(Credential{Kind: CredentialAPIKey, ID: key.ID}, "POST /admin/v1/organizations", k); got != want {
		t.Errorf("API key's id: got %s, want %s", got, want)
	}
	// The same key on another route is another record.
	u := e.do("POST", "/admin/v1/users", `{"email":"a@example.com"}`, HeaderIdempotencyKey, k)
	if got := idOf(t, u, "id"); got == tokenID {
		t.Errorf("POST /users with the key of POST /organizations: got the organization's id %s", got)
	}
}

// TestIdempotencyKeyElsewhere: a client that names its own client_id is
// identified by it (the key changes nothing: a retry meets 409), and POST
// /users/import, idempotent by address, needs no key.
func TestIdempotencyKeyElsewhere(t *testing.T) {
	e := newEnv(t)
	org := e.createOrg("acme")
	body := clientJSON(org.ID, map[string]any{"client_id": "portal", "type": "public"})
	if w := e.do("POST", "/admin/v1/clients", body, HeaderIdempotencyKey, "k1"); w.Code != http.StatusCreated {
		t.Fatalf("got %d %s", w.Code, w.Body)
	}
	env := checkEnvelope(t, e.do("POST", "/admin/v1/clients", body, HeaderIdempotencyKey, "k1"), http.StatusConflict, httpx.CodeConflict)
	if !hasDetail(env, "client_id", "conflict") {
		t.Errorf("details: got %+v, want client_id conflict", env.Details)
	}
	checkEnvelope(t, e.do("POST", "/admin/v1/clients", body, HeaderIdempotencyKey, "bad key"), http.StatusBadRequest, httpx.CodeValidation)

	imp := `{"users":[{"email":"imp@example.com"}]}`
	first := decodeAs[importAnswer](t, e.must(200, "POST", "/admin/v1/users/import", imp))
	again := decodeAs[importAnswer](t, e.must(200, "POST", "/admin/v1/users/import", imp))
	if first.Created != 1 || again.Exists != 1 || again.Data[0].ID != first.Data[0].ID {
		t.Errorf("import twice: got %+v then %+v, want created then exists, one person", first, again)
	}
}
