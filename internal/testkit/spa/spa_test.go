// Package spa signs a person in to a single-page application in headless
// Chromium through oidc-client-ts, a widely used SPA library nobody here
// wrote (app/, loaded as an ES module from node_modules): the app is served
// from its own origin, a port of 127.0.0.1 other than the provider's, so
// every call it makes to the provider from script is cross-origin (CORS)
// while its silent-renew iframe stays on the provider's site, as an app at
// app.example.com beside sso.example.com is. A second copy of the app at
// http://localhost:<port> is on another site, as an app at a domain of its
// own is, and shows why silent renewal needs the same site.
//
// scripts/ensure-node.sh installs the locked package (npm ci) and
// scripts/ensure-chromium.sh the browser; without them the test is
// skipped, or fails when CI is "true".
package spa

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

func need(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node_modules", "oidc-client-ts", "package.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the npm package oidc-client-ts is missing (run scripts/ensure-node.sh): %v", err)
		}
		t.Skipf("the npm package oidc-client-ts is missing; run scripts/ensure-node.sh (%v)", err)
	}
}

// serveApp serves app/ and the two packages it imports at a fresh
// 127.0.0.1 port, with /config.json naming the issuer and the client. It
// returns the port.
func serveApp(t *testing.T, issuer string, clientID *string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /config.json", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "client_id": *clientID})
	})
	files := http.FileServer(http.Dir("app"))
	modules := http.FileServer(http.Dir("."))
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if strings.HasSuffix(r.URL.Path, ".mjs") || strings.HasSuffix(r.URL.Path, ".js") {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		if strings.HasPrefix(r.URL.Path, "/node_modules/oidc-client-ts/dist/") || strings.HasPrefix(r.URL.Path, "/node_modules/jwt-decode/build/") {
			modules.ServeHTTP(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// result is what a window.spa function resolved to.
type result map[string]any

func (r result) str(k string) string { s, _ := r[k].(string); return s }

// spa calls window.spa.<call> in the tab's page once the page's module
// has loaded, and returns what it resolved to.
func spa(t *testing.T, ctx context.Context, call string) result {
	t.Helper()
	waitFor(t, ctx, `!!(window.spa && window.spa.ready)`)
	actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(actx, chromedp.Evaluate[string](`window.spa.`+call+`.then(JSON.stringify)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("spa.%s at %s: %v", call, chrometest.Location(t, ctx), err)
	}
	var r result
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("spa.%s: %q: %v", call, s, err)
	}
	return r
}

// waitFor waits up to 20 s for the expression to be true in the page.
func waitFor(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := chromedp.Run(actx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("at %s: %s never held (%v)", chrometest.Location(t, ctx), expr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitStatus waits for the page's #status to start with want.
func waitStatus(t *testing.T, ctx context.Context, want string) string {
	t.Helper()
	b, _ := json.Marshal(want)
	waitFor(t, ctx, `(document.getElementById("status")?.textContent || "").startsWith(`+string(b)+`)`)
	return chrometest.Text(t, ctx, "#status")
}

// signIn clicks the page's sign-in button; when the provider shows its
// sign-in page the person signs in with a password. It returns once the
// app's callback has been handled and the app shows the person.
func signIn(t *testing.T, ctx context.Context, issuer, app, email, password string) {
	t.Helper()
	chrometest.Click(t, ctx, "#sign-in")
	if strings.HasPrefix(chrometest.Location(t, ctx), issuer) {
		chrometest.Do(t, ctx,
			chromedp.SendKeys(chromedp.CSS(`input[autocomplete="username"]`), email),
			chromedp.SendKeys(chromedp.CSS(`input[autocomplete="current-password"]`), password),
		)
		chrometest.Click(t, ctx, `button[name="method"][value="password"]`)
	}
	chrometest.WaitLocation(t, ctx, app+"/")
	if got := waitStatus(t, ctx, "Signed in"); got != "Signed in as "+email {
		t.Fatalf("the app says %q, want %q", got, "Signed in as "+email)
	}
}

// headers keeps what the tab saw of the provider's answers to page loads:
// every document (top level and iframe) and every redirect on the way.
type headers struct {
	mu        sync.Mutex
	issuer    string
	documents []seen // 200-399 HTML documents
	redirects []seen
}

type seen struct {
	url    string
	status int64
	header network.Headers
}

func (s seen) get(name string) string {
	for k, v := range s.header {
		if strings.EqualFold(k, name) {
			str, _ := v.(string)
			return str
		}
	}
	return ""
}

func watch(t *testing.T, ctx context.Context, issuer string) *headers {
	t.Helper()
	h := &headers{issuer: issuer}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if r := ev.RedirectResponse; r != nil && strings.HasPrefix(r.URL, issuer) {
				h.redirects = append(h.redirects, seen{r.URL, r.Status, r.Headers})
			}
		case *network.EventResponseReceived:
			if r := ev.Response; ev.Type == network.ResourceTypeDocument && strings.HasPrefix(r.URL, issuer) && r.MimeType == "text/html" {
				h.documents = append(h.documents, seen{r.URL, r.Status, r.Headers})
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *headers) snapshot() (docs, redirects []seen) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]seen(nil), h.documents...), append([]seen(nil), h.redirects...)
}

// frameBlocking says what in an answer's headers refuses framing.
func frameBlocking(s seen) string {
	var out []string
	if v := s.get("X-Frame-Options"); v != "" {
		out = append(out, "X-Frame-Options: "+v)
	}
	if v := s.get("Content-Security-Policy"); strings.Contains(v, "frame-ancestors") {
		out = append(out, "Content-Security-Policy: "+v)
	}
	return strings.Join(out, "; ")
}

// TestSinglePageApp: a public client registered with no web_origins (so
// the origin of its redirect URIs) signs a person in from an SPA on its
// own origin through oidc-client-ts in headless Chromium: code + PKCE with
// the exchange from script, userinfo read by the library and by the page,
// a silent renewal by prompt=none in a hidden iframe, sign-out by
// end-session with id_token_hint, a registered post-logout URI and the
// state returned, and then a silent renewal that fails with
// login_required. Around it: an origin the client does not list gets no
// CORS grant for the code exchange or userinfo; introspection and
// revocation grant none to any origin; every provider page the browser
// loaded refuses framing while the prompt=none redirects do not; and an
// SPA on another site (localhost) cannot renew silently at all.
func TestSinglePageApp(t *testing.T) {
	need(t)
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	issuer := c.Issuer()
	const email, password = "ann@example.com", "correct horse battery"
	var org, user map[string]any
	c.MustAdmin(t, "POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &org)
	c.MustAdmin(t, "POST", "/users", map[string]any{"email": email, "email_verified": true, "password": password}, &user)
	c.MustAdmin(t, "POST", "/memberships", map[string]any{"user_id": user["id"], "org_id": org["id"]}, nil)

	// The app at A (its own client, web_origins by default), a copy at B
	// whose client lists no origin, and a copy on another site, L.
	var spaID, closedID, crossID string
	portA, portB, portL := serveApp(t, issuer, &spaID), serveApp(t, issuer, &closedID), serveApp(t, issuer, &crossID)
	appA, appB, appL := "http://127.0.0.1:"+portA, "http://127.0.0.1:"+portB, "http://localhost:"+portL
	pages := func(app string) []string {
		return []string{app + "/callback.html", app + "/silent.html", app + "/signed-out.html"}
	}
	client := func(name string, redirects []string, extra map[string]any) (string, map[string]any) {
		body := map[string]any{"name": name, "type": "public", "redirect_uris": redirects, "scopes": []string{"openid", "email"},
			"organization_id": org["id"], "skip_consent": true}
		for k, v := range extra {
			body[k] = v
		}
		var cl map[string]any
		c.MustAdmin(t, "POST", "/clients", body, &cl)
		return cl["client_id"].(string), cl
	}
	var spaClient map[string]any
	spaID, spaClient = client("Example SPA", pages(appA), nil)
	if got, _ := json.Marshal(spaClient["web_origins"]); string(got) != `["`+appA+`"]` {
		t.Errorf("a public client registered without web_origins has web_origins %s, want [%q]", got, appA)
	}
	closedID, _ = client("SPA without origins", pages(appB), map[string]any{"web_origins": []string{}})
	crossID, _ = client("SPA on another site", pages(appL), nil)

	ctx := chrometest.New(t)
	seenHeaders := watch(t, ctx, issuer)

	// Sign in: discovery (CORS *), the provider's sign-in page, the code
	// exchange from script (CORS for A), userinfo by the library.
	chrometest.Open(t, ctx, appA+"/")
	waitStatus(t, ctx, "Signed out")
	signIn(t, ctx, issuer, appA, email, password)
	first := spa(t, ctx, "user()")
	if first.str("sub") != user["id"] || first.str("organization_id") != org["id"] || first.str("email") != email || first.str("sid") == "" {
		t.Fatalf("signed-in user: %v, want sub %v, organization_id %v, email %s and a sid", first, user["id"], org["id"], email)
	}
	waitFor(t, ctx, `document.getElementById("userinfo").textContent.startsWith("200")`)
	chrometest.Screenshot(t, ctx, "spa-signed-in")

	// userinfo and memberships from script, and an error the page can read.
	if r := spa(t, ctx, "userinfo()"); r["status"] != 200.0 || !strings.Contains(r.str("body"), `"sub":"`+first.str("sub")+`"`) || r.str("correlation_id") == "" {
		t.Errorf("userinfo from A: %v, want 200 with the sub and a readable X-Correlation-ID", r)
	}
	if r := spa(t, ctx, "memberships()"); r["status"] != 200.0 || !strings.Contains(r.str("body"), `"org_slug":"alpha"`) {
		t.Errorf("memberships from A: %v, want 200 listing alpha", r)
	}
	// A string that is no token names no client, so no origin is granted.
	if r := spa(t, ctx, `userinfo("not-a-token")`); r.str("error") == "" {
		t.Errorf("userinfo from A with what is no token: %v, want the fetch refused (no client, no grant)", r)
	}

	// Introspection and revocation answer no origin, not even A's.
	for _, ep := range []string{"introspection_endpoint", "revocation_endpoint"} {
		r := spa(t, ctx, `post("`+ep+`", {token: "x", client_id: "`+spaID+`"})`)
		if r.str("error") == "" {
			t.Errorf("%s from A's page: %v, want the fetch refused (no CORS grant)", ep, r)
		}
	}

	// Silent renewal in a hidden iframe: new tokens, the same app session.
	renewed := spa(t, ctx, "renew()")
	if renewed.str("error") != "" {
		t.Fatalf("silent renewal: %v", renewed)
	}
	if renewed.str("access_token") == first.str("access_token") || renewed.str("sid") != first.str("sid") || renewed.str("sub") != first.str("sub") {
		t.Errorf("silent renewal: sid %q sub %q (new access token %v), want a new access token for sid %q, sub %q",
			renewed.str("sid"), renewed.str("sub"), renewed.str("access_token") != first.str("access_token"), first.str("sid"), first.str("sub"))
	}
	if r := spa(t, ctx, "userinfo()"); r["status"] != 200.0 {
		t.Errorf("userinfo with the renewed token: %v", r)
	}

	// B: the same app and library for a client that lists no origin. The
	// browser comes back with a code (the session is live), but the
	// library's code exchange gets no CORS grant, and neither does A's
	// token at userinfo from B.
	chrometest.Open(t, ctx, appB+"/")
	waitStatus(t, ctx, "Signed out")
	chrometest.Click(t, ctx, "#sign-in")
	chrometest.WaitLocation(t, ctx, appB+"/")
	waitFor(t, ctx, `!(document.getElementById("status")?.textContent || "").endsWith("…")`)
	if got := chrometest.Text(t, ctx, "#status"); !strings.HasPrefix(got, "Sign-in failed") || !strings.Contains(got, "Failed to fetch") {
		t.Errorf("code exchange from an origin the client does not list: %q, want the library's fetch refused", got)
	}
	chrometest.Screenshot(t, ctx, "spa-unlisted-origin")
	if r := spa(t, ctx, `userinfo("`+renewed.str("access_token")+`")`); r.str("error") == "" {
		t.Errorf("userinfo from B with A's token: %v, want the fetch refused (no CORS grant)", r)
	}

	// L: another site. Signing in by redirect works (a top-level
	// navigation carries the SameSite=Lax session cookie), but the silent
	// renewal's iframe is cross-site: the cookie stays behind.
	chrometest.Open(t, ctx, appL+"/")
	waitStatus(t, ctx, "Signed out")
	chrometest.Click(t, ctx, "#sign-in")
	chrometest.WaitLocation(t, ctx, appL+"/")
	if got := waitStatus(t, ctx, "Signed in"); got != "Signed in as "+email {
		t.Fatalf("signing in by redirect from another site with a live session: the app says %q, want %q with no page", got, "Signed in as "+email)
	}
	if r := spa(t, ctx, "renew()"); r.str("error") != "login_required" {
		t.Errorf("silent renewal from another site while the session lives: %v, want login_required", r)
	}

	// Sign out from A: end-session with id_token_hint, the registered
	// post-logout URI, and the library's state back.
	chrometest.Open(t, ctx, appA+"/")
	waitStatus(t, ctx, "Signed in")
	chrometest.Click(t, ctx, "#sign-out")
	chrometest.WaitLocation(t, ctx, appA+"/signed-out.html?")
	if got := waitStatus(t, ctx, "Signed out"); got != "Signed out (state: bye-from-spa)" {
		t.Errorf("after sign-out the app says %q, want the state it sent back", got)
	}
	chrometest.Screenshot(t, ctx, "spa-signed-out")
	loc, _ := url.Parse(chrometest.Location(t, ctx))
	if loc.Query().Get("state") == "" {
		t.Errorf("post-logout redirect %s carries no state", loc)
	}
	chrometest.Open(t, ctx, appA+"/")
	waitStatus(t, ctx, "Signed out")
	if r := spa(t, ctx, "renew()"); r.str("error") != "login_required" {
		t.Errorf("silent renewal after sign-out: %v, want login_required", r)
	}
	// The token's app session has ended: the 401 is still the client's,
	// and readable from its origin with its WWW-Authenticate.
	if r := spa(t, ctx, `userinfo("`+renewed.str("access_token")+`")`); r["status"] != 401.0 || !strings.Contains(r.str("www_authenticate"), `error="invalid_token"`) {
		t.Errorf("userinfo after sign-out with the renewed token: %v, want a readable 401 with WWW-Authenticate", r)
	}

	// Every provider page the browser loaded refuses framing; the
	// prompt=none redirects (the iframes' way back) carry nothing that does.
	docs, redirects := seenHeaders.snapshot()
	if len(docs) == 0 {
		t.Error("the browser loaded no page of the provider")
	}
	for _, d := range docs {
		if csp := d.get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("page %s (%d): Content-Security-Policy %q, want frame-ancestors 'none'", d.url, d.status, csp)
		}
	}
	promptNone := 0
	for _, r := range redirects {
		u, _ := url.Parse(r.url)
		if u.Path != "/authorize" || u.Query().Get("prompt") != "none" {
			continue
		}
		if strings.HasPrefix(u.Query().Get("redirect_uri"), appA+"/") {
			promptNone++
		}
		if b := frameBlocking(r); b != "" {
			t.Errorf("prompt=none redirect %s carries %s", r.url, b)
		}
	}
	// A's two renewals run in a same-site iframe, in the tab's process;
	// L's cross-site iframe may run in a process of its own, out of sight.
	if promptNone != 2 {
		t.Errorf("saw %d prompt=none redirects for A, want its 2 silent renewals", promptNone)
	}
	t.Logf("the browser loaded %d pages of the provider and followed %d of its redirects", len(docs), len(redirects))
}

// TestSinglePageAppHeaders reads what the browser hides: the preflight
// and the answer headers of CORS for a listed origin and for others; and
// the framing rules on pages the SPA test's browser does not load (the
// error page, a sign-in page) and on a prompt=none redirect without a
// session.
func TestSinglePageAppHeaders(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "4/60s" }})
	var org map[string]any
	c.MustAdmin(t, "POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &org)
	const app, other = "http://127.0.0.1:4000", "http://127.0.0.1:4001"
	var cl map[string]any
	c.MustAdmin(t, "POST", "/clients", map[string]any{"name": "SPA", "type": "public", "redirect_uris": []string{app + "/cb"},
		"scopes": []string{"openid"}, "organization_id": org["id"]}, &cl)
	base := c.Issuer()
	do := func(method, path, origin string, hdr map[string]string, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Origin", origin)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	preflight := func(path, origin, method string) *http.Response {
		return do("OPTIONS", path, origin, map[string]string{"Access-Control-Request-Method": method,
			"Access-Control-Request-Headers": "authorization, content-type"}, "")
	}
	for _, tc := range []struct{ path, method string }{
		{"/oauth2/token", "POST"}, {"/userinfo", "GET"}, {"/userinfo", "POST"}, {"/api/v1/me/memberships", "GET"},
	} {
		r := preflight(tc.path, app, tc.method)
		if r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != app || !strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), tc.method) ||
			!strings.Contains(strings.ToLower(r.Header.Get("Access-Control-Allow-Headers")), "authorization") || r.Header.Get("Access-Control-Max-Age") == "" ||
			!strings.Contains(r.Header.Get("Vary"), "Origin") || r.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("preflight %s %s from %s: %d %v", tc.method, tc.path, app, r.StatusCode, r.Header)
		}
		if r := preflight(tc.path, other, tc.method); r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight %s %s from unlisted %s: Access-Control-Allow-Origin %q, want none", tc.method, tc.path, other, r.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	// A token error for the listed client is readable from its origin.
	r := do("POST", "/oauth2/token", app, form, "grant_type=authorization_code&code=nope&code_verifier=x&redirect_uri="+url.QueryEscape(app+"/cb")+"&client_id="+cl["client_id"].(string))
	if r.StatusCode != 400 || r.Header.Get("Access-Control-Allow-Origin") != app || !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "X-Correlation-ID") ||
		r.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("token error from %s: %d %v, want 400 with its origin allowed and X-Correlation-ID exposed", app, r.StatusCode, r.Header)
	}
	if r := do("POST", "/oauth2/token", other, form, "grant_type=authorization_code&code=nope&code_verifier=x&client_id="+cl["client_id"].(string)); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("token answer to unlisted %s: Access-Control-Allow-Origin %q", other, r.Header.Get("Access-Control-Allow-Origin"))
	}
	// An origin another client lists gets that client's grants only.
	const second = "http://127.0.0.1:4002"
	c.MustAdmin(t, "POST", "/clients", map[string]any{"name": "Other SPA", "type": "public", "redirect_uris": []string{second + "/cb"},
		"scopes": []string{"openid"}, "organization_id": org["id"]}, nil)
	if r := preflight("/oauth2/token", second, "POST"); r.Header.Get("Access-Control-Allow-Origin") != second {
		t.Errorf("preflight from %s, which a client lists: Access-Control-Allow-Origin %q", second, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if r := do("POST", "/oauth2/token", second, form, "grant_type=authorization_code&code=nope&code_verifier=x&client_id="+cl["client_id"].(string)); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("token answer naming the first client to %s, which only another lists: Access-Control-Allow-Origin %q", second, r.Header.Get("Access-Control-Allow-Origin"))
	}
	// The limiter's 429 is the client's too: readable, with Retry-After.
	var limited *http.Response
	for i := 0; i < 6 && (limited == nil || limited.StatusCode != 429); i++ {
		limited = do("POST", "/oauth2/token", app, form, "grant_type=authorization_code&code=nope&code_verifier=x&redirect_uri="+url.QueryEscape(app+"/cb")+"&client_id="+cl["client_id"].(string))
	}
	if limited.StatusCode != 429 || limited.Header.Get("Access-Control-Allow-Origin") != app || limited.Header.Get("Retry-After") == "" ||
		!strings.Contains(limited.Header.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Errorf("token endpoint over its limit from %s: %d %v, want 429 with its origin allowed and Retry-After exposed", app, limited.StatusCode, limited.Header)
	}
	for _, path := range []string{"/oauth2/introspect", "/oauth2/revoke"} {
		if r := preflight(path, app, "POST"); r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight of %s from %s: Access-Control-Allow-Origin %q, want none", path, app, r.Header.Get("Access-Control-Allow-Origin"))
		}
		if r := do("POST", path, app, form, "token=x&client_id="+cl["client_id"].(string)); r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("POST %s from %s: Access-Control-Allow-Origin %q, want none", path, app, r.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	for _, path := range []string{"/.well-known/openid-configuration", "/.well-known/jwks.json"} {
		if r := do("GET", path, other, nil, ""); r.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("GET %s: Access-Control-Allow-Origin %q, want *", path, r.Header.Get("Access-Control-Allow-Origin"))
		}
	}

	authorize := func(clientID, prompt string) *testcluster.Page {
		q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {app + "/cb"}, "scope": {"openid"},
			"state": {"state-12345"}, "code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}}
		if prompt != "" {
			q.Set("prompt", prompt)
		}
		return testcluster.NewBrowser(t).Get(base + "/authorize?" + q.Encode())
	}
	for name, p := range map[string]*testcluster.Page{"sign-in page": authorize(cl["client_id"].(string), ""), "error page": authorize("no-such-client", "")} {
		if csp := p.Header.Get("Content-Security-Policy"); !strings.Contains(p.Header.Get("Content-Type"), "text/html") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s (%d, %s): Content-Security-Policy %q, want frame-ancestors 'none'", name, p.Status, p.Header.Get("Content-Type"), csp)
		}
	}
	p := authorize(cl["client_id"].(string), "none")
	if loc, _ := url.Parse(p.Location()); p.Status != 302 || loc == nil || loc.Query().Get("error") != "login_required" {
		t.Errorf("prompt=none without a session: %d Location %q, want a redirect with login_required", p.Status, p.Location())
	}
	if b := frameBlocking(seen{header: network.Headers{"X-Frame-Options": p.Header.Get("X-Frame-Options"), "Content-Security-Policy": p.Header.Get("Content-Security-Policy")}}); b != "" {
		t.Errorf("prompt=none redirect carries %s", b)
	}
}
