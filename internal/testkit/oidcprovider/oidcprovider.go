// Package oidcprovider starts a real, certified upstream OpenID provider
// for oidcd's federation tests: oidc-provider (panva's, OpenID Certified,
// which nobody here wrote) under Node (upstream.mjs), on a loopback port.
// A federation that only ever met a provider written beside it would share
// that provider's misreadings of the protocol; this one is a widely used
// implementation that conforms.
//
// The provider's issuer is http://127.0.0.1:<port>. It signs ID tokens with
// a key made at start (RS256 by default, or ES256 or PS256), requires PKCE
// (S256) of every client, puts RFC 9207's iss into every authorization
// response unless Config.NoIssParam, and releases email and email_verified
// with scope "email", name with "profile", and groups with a scope of its
// own, "groups". The ID token carries these claims and the account's amr.
// Its sign-in page is a plain form (LoginField, PasswordField, SubmitID)
// and consent is approved without a page.
//
// scripts/ensure-node.sh installs Node and the locked package (npm ci into
// node_modules beside this file); without them Start skips the test, or
// fails it when the environment variable CI is "true".
package oidcprovider

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/testkit/freeport"
)

// The sign-in page's form, as a test drives it: it posts to the page's
// interaction URL with the account's sub or email in LoginField and its
// password in PasswordField, submitted by the button with id SubmitID. A
// wrong password shows the form again with the element ErrorID. The
// end-session confirmation page signs out with the button LogoutButtonID
// (name "logout", value "yes").
const (
	LoginField     = "login"
	PasswordField  = "password"
	SubmitID       = "submit"
	ErrorID        = "error"
	LogoutButtonID = "logout"
)

// Scopes are the scopes the provider knows.
var Scopes = []string{"openid", "email", "profile", "groups"}

// Client is a relying party registered at the provider.
type Client struct {
	ID, Secret             string
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	// BackchannelLogoutURI, when set, receives a logout token (with sid:
	// backchannel_logout_session_required is true) when a session the
	// client has a part in ends.
	BackchannelLogoutURI string
	// AuthMethod is the client's token_endpoint_auth_method:
	// "client_secret_basic" (when empty) or "client_secret_post".
	AuthMethod string
}

// Account is a person who can sign in at the provider, by Sub or Email.
type Account struct {
	Sub, Password, Email string
	EmailVerified        bool
	Name                 string
	Groups               []string
	// AMR is the ID token's amr claim, such as ["pwd"] or ["pwd", "otp"];
	// none when empty.
	AMR []string
}

// Config is what the provider starts with.
type Config struct {
	Clients  []Client
	Accounts []Account
	// Alg signs ID tokens and logout tokens: "RS256" (when empty), "ES256"
	// or "PS256".
	Alg string
	// NoIssParam leaves RFC 9207's iss out of authorization responses and
	// says so in discovery, as a provider that predates it does.
	NoIssParam bool
}

// Upstream is a running provider.
type Upstream struct {
	issuer string
	token  string
	stderr *syncBuffer
}

// Issuer is the provider's issuer, http://127.0.0.1:<port>.
func (u *Upstream) Issuer() string { return u.issuer }

// Stderr is what the provider has written to stderr so far.
func (u *Upstream) Stderr() string { return u.stderr.String() }

// Sent is one logout token EndSessions had the provider deliver.
type Sent struct {
	ClientID string `json:"client_id"`
	SID      string `json:"sid"`
	URI      string `json:"uri"`
}

type endSessionsAnswer struct {
	Sessions int    `json:"sessions"`
	Sent     []Sent `json:"sent"`
	Errors   []struct {
		ClientID string `json:"client_id"`
		Error    string `json:"error"`
	} `json:"errors"`
}

// EndSessions ends every session of the account sub at the provider, as
// an administrator's sign-out there does: oidc-provider's own
// Client#backchannelLogout sends each client the account signed in to
// that has a BackchannelLogoutURI a logout token (sub, sid, events), and
// the sessions and their grants are gone. sent is how many tokens were
// delivered (answered 200 or 204); err says which were not.
func (u *Upstream) EndSessions(sub string) (sent int, err error) {
	req, err := http.NewRequest("POST", u.issuer+"/test/end-sessions?"+url.Values{"sub": {sub}}.Encode(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+u.token)
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("oidcprovider: end sessions of %s: %s: %s", sub, resp.Status, bytes.TrimSpace(body))
	}
	var a endSessionsAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return 0, fmt.Errorf("oidcprovider: end sessions of %s: %q: %v", sub, body, err)
	}
	var errs []error
	for _, e := range a.Errors {
		errs = append(errs, fmt.Errorf("oidcprovider: logout token to %s: %s", e.ClientID, e.Error))
	}
	return len(a.Sent), errors.Join(errs...)
}

// dir is the directory of this file, where upstream.mjs and node_modules are.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// need returns the node binary, or skips the test (fails it under
// CI=true) when node or oidc-provider is not installed.
func need(t testing.TB) string {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir(), "node_modules", "oidc-provider", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("oidcprovider: node or the npm package oidc-provider is missing (run scripts/ensure-node.sh): %v", err)
		}
		t.Skipf("oidcprovider: node or the npm package oidc-provider is missing; run scripts/ensure-node.sh (%v)", err)
	}
	return nodeBin
}

// The configuration as upstream.mjs reads it.
type jsConfig struct {
	Port       int         `json:"port"`
	Alg        string      `json:"alg,omitempty"`
	NoIssParam bool        `json:"no_iss_param,omitempty"`
	TestToken  string      `json:"test_token"`
	Clients    []jsClient  `json:"clients"`
	Accounts   []jsAccount `json:"accounts"`
}

type jsClient struct {
	ClientID               string   `json:"client_id"`
	ClientSecret           string   `json:"client_secret"`
	RedirectURIs           []string `json:"redirect_uris"`
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris,omitempty"`
	BackchannelLogoutURI   string   `json:"backchannel_logout_uri,omitempty"`
	AuthMethod             string   `json:"token_endpoint_auth_method,omitempty"`
}

type jsAccount struct {
	Sub           string   `json:"sub"`
	Password      string   `json:"password"`
	Email         string   `json:"email,omitempty"`
	EmailVerified bool     `json:"email_verified"`
	Name          string   `json:"name,omitempty"`
	Groups        []string `json:"groups"`
	AMR           []string `json:"amr,omitempty"`
}

// readyTimeout bounds the wait for READY: Node and oidc-provider load in
// well under a second, and an RSA key takes little more.
const readyTimeout = 30 * time.Second

// Start runs a provider with cfg until the test ends: SIGTERM at cleanup,
// and a kill when it has not exited within 5 s. The provider's stderr goes
// to the test log when the test fails.
func Start(t testing.TB, cfg Config) *Upstream {
	t.Helper()
	nodeBin := need(t)
	switch cfg.Alg {
	case "", "RS256", "ES256", "PS256":
	default:
		t.Fatalf("oidcprovider: Alg %q: want RS256, ES256 or PS256", cfg.Alg)
	}
	for _, c := range cfg.Clients {
		switch c.AuthMethod {
		case "", "client_secret_basic", "client_secret_post":
		default:
			t.Fatalf("oidcprovider: client %s: AuthMethod %q: want client_secret_basic or client_secret_post", c.ID, c.AuthMethod)
		}
	}
	tok := make([]byte, 32)
	rand.Read(tok)
	jc := jsConfig{Alg: cfg.Alg, NoIssParam: cfg.NoIssParam, TestToken: hex.EncodeToString(tok),
		Clients: []jsClient{}, Accounts: []jsAccount{}}
	for _, c := range cfg.Clients {
		jc.Clients = append(jc.Clients, jsClient{c.ID, c.Secret, orEmpty(c.RedirectURIs), c.PostLogoutRedirectURIs, c.BackchannelLogoutURI, c.AuthMethod})
	}
	for _, a := range cfg.Accounts {
		jc.Accounts = append(jc.Accounts, jsAccount{a.Sub, a.Password, a.Email, a.EmailVerified, a.Name, orEmpty(a.Groups), a.AMR})
	}
	// freeport's port is free when picked, not when node binds it; a port
	// taken in between is a retry, not a failure.
	var lastErr error
	for range 3 {
		jc.Port = freeport.TCP(t)
		u, err := start(t, nodeBin, jc)
		if err == nil {
			return u
		}
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	t.Fatalf("oidcprovider: %v", lastErr)
	return nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

var errAddrInUse = errors.New("the port was taken")

func start(t testing.TB, nodeBin string, jc jsConfig) (*Upstream, error) {
	t.Helper()
	b, err := json.Marshal(jc)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(t.TempDir(), "upstream.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(nodeBin, "upstream.mjs", file)
	cmd.Dir = dir()
	stderr := &syncBuffer{}
	stdout := &syncBuffer{more: make(chan struct{}, 1)}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// Wait returns once the process has exited and its output is copied.
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	// stop says whether the process left by itself, with status 0, after
	// SIGTERM.
	stop := func() (clean bool) {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			return cmd.ProcessState.Success()
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
			return false
		}
	}

	issuer := "http://127.0.0.1:" + strconv.Itoa(jc.Port)
	deadline := time.After(readyTimeout)
	for line, ok := "", false; !ok; {
		select {
		case <-stdout.more:
			line, ok = strings.CutSuffix(stdout.String(), "\n")
			if ok && line != "READY "+issuer {
				stop()
				return nil, fmt.Errorf("upstream.mjs said %q, want %q; stderr:\n%s", line, "READY "+issuer, stderr)
			}
		case <-exited:
			if strings.Contains(stderr.String(), "EADDRINUSE") {
				return nil, fmt.Errorf("%w: port %d: %s", errAddrInUse, jc.Port, stderr)
			}
			return nil, fmt.Errorf("upstream.mjs exited before READY (%v); stdout %q; stderr:\n%s", cmd.ProcessState, stdout, stderr)
		case <-deadline:
			stop()
			return nil, fmt.Errorf("upstream.mjs printed no READY within %v; stderr:\n%s", readyTimeout, stderr)
		}
	}
	t.Cleanup(func() {
		if !stop() {
			t.Errorf("oidcprovider %s: upstream.mjs did not exit cleanly within 5 s of SIGTERM (%v)", issuer, cmd.ProcessState)
		}
		if t.Failed() {
			t.Logf("oidcprovider %s stderr:\n%s", issuer, stderr)
		}
	})
	return &Upstream{issuer: issuer, token: jc.TestToken, stderr: stderr}, nil
}

// syncBuffer is a bytes.Buffer the process writes while the test reads;
// more, when not nil, is signalled after each write.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	more chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	s.mu.Unlock()
	if s.more != nil {
		select {
		case s.more <- struct{}{}:
		default:
		}
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
