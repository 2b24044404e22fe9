package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestLoginAgainstANode drives `oidcd admin login` end to end against a
// real node: the test is the person's browser (a cookie jar), signing in
// on the provider's pages with a password and an authenticator code (the
// default --admin-acr asks for the second factor), and following the
// redirect to the CLI's loopback port. The CLI then holds a token of the
// built-in client at acr mfa for the person, kept for --addr with mode
// 0600, and later commands to that --addr send it: with an admin grant,
// `status` works. `logout` revokes it and forgets it.
//
// The person belongs to no organization: an administrator need not.
func TestLoginAgainstANode(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	base := c.URL(0)
	t.Chdir(t.TempDir()) // no ./data/admin-token to fall back on
	xdg := t.TempDir()
	env := map[string]string{cli.EnvXDGConfigHome: xdg}
	envFn := func(k string) string { return env[k] }

	// A person with a password and an authenticator app, as an operator
	// would set them up with the break-glass token.
	const email, password = "root@example.com", "correct horse battery staple"
	var user struct{ ID string }
	adminCall(t, c, "POST", "/admin/v1/users", map[string]any{"email": email, "password": password}, &user, http.StatusCreated)
	var totp struct{ Secret string }
	adminCall(t, c, "POST", "/admin/v1/users/"+user.ID+"/totp", nil, &totp, http.StatusCreated)

	// The CLI waits for the browser; the URL comes on stderr.
	pr, pw := io.Pipe()
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(context.Background(), []string{"--addr", base, "login", "--wait", "60s"}, envFn, nil, &stdout, pw)
		pw.Close()
	}()
	var authURL string
	var stderrText strings.Builder
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		stderrText.WriteString(lines.Text() + "\n")
		if l := strings.TrimSpace(lines.Text()); strings.HasPrefix(l, base+"/authorize?") {
			authURL = l
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if authURL == "" {
		t.Fatalf("no authorization URL printed; stderr:\n%s", stderrText.String())
	}
	u, _ := url.Parse(authURL)
	if q := u.Query(); q.Get("client_id") != "oidcd-admin" || q.Get("code_challenge_method") != "S256" ||
		!strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") || !strings.HasSuffix(q.Get("redirect_uri"), "/callback") {
		t.Fatalf("authorization URL %s", authURL)
	}

	// The browser: password, then the authenticator code, then back to
	// the CLI's loopback port.
	b := testcluster.NewBrowser(t)
	page := b.Follow(b.Get(authURL), base)
	if !strings.Contains(page.Body, `name="password"`) {
		t.Fatalf("want the sign-in form, got %d:\n%s", page.Status, page.Body)
	}
	page = b.Follow(b.Submit(page, map[string]string{"email": email, "password": password}, "method", "password"), base)
	if !strings.Contains(page.Body, `value="otp"`) {
		t.Fatalf("want the second-factor page (--admin-acr mfa), got %d %q:\n%s", page.Status, page.Location(), page.Body)
	}
	code, err := factor.TOTPCode(totp.Secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	page = b.Follow(b.Submit(page, map[string]string{"code": code}, "method", "otp"), base)
	loc := page.Location()
	if !strings.HasPrefix(loc, u.Query().Get("redirect_uri")+"?") {
		t.Fatalf("want a redirect to the CLI, got %d %q:\n%s", page.Status, loc, page.Body)
	}
	if back := b.Get(loc); back.Status != http.StatusOK || !strings.Contains(back.Body, "Signed in") {
		t.Fatalf("the CLI's page: %d %s", back.Status, back.Body)
	}
	select {
	case code := <-done:
		if code != cli.ExitOK {
			t.Fatalf("login: exit %d; stdout %q", code, stdout.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("login did not return")
	}
	if !strings.Contains(stdout.String(), "signed in to "+base) {
		t.Errorf("login stdout %q", stdout.String())
	}

	// What the CLI holds: a token of the built-in client, for this
	// person, at acr mfa, in a file only its owner reads.
	path := filepath.Join(xdg, "oidcd", "credentials.json")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", fi, err)
	}
	var file struct {
		Logins map[string]struct {
			AccessToken string    `json:"access_token"`
			ExpiresAt   time.Time `json:"expires_at"`
		} `json:"logins"`
	}
	raw, _ := os.ReadFile(path)
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	kept := file.Logins[base]
	claims := jwtClaims(t, kept.AccessToken)
	if claims["client_id"] != "oidcd-admin" || claims["acr"] != "urn:service:sso:acr:mfa" || claims["sub"] != user.ID {
		t.Errorf("token claims %v", claims)
	}
	if _, ok := claims["organization_id"]; ok {
		t.Errorf("the token names an organization: %v", claims)
	}
	if d := time.Until(kept.ExpiresAt); d <= 0 || d > time.Hour+time.Minute {
		t.Errorf("expires in %s", d)
	}

	// With a grant, later commands to --addr send the kept token.
	if granted := adminCall(t, c, "POST", "/admin/v1/admins", map[string]any{"user_id": user.ID, "role": "admin"}, nil, 0); granted != http.StatusCreated {
		t.Fatalf("POST /admins: got %d, want 201", granted)
	}
	var sout, serr bytes.Buffer
	if status := cli.Run(context.Background(), []string{"--addr", base, "status"}, envFn, nil, &sout, &serr); status != cli.ExitOK {
		t.Errorf("status with the kept token: exit %d\nstdout %s\nstderr %s", status, sout.String(), serr.String())
	}

	// logout revokes the token at the provider and forgets it.
	var lout, lerr bytes.Buffer
	if code := cli.Run(context.Background(), []string{"--addr", base, "logout"}, envFn, nil, &lout, &lerr); code != cli.ExitOK || lerr.Len() != 0 {
		t.Fatalf("logout: exit %d %q %q", code, lout.String(), lerr.String())
	}
	if raw, _ := os.ReadFile(path); bytes.Contains(raw, []byte(kept.AccessToken)) {
		t.Error("the token is still in the file after logout")
	}
	serr.Reset()
	if code := cli.Run(context.Background(), []string{"--addr", base, "status"}, envFn, nil, io.Discard, &serr); code != cli.ExitAuth {
		t.Errorf("status after logout: exit %d, want %d (no token)", code, cli.ExitAuth)
	}
}

// adminCall calls the admin API with the break-glass token and returns the
// status; want, when not zero, must be it.
func adminCall(t *testing.T, c *testcluster.Cluster, method, path string, body, out any, want int) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.URL(0)+path, rd)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want != 0 && resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		json.Unmarshal(b, out)
	}
	return resp.StatusCode
}

// jwtClaims decodes a JWT's payload without checking it.
func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLoginWithoutSecondFactor: a person with only a password signs in
// through `oidcd admin login`, which asks for a second factor (the
// default --admin-acr). The provider refuses, and both the CLI's page in
// the browser and the terminal say what to do: enrol a second factor at
// the provider's /account (a link on the page), then log in again. The
// page is styled like the provider's, by a stylesheet its own content
// security policy allows by hash.
func TestLoginWithoutSecondFactor(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	base := c.URL(0)
	t.Chdir(t.TempDir())
	env := map[string]string{cli.EnvXDGConfigHome: t.TempDir()}
	const email, password = "new@example.com", "correct horse battery staple"
	adminCall(t, c, "POST", "/admin/v1/users", map[string]any{"email": email, "password": password}, nil, http.StatusCreated)

	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(context.Background(), []string{"--addr", base, "login", "--wait", "60s"}, func(k string) string { return env[k] }, nil, io.Discard, pw)
		pw.Close()
	}()
	var stderr strings.Builder
	var authURL string
	lines := bufio.NewScanner(pr)
	for authURL == "" && lines.Scan() {
		stderr.WriteString(lines.Text() + "\n")
		if l := strings.TrimSpace(lines.Text()); strings.HasPrefix(l, base+"/authorize?") {
			authURL = l
		}
	}
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(pr); rest <- string(b) }()
	if authURL == "" {
		t.Fatalf("no authorization URL printed; stderr:\n%s", stderr.String())
	}

	b := testcluster.NewBrowser(t)
	p := b.Follow(b.Get(authURL), base)
	p = b.Follow(b.Submit(p, map[string]string{"email": email, "password": password}, "method", "password"), base)
	loc := p.Location()
	if !strings.HasPrefix(loc, "http://127.0.0.1:") || !strings.Contains(loc, "error=access_denied") {
		t.Fatalf("want the provider's refusal sent to the CLI, got %d %q:\n%s", p.Status, loc, p.Body)
	}
	resp, err := http.Get(loc)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	html := string(body)

	account := c.Issuer() + "/account"
	for _, want := range []string{
		`<h1>A second factor is needed</h1>`,
		`Enrol a second factor (an authenticator app or a passkey) at <a href="` + account + `">` + account + `</a>, then run oidcd admin login again.`,
		`<code>access_denied: strong authentication required; no second factor enrolled</code>`,
		`<main class="card">`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the CLI's page lacks %q:\n%s", want, html)
		}
	}
	// Its one stylesheet is inline, and the CSP allows exactly it.
	csp := resp.Header.Get("Content-Security-Policy")
	i, j := strings.Index(html, "<style>"), strings.Index(html, "</style>")
	if i < 0 || j < i {
		t.Fatalf("no <style> on the page:\n%s", html)
	}
	sum := sha256.Sum256([]byte(html[i+len("<style>") : j]))
	if want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, want) || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q: want default-src 'none' and %s", csp, want)
	}
	if strings.Contains(html, "style=") || strings.Contains(html, "<script") || strings.Contains(html, "<link") {
		t.Errorf("the page has an inline style attribute, a script or a link:\n%s", html)
	}

	select {
	case code := <-done:
		if code != cli.ExitAuth {
			t.Errorf("login: exit %d, want %d", code, cli.ExitAuth)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("login did not return")
	}
	stderr.WriteString(<-rest)
	for _, want := range []string{
		"error: the sign-in failed: access_denied: strong authentication required; no second factor enrolled\n",
		"Administrators sign in with a second factor, and this account has none yet.\n",
		"Enrol a second factor (an authenticator app or a passkey) at\n\n  " + account + "\n\nthen run oidcd admin login again.\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the terminal lacks %q:\n%s", want, stderr.String())
		}
	}
}
