package oidc

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/testkit/htmlform"
)

// Test PKCE verifier and the request defaults.
const (
	tVerifier = "verifier-verifier-verifier-verifier-verifier"
	tState    = "state-0123456789"
	tNonce    = "nonce-0123456789"
)

// browser is a person's browser: a cookie jar and a client that does not
// follow redirects, so each test sees every 302/303.
type browser struct {
	t   testing.TB
	h   *harness
	jar *cookiejar.Jar
	c   *http.Client
}

func (h *harness) browser() *browser {
	h.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return &browser{t: h.t, h: h, jar: jar, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// page is a read response.
type page struct {
	status int
	header http.Header
	body   string
	issuer string // of the provider that answered
}

func (p page) location() string { return p.header.Get("Location") }

// abs resolves a path (or absolute URL) against the test server.
func (b *browser) abs(ref string) string {
	base, _ := url.Parse(b.h.srv.URL)
	u, err := base.Parse(ref)
	if err != nil {
		b.t.Fatalf("bad url %q: %v", ref, err)
	}
	return u.String()
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(body), issuer: "http://" + b.h.srv.Listener.Addr().String()}
}

func (b *browser) get(ref string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.abs(ref), nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

func (b *browser) post(ref string, form url.Values) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.abs(ref), strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// cookie returns the value of a cookie the browser would send to path.
func (b *browser) cookie(path, name string) string {
	for _, c := range b.jar.Cookies(mustURL(b.t, b.abs(path))) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// setCookie plants a cookie, as another site or a test fixture could.
func (b *browser) setCookie(name, value string) {
	b.jar.SetCookies(mustURL(b.t, b.abs("/")), []*http.Cookie{{Name: name, Value: value, Path: "/"}})
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// authzQuery is a valid request for client with the test defaults;
// mods change it (an empty value deletes the parameter).
func authzQuery(client string, mods ...map[string]string) url.Values {
	q := url.Values{
		"client_id": {client}, "redirect_uri": {hRedirect}, "response_type": {"code"},
		"scope": {"openid"}, "state": {tState}, "nonce": {tNonce},
		"code_challenge": {authn.S256(tVerifier)}, "code_challenge_method": {"S256"},
	}
	for _, m := range mods {
		for k, v := range m {
			if v == "" {
				q.Del(k)
			} else {
				q.Set(k, v)
			}
		}
	}
	return q
}

func authzPath(q url.Values) string { return "/authorize?" + q.Encode() }

// htmlForm is a parsed <form>.
type htmlForm struct {
	action, method string
	hidden         url.Values // hidden inputs
	inputs         []string   // names of the other inputs
	buttons        [][2]string
}

// parseForms returns the forms of an HTML page.
func parseForms(t testing.TB, body string) []htmlForm {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out []htmlForm
	for _, f := range htmlform.Forms(doc) {
		out = append(out, htmlForm{action: f.Action, method: f.Method, hidden: f.Hidden, inputs: f.Inputs, buttons: f.Buttons})
	}
	return out
}

// postForm finds the post form of p that has the named button.
func postForm(t testing.TB, p page, button string) htmlForm {
	t.Helper()
	for _, f := range parseForms(t, p.body) {
		if f.method != "post" {
			continue
		}
		for _, b := range f.buttons {
			if b[0] == button {
				return f
			}
		}
	}
	t.Fatalf("no post form with a %q button (status %d):\n%s", button, p.status, p.body)
	return htmlForm{}
}

// hasButton reports whether form f has button name=value.
func (f htmlForm) hasButton(name, value string) bool {
	return slices.Contains(f.buttons, [2]string{name, value})
}

// submit posts form f with its hidden inputs, fields and the button
// name=value.
func (b *browser) submit(f htmlForm, button, value string, fields map[string]string) page {
	b.t.Helper()
	if !f.hasButton(button, value) {
		b.t.Fatalf("form has no button %s=%s: %v", button, value, f.buttons)
	}
	v := url.Values{}
	for k, vs := range f.hidden {
		v[k] = slices.Clone(vs)
	}
	for k, val := range fields {
		v.Set(k, val)
	}
	v.Set(button, value)
	return b.post(f.action, v)
}

// signIn posts the sign-in form of p.
func (b *browser) signIn(p page, email, password string) page {
	b.t.Helper()
	if p.status != http.StatusOK && p.status != http.StatusBadRequest {
		b.t.Fatalf("sign-in page status %d, want 200:\n%s", p.status, p.body)
	}
	return b.submit(postForm(b.t, p, "method"), "method", "password", map[string]string{"email": email, "password": password})
}

// codeFrom checks that p redirects to the client with a code and the test
// state and returns the code.
func codeFrom(t testing.TB, p page, wantStatus int) string {
	t.Helper()
	q := redirectQuery(t, p, wantStatus)
	if q.Get("error") != "" {
		t.Fatalf("got error %q (%q), want a code", q.Get("error"), q.Get("error_description"))
	}
	if got := q.Get("state"); got != tState {
		t.Errorf("state: got %q, want %q", got, tState)
	}
	if q.Get("code") == "" {
		t.Fatalf("no code in %q", p.location())
	}
	return q.Get("code")
}

// redirectQuery checks that p is a redirect of wantStatus to hRedirect and
// returns its query.
func redirectQuery(t testing.TB, p page, wantStatus int) url.Values {
	t.Helper()
	if p.status != wantStatus {
		t.Fatalf("status: got %d, want %d; body:\n%s", p.status, wantStatus, p.body)
	}
	loc := p.location()
	base, query, ok := strings.Cut(loc, "?")
	if !ok || base != hRedirect {
		t.Fatalf("Location: got %q, want %s?...", loc, hRedirect)
	}
	if got := p.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control: got %q, want %q", got, "no-store")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	// RFC 9207: every authorization response names its issuer.
	if got := q.Get("iss"); got != p.issuer {
		t.Errorf("iss: got %q, want %q", got, p.issuer)
	}
	return q
}

// wantRedirectError checks an error redirected to the client.
func wantRedirectError(t testing.TB, p page, wantStatus int, code, desc string) {
	t.Helper()
	q := redirectQuery(t, p, wantStatus)
	if got := q.Get("error"); got != code {
		t.Errorf("error: got %q, want %q", got, code)
	}
	if got := q.Get("error_description"); got != desc {
		t.Errorf("error_description: got %q, want %q", got, desc)
	}
	if got := q.Get("state"); got != tState {
		t.Errorf("state: got %q, want %q", got, tState)
	}
	if q.Has("code") {
		t.Errorf("error redirect carries a code")
	}
}

// wantErrorPage checks an error page: status, HTML, a reference, and no
// Location.
func wantErrorPage(t testing.TB, p page, status int) {
	t.Helper()
	if p.status != status {
		t.Errorf("status: got %d, want %d", p.status, status)
	}
	if loc := p.location(); loc != "" {
		t.Errorf("Location: got %q, want none", loc)
	}
	if ct := p.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type: got %q, want text/html", ct)
	}
	if !strings.Contains(p.body, `class="reference"`) {
		t.Errorf("no reference on the error page:\n%s", p.body)
	}
}

// wantH1 checks the page's <h1>.
func wantH1(t testing.TB, p page, want string) {
	t.Helper()
	if !strings.Contains(p.body, "<h1>"+want+"</h1>") {
		t.Errorf("page is not %q (status %d):\n%s", want, p.status, p.body)
	}
}

// fullSignIn drives a fresh sign-in for client from GET /authorize to the
// code, allowing consent if asked, and returns the code.
func (b *browser) fullSignIn(q url.Values, email string) string {
	b.t.Helper()
	return b.fullSignInWith(q, email, hPassword)
}

// fullSignInWith is fullSignIn with the given password.
func (b *browser) fullSignInWith(q url.Values, email, password string) string {
	b.t.Helper()
	p := b.get(authzPath(q))
	if p.status == http.StatusFound {
		return codeFrom(b.t, p, http.StatusFound)
	}
	p = b.signIn(p, email, password)
	if p.status == http.StatusOK {
		p = b.submit(postForm(b.t, p, "decision"), "decision", "allow", nil)
	}
	return codeFrom(b.t, p, http.StatusSeeOther)
}

// codeRecord reads the stored code.
func (h *harness) codeRecord(code string) fsm.Code {
	h.t.Helper()
	c, err := h.p.cfg.State.Code(authn.HashToken(code))
	if err != nil {
		h.t.Fatalf("code not stored: %v", err)
	}
	return c
}

// addOrgMember creates an organization and an active membership of user.
func (h *harness) addOrgMember(orgID, slug, name, userID string) {
	h.t.Helper()
	h.apply(fsm.TypeCreateOrg, fsm.CreateOrg{ID: orgID, Slug: slug, Name: name, CreatedAt: h.clock.Now()})
	h.addMember(userID, orgID)
}

func (h *harness) addMember(userID, orgID string) {
	h.t.Helper()
	h.apply(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{
		ID: uuidLike(userID + orgID), UserID: userID, OrgID: orgID, Status: fsm.MembershipActive, CreatedAt: h.clock.Now(),
	}})
}

// uuidLike derives a stable UUID-shaped id from s.
func uuidLike(s string) string {
	x := authn.HashToken(s)
	return x[0:8] + "-" + x[8:12] + "-4" + x[13:16] + "-8" + x[17:20] + "-" + x[20:32]
}

// updateClient changes a registered client.
func (h *harness) updateClient(id string, change func(*fsm.Client)) {
	h.t.Helper()
	c, err := h.p.cfg.State.Client(id)
	if err != nil {
		h.t.Fatal(err)
	}
	change(&c)
	c.UpdatedAt = h.clock.Now().Add(time.Second)
	h.apply(fsm.TypeUpdateClient, fsm.PutClient{Client: c})
}
