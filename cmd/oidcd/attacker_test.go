package main

// Black-box tests of the security issue's defects, against the built
// binary: each starts one `oidcd serve` process and plays the attacker
// through HTTP only, with a relying party built on go-oidc and oauth2.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/pquerna/otp/totp"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/testcluster"
)

var (
	builtOnce sync.Once
	builtBin  string
	builtErr  error
)

// builtBinary builds cmd/oidcd once per test binary.
func builtBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "oidcd-bin-")
		if err != nil {
			builtErr = err
			return
		}
		builtBin = filepath.Join(dir, "oidcd")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			builtErr = &buildError{err, out}
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtBin
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + string(e.out) }

// liveNode is one `oidcd serve` process on 127.0.0.1.
type liveNode struct {
	issuer, token, outbox, dir string
	raftAddr                   string
	cmd                        *exec.Cmd
}

// startLiveNode starts a single node with an admin token from the
// environment and a text-message outbox, and waits until it serves.
func startLiveNode(t *testing.T) *liveNode { return startNodeWith(t, true) }

// startDefaultNode starts a single node as the README's first command
// does: no cluster key, no admin token (it generates both).
func startDefaultNode(t *testing.T) *liveNode { return startNodeWith(t, false) }

func startNodeWith(t *testing.T, givenToken bool) *liveNode {
	t.Helper()
	bin := builtBinary(t)
	dir := t.TempDir()
	ports := freePorts(t, 3)
	n := &liveNode{
		issuer: "http://" + ports[0], outbox: filepath.Join(dir, "sms.jsonl"), dir: dir, raftAddr: ports[1],
	}
	if givenToken {
		n.token = strings.Repeat("a1", 24)
	}
	log, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(bin, "serve", "--issuer", n.issuer, "--http-addr", ports[0], "--raft-addr", ports[1],
		"--gossip-addr", ports[2], "--data-dir", filepath.Join(dir, "data"), "--sms-outbox", n.outbox)
	n.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if givenToken {
		n.cmd.Env = append(n.cmd.Env, "OIDCD_ADMIN_TOKEN="+n.token)
	}
	n.cmd.Stdout, n.cmd.Stderr = log, log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n.cmd.ProcessState == nil {
			stop(t, n.cmd)
		}
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("node log:\n%s", b)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(n.issuer + "/.well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("node did not serve discovery within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The first signing key comes from the leader's loop a moment later.
	for {
		if !givenToken && n.token == "" {
			if b, err := os.ReadFile(filepath.Join(dir, "data", "admin-token")); err == nil {
				n.token = strings.TrimSpace(string(b))
			}
		}
		if n.adminCode(t, "GET", "/keys", nil, nil) == 200 && n.jwksHasKey(t) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatal("no signing key within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *liveNode) jwksHasKey(t *testing.T) bool {
	resp, err := http.Get(n.issuer + "/.well-known/jwks.json")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var ks struct{ Keys []any }
	return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&ks) == nil && len(ks.Keys) > 0
}

// adminCode calls the admin API and returns the status, decoding into out.
func (n *liveNode) adminCode(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, n.issuer+"/admin/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+n.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// admin calls the admin API and fails unless it answers want.
func (n *liveNode) admin(t *testing.T, want int, method, path string, body, out any) {
	t.Helper()
	if got := n.adminCode(t, method, path, body, out); got != want {
		t.Fatalf("%s %s: got %d, want %d", method, path, got, want)
	}
}

// lastSMS is the newest code sent to phone, from the outbox.
func (n *liveNode) lastSMS(t *testing.T, phone string) string {
	t.Helper()
	f, err := os.Open(n.outbox)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m struct{ To, Code string }
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.To == phone {
			code = m.Code
		}
	}
	if code == "" {
		t.Fatalf("no text message to %s", phone)
	}
	return code
}

// site is what the admin provisions: one organization, a person with a
// password and a phone, and a first-party confidential client.
type site struct {
	n                      *liveNode
	org, user              string
	email, password, phone string
	rp                     *oauth2.Config
	verifier               *gooidc.IDTokenVerifier
	cb                     string
}

func provisionSite(t *testing.T, n *liveNode) *site {
	t.Helper()
	s := &site{n: n, email: "ann@example.com", password: "correct horse battery staple", phone: "+15551230001"}
	var org, user, client map[string]any
	n.admin(t, 201, "POST", "/organizations", map[string]any{"slug": "acme", "name": "Acme"}, &org)
	n.admin(t, 201, "POST", "/users", map[string]any{"email": s.email, "email_verified": true, "password": s.password, "phone": s.phone}, &user)
	s.org, s.user = org["id"].(string), user["id"].(string)
	n.admin(t, 201, "POST", "/memberships", map[string]any{"user_id": s.user, "org_id": s.org}, nil)
	cbSrv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(cbSrv.Close)
	s.cb = cbSrv.URL + "/callback"
	n.admin(t, 201, "POST", "/clients", map[string]any{"name": "App", "redirect_uris": []string{s.cb},
		"organization_id": s.org, "skip_consent": true}, &client)
	p, err := gooidc.NewProvider(context.Background(), n.issuer)
	if err != nil {
		t.Fatal(err)
	}
	s.rp = &oauth2.Config{ClientID: client["client_id"].(string), ClientSecret: client["client_secret"].(string),
		Endpoint: p.Endpoint(), RedirectURL: s.cb, Scopes: []string{gooidc.ScopeOpenID}}
	s.verifier = p.Verifier(&gooidc.Config{ClientID: s.rp.ClientID})
	return s
}

// authorize sends b to /authorize with extra parameters, answers the
// first page with a password (or a text message when phone is set), and
// returns the page where the flow stopped: a redirect to the callback, or
// a page of the provider.
func (s *site) authorize(t *testing.T, b *testcluster.Browser, phone string, extra ...oauth2.AuthCodeOption) *testcluster.Page {
	t.Helper()
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(pkceVerifier), gooidc.Nonce("nonce-0123456789")}, extra...)
	page := b.Follow(b.Get(s.rp.AuthCodeURL("state-0123456789", opts...)), s.n.issuer)
	if page.Location() != "" || !strings.Contains(page.Body, `name="password"`) {
		return page
	}
	if phone != "" {
		page = b.Follow(b.Submit(page, map[string]string{"phone": phone}, "method", "sms"), s.n.issuer)
		page = b.Submit(page, map[string]string{"code": s.n.lastSMS(t, phone)}, "", "")
	} else {
		page = b.Submit(page, map[string]string{"email": s.email, "password": s.password}, "method", "password")
	}
	return b.Follow(page, s.n.issuer)
}

const pkceVerifier = "verifier-0123456789-0123456789-0123456789-0123"

// tokenClaims exchanges the code of a callback redirect and returns the
// acr and amr of the ID token, verified by go-oidc.
func (s *site) tokenClaims(t *testing.T, page *testcluster.Page) (string, []string) {
	t.Helper()
	loc, err := url.Parse(page.Location())
	if err != nil || !strings.HasPrefix(page.Location(), s.cb) || loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %q\n%s", page.Status, page.Location(), page.Body)
	}
	tok, err := s.rp.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkceVerifier))
	if err != nil {
		t.Fatal(err)
	}
	idt, err := s.verifier.Verify(context.Background(), tok.Extra("id_token").(string))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ACR string   `json:"acr"`
		AMR []string `json:"amr"`
	}
	idt.Claims(&c)
	return c.ACR, c.AMR
}

func (s *site) factors(t *testing.T) map[string]any {
	t.Helper()
	var f map[string]any
	s.n.admin(t, 200, "GET", "/users/"+s.user+"/factors", nil, &f)
	return f
}

const acrMFA = "urn:service:sso:acr:mfa"

// TestPasswordOnlyAttackerCannotReachMFA: someone with only Ann's password
// (or only her phone) signs in at /account in a fresh browser and tries
// every change of a second factor. None is made; each asks for the
// factor she has (or the password), and no ID token with acr mfa can be
// obtained.
func TestPasswordOnlyAttackerCannotReachMFA(t *testing.T) {
	n := startLiveNode(t)
	s := provisionSite(t, n)
	var totp struct{ Secret string }
	n.admin(t, 201, "POST", "/users/"+s.user+"/totp", nil, &totp)
	before := s.factors(t)

	accountHome := func(t *testing.T, b *testcluster.Browser) *testcluster.Page {
		t.Helper()
		page := b.Get(n.issuer + "/account")
		if strings.Contains(page.Body, `name="password"`) {
			page = b.Submit(page, map[string]string{"email": s.email, "password": s.password}, "method", "password")
		}
		if page.Status != 200 || !strings.Contains(page.Body, `value="totp-setup"`) {
			t.Fatalf("account home: %d\n%s", page.Status, page.Body)
		}
		return page
	}
	t.Run("password only", func(t *testing.T) {
		b := testcluster.NewBrowser(t)
		for _, action := range []string{"totp-setup", "totp-remove", "recovery-new"} {
			page := b.Submit(accountHome(t, b), nil, "action", action)
			if strings.Contains(page.Body, "totp-secret") || strings.Contains(page.Body, "recovery-codes") ||
				!strings.Contains(page.Body, `value="otp"`) {
				t.Fatalf("%s with the password alone: %d, want the second-factor check\n%s", action, page.Status, page.Body)
			}
			// A wrong code does not open the gate.
			page = b.Submit(page, map[string]string{"code": "000000"}, "method", "otp")
			if page.Status != http.StatusBadRequest || strings.Contains(page.Body, "Confirmed") {
				t.Fatalf("%s, wrong code: %d", action, page.Status)
			}
		}
		if after := s.factors(t); !equalJSON(before, after) {
			t.Fatalf("factors changed: %v -> %v", before, after)
		}
		// The application asks for mfa: the attacker meets the code page
		// and never gets a code.
		page := s.authorize(t, b, "", oauth2.SetAuthURLParam("acr_values", acrMFA))
		if page.Location() != "" || !strings.Contains(page.Body, `value="otp"`) {
			t.Fatalf("mfa asked of a password-only session: %d %q", page.Status, page.Location())
		}
	})
	t.Run("text message only", func(t *testing.T) {
		b := testcluster.NewBrowser(t)
		page := s.authorize(t, b, s.phone)
		if acr, amr := s.tokenClaims(t, page); acr != "urn:service:sso:acr:phone" || len(amr) != 1 {
			t.Fatalf("text-message sign-in: acr %q amr %v", acr, amr)
		}
		home := b.Get(n.issuer + "/account")
		if !strings.Contains(home.Body, `value="totp-setup"`) {
			t.Fatalf("account home after a text-message sign-in: %d\n%s", home.Status, home.Body)
		}
		page = b.Submit(home, nil, "action", "totp-setup")
		if strings.Contains(page.Body, "totp-secret") || !strings.Contains(page.Body, `name="password"`) {
			t.Fatalf("totp-setup from a text-message session: %d, want the password asked\n%s", page.Status, page.Body)
		}
		if after := s.factors(t); !equalJSON(before, after) {
			t.Fatalf("factors changed: %v -> %v", before, after)
		}
	})
}

// TestFactorChangeEndsOtherSessions: Ann, with her password and her
// authenticator app, replaces her recovery codes on /account; her other
// browser's session ends (prompt=none gives login_required) while the one
// that made the change goes on.
func TestFactorChangeEndsOtherSessions(t *testing.T) {
	n := startLiveNode(t)
	s := provisionSite(t, n)
	var totp struct{ Secret string }
	n.admin(t, 201, "POST", "/users/"+s.user+"/totp", nil, &totp)

	other := testcluster.NewBrowser(t)
	s.tokenClaims(t, s.authorize(t, other, ""))

	b := testcluster.NewBrowser(t)
	page := b.Get(n.issuer + "/account")
	page = b.Submit(page, map[string]string{"email": s.email, "password": s.password}, "method", "password")
	page = b.Submit(page, nil, "action", "recovery-new")
	code, err := totpNow(totp.Secret)
	if err != nil {
		t.Fatal(err)
	}
	// The right code: the change that asked for it goes on.
	page = b.Submit(page, map[string]string{"code": code}, "method", "otp")
	if !strings.Contains(page.Body, "recovery-codes") {
		t.Fatalf("recovery-new after the factor: %d\n%s", page.Status, page.Body)
	}
	none := oauth2.SetAuthURLParam("prompt", "none")
	if q := callbackQuery(t, s, s.authorize(t, other, "", none)); q.Get("error") != "login_required" {
		t.Fatalf("the other browser after a factor change: %v", q)
	}
	if q := callbackQuery(t, s, s.authorize(t, b, "", none)); q.Get("code") == "" {
		t.Fatalf("the browser that made the change: %v", q)
	}
}

// TestPasswordResetEndsSessions: after the admin changes Ann's password,
// her existing SSO session no longer signs in silently.
func TestPasswordResetEndsSessions(t *testing.T) {
	n := startLiveNode(t)
	s := provisionSite(t, n)
	b := testcluster.NewBrowser(t)
	s.tokenClaims(t, s.authorize(t, b, ""))
	none := oauth2.SetAuthURLParam("prompt", "none")
	if q := callbackQuery(t, s, s.authorize(t, b, "", none)); q.Get("code") == "" {
		t.Fatalf("silent sign-in before the reset: %v", q)
	}
	n.admin(t, 200, "PATCH", "/users/"+s.user, map[string]any{"password": "a new and different passphrase"}, nil)
	if q := callbackQuery(t, s, s.authorize(t, b, "", none)); q.Get("error") != "login_required" {
		t.Fatalf("silent sign-in after the reset: %v, want login_required", q)
	}
}

func callbackQuery(t *testing.T, s *site, page *testcluster.Page) url.Values {
	t.Helper()
	if !strings.HasPrefix(page.Location(), s.cb) {
		t.Fatalf("no redirect to the callback: %d %q\n%s", page.Status, page.Location(), page.Body)
	}
	u, _ := url.Parse(page.Location())
	return u.Query()
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// totpNow is the authenticator app's code at this moment.
func totpNow(secret string) (string, error) { return totp.GenerateCode(secret, time.Now()) }

// adminCodeWith is the status of GET /admin/v1/organizations with token.
func (n *liveNode) adminCodeWith(t *testing.T, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", n.issuer+"/admin/v1/organizations", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
