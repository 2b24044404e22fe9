package oidcprovider

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/net/html"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/htmlform"
)

// browser is a person's browser as the test plays it: a cookie jar, and
// redirects followed up to the relying party's own URLs, where it stops
// so that the test reads what the provider sent there.
type browser struct {
	t      *testing.T
	client *http.Client
}

func newBrowser(t *testing.T, rp string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, client: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), rp) {
				return http.ErrUseLastResponse
			}
			return nil
		}}}
}

// page is an answer the browser got: where it ended, its status, and its
// body.
type page struct {
	url      *url.URL
	status   int
	location string
	body     string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{resp.Request.URL, resp.StatusCode, resp.Header.Get("Location"), string(body)}
}

func (b *browser) get(u string) page {
	b.t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	return b.do(req)
}

// submit fills the page's post form that holds the button name=value
// with fields and posts it, as a browser does.
func (b *browser) submit(p page, name, value string, fields url.Values) page {
	b.t.Helper()
	action, values, err := htmlform.FindIn(strings.NewReader(p.body), name, value)
	if err != nil {
		b.t.Fatalf("%s: %v:\n%s", p.url, err, p.body)
	}
	for k, v := range fields {
		values[k] = v
	}
	if name != "" {
		values.Set(name, value)
	}
	to, err := p.url.Parse(action)
	if err != nil {
		b.t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", to.String(), strings.NewReader(values.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// loginForm checks that p is the sign-in page with the fields the package
// documents.
func loginForm(t *testing.T, p page) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(p.body))
	if err != nil {
		t.Fatal(err)
	}
	forms := htmlform.Forms(doc)
	if p.status != 200 || len(forms) != 1 || !slices.Contains(forms[0].Inputs, LoginField) || !slices.Contains(forms[0].Inputs, PasswordField) ||
		!strings.Contains(p.body, `id="`+SubmitID+`"`) || !strings.HasPrefix(p.url.Path, "/interaction/") {
		t.Fatalf("at %s (%d), want the sign-in form with %s, %s and #%s:\n%s", p.url, p.status, LoginField, PasswordField, SubmitID, p.body)
	}
}

// logoutSink is a relying party's back-channel logout endpoint.
type logoutSink struct {
	srv    *httptest.Server
	tokens chan string
}

func newLogoutSink(t *testing.T) *logoutSink {
	s := &logoutSink{tokens: make(chan string, 10)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/backchannel" || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
			http.Error(w, "want a form POST to /backchannel", 400)
			return
		}
		s.tokens <- r.PostFormValue("logout_token")
		w.WriteHeader(200)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *logoutSink) next(t *testing.T) string {
	t.Helper()
	select {
	case tok := <-s.tokens:
		return tok
	case <-time.After(5 * time.Second):
		t.Fatal("no logout token arrived within 5 s")
		return ""
	}
}

// checkLogoutToken checks a logout token as OpenID Connect Back-Channel
// Logout 1.0 section 2.6 has the relying party do: signed by the issuer
// for the client, typ logout+jwt, the event, the session's sid and the
// account's sub, and no nonce.
func checkLogoutToken(t *testing.T, ctx context.Context, verifier *oidc.IDTokenVerifier, raw, sub, sid string) {
	t.Helper()
	tok, err := verifier.Verify(ctx, raw)
	if err != nil {
		t.Fatalf("logout token: %v", err)
	}
	header, _ := base64.RawURLEncoding.DecodeString(strings.SplitN(raw, ".", 2)[0])
	var h struct{ Typ string }
	json.Unmarshal(header, &h)
	var c struct {
		Sub    string                     `json:"sub"`
		SID    string                     `json:"sid"`
		Nonce  *string                    `json:"nonce"`
		JTI    string                     `json:"jti"`
		Events map[string]json.RawMessage `json:"events"`
	}
	if err := tok.Claims(&c); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Events["http://schemas.openid.net/event/backchannel-logout"]; !ok || c.Sub != sub || c.SID != sid || sid == "" || c.Nonce != nil || c.JTI == "" || h.Typ != "logout+jwt" {
		t.Errorf("logout token: header %s, claims %+v; want typ logout+jwt, the back-channel logout event, sub %s, sid %s, a jti and no nonce", header, c, sub, sid)
	}
}

// TestRelyingParty signs in as a relying party of the upstream, with no
// oidcd in between, for each signing algorithm and client authentication:
// the code flow with PKCE (S256) through golang.org/x/oauth2 and the ID
// token through go-oidc; a wrong password, a request without PKCE; the
// iss parameter on the authorization response (or its absence when
// NoIssParam); EndSessions delivering a logout token to the client's
// back-channel logout URI; and RP-initiated logout at end_session_endpoint
// delivering another.
func TestRelyingParty(t *testing.T) {
	for _, tc := range []struct {
		name, alg, auth string
		noIss           bool
		amr             []string
	}{
		{"RS256 basic", "", "", false, []string{"pwd"}},
		{"ES256 post no-iss", "ES256", "client_secret_post", true, []string{"pwd", "otp"}},
		{"PS256 basic", "PS256", "client_secret_basic", false, []string{"mfa"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink := newLogoutSink(t)
			rp := "http://127.0.0.1:9" // never reached: the browser stops there
			account := Account{Sub: "ann-1", Password: "correct horse battery", Email: "ann@example.com", EmailVerified: true,
				Name: "Ann Example", Groups: []string{"staff", "admins"}, AMR: tc.amr}
			client := Client{ID: "oidcd", Secret: "s3cret-of-oidcd", RedirectURIs: []string{rp + "/callback"},
				PostLogoutRedirectURIs: []string{rp + "/signed-out"}, BackchannelLogoutURI: sink.srv.URL + "/backchannel", AuthMethod: tc.auth}
			up := Start(t, Config{Clients: []Client{client}, Accounts: []Account{account}, Alg: tc.alg, NoIssParam: tc.noIss})

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: 10 * time.Second})
			provider, err := oidc.NewProvider(ctx, up.Issuer())
			if err != nil {
				t.Fatal(err)
			}
			var disco struct {
				IssParam     bool     `json:"authorization_response_iss_parameter_supported"`
				EndSession   string   `json:"end_session_endpoint"`
				Backchannel  bool     `json:"backchannel_logout_session_supported"`
				Algs         []string `json:"id_token_signing_alg_values_supported"`
				ScopesOffers []string `json:"scopes_supported"`
			}
			if err := provider.Claims(&disco); err != nil {
				t.Fatal(err)
			}
			wantAlg := cmp.Or(tc.alg, "RS256")
			if disco.IssParam == tc.noIss || disco.EndSession == "" || !disco.Backchannel || !slices.Equal(disco.Algs, []string{wantAlg}) || !slices.Equal(disco.ScopesOffers, Scopes) {
				t.Errorf("discovery: %+v; want iss parameter %v, an end_session_endpoint, back-channel logout with sessions, alg %s, scopes %v",
					disco, !tc.noIss, wantAlg, Scopes)
			}
			endpoint := provider.Endpoint()
			endpoint.AuthStyle = oauth2.AuthStyleInHeader
			if tc.auth == "client_secret_post" {
				endpoint.AuthStyle = oauth2.AuthStyleInParams
			}
			conf := oauth2.Config{ClientID: client.ID, ClientSecret: client.Secret, Endpoint: endpoint,
				RedirectURL: client.RedirectURIs[0], Scopes: Scopes}
			verifier := provider.Verifier(&oidc.Config{ClientID: client.ID, SupportedSigningAlgs: []string{wantAlg}})
			b := newBrowser(t, rp)

			// A request without PKCE is refused, at the redirect URI.
			if p := b.get(conf.AuthCodeURL("st-0")); p.status != 303 || !strings.Contains(p.location, "error=invalid_request") || !strings.Contains(p.location, "state=st-0") {
				t.Errorf("an authorization request without code_challenge: %d to %q, want 303 to the redirect URI with error=invalid_request", p.status, p.location)
			}

			// signIn runs the code flow to the ID token, typing a wrong
			// password first.
			signIn := func(state, nonce string) (idToken *oidc.IDToken, raw string) {
				t.Helper()
				pkce := oauth2.GenerateVerifier()
				p := b.get(conf.AuthCodeURL(state, oauth2.S256ChallengeOption(pkce), oidc.Nonce(nonce)))
				loginForm(t, p)
				wrong := b.submit(p, "", "", url.Values{LoginField: {account.Email}, PasswordField: {"wrong"}})
				loginForm(t, wrong)
				if !strings.Contains(wrong.body, `id="`+ErrorID+`"`) || !strings.Contains(wrong.body, "Wrong login or password") {
					t.Errorf("after a wrong password, want the form with #%s:\n%s", ErrorID, wrong.body)
				}
				done := b.submit(wrong, "", "", url.Values{LoginField: {account.Email}, PasswordField: {account.Password}})
				cb, err := url.Parse(done.location)
				if err != nil || done.status != 303 || !strings.HasPrefix(done.location, client.RedirectURIs[0]+"?") {
					t.Fatalf("after signing in: %d at %s to %q, want 303 to %s:\n%s", done.status, done.url, done.location, client.RedirectURIs[0], done.body)
				}
				q := cb.Query()
				if q.Get("state") != state || q.Get("code") == "" {
					t.Fatalf("authorization response %s: want a code and state %s", cb, state)
				}
				if iss, has := q.Get("iss"), q.Has("iss"); tc.noIss && has || !tc.noIss && iss != up.Issuer() {
					t.Errorf("authorization response %s: iss %q; want %s", cb, iss, map[bool]string{true: "none", false: up.Issuer()}[tc.noIss])
				}
				// The code is bound to the challenge: another verifier is
				// refused (before oidc-provider consumes the code).
				if _, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
					t.Errorf("the code redeemed with another code_verifier: %v, want invalid_grant", err)
				}
				tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
				if err != nil {
					t.Fatalf("code exchange (%s): %v", cmp.Or(tc.auth, "client_secret_basic"), err)
				}
				raw, _ = tok.Extra("id_token").(string)
				idToken, err = verifier.Verify(ctx, raw)
				if err != nil {
					t.Fatalf("ID token: %v", err)
				}
				return idToken, raw
			}

			idToken, rawID := signIn("st-1", "n-1")
			type idClaims struct {
				Email         string   `json:"email"`
				EmailVerified bool     `json:"email_verified"`
				Name          string   `json:"name"`
				Groups        []string `json:"groups"`
				AMR           []string `json:"amr"`
				SID           string   `json:"sid"`
			}
			var claims idClaims
			if err := idToken.Claims(&claims); err != nil {
				t.Fatal(err)
			}
			if idToken.Subject != account.Sub || idToken.Nonce != "n-1" || claims.Email != account.Email || !claims.EmailVerified || claims.Name != account.Name ||
				!slices.Equal(claims.Groups, account.Groups) || !slices.Equal(claims.AMR, account.AMR) || claims.SID == "" {
				t.Errorf("ID token: sub %s, nonce %s, %+v; want sub %s, nonce n-1, the account's claims, amr %v and a sid", idToken.Subject, idToken.Nonce, claims, account.Sub, account.AMR)
			}
			header, _ := base64.RawURLEncoding.DecodeString(strings.SplitN(rawID, ".", 2)[0])
			if !strings.Contains(string(header), `"alg":"`+wantAlg+`"`) {
				t.Errorf("ID token header %s, want alg %s", header, wantAlg)
			}

			// The test hook answers only its token, and an account with
			// no session has nothing sent.
			resp, err := http.Post(up.Issuer()+"/test/end-sessions?sub="+account.Sub, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Errorf("the test hook without its token: %s, want 401", resp.Status)
			}
			if sent, err := up.EndSessions("nobody"); err != nil || sent != 0 {
				t.Errorf("EndSessions of an unknown account: sent %d, %v; want 0", sent, err)
			}

			// EndSessions: the library's logout token, for this session.
			sent, err := up.EndSessions(account.Sub)
			if err != nil || sent != 1 {
				t.Fatalf("EndSessions: sent %d, %v; want 1", sent, err)
			}
			checkLogoutToken(t, ctx, verifier, sink.next(t), account.Sub, claims.SID)
			if sent, err := up.EndSessions(account.Sub); err != nil || sent != 0 {
				t.Errorf("EndSessions again: sent %d, %v; want 0 (no session left)", sent, err)
			}

			// The session is gone: signing in asks for the password again.
			second, rawSecond := signIn("st-2", "n-2")
			var again idClaims
			second.Claims(&again)
			if again.SID == "" || again.SID == claims.SID {
				t.Errorf("the second session's sid %q, want a new one (the first was %q)", again.SID, claims.SID)
			}

			// RP-initiated logout, as a browser does it: the confirmation
			// page, its button, then the registered post-logout URI with
			// the state, and a logout token for the session.
			q := url.Values{"id_token_hint": {rawSecond}, "post_logout_redirect_uri": {client.PostLogoutRedirectURIs[0]}, "state": {"bye"}}
			confirm := b.get(disco.EndSession + "?" + q.Encode())
			if confirm.status != 200 || !strings.Contains(confirm.body, `id="`+LogoutButtonID+`"`) {
				t.Fatalf("end session: %d at %s, want the confirmation page with #%s:\n%s", confirm.status, confirm.url, LogoutButtonID, confirm.body)
			}
			out := b.submit(confirm, "logout", "yes", nil)
			if out.status != 303 || out.location != client.PostLogoutRedirectURIs[0]+"?state=bye" {
				t.Errorf("after signing out: %d to %q, want 303 to %s?state=bye", out.status, out.location, client.PostLogoutRedirectURIs[0])
			}
			checkLogoutToken(t, ctx, verifier, sink.next(t), account.Sub, again.SID)
		})
	}
}
