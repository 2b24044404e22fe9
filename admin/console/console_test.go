package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/fsm"
)

func TestSignedOutBrowserIsSentToSignIn(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"", "cluster", "organizations", "people", "memberships", "clients", "keys", "audit",
		"people/5b0c8a43-0d33-4a57-a8ae-0c9d3c6d0c51", "organizations/5b0c8a43-0d33-4a57-a8ae-0c9d3c6d0c51/delete"} {
		r := e.get(Prefix + path)
		if r.Status != http.StatusSeeOther || r.Location != Prefix+"signin" {
			t.Errorf("GET %s: got %d to %q, want 303 to the sign-in page", Prefix+path, r.Status, r.Location)
		}
	}
	// A POST with a valid CSRF pair but no session changes nothing.
	r := e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	wantStatus(t, "POST without session", r, http.StatusUnauthorized)
	if _, n, _ := e.state.Orgs(fsm.Page{Page: 1, PageSize: 10}); n != 0 {
		t.Errorf("got %d organizations, want 0", n)
	}
}

func TestSignIn(t *testing.T) {
	e := newEnv(t)
	r := e.get(Prefix + "signin")
	wantStatus(t, "sign-in page", r, http.StatusOK)
	wantBody(t, "sign-in page", r, `autocomplete="current-password"`, `name="csrf_token"`)
	if csp := r.Header.Get("Content-Security-Policy"); csp == "" || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("got CSP %q, want a strict one", csp)
	}

	r = e.post(Prefix+"signin", url.Values{"token": {"wrong"}})
	wantStatus(t, "wrong token", r, http.StatusUnauthorized)
	wantBody(t, "wrong token", r, "not the admin token")
	if e.cookie(cookieSession) != "" {
		t.Fatal("a wrong token got a session cookie")
	}

	// The raw answer, to see the cookie's attributes.
	form := url.Values{"token": {testToken}, "csrf_token": {e.csrf()}}
	req, _ := http.NewRequest("POST", e.srv.URL+Prefix+"signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: cookieCSRF, Value: e.csrf()})
	raw, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	raw.Body.Close()
	var sess *http.Cookie
	for _, c := range raw.Cookies() {
		if c.Name == cookieSession {
			sess = c
		}
	}
	if sess == nil {
		t.Fatalf("no session cookie in %q", raw.Header.Values("Set-Cookie"))
	}
	if !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Path != Prefix || sess.Secure {
		t.Errorf("got cookie %+v, want HttpOnly, SameSite=Strict, Path=%s, not Secure on http", sess, Prefix)
	}
	if strings.Contains(sess.Value, testToken) || strings.Contains(sess.Value, admin.HashToken(testToken)) {
		t.Error("the session cookie holds the token or its hash")
	}

	e.signIn()
	r = e.get(Prefix)
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"cluster" {
		t.Fatalf("signed in GET %s: got %d to %q", Prefix, r.Status, r.Location)
	}
	r = e.get(Prefix + "cluster")
	wantStatus(t, "cluster page", r, http.StatusOK)
	wantBody(t, "cluster page", r, "node-0", "127.0.0.1:8300", "kid-1")

	// A new admin token ends every console session.
	e.token.Store(admin.HashToken("another-token"))
	if r := e.get(Prefix + "cluster"); r.Status != http.StatusSeeOther {
		t.Errorf("after the token changed: got %d, want 303 to sign in", r.Status)
	}
	e.token.Store(admin.HashToken(testToken))
	if r := e.get(Prefix + "cluster"); r.Status != http.StatusOK {
		t.Errorf("token back: got %d, want 200", r.Status)
	}

	r = e.post(Prefix+"signout", nil)
	if r.Status != http.StatusSeeOther || e.cookie(cookieSession) != "" {
		t.Errorf("sign out: got %d, session cookie %q", r.Status, e.cookie(cookieSession))
	}
	if r := e.get(Prefix + "cluster"); r.Status != http.StatusSeeOther {
		t.Errorf("after sign-out: got %d, want 303", r.Status)
	}
}

func TestSecureCookieOnHTTPSIssuer(t *testing.T) {
	e := newEnv(t)
	c := New(Config{Issuer: "https://id.example", Admin: admin.Config{State: e.state, Applier: nil,
		TokenHash: func() string { return admin.HashToken(testToken) }}})
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest("GET", Prefix+"signin", nil))
	res := rec.Result()
	if len(res.Cookies()) == 0 {
		t.Fatal("no CSRF cookie")
	}
	for _, ck := range res.Cookies() {
		if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("got cookie %+v, want Secure, HttpOnly, SameSite=Strict", ck)
		}
	}
}

func TestCSRFRefused(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	tests := []struct {
		name string
		csrf []string
	}{
		{"missing", nil},
		{"empty", []string{""}},
		{"other", []string{"0123456789abcdef0123456789abcdef"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form := url.Values{"slug": {"acme"}, "name": {"Acme"}}
			if tt.csrf != nil {
				form["csrf_token"] = tt.csrf
			} else {
				form["csrf_token"] = nil // present but with no value: posted without the field
			}
			r := e.post(Prefix+"organizations", form)
			wantStatus(t, "POST", r, http.StatusForbidden)
			if _, n, _ := e.state.Orgs(fsm.Page{Page: 1, PageSize: 10}); n != 0 {
				t.Errorf("got %d organizations, want 0", n)
			}
		})
	}
	// A CSRF cookie swapped under a live session unbinds the session.
	u, _ := url.Parse(e.srv.URL + Prefix)
	e.client.Jar.SetCookies(u, []*http.Cookie{{Name: cookieCSRF, Value: "0123456789abcdef0123456789abcdef", Path: Prefix}})
	r := e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	wantStatus(t, "POST with a swapped CSRF cookie", r, http.StatusUnauthorized)
	if _, n, _ := e.state.Orgs(fsm.Page{Page: 1, PageSize: 10}); n != 0 {
		t.Errorf("got %d organizations, want 0", n)
	}
}

// firstOrg returns the only organization.
func firstOrg(t *testing.T, st *fsm.State) fsm.Org {
	t.Helper()
	orgs, n, err := st.Orgs(fsm.Page{Page: 1, PageSize: 10})
	if err != nil || n != 1 {
		t.Fatalf("got %d organizations (%v), want 1", n, err)
	}
	return orgs[0]
}

func TestOrganizationsRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.signIn()

	r := e.post(Prefix+"organizations", url.Values{"slug": {"Not A Slug!"}, "name": {"Acme"}})
	wantStatus(t, "invalid slug", r, http.StatusBadRequest)
	wantBody(t, "invalid slug", r, `role="alert"`, `class="field-error"`, `value="Not A Slug!"`)

	r = e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme Inc"}})
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"organizations?done=org-created" {
		t.Fatalf("create: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	o := firstOrg(t, e.state)
	if o.Slug != "acme" || o.Name != "Acme Inc" {
		t.Errorf("got %+v, want acme / Acme Inc", o)
	}
	r = e.get(r.Location)
	wantBody(t, "list", r, "Organization created.", "Acme Inc", o.ID)

	r = e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Again"}})
	wantStatus(t, "duplicate slug", r, http.StatusConflict)

	r = e.get(Prefix + "organizations/" + o.ID + "/delete")
	wantStatus(t, "confirm page", r, http.StatusOK)
	wantBody(t, "confirm page", r, "Acme Inc", `action="/console/organizations/`+o.ID+`/delete"`)
	r = e.post(Prefix+"organizations/"+o.ID+"/delete", nil)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("delete: got %d\n%s", r.Status, r.Body)
	}
	if o := firstOrg(t, e.state); o.Status != fsm.OrgDeleted {
		t.Errorf("got status %q, want %q", o.Status, fsm.OrgDeleted)
	}
	r = e.get(Prefix + "organizations/not-a-uuid/delete")
	wantStatus(t, "confirm of a bad id", r, http.StatusBadRequest)
}

func TestPeopleAndMembershipsRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	org := firstOrg(t, e.state)

	r := e.post(Prefix+"people", url.Values{"email": {"not-an-email"}, "password": {"pw-that-is-long-enough"}})
	wantStatus(t, "invalid email", r, http.StatusBadRequest)
	if strings.Contains(r.Body, "pw-that-is-long-enough") {
		t.Error("a re-shown form carries the password")
	}

	r = e.post(Prefix+"people", url.Values{"email": {"ada@example.com"}, "email_verified": {"on"}, "password": {"correct horse battery"}})
	if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, Prefix+"people/") {
		t.Fatalf("create: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	personURL := strings.TrimSuffix(r.Location, "?done=person-created")
	id := strings.TrimPrefix(personURL, Prefix+"people/")
	u, err := e.state.User(id)
	if err != nil || u.Email != "ada@example.com" || !u.EmailVerified || u.PasswordHash == "" {
		t.Fatalf("got %+v, %v", u, err)
	}

	r = e.post(personURL, url.Values{"email": {"ada@example.org"}, "phone": {"+15551234567"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("patch: got %d\n%s", r.Status, r.Body)
	}
	if u2, _ := e.state.User(id); u2.Email != "ada@example.org" || u2.EmailVerified || u2.Phone != "+15551234567" || u2.PasswordHash != u.PasswordHash {
		t.Errorf("after patch got %+v", u2)
	}

	r = e.post(Prefix+"memberships", url.Values{"user_id": {id}, "org_id": {org.ID}, "return": {personURL}})
	if r.Status != http.StatusSeeOther || r.Location != personURL+"?done=membership-created" {
		t.Fatalf("add membership: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	ms, err := e.state.MembershipsOfUser(id)
	if err != nil || len(ms) != 1 || ms[0].Status != fsm.MembershipActive {
		t.Fatalf("got %+v, %v", ms, err)
	}
	// The same again: from the person's page a page of its own, from the
	// list the list with the problem on it.
	r = e.post(Prefix+"memberships", url.Values{"user_id": {id}, "org_id": {org.ID}, "return": {personURL}})
	wantStatus(t, "duplicate membership from the person's page", r, http.StatusConflict)
	wantBody(t, "duplicate membership from the person's page", r, "Not done")
	r = e.post(Prefix+"memberships", url.Values{"user_id": {id}, "org_id": {org.ID}})
	wantStatus(t, "duplicate membership from the list", r, http.StatusConflict)
	wantBody(t, "duplicate membership from the list", r, `role="alert"`, "Memberships")
	r = e.get(personURL)
	wantBody(t, "person page", r, "ada@example.org", "Acme", "Suspend")
	r = e.get(Prefix + "memberships")
	wantBody(t, "memberships page", r, "ada@example.org", "Acme")

	mid := ms[0].ID
	r = e.post(Prefix+"memberships/"+mid+"/status", url.Values{"status": {"suspended"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("suspend: got %d\n%s", r.Status, r.Body)
	}
	if m, _ := e.state.Membership(mid); m.Status != fsm.MembershipSuspended {
		t.Errorf("got status %q, want suspended", m.Status)
	}
	r = e.post(Prefix+"memberships/"+mid+"/status", url.Values{"status": {"bogus"}})
	wantStatus(t, "bad status", r, http.StatusBadRequest)

	r = e.post(Prefix+"memberships/"+mid+"/delete", nil)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("delete membership: got %d\n%s", r.Status, r.Body)
	}
	if _, err := e.state.Membership(mid); err == nil {
		t.Error("membership still there")
	}

	r = e.get(personURL + "/delete")
	wantBody(t, "confirm", r, "ada@example.org", `href="`+personURL+`"`, "Delete person")
	r = e.post(personURL+"/delete", nil)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("delete person: got %d\n%s", r.Status, r.Body)
	}
	if _, err := e.state.User(id); err == nil {
		t.Error("person still there")
	}
}

func TestSecondFactors(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	r := e.post(Prefix+"people", url.Values{"email": {"ada@example.com"}})
	personURL := strings.TrimSuffix(r.Location, "?done=person-created")
	id := strings.TrimPrefix(personURL, Prefix+"people/")

	r = e.post(personURL+"/totp", nil)
	wantStatus(t, "enroll TOTP", r, http.StatusOK)
	wantBody(t, "enroll TOTP", r, "otpauth://totp/", "not shown again")
	if f, err := e.state.Factors(id); err != nil || f.TOTP == nil {
		t.Fatalf("no TOTP stored (%v)", err)
	}
	wantBody(t, "person page", e.get(personURL), "Replace the authenticator app", "Remove the authenticator app")

	r = e.post(personURL+"/recovery-codes", nil)
	wantStatus(t, "recovery codes", r, http.StatusOK)
	if n := strings.Count(r.Body, "<li><code>"); n != 10 {
		t.Errorf("got %d codes, want 10\n%s", n, r.Body)
	}
	if f, _ := e.state.Factors(id); f.RecoveryLeft() != 10 {
		t.Errorf("got %d recovery codes stored, want 10", f.RecoveryLeft())
	}

	r = e.post(personURL+"/totp/delete", nil)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("remove TOTP: got %d\n%s", r.Status, r.Body)
	}
	if f, _ := e.state.Factors(id); f.TOTP != nil {
		t.Error("TOTP still stored")
	}
	r = e.post(personURL+"/lockouts/delete", nil)
	if r.Status != http.StatusSeeOther || r.Location != personURL+"?done=lockouts-cleared" {
		t.Errorf("clear lockouts: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
}

func TestClientsRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	org := firstOrg(t, e.state)

	r := e.get(Prefix + "clients")
	wantStatus(t, "clients page", r, http.StatusOK)
	wantBody(t, "clients page", r, `value="`+org.ID+`"`)

	bad := url.Values{"name": {"App"}, "type": {"confidential"}, "organization_id": {org.ID},
		"redirect_uris": {"not a uri"}, "scopes": {"openid"}, "access_token_ttl": {"600"}}
	r = e.post(Prefix+"clients", bad)
	wantStatus(t, "bad redirect URI", r, http.StatusBadRequest)
	wantBody(t, "bad redirect URI", r, "redirect_uris")

	r = e.post(Prefix+"clients", url.Values{"name": {"App"}, "type": {"confidential"}, "organization_id": {org.ID},
		"access_token_ttl": {"ten"}, "redirect_uris": {"https://app.example/cb"}})
	wantStatus(t, "bad ttl", r, http.StatusBadRequest)

	good := url.Values{"name": {"App"}, "type": {"confidential"}, "organization_id": {org.ID}, "client_id": {"app-1"},
		"redirect_uris": {"https://app.example/cb\r\n\r\nhttps://app.example/cb2\n"}, "scopes": {"openid", "email"},
		"backchannel_logout_uri": {"https://app.example/bcl"}, "access_token_ttl": {"300"}}
	r = e.post(Prefix+"clients", good)
	wantStatus(t, "create", r, http.StatusCreated)
	wantBody(t, "create", r, "app-1", `id="client-secret"`, "shown only this once")
	cl, err := e.state.Client("app-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.RedirectURIs) != 2 || cl.AccessTokenTTL != 300 || cl.BackchannelLogoutURI != "https://app.example/bcl" || len(cl.Scopes) != 2 {
		t.Errorf("got %+v", cl)
	}
	if r := e.get(Prefix + "clients"); strings.Contains(r.Body, "client-secret") || !strings.Contains(r.Body, "app-1") ||
		!strings.Contains(r.Body, "https:/<wbr>/<wbr>app.<wbr>example/<wbr>bcl") || !strings.Contains(r.Body, "its own organization") {
		t.Errorf("list: want app-1 without a secret, with its back-channel URI and what it serves\n%s", r.Body)
	}

	// A multi-organization app, serving the organizations picked.
	e.post(Prefix+"organizations", url.Values{"slug": {"beta"}, "name": {"Beta"}})
	multi := url.Values{"name": {"Multi"}, "type": {"public"}, "organization_id": {org.ID}, "client_id": {"multi-1"},
		"redirect_uris": {"https://multi.example/cb"}, "scopes": {"openid"}, "multi_organization": {"on"}, "organizations": {org.ID}}
	wantStatus(t, "create multi", e.post(Prefix+"clients", multi), http.StatusCreated)
	if cl, err := e.state.Client("multi-1"); err != nil || !cl.MultiOrganization || len(cl.Organizations) != 1 || cl.Organizations[0] != org.ID {
		t.Errorf("multi-organization client: got %+v, %v", cl, err)
	}
	wantBody(t, "list", e.get(Prefix+"clients"), "1 organizations")

	r = e.post(Prefix+"clients/app-1/suspended", url.Values{"suspended": {"true"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("suspend: got %d\n%s", r.Status, r.Body)
	}
	if cl, _ := e.state.Client("app-1"); !cl.Suspended {
		t.Error("not suspended")
	}
	r = e.get(Prefix + "clients/app-1/delete")
	wantBody(t, "confirm", r, "app-1")
	r = e.post(Prefix+"clients/app-1/delete", nil)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("delete: got %d\n%s", r.Status, r.Body)
	}
	if _, err := e.state.Client("app-1"); err == nil {
		t.Error("client still there")
	}
}

func TestKeys(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	r := e.get(Prefix + "keys")
	wantStatus(t, "keys page", r, http.StatusOK)
	wantBody(t, "keys page", r, "kid-1", "active")
	r = e.post(Prefix+"keys/rotate", url.Values{"immediate": {"on"}})
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"keys?done=key-rotated" {
		t.Fatalf("rotate: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	if r := e.post(Prefix+"keys/rotate", nil); r.Status != http.StatusSeeOther {
		t.Fatalf("rotate: got %d\n%s", r.Status, r.Body)
	}
	e.keys.mu.Lock()
	defer e.keys.mu.Unlock()
	if got := e.keys.rotated; len(got) != 2 || !got[0] || got[1] {
		t.Errorf("got rotations %v, want [true false]", got)
	}
}

func TestUnknownPage(t *testing.T) {
	e := newEnv(t)
	r := e.get(Prefix + "nope")
	wantStatus(t, "unknown", r, http.StatusNotFound)
	r = e.get(Prefix + "static/console.css?v=" + styleHash)
	wantStatus(t, "stylesheet", r, http.StatusOK)
	if cc := r.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
		t.Errorf("got Cache-Control %q, want immutable", cc)
	}
}

func TestReturnTo(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/console/people/x", "/console/people/x"},
		{"", "/def"},
		{"https://evil.example/", "/def"},
		{"//evil.example/console/", "/def"},
		{"/console//evil", "/def"},
		{"/console/../admin", "/def"},
		{"/console/x?y", "/def"},
	}
	for _, tt := range tests {
		if got := returnTo(tt.in, "/def"); got != tt.want {
			t.Errorf("returnTo(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestSessionNeedsTheNodeSecret: the session cookie's fingerprint is keyed
// with a secret outside the replicated state. Someone holding a copy of
// the state (the browser key and the admin token's hash) but not the
// nodes' secret, such as a console built with another secret, cannot make
// or use a session; and a change of the secret (a KEK adopted) ends every
// session.
func TestSessionNeedsTheNodeSecret(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	if r := e.get(Prefix + "cluster"); r.Status != http.StatusOK {
		t.Fatalf("signed in: got %d, want 200", r.Status)
	}
	e.console.secret = []byte("another secret")
	if r := e.get(Prefix + "cluster"); r.Status != http.StatusSeeOther {
		t.Fatalf("with another secret: got %d, want 303 to sign-in", r.Status)
	}
}

// TestDirectories: the page lists each directory with its server and the
// outcome of its last sync, a failure with its reason.
func TestDirectories(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	wantBody(t, "no directories", e.get(Prefix+"directories"), "No directories")
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	for i, d := range []fsm.Directory{
		{ID: "00000000-0000-4000-8000-0000000000d1", Name: "Corp AD", URL: "ldaps://dc1:636", SyncInterval: 15 * time.Minute},
		{ID: "00000000-0000-4000-8000-0000000000d2", Name: "Lab LDAP", URL: "ldap://lab:389", StartTLS: true, SyncInterval: time.Hour},
	} {
		res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypePutDirectory, fsm.PutDirectory{Directory: d, Create: true}))
		if err != nil || res.Err != nil {
			t.Fatalf("directory %d: %v %v", i, err, res.Err)
		}
	}
	// The leader's sync records the outcome.
	for _, id := range []string{"00000000-0000-4000-8000-0000000000d1", "00000000-0000-4000-8000-0000000000d2"} {
		d, _ := e.state.Directory(id)
		st := fsm.DirectorySync{At: at, OK: id[len(id)-1] == '1', People: 42, Changed: 2, Ended: 1, Error: "connection refused"}
		if st.OK {
			st.Error = ""
		}
		e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeDirectorySyncBatch, fsm.DirectorySyncBatch{DirectoryID: d.ID, Status: &st, At: at}))
	}
	r := e.get(Prefix + "directories")
	wantStatus(t, "directories page", r, http.StatusOK)
	wantBody(t, "directories page", r, "Corp AD", "ldaps://dc1:636", "15m0s", "2 changed, 1 signed out", "Lab LDAP", "(StartTLS)", "<strong>failed</strong>: connection refused")
}
