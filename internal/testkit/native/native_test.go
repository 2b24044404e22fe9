// Package native signs a person in to a native app (RFC 8252) with
// AppAuth-JS (@openid/appauth), a native-app library nobody here wrote,
// under Node (app.mjs): a loopback redirect on a port the app picks at run
// time and a private-use scheme redirect, each with PKCE and no secret. The
// person's browser is headless Chromium: the library "opens the system
// browser" through xdg-open, and the test's own xdg-open hands the URL over.
//
// scripts/ensure-node.sh installs Node and the locked package (npm ci),
// scripts/ensure-chromium.sh the browser; without them the test is
// skipped, or fails when CI is "true".
package native

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
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

func need(t *testing.T) string {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("node_modules", "@openid", "appauth", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or the npm packages are missing (run scripts/ensure-node.sh): %v", err)
		}
		t.Skipf("node or the npm packages are missing; run scripts/ensure-node.sh (%v)", err)
	}
	return nodeBin
}

// lines collects a process's output lines as they come.
type lines struct {
	mu   sync.Mutex
	all  []string
	more chan struct{}
}

func collect(r io.Reader) *lines {
	l := &lines{more: make(chan struct{}, 1)}
	go func() {
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			l.mu.Lock()
			l.all = append(l.all, s.Text())
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
		close(l.more)
	}()
	return l
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// wait returns the first line starting with prefix, waiting up to 30 s.
func (l *lines) wait(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		for _, s := range l.all {
			if strings.HasPrefix(s, prefix) {
				l.mu.Unlock()
				return s
			}
		}
		l.mu.Unlock()
		select {
		case _, open := <-l.more:
			if !open {
				t.Fatalf("app.mjs ended without %q:\n%s", prefix, l.text())
			}
		case <-deadline:
			t.Fatalf("app.mjs printed no %q within 30 s:\n%s", prefix, l.text())
		}
	}
}

// opened waits for the URL that app.mjs had "the system browser" open.
func opened(t *testing.T, file string, out *lines) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(file); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("app.mjs opened no browser within 30 s:\n%s", out.text())
	return ""
}

// TestNativeApp registers a native public client with the loopback
// redirect http://127.0.0.1/callback (no port) and the private-use scheme
// com.example.app:/callback; AppAuth-JS signs the person in through both,
// and each code is redeemed with its own redirect_uri.
func TestNativeApp(t *testing.T) {
	nodeBin := need(t)
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	const email, password = "ann@example.com", "correct horse battery"
	var org, user map[string]any
	c.MustAdmin(t, "POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &org)
	c.MustAdmin(t, "POST", "/users", map[string]any{"email": email, "email_verified": true, "password": password}, &user)
	c.MustAdmin(t, "POST", "/memberships", map[string]any{"user_id": user["id"], "org_id": org["id"]}, nil)
	var app map[string]any
	c.MustAdmin(t, "POST", "/clients", map[string]any{"name": "Desktop App", "type": "public", "application_type": "native",
		"redirect_uris": []string{"http://127.0.0.1/callback", "com.example.app:/callback"}, "scopes": []string{"openid", "email"},
		"organization_id": org["id"], "skip_consent": true}, &app)
	if app["application_type"] != "native" || app["client_secret"] != nil {
		t.Errorf("registered native app: application_type %v, client_secret %v; want native and none", app["application_type"], app["client_secret"])
	}

	// The test's xdg-open is the system browser's launcher: it writes the
	// URL where the test reads it.
	bin := t.TempDir()
	openedFile := filepath.Join(bin, "opened")
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte("#!/bin/sh\nprintf '%s\\n' \"$1\" > \""+openedFile+"\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "app.mjs")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"OIDCD_ISSUER="+c.Issuer(), "OIDCD_CLIENT_ID="+app["client_id"].(string))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := collect(stdout)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})

	// 1. The loopback redirect, on the port app.mjs picked.
	port := strings.TrimPrefix(out.wait(t, "loopback port "), "loopback port ")
	authURL := opened(t, openedFile, out)
	q := mustQuery(t, authURL)
	if want := "http://127.0.0.1:" + port + "/callback"; q.Get("redirect_uri") != want || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		t.Fatalf("authorization request %s: want redirect_uri %s and PKCE S256", authURL, want)
	}
	browser := chrometest.New(t)
	chrometest.Open(t, browser, authURL)
	chrometest.Do(t, browser,
		chromedp.SendKeys(chromedp.CSS(`input[autocomplete="username"]`), email),
		chromedp.SendKeys(chromedp.CSS(`input[autocomplete="current-password"]`), password),
	)
	chrometest.Click(t, browser, `button[name="method"][value="password"]`)
	landed := chrometest.WaitLocation(t, browser, "http://127.0.0.1:"+port+"/callback?")
	if mustQuery(t, landed).Get("code") == "" {
		t.Errorf("the browser landed at %s, want a code", landed)
	}
	out.wait(t, "ok userinfo (loopback)")

	// 2. The private-use scheme: the browser is sent to
	// com.example.app:/callback?code=..., which only an app can take; the
	// test reads the redirect and hands it to app.mjs as an operating
	// system would.
	schemeURL := strings.TrimPrefix(out.wait(t, "open "), "open ")
	if q := mustQuery(t, schemeURL); q.Get("redirect_uri") != "com.example.app:/callback" {
		t.Fatalf("authorization request %s: want redirect_uri com.example.app:/callback", schemeURL)
	}
	redirect := make(chan string, 1)
	if _, err := chromedp.Call(browser, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Listen(browser, func(ev any) {
		if ev, ok := ev.(*network.EventRequestWillBeSent); ok && strings.HasPrefix(ev.Request.URL, "com.example.app:") {
			select {
			case redirect <- ev.Request.URL:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	nctx, ncancel := context.WithTimeout(browser, 10*time.Second)
	chromedp.Do(nctx, chromedp.Navigate(schemeURL)) // fails: no app for the scheme in a headless browser
	ncancel()
	var back string
	select {
	case back = <-redirect:
	case <-time.After(10 * time.Second):
		t.Fatalf("the browser was sent nowhere near com.example.app: from %s (now at %s)", schemeURL, chrometest.Location(t, browser))
	}
	if mustQuery(t, back).Get("code") == "" {
		t.Fatalf("redirect %s carries no code", back)
	}
	io.WriteString(stdin, back+"\n")

	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("app.mjs: %v\n%s\n%s", err, out.text(), stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("app.mjs did not finish:\n%s\n%s", out.text(), stderr.String())
	}
	got := out.text()
	t.Logf("app.mjs:\n%s", got)
	for _, w := range []string{"ok discovery", "ok code at the loopback port " + port, "ok token exchange (loopback)", "ok userinfo (loopback) " + email,
		"ok code at com.example.app:/callback", "ok token exchange (private-use scheme)", "ok userinfo (private-use scheme) " + email, "done"} {
		if !strings.Contains(got+"\n", w+"\n") {
			t.Errorf("app.mjs: no %q in its output", w)
		}
	}
}

// TestNativeRedirectRules: what a native registration may name, and what
// /authorize matches of it. A loopback redirect matches any port but
// only its own address and path; a private-use scheme matches exactly; a
// web app cannot register a private-use scheme, nor a native app the
// name localhost, a scheme without a dot or a secret.
func TestNativeRedirectRules(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	var org map[string]any
	c.MustAdmin(t, "POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &org)
	register := func(appType, typ string, redirects ...string) (int, map[string]any) {
		var out map[string]any
		body := map[string]any{"name": "App", "type": typ, "redirect_uris": redirects, "organization_id": org["id"]}
		if appType != "" {
			body["application_type"] = appType
		}
		return c.Admin(t, "POST", "/clients", body, &out), out
	}
	for _, tc := range []struct {
		appType, typ, redirect string
		want                   int
	}{
		{"native", "public", "http://127.0.0.1/callback", 201},
		{"native", "public", "http://[::1]/callback", 201},
		{"native", "public", "com.example.app:/callback", 201},
		{"native", "public", "https://app.example.com/callback", 201},
		{"native", "public", "http://localhost/callback", 400},
		{"native", "public", "myapp:/callback", 400},
		{"native", "confidential", "http://127.0.0.1/callback", 400},
		{"", "public", "com.example.app:/callback", 400},
		{"web", "public", "com.example.app:/callback", 400},
	} {
		if st, out := register(tc.appType, tc.typ, tc.redirect); st != tc.want {
			t.Errorf("register %s %s client with %s: %d %v, want %d", tc.appType, tc.typ, tc.redirect, st, out, tc.want)
		}
	}

	st, app := register("native", "public", "http://127.0.0.1/callback", "http://[::1]/callback", "com.example.app:/callback")
	if st != 201 {
		t.Fatalf("register: %d %v", st, app)
	}
	authorizeAs := func(clientID, redirect string) *testcluster.Page {
		q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
			"scope": {"openid"}, "state": {"state-12345"}, "code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"},
			"code_challenge_method": {"S256"}}
		return testcluster.NewBrowser(t).Get(c.Issuer() + "/authorize?" + q.Encode())
	}
	authorize := func(redirect string) *testcluster.Page { return authorizeAs(app["client_id"].(string), redirect) }
	for _, tc := range []struct {
		redirect string
		accepted bool
	}{
		{"http://127.0.0.1:49152/callback", true},
		{"http://127.0.0.1/callback", true},
		{"com.example.app:/callback", true},
		{"http://127.0.0.1:49152/other", false},
		{"http://localhost:49152/callback", false},
		{"http://[::1]:49152/callback", true},
		{"http://[::1]:49152/other", false},
		{"http://[0:0:0:0:0:0:0:1]:49152/callback", false},
		{"HTTP://127.0.0.1:49152/callback", false},
		{"com.example.app:/callback/x", false},
		{"com.example.other:/callback", false},
	} {
		// Accepted: the provider's sign-in page; refused: its error page,
		// never a redirect to the URI.
		p := authorize(tc.redirect)
		want := 400
		if tc.accepted {
			want = 200
		}
		if p.Status != want || p.Location() != "" {
			t.Errorf("/authorize with redirect_uri %s: %d Location %q, want %d and no redirect", tc.redirect, p.Status, p.Location(), want)
		}
	}

	// The built-in client of `oidcd admin login` is a native app by the
	// same rule.
	for _, tc := range []struct {
		redirect string
		want     int
	}{
		{"http://127.0.0.1:49153/callback", 200},
		{"http://[::1]:49153/callback", 200},
		{"http://localhost:49153/callback", 400},
		{"http://127.0.0.1:49153/other", 400},
	} {
		if p := authorizeAs("oidcd-admin", tc.redirect); p.Status != tc.want || p.Location() != "" {
			t.Errorf("/authorize of oidcd-admin with redirect_uri %s: %d Location %q, want %d and no redirect", tc.redirect, p.Status, p.Location(), tc.want)
		}
	}
}

// TestNativeLoopbackExchangeNamesItsPort: the token request must name the
// very redirect_uri of its authorization request (RFC 6749 4.1.3), so a
// code sent to one loopback port is not redeemed with another, though
// both match the registration.
func TestNativeLoopbackExchangeNamesItsPort(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	const email, password = "ann@example.com", "correct horse battery"
	var org, user, app map[string]any
	c.MustAdmin(t, "POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &org)
	c.MustAdmin(t, "POST", "/users", map[string]any{"email": email, "email_verified": true, "password": password}, &user)
	c.MustAdmin(t, "POST", "/memberships", map[string]any{"user_id": user["id"], "org_id": org["id"]}, nil)
	c.MustAdmin(t, "POST", "/clients", map[string]any{"name": "Desktop App", "type": "public", "application_type": "native",
		"redirect_uris": []string{"http://127.0.0.1/callback"}, "organization_id": org["id"], "skip_consent": true}, &app)
	const verifier = "a-verifier-of-more-than-forty-three-characters-0123456789"
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	b := testcluster.NewBrowser(t)
	code := func(port string) string {
		q := url.Values{"response_type": {"code"}, "client_id": {app["client_id"].(string)}, "redirect_uri": {"http://127.0.0.1:" + port + "/callback"},
			"scope": {"openid"}, "state": {"state-12345"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
		p := b.Follow(b.Get(c.Issuer()+"/authorize?"+q.Encode()), c.Issuer())
		if p.Location() == "" {
			p = b.Follow(b.Submit(p, map[string]string{"email": email, "password": password}, "method", "password"), c.Issuer())
		}
		got := mustQuery(t, p.Location()).Get("code")
		if !strings.HasPrefix(p.Location(), "http://127.0.0.1:"+port+"/callback?") || got == "" {
			t.Fatalf("authorize for port %s: %d Location %q", port, p.Status, p.Location())
		}
		return got
	}
	exchange := func(code, port string) (int, map[string]any) {
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
			"client_id": {app["client_id"].(string)}, "redirect_uri": {"http://127.0.0.1:" + port + "/callback"}}
		resp, err := c.Client().PostForm(c.Issuer()+"/oauth2/token", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if st, out := exchange(code("50001"), "50002"); st != 400 || out["error"] != "invalid_grant" {
		t.Errorf("a code sent to port 50001 redeemed with port 50002: %d %v, want 400 invalid_grant", st, out)
	}
	if st, out := exchange(code("50003"), "50003"); st != 200 || out["access_token"] == nil {
		t.Errorf("a code sent to port 50003 redeemed with it: %d %v, want tokens", st, out)
	}
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return u.Query()
}
