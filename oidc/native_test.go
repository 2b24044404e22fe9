package oidc

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

// Native applications (RFC 8252; docs/application-developers.md, "Native apps"): a private-use
// scheme redirect matches exactly, a loopback redirect at 127.0.0.1 or
// [::1] on any port with the same path and query; a web client's loopback
// redirect keeps its exact port. The built-in client's own variants are
// in adminclient_test.go.

const (
	hNative        = "native-app" // public, native, org A, skip_consent
	tNativeScheme  = "com.example.app:/callback"
	tNativeLoop4   = "http://127.0.0.1/cb"
	tNativeLoop6   = "http://[::1]/cb"
	tNativeAtPort  = "http://127.0.0.1:51004/cb"
	tNativeAtPort6 = "http://[::1]:8080/cb"
)

// addNative registers hNative: a native public client with a private-use
// scheme redirect and loopback redirects at 127.0.0.1 and [::1].
func (h *harness) addNative() {
	h.t.Helper()
	// Client.ApplicationType is past the format gate, as on a cluster of
	// one build.
	if err := h.applier.SetFormat(fsm.CurrentFormat); err != nil {
		h.t.Fatal(err)
	}
	now := h.clock.Now()
	h.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{
		ID: hNative, Name: "Native App", Type: fsm.ClientPublic, ApplicationType: fsm.ApplicationNative,
		Scopes: []string{"openid", "email"}, OrganizationID: hOrgA, SkipConsent: true, AccessTokenTTL: 600,
		RedirectURIs: []string{tNativeScheme, tNativeLoop4, tNativeLoop6}, CreatedAt: now, UpdatedAt: now,
	}})
}

// nativeCases are redirect URIs for hNative and the web client hPublic
// (registered hRedirect and hLoopback, http://127.0.0.1:9999/cb), and
// whether /authorize takes them.
var nativeCases = []struct {
	name, client, uri string
	ok                bool
}{
	{"private-use scheme", hNative, tNativeScheme, true},
	{"loopback as registered", hNative, tNativeLoop4, true},
	{"loopback any port", hNative, tNativeAtPort, true},
	{"loopback port 1", hNative, "http://127.0.0.1:1/cb", true},
	{"loopback port 65535", hNative, "http://127.0.0.1:65535/cb", true},
	{"loopback v6 any port", hNative, tNativeAtPort6, true},
	{"loopback v6 as registered", hNative, tNativeLoop6, true},

	{"private-use other path", hNative, "com.example.app:/callback2", false},
	{"private-use other form", hNative, "com.example.app://callback", false},
	{"private-use other scheme", hNative, "com.example.other:/callback", false},
	{"private-use case", hNative, "COM.example.app:/callback", false},
	{"private-use query", hNative, tNativeScheme + "?x=1", false},
	{"loopback other path", hNative, "http://127.0.0.1:51004/cb2", false},
	{"loopback trailing slash", hNative, "http://127.0.0.1:51004/cb/", false},
	{"loopback root", hNative, "http://127.0.0.1:51004/", false},
	{"loopback query", hNative, "http://127.0.0.1:51004/cb?x=1", false},
	{"loopback empty query", hNative, "http://127.0.0.1:51004/cb?", false},
	{"loopback fragment", hNative, "http://127.0.0.1:51004/cb#x", false},
	{"loopback escaped path", hNative, "http://127.0.0.1:51004/%63b", false},
	{"loopback user info", hNative, "http://u@127.0.0.1:51004/cb", false},
	{"loopback port 0", hNative, "http://127.0.0.1:0/cb", false},
	{"loopback port 65536", hNative, "http://127.0.0.1:65536/cb", false},
	{"loopback port leading zero", hNative, "http://127.0.0.1:051004/cb", false},
	{"loopback empty port", hNative, "http://127.0.0.1:/cb", false},
	{"localhost", hNative, "http://localhost:51004/cb", false},
	{"localhost no port", hNative, "http://localhost/cb", false},
	{"other loopback address", hNative, "http://127.0.0.2:51004/cb", false},
	{"short loopback address", hNative, "http://127.1:51004/cb", false},
	{"v6 written long", hNative, "http://[0:0:0:0:0:0:0:1]:51004/cb", false},
	{"https loopback", hNative, "https://127.0.0.1:51004/cb", false},
	{"scheme in capitals", hNative, "HTTP://127.0.0.1:51004/cb", false},
	{"another host", hNative, "http://app.example:51004/cb", false},
	{"host beginning like loopback", hNative, "http://127.0.0.1.evil.example/cb", false},
	{"another client's redirect", hNative, hRedirect, false},

	{"web loopback exact", hPublic, hLoopback, true},
	{"web loopback other port", hPublic, "http://127.0.0.1:9998/cb", false},
	{"web loopback no port", hPublic, "http://127.0.0.1/cb", false},
	{"web private-use scheme", hPublic, tNativeScheme, false},
}

// TestNativeRedirectsAtAuthorize: what /authorize takes from a native and
// a web client; a redirect that matches nothing is an error page, never
// a redirect.
func TestNativeRedirectsAtAuthorize(t *testing.T) {
	h := newHarness(t)
	h.addNative()
	b := h.browser()
	h.liveSession(b, hUser, ACRPwd, AMRPassword)
	for _, tc := range nativeCases {
		t.Run(tc.name, func(t *testing.T) {
			p := b.get(authzPath(authzQuery(tc.client, map[string]string{"redirect_uri": tc.uri})))
			if !tc.ok {
				wantErrorPage(t, p, http.StatusBadRequest)
				return
			}
			if q := adminRedirect(t, p, tc.uri); q.Get("code") == "" {
				t.Errorf("got %v, want a code", q)
			}
		})
	}
}

// TestNativeRedirectsAtToken: a code issued to a redirect URI is
// exchanged with that URI only: for a native client's loopback redirect
// the very port it was sent to, not the registered form nor another
// port; and a native client authenticates as a public one.
func TestNativeRedirectsAtToken(t *testing.T) {
	h := newHarness(t)
	h.addNative()
	b := h.browser()
	h.liveSession(b, hUser, ACRPwd, AMRPassword)
	issue := func(t *testing.T, client, uri string) string {
		t.Helper()
		q := adminRedirect(t, b.get(authzPath(authzQuery(client, map[string]string{"redirect_uri": uri}))), uri)
		return q.Get("code")
	}
	exchange := func(client, code, uri string, mod ...string) (int, map[string]any) {
		form := bcWith(url.Values{
			"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {uri},
			"code_verifier": {tVerifier}, "client_id": {client},
		}, mod...)
		rec := bcDo(t, h, bcReq{method: "POST", path: PathToken, form: form})
		var out map[string]any
		json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, out
	}
	for _, tc := range []struct {
		name, client, issued, sent string
		ok                         bool
	}{
		{"private-use scheme", hNative, tNativeScheme, tNativeScheme, true},
		{"loopback at its port", hNative, tNativeAtPort, tNativeAtPort, true},
		{"loopback as registered", hNative, tNativeLoop4, tNativeLoop4, true},
		{"loopback v6 at its port", hNative, tNativeAtPort6, tNativeAtPort6, true},
		{"loopback another port", hNative, tNativeAtPort, "http://127.0.0.1:51005/cb", false},
		{"loopback the registered form", hNative, tNativeAtPort, tNativeLoop4, false},
		{"loopback from the registered form to a port", hNative, tNativeLoop4, tNativeAtPort, false},
		{"loopback the other address", hNative, tNativeAtPort, "http://[::1]:51004/cb", false},
		{"loopback localhost", hNative, tNativeAtPort, "http://localhost:51004/cb", false},
		{"loopback other path", hNative, tNativeAtPort, "http://127.0.0.1:51004/cb2", false},
		{"loopback scheme in capitals", hNative, tNativeAtPort, "HTTP://127.0.0.1:51004/cb", false},
		{"private-use to loopback", hNative, tNativeScheme, tNativeAtPort, false},
		{"web loopback exact", hPublic, hLoopback, hLoopback, true},
		{"web loopback other port", hPublic, hLoopback, "http://127.0.0.1:9998/cb", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := issue(t, tc.client, tc.issued)
			status, body := exchange(tc.client, code, tc.sent)
			if !tc.ok {
				if status != http.StatusBadRequest || body["error"] != "invalid_grant" {
					t.Errorf("got %d %v, want 400 invalid_grant", status, body)
				}
				return
			}
			if status != http.StatusOK || body["access_token"] == nil || body["id_token"] == nil {
				t.Errorf("got %d %v, want 200 with tokens", status, body)
			}
		})
	}
	t.Run("never a secret", func(t *testing.T) {
		code := issue(t, hNative, tNativeAtPort)
		if status, body := exchange(hNative, code, tNativeAtPort, "client_secret", "anything-at-all-0123456789"); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
			t.Errorf("with a client_secret: got %d %v, want 401 invalid_client", status, body)
		}
		rec := bcDo(t, h, bcReq{method: "POST", path: PathToken, user: hNative, pass: "anything-at-all-0123456789", form: url.Values{
			"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {tNativeAtPort}, "code_verifier": {tVerifier},
		}})
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("with HTTP Basic: got %d %s, want 401", rec.Code, rec.Body)
		}
		// Neither refusal spent the code.
		if status, body := exchange(hNative, code, tNativeAtPort); status != http.StatusOK {
			t.Errorf("then as a public client: got %d %v, want 200", status, body)
		}
	})
	t.Run("PKCE", func(t *testing.T) {
		for _, mod := range []map[string]string{{"code_challenge": ""}, {"code_challenge_method": "plain"}} {
			mod["redirect_uri"] = tNativeAtPort
			wantErrorPage(t, b.get(authzPath(authzQuery(hNative, mod))), http.StatusBadRequest)
		}
		code := issue(t, hNative, tNativeAtPort)
		if status, body := exchange(hNative, code, tNativeAtPort, "code_verifier", tVerifier+"-wrong"); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Errorf("wrong verifier: got %d %v, want 400 invalid_grant", status, body)
		}
	})
}

// TestNativeCodeFlow: RFC 8252's loopback flow end to end. The app
// listens on a port of 127.0.0.1 chosen at run time, the person signs in
// with a password, the browser's redirect delivers the code to that port,
// and the app exchanges it with the same URI and reads userinfo.
func TestNativeCodeFlow(t *testing.T) {
	h := newHarness(t)
	h.addNative()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan url.Values, 1)
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cb" {
			http.NotFound(w, r)
			return
		}
		select {
		case got <- r.URL.Query():
		default:
		}
		w.Write([]byte("You may close this window."))
	})}
	go app.Serve(ln)
	t.Cleanup(func() { app.Close() })
	redirectURI := "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + "/cb"

	b := h.browser()
	p := b.get(authzPath(authzQuery(hNative, map[string]string{"redirect_uri": redirectURI, "scope": "openid email"})))
	p = b.signIn(p, hEmail, hPassword)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location(), redirectURI+"?") {
		t.Fatalf("after sign-in: got %d to %q, want 303 to %s?...", p.status, p.location(), redirectURI)
	}
	// The browser follows the redirect to the app's port.
	resp, err := http.Get(p.location())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	q := <-got
	if q.Get("state") != tState || q.Get("iss") != h.p.cfg.Issuer || q.Get("code") == "" {
		t.Fatalf("delivered to the app: %v", q)
	}
	rec := bcDo(t, h, bcReq{method: "POST", path: PathToken, form: url.Values{
		"grant_type": {"authorization_code"}, "code": {q.Get("code")}, "redirect_uri": {redirectURI},
		"code_verifier": {tVerifier}, "client_id": {hNative},
	}})
	if rec.Code != http.StatusOK {
		t.Fatalf("token: got %d %s, want 200", rec.Code, rec.Body)
	}
	var tr tokenResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &tr); err != nil {
		t.Fatal(err)
	}
	if id := bcClaims(t, tr.IDToken); string(id["aud"]) != `["`+hNative+`"]` || string(id["nonce"]) != `"`+tNonce+`"` {
		t.Errorf("id token aud %s nonce %s", id["aud"], id["nonce"])
	}
	if s := bcUserinfoStatus(t, h, tr.AccessToken); s != http.StatusOK {
		t.Errorf("userinfo: got %d, want 200", s)
	}
}
