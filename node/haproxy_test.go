package node_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/testkit/htmlform"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

const haproxyPath = "/usr/sbin/haproxy"

// needHAProxy skips the test without HAProxy, or fails it under CI.
func needHAProxy(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(haproxyPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("haproxy not found at %s (scripts/ensure-haproxy.sh)", haproxyPath)
		}
		t.Skipf("haproxy not found at %s; run scripts/ensure-haproxy.sh", haproxyPath)
	}
}

// haproxy starts Debian's HAProxy with the repository's own HTTP-mode
// configuration (deploy/haproxy/haproxy.cfg) in front of backends,
// terminating TLS with certFile and keyFile on 127.0.0.1:port. It is
// stopped at the end of the test.
func haproxy(t *testing.T, port string, certFile, keyFile string, backends []string) {
	t.Helper()
	needHAProxy(t)
	cert, _ := os.ReadFile(certFile)
	key, _ := os.ReadFile(keyFile)
	pem := filepath.Join(t.TempDir(), "site.pem")
	if err := os.WriteFile(pem, append(cert, key...), 0o600); err != nil {
		t.Fatal(err)
	}
	startHAProxy(t, port, siteConfig(t, "haproxy.cfg", port, pem, backends))
}

// siteConfig is the repository's deploy/haproxy/<name> with only its
// addresses substituted: the listener by 127.0.0.1:port, the certificate
// by pem, and the example nodes 10.0.0.1 to 10.0.0.3 by backends (the
// last repeated when there are fewer). The tests run what the docs show.
func siteConfig(t *testing.T, name, port, pem string, backends []string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "haproxy", name))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	subst := func(old, new string) {
		t.Helper()
		if !strings.Contains(cfg, old) {
			t.Fatalf("deploy/haproxy/%s has no %q to substitute", name, old)
		}
		cfg = strings.ReplaceAll(cfg, old, new)
	}
	subst("bind :443", "bind 127.0.0.1:"+port)
	if pem != "" {
		subst("/etc/haproxy/site.pem", pem)
	}
	for i := range 3 {
		example := fmt.Sprintf("10.0.0.%d:", i+1)
		backend := backends[min(i, len(backends)-1)]
		host, bport, _ := net.SplitHostPort(backend)
		// The example's port (8080 or 8443) goes with its address.
		re := regexp.MustCompile(regexp.QuoteMeta(example) + `\d+`)
		if !re.MatchString(cfg) {
			t.Fatalf("deploy/haproxy/%s has no %s<port> to substitute", name, example)
		}
		cfg = re.ReplaceAllString(cfg, net.JoinHostPort(host, bport))
	}
	return cfg
}

// startHAProxy runs Debian's HAProxy with cfg until the test ends and
// waits for it to listen on 127.0.0.1:port. A port from site is handed
// over already bound (HAProxy's "bind fd@3"): were it freed for HAProxy
// to bind, another test's listener could take it in between.
func startHAProxy(t *testing.T, port, cfg string) {
	t.Helper()
	var inherited *os.File
	if ln := takeReserved(port); ln != nil {
		f, err := ln.File()
		ln.Close() // f is the same socket, still bound and listening
		if err != nil {
			t.Fatal(err)
		}
		inherited = f
		bind := "bind 127.0.0.1:" + port
		if !strings.Contains(cfg, bind) {
			t.Fatalf("the configuration has no %q to hand the reserved port to", bind)
		}
		cfg = strings.Replace(cfg, bind, "bind fd@3", 1)
	}
	cfgFile := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(haproxyPath, "-db", "-f", cfgFile)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if inherited != nil {
		cmd.ExtraFiles = []*os.File{inherited} // fd 3 in HAProxy
	}
	err := cmd.Start()
	if inherited != nil {
		inherited.Close() // HAProxy holds the socket now
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy:\n%s", out.String())
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy did not listen within 10 s:\n%s", out.String())
		}
	}
}

// from is a client whose connections leave from source address ip (on
// loopback, 127.0.0.0/8 is ours) and that trusts roots.
func from(ip string, roots *x509.CertPool) *http.Client {
	tr := testcluster.LoopbackTransport()
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}).DialContext
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// site is a TLS pair for 127.0.0.1, a pool of roots that trusts it, and a
// port on 127.0.0.1 for the balancer, kept bound for it.
func site(t *testing.T) (certFile, keyFile string, roots *x509.CertPool, port string) {
	t.Helper()
	certFile, keyFile, cert := node.WritePair(t, t.TempDir(), "site", 24*time.Hour)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	reserve(t, port, ln.(*net.TCPListener))
	return certFile, keyFile, roots, port
}

// reserved holds the balancer ports site picked, bound until startHAProxy
// hands them to HAProxy (or the test ends).
var reserved = struct {
	sync.Mutex
	m map[string]*net.TCPListener
}{m: map[string]*net.TCPListener{}}

func reserve(t *testing.T, port string, ln *net.TCPListener) {
	reserved.Lock()
	reserved.m[port] = ln
	reserved.Unlock()
	t.Cleanup(func() {
		if ln := takeReserved(port); ln != nil {
			ln.Close()
		}
	})
}

// takeReserved returns the listener site bound for port and forgets it,
// or nil.
func takeReserved(port string) *net.TCPListener {
	reserved.Lock()
	defer reserved.Unlock()
	ln := reserved.m[port]
	delete(reserved.m, port)
	return ln
}

// signInThrough signs w's person in to its confidential client from
// source address ip, through the balancer that p's endpoints name, with
// go-oidc and x/oauth2, and verifies the ID token.
func signInThrough(t *testing.T, c *testcluster.Cluster, p *gooidc.Provider, w world, ip string, roots *x509.CertPool) (*oauth2.Token, error) {
	t.Helper()
	cl := from(ip, roots)
	verifier := p.Verifier(&gooidc.Config{ClientID: w.confID})
	r := &rp{provider: p, verifier: verifier, oauth: oauth2.Config{ClientID: w.confID, ClientSecret: w.confSecret,
		Endpoint: p.Endpoint(), RedirectURL: w.cb, Scopes: []string{gooidc.ScopeOpenID}}}
	b := testcluster.NewBrowser(t)
	b.Client.Transport = cl.Transport
	pkce := oauth2.GenerateVerifier()
	q := signIn(t, c, b, r, w, pkce, "nonce-0123456789")
	ctx := gooidc.ClientContext(context.Background(), cl)
	tok, err := r.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		return nil, err
	}
	if _, err := verifier.Verify(ctx, tok.Extra("id_token").(string)); err != nil {
		t.Fatalf("ID token from %s: %v", ip, err)
	}
	return tok, nil
}

// withHeaders is rt adding the header pairs kv to every request: what a
// client writes itself.
func withHeaders(rt http.RoundTripper, kv ...string) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Add(kv[i], kv[i+1])
		}
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// perAddressRulesFollowTheClient checks through the balancer at issuer
// that the per-address rules count the real client whatever it writes
// itself: six token requests from one address, each naming another client
// in its own Forwarded and X-Forwarded-For (HAProxy in HTTP mode appends
// the real address to the latter and passes the former through; in TCP
// mode it sees neither), end in 429; ten wrong passwords from an attacker
// who names the person's address in both headers lock out only the
// attacker's address, and the person then signs in from the address the
// attacker named (signInFrom).
func perAddressRulesFollowTheClient(t *testing.T, p *gooidc.Provider, issuer string, w world, roots *x509.CertPool, signInFrom func(ip string) error) {
	t.Helper()
	one := from("127.0.0.20", roots)
	status := 0
	for i := range 6 {
		req, _ := http.NewRequest("POST", issuer+"/oauth2/token", strings.NewReader("grant_type=authorization_code&code=nope&redirect_uri="+w.cb))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Forwarded", fmt.Sprintf("for=198.51.100.%d", i+1))
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
		req.SetBasicAuth(w.confID, w.confSecret)
		resp, err := one.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		status = resp.StatusCode
	}
	if status != http.StatusTooManyRequests {
		t.Fatalf("the sixth token request from one address: got %d, want 429", status)
	}

	attacker := testcluster.NewBrowser(t)
	attacker.Client.Transport = withHeaders(from("127.0.0.30", roots).Transport,
		"Forwarded", "for=127.0.0.31", "X-Forwarded-For", "127.0.0.31")
	au := p.Endpoint().AuthURL + "?" + strings.Join([]string{"client_id=" + w.confID, "response_type=code", "scope=openid",
		"redirect_uri=" + w.cb, "state=state-0123456789", "code_challenge=" + oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()),
		"code_challenge_method=S256"}, "&")
	last := 0
	for range 11 {
		page := attacker.Follow(attacker.Get(au), issuer)
		page = attacker.Submit(page, map[string]string{"email": w.email, "password": "wrong"}, "method", "password")
		last = page.Status
	}
	if last != http.StatusTooManyRequests {
		t.Fatalf("the attacker's address after 10 wrong passwords: got %d, want 429", last)
	}
	if err := signInFrom("127.0.0.31"); err != nil {
		t.Fatalf("the person, from the address the attacker named: %v", err)
	}
}

// TestBehindHAProxy: three nodes behind a real HAProxy that terminates
// TLS and names the client in X-Forwarded-For, with --trusted-proxies set
// to it. Six people at six addresses sign in to one application through
// go-oidc within the minute and all succeed (the per-client-and-address
// token limit counts them apart); the sixth token request from one address
// gets 429; one address locked out of an account leaves another signing
// in; a Forwarded or X-Forwarded-For header the client writes itself
// moves neither (--proxy-header x-forwarded-for, the default); and after
// the leader is killed, every acknowledged sign-in's token still works
// through the balancer.
func TestBehindHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts haproxy")
	}
	certFile, keyFile, roots, port := site(t)
	issuer := "https://127.0.0.1:" + port
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) {
		cfg.Issuer = issuer
		cfg.TrustedProxies = "127.0.0.1/32"
		cfg.RateLimit = "5/60s"
	}})
	var backends []string
	for i := range c.Size() {
		backends = append(backends, strings.TrimPrefix(c.URL(i), "http://"))
	}
	haproxy(t, port, certFile, keyFile, backends)
	w := provision(t, c)

	ctx := gooidc.ClientContext(context.Background(), from("127.0.0.1", roots))
	p, err := gooidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatalf("discovery through haproxy: %v", err)
	}
	signInFrom := func(t *testing.T, ip string) (*oauth2.Token, error) {
		t.Helper()
		return signInThrough(t, c, p, w, ip, roots)
	}

	var tokens []*oauth2.Token
	for i := 2; i <= 7; i++ {
		tok, err := signInFrom(t, fmt.Sprintf("127.0.0.%d", i))
		if err != nil {
			t.Fatalf("sign-in %d of one client within the minute: %v", i-1, err)
		}
		tokens = append(tokens, tok)
	}

	perAddressRulesFollowTheClient(t, p, issuer, w, roots, func(ip string) error {
		_, err := signInFrom(t, ip)
		return err
	})

	// Kill the leader behind the balancer: every acknowledged sign-in's
	// token still works through it.
	c.Kill(c.WaitNewLeader())
	c.WaitNewLeader()
	for i, tok := range tokens {
		deadline := time.Now().Add(15 * time.Second)
		for {
			req, _ := http.NewRequest("GET", issuer+"/userinfo", nil)
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			resp, err := from("127.0.0.40", roots).Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				if resp.StatusCode == http.StatusUnauthorized {
					t.Fatalf("sign-in %d's token was lost with the leader: 401", i+1)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("sign-in %d's token: no 200 through haproxy 15 s after the leader died (last %v)", i+1, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// flowClient is a browser and relying party for a goroutine other than
// the test's: every step returns an error instead of failing the test.
type flowClient struct {
	hc       *http.Client
	rp       oauth2.Config
	verifier *gooidc.IDTokenVerifier
	email    string
	password string
	cb       string
}

// signIn runs one whole sign-in: authorize, the password form, the code
// exchange, the ID token's verification and userinfo.
func (f *flowClient) signIn(ctx context.Context) error {
	pkce := oauth2.GenerateVerifier()
	u := f.rp.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce), gooidc.Nonce("nonce-0123456789"))
	resp, err := f.hc.Get(u)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("authorize: %d", resp.StatusCode)
	}
	action, values, err := htmlform.FindIn(strings.NewReader(string(body)), "method", "password")
	if err != nil {
		return fmt.Errorf("sign-in form: %w", err)
	}
	values.Set("email", f.email)
	values.Set("password", f.password)
	values.Set("method", "password")
	target, _ := resp.Request.URL.Parse(action)
	resp, err = f.hc.PostForm(target.String(), values)
	if err != nil {
		return err
	}
	// What answered, should it fail: a page of ours names its reference
	// (the node's log line has it) and a balancer's own page says so.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode/100 != 3 || !strings.HasPrefix(loc, f.cb) {
		return fmt.Errorf("sign-in: %d %q (correlation id %q): %s", resp.StatusCode, loc,
			resp.Header.Get(httpx.HeaderCorrelationID), strings.Join(strings.Fields(string(answer)), " "))
	}
	q, _ := url.Parse(loc)
	tok, err := f.rp.Exchange(gooidc.ClientContext(ctx, f.hc), q.Query().Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		return fmt.Errorf("exchange: %w", err)
	}
	if _, err := f.verifier.Verify(ctx, tok.Extra("id_token").(string)); err != nil {
		return fmt.Errorf("ID token: %w", err)
	}
	req, _ := http.NewRequest("GET", strings.TrimSuffix(f.rp.Endpoint.AuthURL, "/authorize")+"/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err = f.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("userinfo: %d", resp.StatusCode)
	}
	return nil
}

// TestRollingRestartBehindHAProxy: three nodes behind HAProxy are
// restarted one at a time the way SIGTERM stops a node (drain, hand
// leadership over, close) while sign-ins run through the balancer
// without a pause. No sign-in fails and no 5xx reaches a client. (Without
// the drain, the same restart fails sign-ins with 503.)
func TestRollingRestartBehindHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts haproxy")
	}
	certFile, keyFile, roots, port := site(t)
	issuer := "https://127.0.0.1:" + port
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) {
		cfg.Issuer = issuer
		cfg.TrustedProxies = "127.0.0.1/32"
		cfg.RateLimit = "off"
		// deploy/haproxy/haproxy.cfg checks every 1 s and takes a node out
		// after 2 failures: out within 3 s of the drain's start.
		cfg.ShutdownDrain = 3500 * time.Millisecond
	}})
	var backends []string
	for i := range c.Size() {
		backends = append(backends, strings.TrimPrefix(c.URL(i), "http://"))
	}
	haproxy(t, port, certFile, keyFile, backends)
	w := provision(t, c)
	ctx := gooidc.ClientContext(context.Background(), from("127.0.0.1", roots))
	p, err := gooidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int32
	errs := make(chan error, 100)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := from(fmt.Sprintf("127.0.0.%d", 50+i), roots)
			f := &flowClient{hc: hc, verifier: p.Verifier(&gooidc.Config{ClientID: w.publicID}), email: w.email, password: w.password, cb: w.cb,
				rp: oauth2.Config{ClientID: w.publicID, Endpoint: p.Endpoint(), RedirectURL: w.cb, Scopes: []string{gooidc.ScopeOpenID}}}
			for n := 0; n < 10000; n++ {
				select {
				case <-stop:
					return
				default:
				}
				hc.Jar, _ = cookiejar.New(nil)
				if err := f.signIn(ctx); err != nil {
					failed.Add(1)
					select {
					case errs <- err:
					default:
					}
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	for i := range c.Size() {
		c.Node(i).Drain(context.Background()) // SIGTERM's first half
		c.Kill(i)
		c.Restart(i)
		firstReady(t, c, i)
		time.Sleep(2500 * time.Millisecond) // rise 2 at inter 1 s: the balancer sees it up again
		t.Logf("node %d restarted; %d sign-ins so far, %d failed", i, ok.Load(), failed.Load())
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a sign-in failed during the rolling restart: %v", err)
	}
	if ok.Load() < 10 {
		t.Fatalf("only %d sign-ins completed during the restart", ok.Load())
	}
	t.Logf("%d sign-ins, %d failed", ok.Load(), failed.Load())
}
