package node_test

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/testkit/freeport"
	"github.com/oidcd/oidcd/testcluster"
)

const (
	apache2Path        = "/usr/sbin/apache2"
	apacheModulesDir   = "/usr/lib/apache2/modules"
	modAuthOpenIDCPath = apacheModulesDir + "/mod_auth_openidc.so"
)

// needApacheOIDC skips the test without Debian's apache2 and
// libapache2-mod-auth-openidc, or fails it under CI.
func needApacheOIDC(t *testing.T) {
	t.Helper()
	for _, p := range []string{apache2Path, modAuthOpenIDCPath} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found (scripts/ensure-apache-oidc.sh)", p)
			}
			t.Skipf("%s not found; run scripts/ensure-apache-oidc.sh", p)
		}
	}
}

// apacheRP is Debian's Apache with mod_auth_openidc, configured by the
// repository's deploy/apache/oidcd-mod_auth_openidc.conf, on 127.0.0.1.
// The application behind /app/ is a static page whose response headers
// echo what the module hands an application: X-Remote-User (REMOTE_USER),
// X-Sub, X-Email and X-Organization (the OIDC_CLAIM_* variables).
type apacheRP struct {
	url string // http://127.0.0.1:port
	dir string // ServerRoot: the configuration, the page, the logs
}

// startApache runs Apache with the recipe until the test ends, with the
// recipe's two example addresses replaced by issuer and 127.0.0.1:port
// and its secrets defined, and waits until it listens.
func startApache(t *testing.T, port, issuer, clientID, secret string) *apacheRP {
	t.Helper()
	needApacheOIDC(t)
	a := &apacheRP{url: "http://127.0.0.1:" + port, dir: t.TempDir()}
	b, err := os.ReadFile(filepath.Join("..", "deploy", "apache", "oidcd-mod_auth_openidc.conf"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := string(b)
	for _, s := range [][2]string{{"https://sso.example.com", issuer}, {"https://app.example.com", a.url}} {
		if !strings.Contains(recipe, s[0]) {
			t.Fatalf("deploy/apache/oidcd-mod_auth_openidc.conf has no %q to substitute", s[0])
		}
		recipe = strings.ReplaceAll(recipe, s[0], s[1])
	}
	htdocs := filepath.Join(a.dir, "htdocs")
	for name, body := range map[string]string{"app/index.html": "<p>the application</p>\n", "loggedout.html": "<p>signed out</p>\n"} {
		p := filepath.Join(htdocs, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lines := []string{
		fmt.Sprintf("ServerRoot %q", a.dir),
		"ServerName 127.0.0.1",
		"Listen 127.0.0.1:" + port,
		fmt.Sprintf("PidFile %q", filepath.Join(a.dir, "apache2.pid")),
		fmt.Sprintf("Mutex file:%s default", a.dir),
		fmt.Sprintf("ErrorLog %q", filepath.Join(a.dir, "error.log")),
		"LogLevel warn auth_openidc:info",
		`LogFormat "%r %>s" plain`,
		fmt.Sprintf("CustomLog %q plain", filepath.Join(a.dir, "access.log")),
		"StartServers 1",
		"ServerLimit 1",
		"ThreadsPerChild 16",
		"MaxRequestWorkers 16",
		"MinSpareThreads 1",
		"MaxSpareThreads 16",
	}
	for _, m := range []string{"mpm_event", "authn_core", "authz_core", "authz_user", "dir", "mime", "headers", "auth_openidc"} {
		lines = append(lines, fmt.Sprintf("LoadModule %s_module %s/mod_%s.so", m, apacheModulesDir, m))
	}
	if os.Geteuid() == 0 {
		// Apache's children drop to www-data, which must reach htdocs
		// through the test's temporary directories (0700 otherwise).
		lines = append(lines, "User www-data", "Group www-data")
		for d := a.dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()) && d != filepath.Clean(os.TempDir()); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	lines = append(lines,
		"TypesConfig /etc/mime.types",
		"DirectoryIndex index.html",
		fmt.Sprintf("DocumentRoot %q", htdocs),
		fmt.Sprintf("<Directory %q>\n    Require all granted\n</Directory>", htdocs),
		// The recipe reads its secrets from Apache variables.
		"Define OIDCD_CLIENT_ID "+clientID,
		"Define OIDCD_CLIENT_SECRET "+secret,
		"Define OIDCD_PASSPHRASE test-passphrase-0123456789abcdef",
		recipe,
		// The application: what the module passes, echoed as headers.
		`<Location /app/>
    Header set X-Remote-User "expr=%{REMOTE_USER}"
    Header set X-Sub "expr=%{reqenv:OIDC_CLAIM_sub}"
    Header set X-Email "expr=%{reqenv:OIDC_CLAIM_email}"
    Header set X-Organization "expr=%{reqenv:OIDC_CLAIM_organization_id}"
</Location>`)
	conf := filepath.Join(a.dir, "apache2.conf")
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(apache2Path, "-d", a.dir, "-f", conf, "-DFOREGROUND")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // the parent stops its children
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("apache2:\n%s\nerror.log:\n%s", out.String(), a.log(t, "error.log"))
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return a
		}
		select {
		case <-exited:
			t.Fatalf("apache2 exited:\n%s\n%s", out.String(), a.log(t, "error.log"))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("apache2 did not listen within 10 s:\n%s", out.String())
		}
	}
}

// log is one of Apache's log files ("" before it exists).
func (a *apacheRP) log(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(a.dir, name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// version is the module's name and version as it logs them when it
// starts ("mod_auth_openidc-2.4.12.3").
func (a *apacheRP) version(t *testing.T) string {
	t.Helper()
	for _, f := range strings.Fields(a.log(t, "error.log")) {
		if strings.HasPrefix(f, "mod_auth_openidc-") {
			return f
		}
	}
	return "mod_auth_openidc (version not logged)"
}

// backchannel is the access log's line for each back-channel logout
// request Apache has answered: "POST /app/redirect_uri?logout=backchannel
// HTTP/1.1 <status>".
func (a *apacheRP) backchannel(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(a.log(t, "access.log"), "\n") {
		if strings.Contains(l, "logout=backchannel") {
			out = append(out, l)
		}
	}
	return out
}

// openApp opens /app/ in b and follows every redirect on 127.0.0.1 (the
// module's to the node, the node's back to the module), stopping at the
// first page: the application, or a page of the node.
func (a *apacheRP) openApp(b *testcluster.Browser) *testcluster.Page {
	return b.Follow(b.Get(a.url+"/app/"), "http://127.0.0.1:")
}

// signIn opens /app/ in b and signs in at node as email with pw,
// consenting when asked; it returns the application's page.
func (a *apacheRP) signIn(t *testing.T, c *testcluster.Cluster, b *testcluster.Browser, email, pw string) *testcluster.Page {
	t.Helper()
	page := a.openApp(b)
	for i := 0; i < 4 && strings.HasPrefix(page.URL.String(), c.URL(0)); i++ {
		switch {
		case strings.Contains(page.Body, `name="password"`):
			page = b.Submit(page, map[string]string{"email": email, "password": pw}, "method", "password")
		case strings.Contains(page.Body, `value="allow"`):
			page = b.Submit(page, nil, "decision", "allow")
		default:
			t.Fatalf("unexpected page %d at %s:\n%s", page.Status, page.URL, page.Body)
		}
		page = b.Follow(page, "http://127.0.0.1:")
	}
	a.wantApp(t, page, "after sign-in")
	return page
}

// wantApp fails unless page is the application's, served to a signed-in
// person.
func (a *apacheRP) wantApp(t *testing.T, page *testcluster.Page, when string) {
	t.Helper()
	if page.Status != 200 || page.URL.String() != a.url+"/app/" || !strings.Contains(page.Body, "the application") {
		t.Fatalf("%s: %d at %s, want the application at %s/app/\n%s", when, page.Status, page.URL, a.url, page.Body)
	}
}

// htmlBrowser is a browser that says it accepts HTML, as every browser
// does: the module answers a request that does not (an XMLHttpRequest, a
// script) 401 instead of sending it to sign in.
func htmlBrowser(t *testing.T) *testcluster.Browser {
	b := testcluster.NewBrowser(t)
	b.Client.Transport = withHeaders(b.Client.Transport, "Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	return b
}

// asksSignIn reports whether page is the node's sign-in page.
func asksSignIn(c *testcluster.Cluster, page *testcluster.Page) bool {
	return page.Status == 200 && strings.HasPrefix(page.URL.String(), c.URL(0)+"/") && strings.Contains(page.Body, `name="password"`)
}

// freeLoopbackPort is a port of 127.0.0.1 that is free for now.

// TestApacheModAuthOpenIDC runs the recipe of docs/application-developers.md
// ("Apache with mod_auth_openidc") with Debian's module against a node:
// sign-in with the claims an application reads, Apache's session ending
// with the ID token and coming back without a page, RP-initiated logout,
// and back-channel logout with and without sid.
//
// The node's clock runs 52 s behind Apache's, so the tokens of the client
// (60 s, the shortest lifetime a client may have) expire tokenLife after
// they are issued, by Apache's clock: the test sees what the module does
// at expiry without waiting a minute.
func TestApacheModAuthOpenIDC(t *testing.T) {
	needApacheOIDC(t)
	const tokenLife = 8 * time.Second
	c := testcluster.New(t, testcluster.Options{Now: func() time.Time { return time.Now().Add(tokenLife - 60*time.Second) }})
	tok := testcluster.AdminToken
	port := strconv.Itoa(freeport.TCP(t))
	app := "http://127.0.0.1:" + port

	var org, cl map[string]any
	do(t, c, "POST", "/admin/v1/organizations", tok, map[string]any{"slug": "alpha", "name": "Alpha"}, &org)
	orgID, _ := org["id"].(string)
	people := map[string]string{"ann@example.com": "correct horse battery", "bob@example.com": "battery staple horse"}
	ids := map[string]string{}
	for email, pw := range people {
		var u map[string]any
		do(t, c, "POST", "/admin/v1/users", tok, map[string]any{"email": email, "email_verified": true, "password": pw}, &u)
		ids[email], _ = u["id"].(string)
		if resp := do(t, c, "POST", "/admin/v1/memberships", tok, map[string]any{"user_id": ids[email], "org_id": orgID}, nil); resp.StatusCode != 201 {
			t.Fatalf("membership: %d", resp.StatusCode)
		}
	}
	annID, bobID := ids["ann@example.com"], ids["bob@example.com"]
	// Registered as docs/application-developers.md says: the module's
	// redirect URI and the page after sign-out as redirect URIs, its
	// back-channel endpoint, and a rate limit of its own (every sign-in
	// and sign-out reaches the token or revocation endpoint from Apache's
	// one address).
	do(t, c, "POST", "/admin/v1/clients", tok, map[string]any{
		"name":                   "Apache",
		"organization_id":        orgID,
		"redirect_uris":          []string{app + "/app/redirect_uri", app + "/loggedout.html"},
		"scopes":                 []string{"openid", "email", "profile"},
		"backchannel_logout_uri": app + "/app/redirect_uri?logout=backchannel",
		"access_token_ttl":       60,
		"rate_limit":             "600/60s",
	}, &cl)
	clientID, _ := cl["client_id"].(string)
	secret, _ := cl["client_secret"].(string)
	if clientID == "" || secret == "" {
		t.Fatalf("client: %v", cl)
	}
	a := startApache(t, port, c.Issuer(), clientID, secret)

	// Sign-in: the page gets the person's sub as REMOTE_USER and the
	// claims of the ID token and of userinfo.
	bAnn, bBob := htmlBrowser(t), htmlBrowser(t)
	bobSignIn := time.Now()
	for _, s := range []struct {
		b         *testcluster.Browser
		email, id string
	}{{bBob, "bob@example.com", bobID}, {bAnn, "ann@example.com", annID}} {
		p := a.signIn(t, c, s.b, s.email, people[s.email])
		if got := [4]string{p.Header.Get("X-Remote-User"), p.Header.Get("X-Sub"), p.Header.Get("X-Email"), p.Header.Get("X-Organization")}; got != [4]string{s.id, s.id, s.email, orgID} {
			t.Fatalf("claims at the application: got %q, want REMOTE_USER and sub %s, email %s, organization %s", got, s.id, s.email, orgID)
		}
	}
	signedIn := time.Now()

	// A logout token without sid (the account erased) is answered 200 and
	// ignored by Debian's 2.4.12: Apache looks sessions up by the ID
	// token's sid only (sub-only tokens are matched from 2.4.20 on). Bob
	// keeps Apache's session until it ends with the ID token.
	if resp := do(t, c, "DELETE", "/admin/v1/users/"+bobID, tok, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("erase: %d", resp.StatusCode)
	}
	waitUntil(t, "the sub-only logout token at Apache", 5*time.Second, func() bool { return len(a.backchannel(t)) >= 1 })
	if got := a.backchannel(t); len(got) != 1 || !strings.HasSuffix(got[0], " 200") {
		t.Fatalf("back-channel requests: got %q, want one answered 200", got)
	}
	p := a.openApp(bBob)
	if d := time.Since(bobSignIn); d > tokenLife-2*time.Second {
		t.Fatalf("too slow to tell: %v since bob's sign-in, his ID token may have expired", d)
	}
	if p.Status != 200 || p.URL.String() != app+"/app/" || p.Header.Get("X-Sub") != bobID {
		t.Fatalf("%s: after a logout token without sid, the erased person got %d at %s, want the application as before: "+
			"if this version matches sub-only tokens, docs/application-developers.md must say so", a.version(t), p.Status, p.URL)
	}
	t.Logf("%s, a logout token without sid: %s; %s", a.version(t), a.backchannel(t)[0], lastLine(a.log(t, "error.log"), "logout token"))

	// Apache's session ends with the ID token (OIDCSessionMaxDuration 0);
	// the next request goes to the node, which signs ann in again
	// without a page while her session lives. Bob, erased, must sign in.
	time.Sleep(time.Until(signedIn.Add(tokenLife + 1500*time.Millisecond)))
	p = bAnn.Get(app + "/app/")
	if p.Status != 302 || !strings.HasPrefix(p.Location(), c.URL(0)+"/authorize?") {
		t.Fatalf("ann after her ID token expired: %d %q, want a redirect to the node's /authorize", p.Status, p.Location())
	}
	p = bAnn.Follow(p, "http://127.0.0.1:")
	a.wantApp(t, p, "ann signed in again without a page")
	if got := p.Header.Get("X-Sub"); got != annID {
		t.Fatalf("sub after the silent sign-in: got %q, want %q", got, annID)
	}
	if p = a.openApp(bBob); !asksSignIn(c, p) {
		t.Fatalf("erased bob after his ID token expired: %d at %s, want the node's sign-in page", p.Status, p.URL)
	}

	// RP-initiated logout: the module's logout URL ends Apache's session,
	// sends the browser to the node's end-session endpoint with the ID
	// token as hint, and the node ends ann's session and sends her back.
	back := app + "/loggedout.html"
	p = bAnn.Follow(bAnn.Get(app+"/app/redirect_uri?logout="+url.QueryEscape(back)), "http://127.0.0.1:")
	if p.Status != 200 || p.URL.String() != back {
		t.Fatalf("sign-out ended at %d %s, want %s\n%s", p.Status, p.URL, back, p.Body)
	}
	if p = a.openApp(bAnn); !asksSignIn(c, p) {
		t.Fatalf("after sign-out: %d at %s, want the node's sign-in page", p.Status, p.URL)
	}

	// A logout token with sid (a password reset ends every session of the
	// person) ends Apache's session: the next request goes to the node,
	// whose session ended too.
	annSignIn := time.Now()
	a.signIn(t, c, bAnn, "ann@example.com", people["ann@example.com"])
	if resp := do(t, c, "PATCH", "/admin/v1/users/"+annID, tok, map[string]any{"password": "a new password, reset"}, nil); resp.StatusCode != 200 {
		t.Fatalf("password reset: %d", resp.StatusCode)
	}
	// Asked before the ID token's expiry, so only the logout token can
	// have ended Apache's session.
	for deadline := annSignIn.Add(tokenLife - 2*time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Apache's session outlived the logout token with sid: %d\nback-channel: %q", p.Status, a.backchannel(t))
		}
		if p = bAnn.Get(app + "/app/"); p.Status == 302 {
			break
		}
	}
	if p = bAnn.Follow(p, "http://127.0.0.1:"); !asksSignIn(c, p) {
		t.Fatalf("after the password reset: %d at %s, want the node's sign-in page", p.Status, p.URL)
	}
	for _, l := range a.backchannel(t) {
		if !strings.HasSuffix(l, " 200") {
			t.Fatalf("back-channel request answered: %q", l)
		}
	}
	// No error, and every call from Apache to the token and revocation
	// endpoints (four code exchanges, two revocations) succeeded.
	for _, l := range strings.Split(a.log(t, "error.log"), "\n") {
		if strings.Contains(l, ":error]") || strings.Contains(l, "failed") {
			t.Errorf("Apache's error.log: %s", l)
		}
	}
}

// lastLine is the last line of s that contains sub ("" when none).
func lastLine(s, sub string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) {
			return lines[i]
		}
	}
	return ""
}
