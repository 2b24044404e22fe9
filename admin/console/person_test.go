package console

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
)

// fakeProvider issues codes as the provider's /authorize would and
// redeems them as its token endpoint would (PKCE S256 checked).
type fakeProvider struct {
	t      *testing.T
	issuer string
	mu     sync.Mutex
	codes  map[string]fakeCode
	fail   error // the next exchanges fail with it
	api    *fakeAPI
}

type fakeCode struct {
	challenge, redirect, nonce, sub string
}

// signIn plays the person's sign-in at the provider for the /authorize
// URL loc, and returns the callback's query.
func (p *fakeProvider) signIn(loc, sub string) url.Values {
	p.t.Helper()
	u, err := url.Parse(loc)
	if err != nil {
		p.t.Fatal(err)
	}
	q := u.Query()
	code := uuid.NewString()
	p.mu.Lock()
	p.codes[code] = fakeCode{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), nonce: q.Get("nonce"), sub: sub}
	p.mu.Unlock()
	return url.Values{"code": {code}, "state": {q.Get("state")}}
}

func (p *fakeProvider) exchange(_ context.Context, code, verifier, redirectURI string) (Tokens, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return Tokens{}, p.fail
	}
	c, ok := p.codes[code]
	delete(p.codes, code)
	if !ok || pkceChallenge(verifier) != c.challenge || redirectURI != c.redirect {
		return Tokens{}, &ExchangeError{Status: 400, Code: "invalid_grant"}
	}
	at := "at-" + uuid.NewString()
	p.api.mu.Lock()
	p.api.active[at] = c.sub
	p.api.mu.Unlock()
	return Tokens{AccessToken: at, IDToken: testIDToken(map[string]any{"iss": p.issuer, "sub": c.sub, "aud": admin.ClientID, "nonce": c.nonce}), ExpiresIn: 600}, nil
}

// testIDToken is an unsigned compact JWS with the claims (the console
// does not check the signature of an ID token it redeemed itself).
func testIDToken(claims map[string]any) string {
	b, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(b) + "." + enc([]byte("sig"))
}

// personEnv is apiEnv with the fake provider in place.
type personEnv struct {
	*apiEnv
	idp *fakeProvider
}

func newPersonEnv(t *testing.T) *personEnv {
	e := newAPIEnv(t)
	idp := &fakeProvider{t: t, issuer: "http://127.0.0.1", codes: map[string]fakeCode{}, api: e.api}
	e.console.exchange = idp.exchange
	return &personEnv{apiEnv: e, idp: idp}
}

// start follows the sign-in page's link and returns the /authorize URL.
func (e *personEnv) start() string {
	e.t.Helper()
	r := e.get(Prefix + "signin/provider")
	wantStatus(e.t, "start", r, http.StatusSeeOther)
	return r.Location
}

// personSignIn signs sub in through the fake provider.
func (e *personEnv) personSignIn(sub string) resp {
	e.t.Helper()
	q := e.idp.signIn(e.start(), sub)
	return e.get(callbackPath + "?" + q.Encode())
}

func TestProviderSignInStarts(t *testing.T) {
	e := newPersonEnv(t)
	r := e.get(Prefix + "signin")
	wantBody(t, "sign-in page", r, `href="/console/signin/provider"`, `id="token"`)
	r = e.get(Prefix + "signin/provider")
	wantStatus(t, "start", r, http.StatusSeeOther)
	u, err := url.Parse(r.Location)
	if err != nil || u.Scheme+"://"+u.Host+u.Path != "http://127.0.0.1/authorize" {
		t.Fatalf("got Location %q, want the issuer's /authorize", r.Location)
	}
	q := u.Query()
	for k, want := range map[string]string{
		"client_id": admin.ClientID, "response_type": "code", "scope": "openid",
		"redirect_uri": "http://127.0.0.1/console/callback", "code_challenge_method": "S256",
		"acr_values": defaultAdminACR,
	} {
		if got := q.Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if len(q.Get(k)) < 43 {
			t.Errorf("%s: got %q, want 32 random bytes", k, q.Get(k))
		}
	}
	var flowCookie *http.Cookie
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == cookieFlow {
			flowCookie = c
		}
	}
	if flowCookie == nil || !flowCookie.HttpOnly || flowCookie.SameSite != http.SameSiteLaxMode || flowCookie.MaxAge != 600 || flowCookie.Path != Prefix {
		t.Errorf("flow cookie: got %+v, want HttpOnly, SameSite=Lax, ten minutes, on %s", flowCookie, Prefix)
	}
	if strings.Contains(flowCookie.Value, q.Get("state")) {
		t.Error("the flow cookie shows the state in the clear; want it sealed")
	}
}

func TestCallbackURL(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, issuer, base string
		own, tls           bool
		host, want         string
	}{
		{"public listener: the issuer", "https://id.example/", "", false, false, "node-3:8080", "https://id.example/console/callback"},
		{"own listener: the address the browser used", "https://id.example", "", true, false, "10.0.0.5:9090", "http://10.0.0.5:9090/console/callback"},
		{"own listener over TLS", "https://id.example", "", true, true, "admin.example:9443", "https://admin.example:9443/console/callback"},
		{"configured", "https://id.example", "https://console.example/", true, false, "10.0.0.5:9090", "https://console.example/console/callback"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := listenerConsole(e, tc.issuer, tc.own)
			c.callbackBase = strings.TrimSuffix(tc.base, "/")
			r := httptestRequest()
			r.Host = tc.host
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if got := c.callbackURL(r); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCallbackStateMismatch(t *testing.T) {
	e := newPersonEnv(t)
	sub := e.person("ada@example.com", admin.RoleAdmin)
	q := e.idp.signIn(e.start(), sub)
	q.Set("state", "another-state-entirely")
	r := e.get(callbackPath + "?" + q.Encode())
	wantStatus(t, "callback", r, http.StatusBadRequest)
	wantBody(t, "callback", r, "does not belong to the sign-in this browser started", `id="signin-provider"`)
	if e.cookie(cookieSession) != "" {
		t.Error("a session cookie was set")
	}
	if e.cookie(cookieFlow) != "" {
		t.Error("the flow cookie outlived the failed callback")
	}
}

func TestCallbackWithoutFlowCookie(t *testing.T) {
	e := newPersonEnv(t)
	sub := e.person("ada@example.com", admin.RoleAdmin)
	q := e.idp.signIn(e.start(), sub)
	e.client.Jar.SetCookies(mustURL(e.srv.URL+Prefix), []*http.Cookie{{Name: cookieFlow, Value: "", Path: Prefix, MaxAge: -1}})
	r := e.get(callbackPath + "?" + q.Encode())
	wantStatus(t, "callback", r, http.StatusBadRequest)
	wantBody(t, "callback", r, "was not started here")
	// A cookie that does not open is no better.
	e.client.Jar.SetCookies(mustURL(e.srv.URL+Prefix), []*http.Cookie{{Name: cookieFlow, Value: "forged", Path: Prefix}})
	r = e.get(callbackPath + "?" + q.Encode())
	wantStatus(t, "callback with a forged flow cookie", r, http.StatusBadRequest)
	if e.cookie(cookieSession) != "" {
		t.Error("a session cookie was set")
	}
}

func TestCallbackProviderError(t *testing.T) {
	e := newPersonEnv(t)
	loc, _ := url.Parse(e.start())
	q := url.Values{"error": {"access_denied"}, "state": {loc.Query().Get("state")}}
	r := e.get(callbackPath + "?" + q.Encode())
	wantStatus(t, "callback", r, http.StatusBadRequest)
	wantBody(t, "callback", r, "cancelled or refused")
}

func TestCallbackExchangeFails(t *testing.T) {
	e := newPersonEnv(t)
	sub := e.person("ada@example.com", admin.RoleAdmin)
	e.idp.fail = &ExchangeError{Status: 400, Code: "invalid_grant"}
	r := e.personSignIn(sub)
	wantStatus(t, "callback", r, http.StatusBadGateway)
	wantBody(t, "callback", r, "did not complete the sign-in")
	if e.cookie(cookieSession) != "" {
		t.Error("a session cookie was set")
	}
}

func TestCallbackChecksTheIDToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claims func(sub, nonce string) map[string]any
	}{
		{"another nonce", func(sub, _ string) map[string]any {
			return map[string]any{"iss": "http://127.0.0.1", "sub": sub, "aud": admin.ClientID, "nonce": "replayed-nonce-value"}
		}},
		{"another audience", func(sub, nonce string) map[string]any {
			return map[string]any{"iss": "http://127.0.0.1", "sub": sub, "aud": []string{"demo-rp"}, "nonce": nonce}
		}},
		{"another issuer", func(sub, nonce string) map[string]any {
			return map[string]any{"iss": "http://elsewhere", "sub": sub, "aud": admin.ClientID, "nonce": nonce}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPersonEnv(t)
			sub := e.person("ada@example.com", admin.RoleAdmin)
			loc, _ := url.Parse(e.start())
			nonce := loc.Query().Get("nonce")
			e.console.exchange = func(context.Context, string, string, string) (Tokens, error) {
				e.api.active["at-x"] = sub
				return Tokens{AccessToken: "at-x", IDToken: testIDToken(tc.claims(sub, nonce))}, nil
			}
			r := e.get(callbackPath + "?" + url.Values{"code": {"c"}, "state": {loc.Query().Get("state")}}.Encode())
			wantStatus(t, "callback", r, http.StatusBadGateway)
			if e.cookie(cookieSession) != "" {
				t.Error("a session cookie was set")
			}
		})
	}
}

func TestCallbackSignsThePersonIn(t *testing.T) {
	e := newPersonEnv(t)
	sub := e.person("ada@example.com", admin.RoleAdmin)
	q := e.idp.signIn(e.start(), sub)
	r := e.get(callbackPath + "?" + q.Encode())
	wantStatus(t, "callback", r, http.StatusOK)
	// The flow cookie works once: the same answer again is refused.
	wantStatus(t, "the callback replayed", e.get(callbackPath+"?"+q.Encode()), http.StatusBadRequest)
	wantBody(t, "callback", r, `<meta http-equiv="refresh" content="0;url=/console/">`, "ada@example.com")
	if e.cookie(cookieSession) == "" || e.cookie(cookieFlow) != "" {
		t.Fatalf("after the callback: session %q, flow %q; want a session and no flow cookie", e.cookie(cookieSession), e.cookie(cookieFlow))
	}
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == cookieSession && (c.MaxAge != 595 || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode) {
			t.Errorf("session cookie: got %+v, want the access token's 600 s less 5, HttpOnly, SameSite=Strict", c)
		}
	}
	e.api.mu.Lock()
	e.api.bearer = nil
	e.api.mu.Unlock()
	r = e.get(Prefix + "people")
	wantStatus(t, "people page", r, http.StatusOK)
	wantBody(t, "people page", r, `id="signed-in-as"`, "<strong>ada@example.com</strong>", "(admin)")
	e.api.mu.Lock()
	defer e.api.mu.Unlock()
	if len(e.api.bearer) == 0 {
		t.Fatal("the page called no API")
	}
	for _, b := range e.api.bearer {
		if !strings.HasPrefix(b, "at-") {
			t.Errorf("a call of a person's page carried %q, want the person's access token", b)
		}
	}
}

func TestCallbackRefusesAPersonWithoutAGrant(t *testing.T) {
	e := newPersonEnv(t)
	var u admin.User
	if err := e.console.call(httptestRequest(), "POST", "/users", map[string]any{"email": "eve@example.com"}, &u); err != nil {
		t.Fatal(err)
	}
	r := e.personSignIn(u.ID)
	wantStatus(t, "callback", r, http.StatusForbidden)
	wantBody(t, "callback", r, "you may not administer this site")
	if e.cookie(cookieSession) != "" {
		t.Error("a session cookie was set")
	}
}

func TestAPIRefusalEndsThePersonSession(t *testing.T) {
	e := newPersonEnv(t)
	sub := e.person("ada@example.com", admin.RoleAdmin)
	wantStatus(t, "callback", e.personSignIn(sub), http.StatusOK)
	wantStatus(t, "people page", e.get(Prefix+"people"), http.StatusOK)
	// The grant is removed: the API refuses the token from now on.
	e.api.mu.Lock()
	e.api.grants = nil
	e.api.mu.Unlock()
	r := e.get(Prefix + "people")
	wantStatus(t, "people page after the grant went", r, http.StatusUnauthorized)
	wantBody(t, "people page after the grant went", r, "Your console session has ended", `id="signin-provider"`)
	if strings.Contains(r.Body, "People") && strings.Contains(r.Body, "New person") {
		t.Error("the page's content was shown")
	}
	if strings.Contains(r.Body, `aria-invalid="true"`) {
		t.Error("the token field is shown in error for a person's session")
	}
	if e.cookie(cookieSession) != "" {
		t.Error("the session cookie is still there")
	}
	r = e.get(Prefix + "cluster")
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"signin" {
		t.Errorf("after the end: got %d to %q, want the sign-in page", r.Status, r.Location)
	}
}

func TestRoleRefusalKeepsThePersonSession(t *testing.T) {
	e := newPersonEnv(t)
	sub := e.person("olga@example.com", admin.RoleOrgAdmin)
	r := e.personSignIn(sub)
	wantStatus(t, "callback", r, http.StatusOK)
	wantBody(t, "callback", r, "(org_admin)")
	r = e.get(Prefix + "admins")
	wantStatus(t, "administrators page", r, http.StatusForbidden)
	wantBody(t, "administrators page", r, "may not do that")
	if e.cookie(cookieSession) == "" {
		t.Fatal("a refusal by role ended the session")
	}
	r = e.get(Prefix + "people")
	wantStatus(t, "people page", r, http.StatusOK)
	// The navigation offers an org_admin only what its role may open.
	for _, c := range []struct {
		page  string
		shown bool
	}{
		{"people", true}, {"organizations", true}, {"invitations", true}, {"audit", true},
		{"branding", false}, {"keys", false}, {"cluster", false}, {"directories", false}, {"admins", false},
	} {
		if got := strings.Contains(r.Body, `<a href="/console/`+c.page+`"`); got != c.shown {
			t.Errorf("org_admin's navigation: link to %s shown %v, want %v", c.page, got, c.shown)
		}
	}
}

func TestPersonSignsOut(t *testing.T) {
	e := newPersonEnv(t)
	sub := e.person("ada@example.com", admin.RoleAdmin)
	wantStatus(t, "callback", e.personSignIn(sub), http.StatusOK)
	r := e.post(Prefix+"signout", nil)
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"signin" {
		t.Fatalf("sign out: got %d to %q", r.Status, r.Location)
	}
	if e.cookie(cookieSession) != "" {
		t.Error("the session cookie is still there")
	}
}

// A person's session cookie is bound to the node's secret like the
// token's: another secret (a copy of the state elsewhere) does not open
// it as a session.
func TestPersonSessionNeedsTheNodeSecret(t *testing.T) {
	e := newPersonEnv(t)
	sub := e.person("ada@example.com", admin.RoleAdmin)
	wantStatus(t, "callback", e.personSignIn(sub), http.StatusOK)
	e.console.secret = []byte("another node secret")
	r := e.get(Prefix + "people")
	if r.Status != http.StatusSeeOther {
		t.Errorf("got %d, want the sign-in page", r.Status)
	}
}

func TestExchanges(t *testing.T) {
	var got url.Values
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got = r.PostForm
		if r.URL.Path != tokenPath {
			http.NotFound(w, r)
			return
		}
		if r.PostForm.Get("code") == "bad" {
			httpx.WriteJSON(w, 400, map[string]string{"error": "invalid_grant"})
			return
		}
		httpx.WriteJSON(w, 200, map[string]any{"access_token": "at", "id_token": "a.b.c", "expires_in": 600, "token_type": "Bearer"})
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for name, ex := range map[string]func(context.Context, string, string, string) (Tokens, error){
		"in process": ExchangeVia(h),
		"over HTTP":  HTTPExchange(nil, srv.URL+tokenPath),
	} {
		t.Run(name, func(t *testing.T) {
			tok, err := ex(context.Background(), "good", "the-verifier", "http://127.0.0.1/console/callback")
			if err != nil || tok.AccessToken != "at" || tok.IDToken != "a.b.c" || tok.ExpiresIn != 600 {
				t.Fatalf("got %+v, %v", tok, err)
			}
			want := url.Values{"grant_type": {"authorization_code"}, "code": {"good"}, "code_verifier": {"the-verifier"},
				"redirect_uri": {"http://127.0.0.1/console/callback"}, "client_id": {admin.ClientID}}
			if got.Encode() != want.Encode() {
				t.Errorf("sent %v, want %v", got, want)
			}
			_, err = ex(context.Background(), "bad", "v", "http://127.0.0.1/console/callback")
			var ee *ExchangeError
			if !errors.As(err, &ee) || ee.Status != 400 || ee.Code != "invalid_grant" {
				t.Errorf("refusal: got %v", err)
			}
		})
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
