package admin

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
)

// createKey makes an API key through the API and returns its answer.
func (e *env) createKey(body string) APIKey {
	e.t.Helper()
	return decodeAs[APIKey](e.t, e.must(201, "POST", "/admin/v1/api-keys", body))
}

func (e *env) createGrant(body string) Grant {
	e.t.Helper()
	return decodeAs[Grant](e.t, e.must(201, "POST", "/admin/v1/admins", body))
}

// TestPersonTokens: a person's access token administers only while the
// provider finds it active, it was issued to oidcd-admin, its acr meets
// the required one and its sub holds a grant; the credential carries the
// grant's role and organization.
func TestPersonTokens(t *testing.T) {
	people := &fakePeople{}
	e := newEnv(t, withPeople(people, authn.ACRMFA))
	org := e.createOrg("acme")
	admin := e.createUser(`{"email":"ada@example.com"}`)
	orgAdmin := e.createUser(`{"email":"olga@example.com"}`)
	nobody := e.createUser(`{"email":"nobody@example.com"}`)
	e.createGrant(`{"user_id":"` + admin.ID + `","role":"admin"}`)
	e.createGrant(`{"user_id":"` + orgAdmin.ID + `","role":"org_admin","organization_id":"` + org.ID + `"}`)
	people.set("t-admin", PersonToken{Active: true, Sub: admin.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	people.set("t-org", PersonToken{Active: true, Sub: orgAdmin.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	people.set("t-inactive", PersonToken{Active: false, Sub: admin.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	people.set("t-other-client", PersonToken{Active: true, Sub: admin.ID, ClientID: "some-app", ACR: authn.ACRMFA})
	people.set("t-pwd", PersonToken{Active: true, Sub: admin.ID, ClientID: ClientID, ACR: authn.ACRPwd})
	people.set("t-nogrant", PersonToken{Active: true, Sub: nobody.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	tests := []struct {
		name    string
		token   string
		status  int
		code    string
		message string // a part of the error message
		want    Credential
	}{
		{"admin", "t-admin", 200, "", "", Credential{Kind: CredentialPerson, Sub: admin.ID, Role: RoleAdmin}},
		{"org_admin", "t-org", 200, "", "", Credential{Kind: CredentialPerson, Sub: orgAdmin.ID, Role: RoleOrgAdmin, OrgID: org.ID}},
		{"inactive", "t-inactive", 401, httpx.CodeUnauthorized, "", Credential{}},
		{"unknown", "t-unknown", 401, httpx.CodeUnauthorized, "", Credential{}},
		{"issued to another client", "t-other-client", 401, httpx.CodeUnauthorized, ClientID, Credential{}},
		{"password only", "t-pwd", 403, httpx.CodeForbidden, "second factor", Credential{}},
		{"no grant", "t-nogrant", 403, httpx.CodeForbidden, "grant", Credential{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := e.do("GET", "/admin/v1/organizations", "", bearerHdr(tt.token)...)
			if tt.code != "" {
				env := checkEnvelope(t, w, tt.status, tt.code)
				if !strings.Contains(env.Message, tt.message) {
					t.Errorf("message: got %q, want it to say %q", env.Message, tt.message)
				}
				return
			}
			if w.Code != tt.status {
				t.Fatalf("got %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if got := lastCredential(t, e, tt.token); got != tt.want {
				t.Errorf("credential: got %+v, want %+v", got, tt.want)
			}
		})
	}
	people.err = errors.New("provider down")
	checkEnvelope(t, e.do("GET", "/admin/v1/organizations", "", bearerHdr("t-admin")...), 503, httpx.CodeUnavailable)
}

// lastCredential makes a write with token (a new person, which every
// role but the auditor may create: an org_admin's becomes a member of its
// organization) and reads who acted from its audit event, as GET /audit
// shows it.
func lastCredential(t *testing.T, e *env, token string) Credential {
	t.Helper()
	stamp := strings.ToLower(strings.ReplaceAll(e.clock.now().Format("150405.000000000"), ".", "-"))
	w := e.do("POST", "/admin/v1/users", `{"email":"p`+stamp+`@example.com"}`, bearerHdr(token)...)
	if w.Code != 201 {
		t.Fatalf("write with %s: got %d %s", token, w.Code, w.Body)
	}
	var page struct {
		Data []struct {
			Detail struct {
				Action     string `json:"action"`
				Credential struct {
					Kind string `json:"kind"`
					Sub  string `json:"sub"`
					ID   string `json:"id"`
				} `json:"credential"`
			} `json:"detail"`
		} `json:"data"`
	}
	r := e.must(200, "GET", "/admin/v1/audit?type=admin&order=desc&limit=1", "")
	if err := json.Unmarshal(r.Body.Bytes(), &page); err != nil || len(page.Data) != 1 {
		t.Fatalf("audit: %v %s", err, r.Body)
	}
	c := page.Data[0].Detail.Credential
	if strings.Contains(r.Body.String(), token) {
		t.Errorf("the trail holds the credential itself: %s", r.Body)
	}
	out := Credential{Kind: c.Kind, Sub: c.Sub, ID: c.ID}
	// The role is not in the trail: read it back from the state.
	switch c.Kind {
	case CredentialPerson:
		gs, _ := e.state.AdminGrantsOfUser(c.Sub)
		g, _ := widestGrant(gs)
		out.Role, out.OrgID = g.Role, g.OrgID
	case CredentialAPIKey:
		k, _ := e.state.APIKey(c.ID)
		out.Role, out.OrgID = k.Role, k.OrgID
	case CredentialToken:
		out.Role = RoleAdmin
	}
	return out
}

// TestAuditCredentialOfEachKind: every admin event names who acted, and
// never the secret.
func TestAuditCredentialOfEachKind(t *testing.T) {
	people := &fakePeople{}
	e := newEnv(t, withPeople(people, ""))
	ada := e.createUser(`{"email":"ada@example.com"}`)
	e.createGrant(`{"user_id":"` + ada.ID + `","role":"admin"}`)
	people.set("person-token", PersonToken{Active: true, Sub: ada.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	k := e.createKey(`{"name":"ci","role":"admin","expires_in":3600}`)
	tests := []struct {
		name  string
		token string
		want  Credential
	}{
		{"token", e.token, Credential{Kind: CredentialToken, Role: RoleAdmin}},
		{"api key", k.Key, Credential{Kind: CredentialAPIKey, ID: k.ID, Role: RoleAdmin}},
		{"person", "person-token", Credential{Kind: CredentialPerson, Sub: ada.ID, Role: RoleAdmin}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lastCredential(t, e, tt.token); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if v := e.must(200, "GET", "/admin/v1/audit/verify", ""); !strings.Contains(v.Body.String(), `"ok":true`) {
		t.Errorf("verify: %s", v.Body)
	}
	if got := credentialDetail(Credential{Kind: CredentialToken, Role: RoleAdmin, ID: "x", Sub: "y"}); got != `{"kind":"token"}` {
		t.Errorf("token detail: got %s", got)
	}
}

// TestRemovedCredentialRefusedAtOnce: a key or a grant deleted through
// another node is refused by the very next request here, because the
// check takes a read index (during which this node applies the delete)
// before it reads; the read index is taken once per request, GETs
// included.
func TestRemovedCredentialRefusedAtOnce(t *testing.T) {
	ri := &readIndexCounter{}
	people := &fakePeople{}
	e := newEnv(t, withReadIndex(ri), withPeople(people, ""))
	ada := e.createUser(`{"email":"ada@example.com"}`)
	g := e.createGrant(`{"user_id":"` + ada.ID + `","role":"auditor"}`)
	people.set("person-token", PersonToken{Active: true, Sub: ada.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	k := e.createKey(`{"name":"ci","role":"auditor","expires_in":3600}`)
	tests := []struct {
		name   string
		token  string
		delete fsm.Command
		status int
	}{
		{"api key", k.Key, fsm.MustCommand(fsm.TypeDeleteAPIKey, fsm.DeleteAPIKey{ID: k.ID}), 401},
		{"grant", "person-token", fsm.MustCommand(fsm.TypeDeleteAdminGrant, fsm.DeleteAdminGrant{ID: g.ID}), 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ri.calls.Store(0)
			if w := e.do("GET", "/admin/v1/users", "", bearerHdr(tt.token)...); w.Code != 200 {
				t.Fatalf("before: got %d %s", w.Code, w.Body)
			}
			if n := ri.calls.Load(); n != 1 {
				t.Errorf("read index calls of one GET: got %d, want 1", n)
			}
			ri.calls.Store(0)
			ri.then = func() { ri.then = nil; e.applyNow(tt.delete) }
			if w := e.do("GET", "/admin/v1/users", "", bearerHdr(tt.token)...); w.Code != tt.status {
				t.Fatalf("the next request: got %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if n := ri.calls.Load(); n != 1 {
				t.Errorf("read index calls: got %d, want 1", n)
			}
		})
	}
	k2 := e.createKey(`{"name":"ci2","role":"auditor","expires_in":3600}`)
	ri.err = errDown
	if w := e.do("POST", "/admin/v1/organizations", `{"slug":"x","name":"X"}`, bearerHdr(k2.Key)...); w.Code != 503 {
		t.Errorf("a key with no read index to be had: got %d, want 503", w.Code)
	}
}

// TestCredentialGuessesCounted: wrong keys and person tokens use up the
// address's allowance like wrong admin tokens; past the limit the
// credential is not even looked up (no read index, no token check), the
// right one included.
func TestCredentialGuessesCounted(t *testing.T) {
	ri := &readIndexCounter{}
	people := &fakePeople{}
	e := newEnv(t, withReadIndex(ri), withPeople(people, ""))
	k := e.createKey(`{"name":"ci","role":"admin","expires_in":3600}`)
	wrongSecret := k.Key[:len(k.Key)-4] + "AAAA"
	if wrongSecret == k.Key {
		wrongSecret = k.Key[:len(k.Key)-4] + "BBBB"
	}
	guesses := []string{
		wrongSecret, // the right id, a wrong secret
		apiKeyPrefix + "00000000-0000-4000-8000-000000000000_x", // no such key
		"not-a-person-token",
		GenerateToken(),
	}
	for i := range guardLimit {
		if w := e.do("GET", "/admin/v1/organizations", "", bearerHdr(guesses[i%len(guesses)])...); w.Code != 401 {
			t.Fatalf("guess %d: got %d, want 401", i, w.Code)
		}
	}
	ri.calls.Store(0)
	people.calls.Store(0)
	for _, tok := range append(guesses, k.Key, e.token) {
		checkEnvelope(t, e.do("GET", "/admin/v1/organizations", "", bearerHdr(tok)...), 429, httpx.CodeRateLimited)
	}
	if ri.calls.Load() != 0 || people.calls.Load() != 0 {
		t.Errorf("past the limit: %d read indexes, %d token checks; want none", ri.calls.Load(), people.calls.Load())
	}
}

// TestGenuineRefusalsAreNotGuesses: a known person refused for a weak
// sign-in or a missing grant is not guessing, and never runs out of the
// address's allowance; an inactive token is a guess like any other.
func TestGenuineRefusalsAreNotGuesses(t *testing.T) {
	people := &fakePeople{}
	e := newEnv(t, withPeople(people, ""))
	ada := e.createUser(`{"email":"ada@example.com"}`)
	people.set("no-grant", PersonToken{Active: true, Sub: ada.ID, ClientID: ClientID, ACR: authn.ACRMFA})
	people.set("weak", PersonToken{Active: true, Sub: ada.ID, ClientID: ClientID, ACR: authn.ACRPwd})
	for i := range 2 * guardLimit {
		tok := []string{"no-grant", "weak"}[i%2]
		if w := e.do("GET", "/admin/v1/organizations", "", bearerHdr(tok)...); w.Code != 403 {
			t.Fatalf("attempt %d with %s: got %d, want 403", i, tok, w.Code)
		}
	}
	for i := range guardLimit {
		if w := e.do("GET", "/admin/v1/organizations", "", bearerHdr("inactive")...); w.Code != 401 {
			t.Fatalf("guess %d: got %d, want 401", i, w.Code)
		}
	}
	checkEnvelope(t, e.do("GET", "/admin/v1/organizations", "", bearerHdr("no-grant")...), 429, httpx.CodeRateLimited)
}

// TestReplacedTokenRefusedAtOnce: the break-glass token replaced through
// another node (applied here only while this request's read index is
// taken, as on a follower a moment behind) is refused by the very next
// request, a write and a linearizable read alike; a read of the node's own
// copy (?stale=true) and the node-local routes take no read index for it.
func TestReplacedTokenRefusedAtOnce(t *testing.T) {
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/admin/v1/organizations", `{"slug":"r","name":"R"}`},
		{"GET", "/admin/v1/users", ""},
	} {
		t.Run(tt.method, func(t *testing.T) {
			ri := &readIndexCounter{}
			e := newEnv(t, withReadIndex(ri))
			replacement := GenerateToken()
			ri.then = func() {
				ri.then = nil
				e.applyNow(fsm.MustCommand(fsm.TypeSetAdminToken, fsm.SetAdminToken{Hash: HashToken(replacement), Replace: true}))
			}
			checkEnvelope(t, e.do(tt.method, tt.path, tt.body), 401, httpx.CodeUnauthorized)
			if n := ri.calls.Load(); n != 1 {
				t.Errorf("read index calls: got %d, want 1", n)
			}
			w := e.do(tt.method, tt.path, tt.body, bearerHdr(replacement)...)
			if w.Code/100 != 2 {
				t.Errorf("the replacement: got %d %s", w.Code, w.Body)
			}
		})
	}
	ri := &readIndexCounter{}
	e := newEnv(t, withReadIndex(ri))
	for _, p := range []string{"/admin/v1/users?stale=true", "/admin/v1/status", "/admin/v1/cluster"} {
		ri.calls.Store(0)
		e.do("GET", p, "")
		if n := ri.calls.Load(); n != 0 {
			t.Errorf("GET %s: %d read index calls, want none", p, n)
		}
	}
}
