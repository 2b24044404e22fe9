package admin

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

func TestHashToken(t *testing.T) {
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" // SHA-256("abc")
	if got := HashToken("abc"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	a, b := GenerateToken(), GenerateToken()
	if a == b {
		t.Errorf("got %q twice, want different tokens", a)
	}
	raw, err := base64.RawURLEncoding.DecodeString(a)
	if err != nil || len(raw) != 32 {
		t.Errorf("got %q (%d bytes, %v), want 32 bytes base64url", a, len(raw), err)
	}
	if tokenMatches("", HashToken("")) {
		t.Errorf("got a match for the empty token, want none")
	}
	if tokenMatches(a, "") {
		t.Errorf("got a match against an empty hash, want none")
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	other := GenerateToken()
	tests := []struct {
		name   string
		auth   string
		path   string
		status int
		header string
	}{
		{"missing", "", "/admin/v1/organizations", 401, "Bearer"},
		{"basic scheme", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+e.token)), "/admin/v1/organizations", 401, "Bearer"},
		{"empty bearer", "Bearer ", "/admin/v1/organizations", 401, "Bearer"},
		{"bearer without space", "Bearer" + e.token, "/admin/v1/organizations", 401, "Bearer"},
		{"wrong token", "Bearer " + other, "/admin/v1/organizations", 401, `Bearer error="invalid_token"`},
		{"the hash itself", "Bearer " + HashToken(e.token), "/admin/v1/organizations", 401, `Bearer error="invalid_token"`},
		{"token with suffix", "Bearer " + e.token + "x", "/admin/v1/organizations", 401, `Bearer error="invalid_token"`},
		{"unknown route without token", "", "/admin/v1/nothing-here", 401, "Bearer"},
		{"cluster without token", "", "/admin/v1/cluster", 401, "Bearer"},
		{"good", "Bearer " + e.token, "/admin/v1/organizations", 200, ""},
		{"scheme case-insensitive", "bearer " + e.token, "/admin/v1/organizations", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := []string{"Authorization", tt.auth}
			w := e.do("GET", tt.path, "", hdr...)
			if tt.status == 401 {
				env := checkEnvelope(t, w, 401, httpx.CodeUnauthorized)
				if strings.Contains(env.Message, e.token) {
					t.Errorf("message %q leaks the token", env.Message)
				}
			} else if w.Code != tt.status {
				t.Fatalf("got %d, want %d", w.Code, tt.status)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != tt.header {
				t.Errorf("WWW-Authenticate: got %q, want %q", got, tt.header)
			}
		})
	}
}

func TestTokenHashConfig(t *testing.T) {
	tests := []struct {
		name   string
		hash   string
		token  string
		status int
	}{
		{"none configured lets nobody in", "", "anything", 401},
		{"configured hash", HashToken("s3cret-token"), "s3cret-token", 200},
		{"configured hash, other token", HashToken("s3cret-token"), "other", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.TokenHash = func() string { return tt.hash } })
			w := e.do("GET", "/admin/v1/organizations", "", "Authorization", "Bearer "+tt.token)
			if w.Code != tt.status {
				t.Errorf("got %d, want %d", w.Code, tt.status)
			}
			// The replicated token of the env is not consulted any more.
			if w := e.do("GET", "/admin/v1/organizations", ""); tt.hash != HashToken(e.token) && w.Code != 401 {
				t.Errorf("state token: got %d, want %d", w.Code, 401)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	e := newEnv(t)
	e.run(t, []tc{
		{name: "unknown route", method: "GET", path: "/admin/v1/widgets", status: 404, code: httpx.CodeNotFound},
		{name: "unknown nested route", method: "GET", path: "/admin/v1/users/x/y/z", status: 404, code: httpx.CodeNotFound},
		{name: "PUT organizations", method: "PUT", path: "/admin/v1/organizations", body: `{}`, status: 405, code: httpx.CodeBadRequest},
		{name: "DELETE organizations list", method: "DELETE", path: "/admin/v1/organizations", status: 405, code: httpx.CodeBadRequest},
		{name: "PUT organization", method: "PUT", path: "/admin/v1/organizations/00000000-0000-4000-8000-000000000000", body: `{}`, status: 405, code: httpx.CodeBadRequest},
		{name: "PATCH invitation", method: "PATCH", path: "/admin/v1/invitations/00000000-0000-4000-8000-000000000000", body: `{}`, status: 405, code: httpx.CodeBadRequest},
		{name: "GET rotate", method: "GET", path: "/admin/v1/keys/rotate", status: 405, code: httpx.CodeBadRequest},
		{name: "POST cluster", method: "POST", path: "/admin/v1/cluster", body: `{}`, status: 405, code: httpx.CodeBadRequest},
	})
	w := e.do("PUT", "/admin/v1/users/00000000-0000-4000-8000-000000000000", `{}`)
	if got, want := w.Header().Get("Allow"), "DELETE, GET, HEAD, PATCH"; got != want {
		t.Errorf("Allow: got %q, want %q", got, want)
	}
}

func TestCorrelationIDEchoed(t *testing.T) {
	e := newEnv(t)
	w := e.do("GET", "/admin/v1/organizations/nope", "", httpx.HeaderCorrelationID, "trace-42")
	env := checkEnvelope(t, w, 400, httpx.CodeValidation)
	if env.CorrelationID != "trace-42" {
		t.Errorf("got %q, want %q", env.CorrelationID, "trace-42")
	}
	w = e.do("GET", "/admin/v1/organizations", "", httpx.HeaderCorrelationID, "trace-43")
	if got := w.Header().Get(httpx.HeaderCorrelationID); got != "trace-43" {
		t.Errorf("got %q, want %q", got, "trace-43")
	}
}

// TestApplyFails checks that every write answers 503 when the cluster
// cannot commit, and that nothing was written.
func TestApplyFails(t *testing.T) {
	e := newEnv(t)
	org := e.createOrg("acme")
	user := e.createUser(`{"email":"a@example.com"}`)
	m := e.createMembership(user.ID, org.ID)
	c := e.createClient(`{"name":"App","redirect_uris":["https://app.example/cb"],"organization_id":"` + org.ID + `"}`)
	e.app.Fail = errDown
	before := e.app.FSM.Applied()
	tests := []struct{ method, path, body string }{
		{"POST", "/admin/v1/organizations", `{"slug":"other","name":"Other"}`},
		{"DELETE", "/admin/v1/organizations/" + org.ID, ""},
		{"POST", "/admin/v1/users", `{"email":"b@example.com","password":"long enough"}`},
		{"PATCH", "/admin/v1/users/" + user.ID, `{"email_verified":true}`},
		{"DELETE", "/admin/v1/users/" + user.ID, ""},
		{"POST", "/admin/v1/memberships", `{"user_id":"` + user.ID + `","org_id":"` + org.ID + `"}`},
		{"PATCH", "/admin/v1/memberships/" + m.ID, `{"status":"suspended"}`},
		{"DELETE", "/admin/v1/memberships/" + m.ID, ""},
		{"POST", "/admin/v1/clients", `{"name":"App2","redirect_uris":["https://app.example/cb"],"organization_id":"` + org.ID + `"}`},
		{"PATCH", "/admin/v1/clients/" + c.ClientID, `{"suspended":true}`},
		{"DELETE", "/admin/v1/clients/" + c.ClientID, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := e.do(tt.method, tt.path, tt.body)
			env := checkEnvelope(t, w, http.StatusServiceUnavailable, httpx.CodeUnavailable)
			if env.Message != "cluster unavailable, try again" {
				t.Errorf("got %q, want %q", env.Message, "cluster unavailable, try again")
			}
			if got := w.Header().Get("Retry-After"); got == "" {
				t.Errorf("Retry-After: got %q, want a value", got)
			}
		})
	}
	if got := e.app.FSM.Applied(); got != before {
		t.Errorf("applied index: got %d, want %d", got, before)
	}
	// Reads still work from the local state.
	e.app.Fail = nil
	e.must(200, "GET", "/admin/v1/organizations/"+org.ID, "")
	e.must(200, "GET", "/admin/v1/users/"+user.ID, "")
}

// writeEndpoints lists every route that reads a JSON body, with a valid
// body, for the body-error table.
func writeEndpoints(t *testing.T, e *env) []struct{ method, path, good string } {
	org := e.createOrg("body-org")
	user := e.createUser(`{"email":"body@example.com"}`)
	m := e.createMembership(user.ID, org.ID)
	c := e.createClient(`{"name":"App","redirect_uris":["https://app.example/cb"],"organization_id":"` + org.ID + `"}`)
	return []struct{ method, path, good string }{
		{"POST", "/admin/v1/organizations", `{"slug":"x","name":"X"}`},
		{"POST", "/admin/v1/users", `{"email":"x@example.com"}`},
		{"PATCH", "/admin/v1/users/" + user.ID, `{"email_verified":true}`},
		{"POST", "/admin/v1/memberships", `{"user_id":"` + user.ID + `","org_id":"` + org.ID + `"}`},
		{"PATCH", "/admin/v1/memberships/" + m.ID, `{"status":"active"}`},
		{"POST", "/admin/v1/clients", `{"name":"App","redirect_uris":["https://a.example/cb"],"organization_id":"` + org.ID + `"}`},
		{"PATCH", "/admin/v1/clients/" + c.ClientID, `{"name":"App 2"}`},
		{"POST", "/admin/v1/keys/rotate", `{"immediate":false}`},
	}
}

func TestBodyErrors(t *testing.T) {
	e := newEnv(t)
	huge := `{"name":"` + strings.Repeat("a", httpx.MaxJSONBody) + `"}`
	for _, ep := range writeEndpoints(t, e) {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			e.run(t, []tc{
				{name: "malformed", method: ep.method, path: ep.path, body: `{"slug":`, status: 400, code: httpx.CodeBadRequest},
				{name: "not an object", method: ep.method, path: ep.path, body: `[1,2]`, status: 400, code: httpx.CodeValidation, field: "body", dcode: "invalid_type"},
				{name: "two objects", method: ep.method, path: ep.path, body: ep.good + ep.good, status: 400, code: httpx.CodeBadRequest},
				{name: "trailing garbage", method: ep.method, path: ep.path, body: ep.good + `x`, status: 400, code: httpx.CodeBadRequest},
				{name: "oversized", method: ep.method, path: ep.path, body: huge, status: 413, code: httpx.CodeBadRequest},
				{name: "unknown field", method: ep.method, path: ep.path, body: `{"bogus":1}`, status: 400, code: httpx.CodeValidation, field: "bogus", dcode: "unknown_field"},
				{name: "text/plain", method: ep.method, path: ep.path, body: ep.good, hdr: []string{"Content-Type", "text/plain"}, status: 415, code: httpx.CodeBadRequest},
				{name: "form", method: ep.method, path: ep.path, body: ep.good, hdr: []string{"Content-Type", "application/x-www-form-urlencoded"}, status: 415, code: httpx.CodeBadRequest},
			})
		})
	}
}

// TestAnswersHoldNoSecrets reads every answer that shows users and clients
// and looks for stored hashes.
func TestAnswersHoldNoSecrets(t *testing.T) {
	e := newEnv(t)
	org := e.createOrg("acme")
	u := e.createUser(`{"email":"a@example.com","password":"correct horse"}`)
	c := e.createClient(`{"name":"App","redirect_uris":["https://app.example/cb"],"organization_id":"` + org.ID + `"}`)
	for _, w := range []string{
		e.must(200, "GET", "/admin/v1/users/"+u.ID, "").Body.String(),
		e.must(200, "GET", "/admin/v1/users", "").Body.String(),
		e.must(200, "PATCH", "/admin/v1/users/"+u.ID, `{"password":"another one"}`).Body.String(),
		e.must(200, "GET", "/admin/v1/clients/"+c.ClientID, "").Body.String(),
		e.must(200, "GET", "/admin/v1/clients", "").Body.String(),
		e.must(200, "PATCH", "/admin/v1/clients/"+c.ClientID, `{"name":"App 2"}`).Body.String(),
	} {
		stored, _ := e.state.User(u.ID)
		parts := strings.Split(stored.PasswordHash, "$") // only the scheme may show
		salt := parts[len(parts)-2]
		for _, bad := range []string{"$argon2id$", salt, "hash", "client_secret", "correct horse", "another one"} {
			if strings.Contains(w, bad) {
				t.Errorf("answer %s holds %q", w, bad)
			}
		}
	}
}

// valueless is an Applier whose results come back without the record, as a
// forwarded write's might: answers must then be read from the state.
type valueless struct{ Applier }

func (v valueless) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	res, err := v.Applier.Apply(ctx, cmd)
	res.Value = nil
	return res, err
}

func TestAnswersWithoutResultValue(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Applier = valueless{c.Applier} })
	o := e.createOrg("acme")
	u := e.createUser(`{"email":"a@example.com"}`)
	m := e.createMembership(u.ID, o.ID)
	e.createClient(`{"client_id":"app","name":"App","redirect_uris":["https://app.example/cb"],"organization_id":"` + o.ID + `"}`)
	if got := decodeAs[User](t, e.must(200, "PATCH", "/admin/v1/users/"+u.ID, `{"phone":"+15551234567"}`)); got.Phone != "+15551234567" {
		t.Errorf("got %+v, want the new phone", got)
	}
	if got := decodeAs[Membership](t, e.must(200, "PATCH", "/admin/v1/memberships/"+m.ID, `{"status":"suspended"}`)); got.Status != "suspended" {
		t.Errorf("got %+v, want suspended", got)
	}
	if got := decodeAs[Client](t, e.must(200, "PATCH", "/admin/v1/clients/app", `{"name":"B"}`)); got.Name != "B" {
		t.Errorf("got %+v, want name B", got)
	}
}

// TestHasherGivesUp checks that a request whose context ends before a hash
// slot is free answers 503 and writes nothing.
func TestHasherGivesUp(t *testing.T) {
	e := newEnv(t)
	before := e.app.FSM.Applied()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("POST", "/admin/v1/users", strings.NewReader(`{"email":"a@example.com","password":"long enough"}`)).WithContext(ctx)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+e.token)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	checkEnvelope(t, w, 503, httpx.CodeUnavailable)
	if got := e.app.FSM.Applied(); got != before {
		t.Errorf("applied index: got %d, want %d", got, before)
	}
}

func TestDefaults(t *testing.T) {
	app := fsmtest.New(t)
	h := httpx.Correlation(New(Config{State: app.State(), Applier: app, TokenHash: func() string { return HashToken("t") }}))
	r := httptest.NewRequest("POST", "/admin/v1/organizations", strings.NewReader(`{"slug":"a","name":"A"}`))
	r.Header.Set("Authorization", "Bearer t")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 201 {
		t.Fatalf("got %d, want 201: %s", w.Code, w.Body)
	}
	if o := decodeAs[Org](t, w); !isUUID(o.ID) {
		t.Errorf("got id %q, want a UUID", o.ID)
	}
}

// TestAdminTokenGuessesAreLimited: from one address, at most guardLimit
// wrong tokens are compared in a window, even when they arrive at once;
// the next attempt gets 429 without being evaluated, and that includes
// the right token. Another address is not affected, and a right token
// does not use up the allowance.
func TestAdminTokenGuessesAreLimited(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var compared atomic.Int64
	good := HashToken("the-right-token-the-right-token-!!")
	h := New(Config{State: fsmtest.New(t).State(), Applier: nil, Now: func() time.Time { return now },
		TokenHash: func() string { compared.Add(1); return good }})
	call := func(remote, token string) int {
		r := httptest.NewRequest("GET", Prefix+"/status", nil)
		r.RemoteAddr = remote
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range 5 {
		if got := call("192.0.2.1:1000", "the-right-token-the-right-token-!!"); got == http.StatusTooManyRequests || got == http.StatusUnauthorized {
			t.Fatalf("the right token: got %d", got)
		}
	}
	compared.Store(0)
	var wg sync.WaitGroup
	codes := make(chan int, 60)
	for range 60 {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- call("192.0.2.1:1000", "wrong") }()
	}
	wg.Wait()
	close(codes)
	n429 := 0
	for c := range codes {
		if c == http.StatusTooManyRequests {
			n429++
		}
	}
	if got := compared.Load(); got > guardLimit || n429 != 60-guardLimit {
		t.Fatalf("60 concurrent guesses: %d compared, %d refused; want at most %d compared", got, n429, guardLimit)
	}
	if got := call("[2001:db8::1]:1", "wrong"); got != http.StatusUnauthorized {
		t.Fatalf("another address: got %d, want 401", got)
	}
	if got := call("192.0.2.1:1000", "the-right-token-the-right-token-!!"); got != http.StatusTooManyRequests {
		t.Fatalf("over the limit, even the right token: got %d, want 429", got)
	}
	now = now.Add(guardWindow)
	if got := call("192.0.2.1:1000", "wrong"); got != http.StatusUnauthorized {
		t.Fatalf("after the window: got %d, want 401", got)
	}
}

func TestSourceKey(t *testing.T) {
	cases := []struct{ remote, want string }{
		{"192.0.2.1:1000", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:1", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:1", "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.9]:1", "192.0.2.9"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if got := sourceKey(r); got != c.want {
			t.Errorf("sourceKey(%q): got %q, want %q", c.remote, got, c.want)
		}
	}
}
