package node_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestOidcdUpstreamOfOidcd: a subsidiary's oidcd signs people in through
// its headquarters' oidcd. HQ's ID token names no address (oidcd puts it
// in userinfo), so the subsidiary reads it there; HQ's back-channel
// logout, when the person signs out at HQ, signs them out of the
// subsidiary's application too.
func TestOidcdUpstreamOfOidcd(t *testing.T) {
	noLimits := func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }
	hq := testcluster.New(t, testcluster.Options{Size: 1, Configure: noLimits})
	sub := testcluster.New(t, testcluster.Options{Size: 1, Configure: noLimits})

	// At HQ: alice, and the subsidiary registered as a confidential
	// client with the two URIs the subsidiary's CLI prints.
	var hqOrg, alice, hqClient map[string]any
	hq.MustAdmin(t, "POST", "/organizations", map[string]any{"slug": "hq", "name": "Headquarters"}, &hqOrg)
	hq.MustAdmin(t, "POST", "/users", map[string]any{"email": "alice@hq.example", "email_verified": true, "password": "correct horse battery"}, &alice)
	hq.MustAdmin(t, "POST", "/memberships", map[string]any{"user_id": alice["id"], "org_id": hqOrg["id"]}, nil)
	hq.MustAdmin(t, "POST", "/clients", map[string]any{"name": "Subsidiary", "type": "confidential", "organization_id": hqOrg["id"],
		"redirect_uris": []string{sub.Issuer() + "/federation/hq/callback"}, "scopes": []string{"openid", "email", "profile"},
		"skip_consent": true, "backchannel_logout_uri": sub.Issuer() + "/federation/hq/backchannel-logout"}, &hqClient)

	// At the subsidiary: HQ as its upstream, authoritative for hq.example,
	// and an application that knows only the subsidiary.
	var subOrg, ip map[string]any
	sub.MustAdmin(t, "POST", "/organizations", map[string]any{"slug": "sub", "name": "Subsidiary"}, &subOrg)
	sub.MustAdmin(t, "POST", "/identity-providers", map[string]any{"slug": "hq", "display_name": "Headquarters",
		"issuer": hq.Issuer(), "client_id": hqClient["client_id"], "client_secret": hqClient["client_secret"],
		"email_domains": []string{"hq.example"}, "memberships": map[string]any{"organization_id": subOrg["id"]}}, &ip)
	if ip["redirect_uri"] != sub.Issuer()+"/federation/hq/callback" {
		t.Fatalf("the provider's redirect_uri %v", ip["redirect_uri"])
	}
	logouts := make(chan string, 4)
	appSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/backchannel" {
			_ = r.ParseForm()
			logouts <- r.PostForm.Get("logout_token")
		}
	}))
	t.Cleanup(appSrv.Close)
	app := appSrv.URL
	var appClient map[string]any
	sub.MustAdmin(t, "POST", "/clients", map[string]any{"name": "App", "type": "confidential", "organization_id": subOrg["id"],
		"redirect_uris": []string{app + "/callback"}, "scopes": []string{"openid", "email"}, "skip_consent": true,
		"backchannel_logout_uri": app + "/backchannel"}, &appClient)
	r := newRP(t, sub, appClient["client_id"].(string), appClient["client_secret"].(string), app+"/callback", "openid", "email")

	// The application sends alice to the subsidiary with her address as
	// login_hint: it goes straight to HQ, whose password page she fills.
	// Browsers keep cookies by host name, not port: the two providers
	// here share 127.0.0.1, where at a real site they have names of
	// their own (their cookies have the same names). The jar keeps
	// them apart as two hosts would.
	b := testcluster.NewBrowser(t)
	b.Client.Jar = hostPortJar{}
	verifier, nonce := oauth2.GenerateVerifier(), "nonce-0123456789abcdef"
	page := b.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier), gooidc.Nonce(nonce),
		oauth2.SetAuthURLParam("login_hint", "alice@hq.example")))
	page = b.Follow(page, sub.Issuer())
	if !strings.HasPrefix(page.Location(), hq.Issuer()+"/authorize") {
		t.Fatalf("the subsidiary answered %d %q, want a redirect to HQ\n%s", page.Status, page.Location(), page.Body)
	}
	page = b.Follow(page, hq.Issuer())
	if !strings.Contains(page.Body, `name="password"`) {
		t.Fatalf("HQ's page %d at %s:\n%s", page.Status, page.URL, page.Body)
	}
	page = b.Follow(b.Submit(page, map[string]string{"email": "alice@hq.example", "password": "correct horse battery"}, "method", "password"), hq.Issuer())
	if !strings.HasPrefix(page.Location(), sub.Issuer()+"/federation/hq/callback") {
		t.Fatalf("HQ answered %d %q, want the subsidiary's callback\n%s", page.Status, page.Location(), page.Body)
	}
	page = b.Follow(page, sub.Issuer())
	loc, _ := url.Parse(page.Location())
	if loc == nil || !strings.HasPrefix(page.Location(), app+"/callback") || loc.Query().Get("code") == "" {
		t.Fatalf("the subsidiary answered %d %q, want the application's callback with a code\n%s", page.Status, page.Location(), page.Body)
	}

	// The application's tokens are the subsidiary's, for a person of its
	// own, with HQ's address verified.
	ctx := gooidc.ClientContext(context.Background(), sub.Client())
	tk, err := r.oauth.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	idt, err := r.verifier.Verify(ctx, tk.Extra("id_token").(string))
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		SID string `json:"sid"`
	}
	_ = idt.Claims(&claims)
	ui, err := r.provider.UserInfo(ctx, oauth2.StaticTokenSource(tk))
	if err != nil {
		t.Fatal(err)
	}
	if ui.Email != "alice@hq.example" || !ui.EmailVerified || idt.Subject == alice["id"] || claims.SID == "" {
		t.Fatalf("subsidiary's person: sub %s (HQ's %v), email %q verified %v, sid %q", idt.Subject, alice["id"], ui.Email, ui.EmailVerified, claims.SID)
	}
	var ids struct {
		Data []map[string]any `json:"data"`
	}
	sub.MustAdmin(t, "GET", "/users/"+idt.Subject+"/identities", nil, &ids)
	if len(ids.Data) != 1 || ids.Data[0]["subject"] != alice["id"] || ids.Data[0]["email"] != "alice@hq.example" {
		t.Fatalf("the subsidiary's link: %+v", ids.Data)
	}

	// Alice, at HQ on another computer, signs her other sessions out
	// (the laptop she left behind): HQ's logout token, with the sid of
	// the session the subsidiary's sign-in came through, reaches the
	// subsidiary, which signs her out of the application with its own.
	b2 := testcluster.NewBrowser(t)
	page = b2.Get(hq.Issuer() + "/account")
	page = b2.Submit(page, map[string]string{"email": "alice@hq.example", "password": "correct horse battery"}, "method", "password")
	if page.Status != http.StatusOK || !strings.Contains(page.Body, `value="sessions-end-others"`) {
		t.Fatalf("HQ's account page %d:\n%s", page.Status, page.Body)
	}
	if page = b2.Submit(page, nil, "action", "sessions-end-others"); page.Status != http.StatusOK {
		t.Fatalf("HQ's account page answered %d\n%s", page.Status, page.Body)
	}
	select {
	case raw := <-logouts:
		var lt map[string]any
		if parts := strings.Split(raw, "."); len(parts) == 3 {
			if p, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
				_ = json.Unmarshal(p, &lt)
			}
		}
		if lt["iss"] != sub.Issuer() || lt["sub"] != idt.Subject || lt["sid"] != claims.SID {
			t.Fatalf("the application's logout token: %v (want the subsidiary's, sub %s, sid %s)", lt, idt.Subject, claims.SID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no logout token reached the application after the sign-out at HQ")
	}
	// And the subsidiary's session is gone: the next sign-in asks again.
	page = b.Follow(b.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier), gooidc.Nonce(nonce))), sub.Issuer())
	if page.Status != http.StatusOK || !strings.Contains(page.Body, `value="hq"`) {
		t.Fatalf("after HQ's logout the subsidiary answered %d %q, want its sign-in page\n%s", page.Status, page.Location(), page.Body)
	}
}

// hostPortJar keeps cookies per host and port.
type hostPortJar map[string]*cookiejar.Jar

func (j hostPortJar) jar(u *url.URL) *cookiejar.Jar {
	if j[u.Host] == nil {
		j[u.Host], _ = cookiejar.New(nil)
	}
	return j[u.Host]
}

func (j hostPortJar) SetCookies(u *url.URL, cs []*http.Cookie) { j.jar(u).SetCookies(u, cs) }
func (j hostPortJar) Cookies(u *url.URL) []*http.Cookie        { return j.jar(u).Cookies(u) }
