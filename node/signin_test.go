package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/testcluster"
)

// world is what an operator provisions through the admin API.
type world struct {
	orgA, orgB, user    string
	confID, confSecret  string
	publicID, multiID   string
	email, password, cb string
}

func provision(t *testing.T, c *testcluster.Cluster) world { return provisionTB(t, c) }

func provisionTB(t testing.TB, c *testcluster.Cluster) world {
	t.Helper()
	tok := testcluster.AdminToken
	w := world{email: "ann@example.com", password: "correct horse battery", cb: "http://127.0.0.1:9/callback"}
	var o map[string]any
	do(t, c, "POST", "/admin/v1/organizations", tok, map[string]any{"slug": "alpha", "name": "Alpha"}, &o)
	w.orgA = o["id"].(string)
	do(t, c, "POST", "/admin/v1/organizations", tok, map[string]any{"slug": "beta", "name": "Beta"}, &o)
	w.orgB = o["id"].(string)
	var u map[string]any
	do(t, c, "POST", "/admin/v1/users", tok, map[string]any{"email": w.email, "email_verified": true, "password": w.password}, &u)
	w.user = u["id"].(string)
	for _, org := range []string{w.orgA, w.orgB} {
		if resp := do(t, c, "POST", "/admin/v1/memberships", tok, map[string]any{"user_id": w.user, "org_id": org}, nil); resp.StatusCode != 201 {
			t.Fatalf("membership: %d", resp.StatusCode)
		}
	}
	var cl map[string]any
	do(t, c, "POST", "/admin/v1/clients", tok, map[string]any{"name": "Server App", "redirect_uris": []string{w.cb},
		"scopes": []string{"openid", "email", "profile"}, "organization_id": w.orgA}, &cl)
	w.confID, w.confSecret = cl["client_id"].(string), cl["client_secret"].(string)
	do(t, c, "POST", "/admin/v1/clients", tok, map[string]any{"name": "SPA", "type": "public", "redirect_uris": []string{w.cb},
		"scopes": []string{"openid", "email"}, "organization_id": w.orgA, "skip_consent": true}, &cl)
	w.publicID = cl["client_id"].(string)
	do(t, c, "POST", "/admin/v1/clients", tok, map[string]any{"name": "Multi", "type": "public", "redirect_uris": []string{w.cb},
		"organization_id": w.orgA, "multi_organization": true, "skip_consent": true}, &cl)
	w.multiID = cl["client_id"].(string)
	return w
}

// rp is a relying party built the way an application builds one.
type rp struct {
	provider *gooidc.Provider
	oauth    oauth2.Config
	verifier *gooidc.IDTokenVerifier
}

func newRP(t *testing.T, c *testcluster.Cluster, clientID, secret, cb string, scopes ...string) *rp {
	return newRPTB(t, c, clientID, secret, cb, scopes...)
}

func newRPTB(t testing.TB, c *testcluster.Cluster, clientID, secret, cb string, scopes ...string) *rp {
	t.Helper()
	p, err := gooidc.NewProvider(gooidc.ClientContext(context.Background(), c.Client()), c.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	return &rp{provider: p, verifier: p.Verifier(&gooidc.Config{ClientID: clientID}), oauth: oauth2.Config{
		ClientID: clientID, ClientSecret: secret, Endpoint: p.Endpoint(), RedirectURL: cb, Scopes: scopes,
	}}
}

// signIn runs the browser through the flow and returns the callback query.
func signIn(t *testing.T, c *testcluster.Cluster, b *testcluster.Browser, r *rp, w world, pkceVerifier, nonce string, extra ...oauth2.AuthCodeOption) url.Values {
	t.Helper()
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(pkceVerifier), gooidc.Nonce(nonce)}, extra...)
	base := r.authBase()
	page := b.Follow(b.Get(r.oauth.AuthCodeURL("state-0123456789", opts...)), base)
	for i := 0; i < 4 && page.Location() == ""; i++ {
		switch {
		case strings.Contains(page.Body, `name="password"`):
			page = b.Submit(page, map[string]string{"email": w.email, "password": w.password}, "method", "password")
		case strings.Contains(page.Body, `value="allow"`):
			page = b.Submit(page, nil, "decision", "allow")
		case strings.Contains(page.Body, `name="organization_id"`):
			page = b.Submit(page, nil, "organization_id", w.orgB)
		default:
			t.Fatalf("unexpected page %d at %s:\n%s", page.Status, page.URL, page.Body)
		}
		page = b.Follow(page, base)
	}
	loc, err := url.Parse(page.Location())
	if err != nil || !strings.HasPrefix(page.Location(), w.cb) {
		t.Fatalf("flow ended at %d %q, want a redirect to %s\n%s", page.Status, page.Location(), w.cb, page.Body)
	}
	q := loc.Query()
	if q.Get("state") != "state-0123456789" {
		t.Fatalf("state: got %q", q.Get("state"))
	}
	return q
}

func bearerGet(t *testing.T, c *testcluster.Cluster, path, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", c.URL(0)+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func clientPost(t *testing.T, c *testcluster.Cluster, path, id, secret string, form url.Values) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", c.URL(0)+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRelyingPartySignInEndToEnd(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	w := provision(t, c)
	ctx := context.Background()
	r := newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID, "email")
	b := testcluster.NewBrowser(t)

	pkce := oauth2.GenerateVerifier()
	q := signIn(t, c, b, r, w, pkce, "nonce-0123456789")
	tok, err := r.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := r.verifier.Verify(ctx, raw)
	if err != nil {
		t.Fatalf("go-oidc rejected the ID token: %v", err)
	}
	var claims struct {
		Sub   string   `json:"sub"`
		Aud   []string `json:"aud"`
		Nonce string   `json:"nonce"`
		Org   string   `json:"organization_id"`
		SID   string   `json:"sid"`
		ACR   string   `json:"acr"`
		AMR   []string `json:"amr"`
	}
	idt.Claims(&claims)
	if claims.Sub != w.user || claims.Nonce != "nonce-0123456789" || claims.Org != w.orgA || claims.SID == "" ||
		claims.ACR != "urn:service:sso:acr:pwd" || len(claims.AMR) != 1 || claims.AMR[0] != "pwd" {
		t.Fatalf("ID token claims: %+v", claims)
	}
	if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
		t.Fatalf("at_hash: %v", err)
	}

	ui, err := r.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil || ui.Subject != w.user || ui.Email != w.email || !ui.EmailVerified {
		t.Fatalf("userinfo: %+v %v", ui, err)
	}
	status, mems := bearerGet(t, c, "/api/v1/me/memberships", tok.AccessToken)
	if data, _ := mems["data"].([]any); status != 200 || len(data) != 2 {
		t.Fatalf("memberships: %d %v", status, mems)
	}

	status, body := clientPost(t, c, "/oauth2/introspect", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}})
	if status != 200 || !strings.Contains(body, `"active":true`) || !strings.Contains(body, w.confID) {
		t.Fatalf("introspect: %d %s", status, body)
	}
	if status, _ := clientPost(t, c, "/oauth2/revoke", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}}); status != 200 {
		t.Fatalf("revoke: %d", status)
	}
	if status, _ := bearerGet(t, c, "/userinfo", tok.AccessToken); status != 401 {
		t.Fatalf("userinfo after revoke: got %d, want 401", status)
	}
	if _, body := clientPost(t, c, "/oauth2/introspect", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}}); body != `{"active":false}` {
		t.Fatalf("introspect after revoke: %s", body)
	}
	// The code was used once; a replay is refused.
	if _, err := r.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce)); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("code replay: got %v, want invalid_grant", err)
	}
}

func TestPublicAndMultiOrganizationApps(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	w := provision(t, c)
	ctx := context.Background()
	b := testcluster.NewBrowser(t)

	pub := newRP(t, c, w.publicID, "", w.cb, gooidc.ScopeOpenID)
	pkce := oauth2.GenerateVerifier()
	q := signIn(t, c, b, pub, w, pkce, "nonce-public-1")
	tok, err := pub.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("public exchange: %v", err)
	}
	first, err := pub.verifier.Verify(ctx, tok.Extra("id_token").(string))
	if err != nil {
		t.Fatal(err)
	}

	// Silent re-sign-in: the SSO session is live, no page, same app session.
	pkce2 := oauth2.GenerateVerifier()
	page := b.Get(pub.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce2), gooidc.Nonce("nonce-public-2"), oauth2.SetAuthURLParam("prompt", "none")))
	loc, _ := url.Parse(page.Location())
	tok2, err := pub.oauth.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(pkce2))
	if err != nil {
		t.Fatalf("silent exchange: %v (%s)", err, page.Location())
	}
	second, _ := pub.verifier.Verify(ctx, tok2.Extra("id_token").(string))
	var c1, c2 struct{ SID string }
	first.Claims(&c1)
	second.Claims(&c2)
	if c1.SID == "" || c1.SID != c2.SID {
		t.Fatalf("sid: first %q, silent %q; want the same app session", c1.SID, c2.SID)
	}

	// A multi-organization app: the person belongs to two, so the picker asks.
	multi := newRP(t, c, w.multiID, "", w.cb, gooidc.ScopeOpenID)
	pkce3 := oauth2.GenerateVerifier()
	q = signIn(t, c, b, multi, w, pkce3, "nonce-multi-1")
	tok3, err := multi.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce3))
	if err != nil {
		t.Fatalf("multi exchange: %v", err)
	}
	idt, _ := multi.verifier.Verify(ctx, tok3.Extra("id_token").(string))
	var mc struct {
		Org string `json:"organization_id"`
	}
	idt.Claims(&mc)
	if mc.Org != w.orgB {
		t.Fatalf("organization_id: got %q, want the picked %q", mc.Org, w.orgB)
	}
}

func decodeResp(t testing.TB, c *testcluster.Cluster, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// authBase is the origin of the RP's authorization endpoint: the node or
// balancer its browser talks to.
func (r *rp) authBase() string {
	au, _ := url.Parse(r.oauth.Endpoint.AuthURL)
	return au.Scheme + "://" + au.Host
}
