package oidcprovider

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// The federation's black-box tests: oidcd signs a person in through a
// real, certified upstream (oidc-provider, driven in Chromium), for an
// application that knows only oidcd and uses a relying-party library we
// did not write (go-oidc with x/oauth2); the upstream's back-channel
// logout then signs the person out of that application.

// rp is a confidential web application of oidcd: go-oidc verifies its ID
// tokens, and its back-channel logout endpoint records what arrives. Its
// /logout signs out through oidcd's end_session_endpoint (from
// discovery) with the ID token it kept as id_token_hint, its post-logout
// URI /signed-out and a fresh state.
type rp struct {
	srv        *httptest.Server
	conf       oauth2.Config
	provider   *oidc.Provider
	verifier   *oidc.IDTokenVerifier
	endSession string

	mu       sync.Mutex
	pending  map[string][2]string // state -> verifier, nonce
	idToken  string               // the last raw ID token
	claims   map[string]any       // its claims
	outState string               // the state of the last sign-out sent
	back     []string             // the states the post-logout URI received
	logouts  []string             // raw logout tokens received
}

func newRP(t *testing.T, issuer string) *rp {
	t.Helper()
	a := &rp{pending: map[string][2]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		state, nonce, verifier := random(), random(), oauth2.GenerateVerifier()
		a.mu.Lock()
		a.pending[state] = [2]string{verifier, nonce}
		a.mu.Unlock()
		opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)}
		for _, k := range []string{"idp_hint", "login_hint", "prompt"} {
			if v := r.URL.Query().Get(k); v != "" {
				opts = append(opts, oauth2.SetAuthURLParam(k, v))
			}
		}
		http.Redirect(w, r, a.conf.AuthCodeURL(state, opts...), http.StatusFound)
	})
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		p, ok := a.pending[r.URL.Query().Get("state")]
		a.mu.Unlock()
		if !ok {
			http.Error(w, "unknown state; error="+r.URL.Query().Get("error"), http.StatusBadRequest)
			return
		}
		tok, err := a.conf.Exchange(r.Context(), r.URL.Query().Get("code"), oauth2.VerifierOption(p[0]))
		if err != nil {
			http.Error(w, "exchange: "+err.Error(), http.StatusBadGateway)
			return
		}
		raw, _ := tok.Extra("id_token").(string)
		idt, err := a.verifier.Verify(r.Context(), raw)
		if err != nil || idt.Nonce != p[1] {
			http.Error(w, fmt.Sprintf("id token: %v (nonce %q)", err, idt.Nonce), http.StatusBadGateway)
			return
		}
		var claims map[string]any
		_ = idt.Claims(&claims)
		// oidcd's ID token carries no address: userinfo does.
		ui, err := a.provider.UserInfo(r.Context(), oauth2.StaticTokenSource(tok))
		if err != nil {
			http.Error(w, "userinfo: "+err.Error(), http.StatusBadGateway)
			return
		}
		claims["email"], claims["email_verified"] = ui.Email, ui.EmailVerified
		a.mu.Lock()
		a.idToken, a.claims = raw, claims
		a.mu.Unlock()
		fmt.Fprintf(w, "<!doctype html><title>App</title><h1 id=who>signed in as %s</h1>", claims["email"])
	})
	mux.HandleFunc("GET /logout", func(w http.ResponseWriter, r *http.Request) {
		state := random()
		a.mu.Lock()
		hint := a.idToken
		a.outState = state
		a.mu.Unlock()
		q := url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {a.srv.URL + "/signed-out"},
			"client_id": {a.conf.ClientID}, "state": {state}}
		http.Redirect(w, r, a.endSession+"?"+q.Encode(), http.StatusFound)
	})
	mux.HandleFunc("GET /signed-out", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.back = append(a.back, r.URL.Query().Get("state"))
		a.mu.Unlock()
		fmt.Fprint(w, "<!doctype html><title>App</title><h1 id=out>You have signed out of the app</h1>")
	})
	mux.HandleFunc("POST /backchannel", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		a.mu.Lock()
		a.logouts = append(a.logouts, r.PostForm.Get("logout_token"))
		a.mu.Unlock()
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	provider, err := oidc.NewProvider(context.Background(), issuer)
	if err != nil {
		t.Fatalf("go-oidc discovery of oidcd: %v", err)
	}
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := provider.Claims(&meta); err != nil || meta.EndSession == "" {
		t.Fatalf("oidcd's discovery names no end_session_endpoint (%v)", err)
	}
	a.endSession = meta.EndSession
	a.conf = oauth2.Config{Endpoint: provider.Endpoint(), RedirectURL: a.srv.URL + "/callback", Scopes: []string{oidc.ScopeOpenID, "email"}}
	a.provider = provider
	return a
}

func (a *rp) register(clientID, secret string) {
	a.conf.ClientID, a.conf.ClientSecret = clientID, secret
	a.verifier = a.provider.Verifier(&oidc.Config{ClientID: clientID})
}

func random() string {
	var b [24]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// federationWorld is oidcd (size nodes), the upstream with alice, an
// organization, the application and the provider registered through the
// admin API of the node given.
type federationWorld struct {
	c        *testcluster.Cluster
	up       *Upstream
	app      *rp
	org      string
	provider map[string]any
	// wantLoginShown is what the upstream's login field must show on
	// arrival: the login_hint passed on, "" for none.
	wantLoginShown string
}

func newFederationWorld(t *testing.T, size int, logoutNode func(c *testcluster.Cluster) string) *federationWorld {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{Size: size, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	issuer := c.Issuer()
	app := newRP(t, issuer)
	w := &federationWorld{c: c, app: app}
	var org map[string]any
	c.MustAdmin(t, "POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &org)
	w.org = org["id"].(string)
	var cl map[string]any
	c.MustAdmin(t, "POST", "/clients", map[string]any{"name": "App", "type": "confidential", "organization_id": w.org,
		"redirect_uris": []string{app.srv.URL + "/callback"}, "scopes": []string{"openid", "email"}, "skip_consent": true,
		"backchannel_logout_uri": app.srv.URL + "/backchannel"}, &cl)
	app.register(cl["client_id"].(string), cl["client_secret"].(string))

	logoutBase := issuer
	if logoutNode != nil {
		logoutBase = logoutNode(c)
	}
	w.up = Start(t, Config{
		Clients: []Client{{ID: "oidcd", Secret: "upstream-secret", RedirectURIs: []string{issuer + "/federation/corp/callback"},
			PostLogoutRedirectURIs: []string{issuer + "/federation/corp/logged-out"},
			BackchannelLogoutURI:   logoutBase + "/federation/corp/backchannel-logout"}},
		Accounts: []Account{{Sub: "alice-at-corp", Password: "alice-upstream", Email: "alice@corp.example", EmailVerified: true,
			Name: "Alice", Groups: []string{"staff"}, AMR: []string{"pwd"}}},
	})
	c.MustAdmin(t, "POST", "/identity-providers", map[string]any{"slug": "corp", "display_name": "Corp", "issuer": w.up.Issuer(),
		"client_id": "oidcd", "client_secret": "upstream-secret", "scopes": Scopes, "email_domains": []string{"corp.example"},
		"memberships": map[string]any{"organization_id": w.org}}, &w.provider)
	return w
}

// signInThroughUpstream drives Chromium from the application's login
// through the upstream's login page and back to the application.
func (w *federationWorld) signInThroughUpstream(t *testing.T, ctx context.Context, loginQuery string, clickButton bool) {
	t.Helper()
	chrometest.Open(t, ctx, w.app.srv.URL+"/login"+loginQuery)
	if clickButton {
		chrometest.WaitLocation(t, ctx, w.c.Issuer()+"/authorize")
		chrometest.Screenshot(t, ctx, "federation-signin-page")
		chrometest.Click(t, ctx, `button[name=idp][value=corp]`)
	}
	chrometest.WaitLocation(t, ctx, w.up.Issuer())
	chrometest.Screenshot(t, ctx, "federation-upstream-login")
	// The upstream fills its login field with our login_hint, when one
	// was passed on: what it shows is checked, then replaced.
	shown, err := chromedp.Run(ctx, chromedp.Value(`input[name=`+LoginField+`]`))
	if err != nil {
		t.Fatalf("the upstream's login field: %v", err)
	}
	if want := w.wantLoginShown; shown != want {
		t.Errorf("the upstream's login field shows %q, want %q (login_hint passed on)", shown, want)
	}
	chrometest.Do(t, ctx,
		chromedp.SetValue(`input[name=`+LoginField+`]`, "alice-at-corp"),
		chromedp.SendKeys(`input[name=`+PasswordField+`]`, "alice-upstream"))
	chrometest.Click(t, ctx, "#"+SubmitID)
	chrometest.WaitLocation(t, ctx, w.app.srv.URL+"/callback")
	if got := chrometest.Text(t, ctx, "#who"); got != "signed in as alice@corp.example" {
		chrometest.Screenshot(t, ctx, "federation-back")
		t.Fatalf("the application says %q", got)
	}
}

func (w *federationWorld) claims() map[string]any {
	w.app.mu.Lock()
	defer w.app.mu.Unlock()
	return w.app.claims
}

func (w *federationWorld) waitLogout(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		w.app.mu.Lock()
		got := append([]string(nil), w.app.logouts...)
		w.app.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d logout tokens reached the application, want %d", len(got), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFederatedSignInAndUpstreamLogout: the whole life on one node and on
// three. On three, the provider is registered through one node, the
// browser's requests go round the nodes through the balancer, and the
// upstream's logout token is delivered to a follower.
func TestFederatedSignInAndUpstreamLogout(t *testing.T) {
	for _, size := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", size), func(t *testing.T) {
			var follower string
			w := newFederationWorld(t, size, func(c *testcluster.Cluster) string {
				if size == 1 {
					return c.Issuer()
				}
				c.WaitLeader()
				for i := range size {
					if i != c.Leader() {
						follower = c.URL(i)
						return follower
					}
				}
				t.Fatal("no follower")
				return ""
			})
			ctx := chrometest.New(t)
			w.signInThroughUpstream(t, ctx, "", true)
			claims := w.claims()
			if claims["email"] != "alice@corp.example" || claims["email_verified"] != true || claims["organization_id"] != w.org ||
				claims["acr"] != "urn:service:sso:acr:pwd" || fmt.Sprint(claims["amr"]) != "[pwd]" || claims["sid"] == nil {
				t.Fatalf("ID token claims: %v", claims)
			}
			sub := claims["sub"].(string)
			if sub == "alice-at-corp" {
				t.Fatal("the upstream's subject leaked as ours")
			}
			if size == 1 {
				// The session records the link and the upstream's session,
				// and verifies no credential of the person here: the
				// upstream's pwd is not their password (/account asks).
				st := w.c.Node(0).FSM().State()
				app, err := st.AppSession(claims["sid"].(string))
				if err != nil {
					t.Fatal(err)
				}
				sso, err := st.SSOSession(app.SSOSessionID)
				if err != nil || sso.ProviderID != w.provider["id"] || sso.IdentityID == "" || sso.UpstreamSID == "" || len(sso.Verified) != 0 {
					t.Fatalf("the SSO session: %+v, %v", sso, err)
				}
			}
			var ids struct {
				Data []map[string]any `json:"data"`
			}
			w.c.MustAdmin(t, "GET", "/users/"+sub+"/identities", nil, &ids)
			if len(ids.Data) != 1 || ids.Data[0]["subject"] != "alice-at-corp" || ids.Data[0]["provider_id"] != w.provider["id"] {
				t.Fatalf("identities: %+v", ids.Data)
			}

			// While the session lives, a second sign-in asks nobody.
			chrometest.Open(t, ctx, w.app.srv.URL+"/login")
			chrometest.WaitLocation(t, ctx, w.app.srv.URL+"/callback")

			// The upstream ends alice's session: its logout token reaches
			// oidcd (a follower on three nodes), which signs her out of
			// the application with a logout token of its own.
			sent, err := w.up.EndSessions("alice-at-corp")
			if err != nil || sent == 0 {
				t.Fatalf("upstream EndSessions: sent %d, %v\n%s", sent, err, w.up.Stderr())
			}
			got := w.waitLogout(t, 1)
			var lt map[string]any
			if parts := strings.Split(got[0], "."); len(parts) == 3 {
				b, _ := base64.RawURLEncoding.DecodeString(parts[1])
				_ = json.Unmarshal(b, &lt)
			}
			if lt["sub"] != sub || lt["sid"] != claims["sid"] || lt["iss"] != w.c.Issuer() {
				t.Fatalf("oidcd's logout token to the application: %v (want sub %s sid %v)", lt, sub, claims["sid"])
			}
			// The session is gone: the application's next sign-in shows
			// the sign-in page again.
			chrometest.Open(t, ctx, w.app.srv.URL+"/login")
			chrometest.WaitLocation(t, ctx, w.c.Issuer()+"/authorize")
			chrometest.Click(t, ctx, `button[name=idp][value=corp]`)
			chrometest.WaitLocation(t, ctx, w.up.Issuer())
		})
	}
}

// TestFederationHints: idp_hint and an address of the provider's domains
// (login_hint) go straight to the upstream, with no sign-in page here.
func TestFederationHints(t *testing.T) {
	w := newFederationWorld(t, 1, nil)
	for _, q := range []string{"?idp_hint=corp", "?login_hint=" + url.QueryEscape("alice@corp.example")} {
		t.Run(q, func(t *testing.T) {
			w.wantLoginShown = ""
			if strings.Contains(q, "login_hint") {
				w.wantLoginShown = "alice@corp.example"
			}
			ctx := chrometest.New(t)
			w.signInThroughUpstream(t, ctx, q, false)
		})
	}
}

// TestFederationRefusals: what an attacker at the callback or an upstream
// claiming someone's address meets. A callback with no request of this
// browser, or another browser's state, is a 400 page and sends nothing
// upstream; an address that is already a person's here is not taken over
// by provisioning create: a 403 page with a way back, and nobody made.
func TestFederationRefusals(t *testing.T) {
	w := newFederationWorld(t, 1, nil)
	base := w.c.Issuer()
	resp, err := http.Get(base + "/federation/corp/callback?code=stolen&state=forged")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("a callback without this browser's request: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	// Alice's address already has a password account here, unverified
	// by the upstream's rules for linking (provisioning create).
	var alice map[string]any
	w.c.MustAdmin(t, "POST", "/users", map[string]any{"email": "alice@corp.example", "password": "a-local-password-1"}, &alice)
	ctx := chrometest.New(t)
	chrometest.Open(t, ctx, w.app.srv.URL+"/login?idp_hint=corp")
	chrometest.WaitLocation(t, ctx, w.up.Issuer())
	chrometest.Do(t, ctx,
		chromedp.SetValue(`input[name=`+LoginField+`]`, "alice-at-corp"),
		chromedp.SendKeys(`input[name=`+PasswordField+`]`, "alice-upstream"))
	chrometest.Click(t, ctx, "#"+SubmitID)
	chrometest.WaitLocation(t, ctx, base+"/federation/corp/callback")
	chrometest.Screenshot(t, ctx, "federation-address-taken")
	if got := chrometest.Text(t, ctx, "main"); !strings.Contains(got, "already belongs to an account here") || !strings.Contains(got, "Try again") {
		t.Fatalf("the refusal page says %q", got)
	}
	var ids struct {
		Data []map[string]any `json:"data"`
	}
	w.c.MustAdmin(t, "GET", "/users/"+alice["id"].(string)+"/identities", nil, &ids)
	if len(ids.Data) != 0 {
		t.Fatalf("alice's account was linked: %+v", ids.Data)
	}
	var users struct {
		Data []map[string]any `json:"data"`
	}
	w.c.MustAdmin(t, "GET", "/users", nil, &users)
	if len(users.Data) != 1 {
		t.Fatalf("%d people after the refusal, want alice alone", len(users.Data))
	}
}

// TestFederationPromptLogin: an application's prompt=login goes on to
// the upstream, which asks for the password again although its session
// lives; its fresh auth_time passes the check that an upstream's older
// one would fail.
func TestFederationPromptLogin(t *testing.T) {
	w := newFederationWorld(t, 1, nil)
	ctx := chrometest.New(t)
	w.signInThroughUpstream(t, ctx, "?idp_hint=corp", false)
	w.signInThroughUpstream(t, ctx, "?idp_hint=corp&prompt=login", false)
	if got := w.claims()["auth_time"]; got == nil {
		t.Fatalf("no auth_time in the application's ID token: %v", w.claims())
	}
}
