package node_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/testkit/testclock"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

const backchannelEvent = "http://schemas.openid.net/event/backchannel-logout"

// logoutToken is one logout token a receiver accepted, with its claims.
type logoutToken struct {
	Raw    string
	JTI    string
	Sub    string
	SID    string
	HasSID bool
	Org    string
	At     time.Time // when the receiver saw it
}

// bcReceiver is a relying party's back-channel logout endpoint on 127.0.0.1.
// It validates every token exactly as docs/application-developers.md
// ("Signing out") tells receivers: signature by the node's JWKS (kid,
// RS256), typ logout+jwt, iss, exp, aud equal to its own client_id as a
// plain string, the events key with an empty object, no nonce. A valid token
// is recorded, answered with status(); an invalid one is recorded as a
// problem and answered 400.
type bcReceiver struct {
	t        *testing.T
	clientID string
	issuer   string
	now      func() time.Time
	srv      *httptest.Server

	mu       sync.Mutex
	status   func(attempt int) int // attempt counts requests per jti, from 1
	gate     chan struct{}         // when set, requests wait for it to close
	attempts map[string]int
	tokens   []logoutToken // answered 2xx
	seen     []logoutToken // every valid token, whatever the answer
	problems []string
	keys     jwk.Set
}

func newBCReceiver(t *testing.T, c *testcluster.Cluster, clientID string, now func() time.Time) *bcReceiver {
	t.Helper()
	if now == nil {
		now = time.Now
	}
	r := &bcReceiver{t: t, clientID: clientID, issuer: c.Issuer(), now: now, attempts: map[string]int{},
		status: func(int) int { return http.StatusOK }}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	// Fetch the key set now, as a relying party does at start-up: a
	// token that arrives while the node restarts still validates.
	if _, err := r.keySet(true); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *bcReceiver) URL() string { return r.srv.URL + "/backchannel-logout" }

func (r *bcReceiver) serve(w http.ResponseWriter, req *http.Request) {
	tok, err := r.validate(req)
	r.mu.Lock()
	if err != nil {
		r.problems = append(r.problems, err.Error())
		r.mu.Unlock()
		http.Error(w, "invalid logout token", http.StatusBadRequest)
		return
	}
	r.attempts[tok.JTI]++
	n, gate, status := r.attempts[tok.JTI], r.gate, r.status
	r.seen = append(r.seen, tok)
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-req.Context().Done():
			return // the sender gave up (node stopped)
		}
	}
	code := status(n)
	if code >= 200 && code < 300 {
		r.mu.Lock()
		r.tokens = append(r.tokens, tok)
		r.mu.Unlock()
	}
	w.WriteHeader(code)
}

func (r *bcReceiver) keySet(refresh bool) (jwk.Set, error) {
	r.mu.Lock()
	set := r.keys
	r.mu.Unlock()
	if set != nil && !refresh {
		return set, nil
	}
	set, err := jwk.Fetch(context.Background(), r.issuer+"/.well-known/jwks.json")
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.keys = set
	r.mu.Unlock()
	return set, nil
}

func (r *bcReceiver) validate(req *http.Request) (logoutToken, error) {
	var out logoutToken
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		return out, fmt.Errorf("%s with Content-Type %q", req.Method, req.Header.Get("Content-Type"))
	}
	if err := req.ParseForm(); err != nil {
		return out, err
	}
	raw := req.PostForm.Get("logout_token")
	msg, err := jws.Parse([]byte(raw))
	if err != nil {
		return out, fmt.Errorf("not a JWS: %v", err)
	}
	hdr := msg.Signatures()[0].ProtectedHeaders()
	if hdr.Type() != "logout+jwt" || hdr.Algorithm() != jwa.RS256 || hdr.KeyID() == "" {
		return out, fmt.Errorf("header typ %q alg %q kid %q", hdr.Type(), hdr.Algorithm(), hdr.KeyID())
	}
	opts := func(set jwk.Set) []jwt.ParseOption {
		return []jwt.ParseOption{jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithIssuer(r.issuer),
			jwt.WithClock(jwt.ClockFunc(r.now)), jwt.WithAcceptableSkew(5 * time.Second)}
	}
	set, err := r.keySet(false)
	if err == nil {
		if _, err = jwt.Parse([]byte(raw), opts(set)...); err != nil {
			if set, err = r.keySet(true); err == nil { // an unknown kid: fetch once more
				_, err = jwt.Parse([]byte(raw), opts(set)...)
			}
		}
	}
	if err != nil {
		return out, fmt.Errorf("jwt: %v", err)
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(msg.Payload(), &c); err != nil {
		return out, err
	}
	if string(c["aud"]) != strconv.Quote(r.clientID) {
		return out, fmt.Errorf("aud %s, want the string %q", c["aud"], r.clientID)
	}
	var events map[string]json.RawMessage
	if err := json.Unmarshal(c["events"], &events); err != nil || string(events[backchannelEvent]) != "{}" {
		return out, fmt.Errorf("events %s", c["events"])
	}
	if _, ok := c["nonce"]; ok {
		return out, fmt.Errorf("nonce present")
	}
	for _, k := range []string{"iat", "exp", "jti", "sub", "organization_id"} {
		if _, ok := c[k]; !ok {
			return out, fmt.Errorf("no %s", k)
		}
	}
	str := func(k string) string { var s string; json.Unmarshal(c[k], &s); return s }
	_, hasSID := c["sid"]
	return logoutToken{Raw: raw, JTI: str("jti"), Sub: str("sub"), SID: str("sid"), HasSID: hasSID, Org: str("organization_id"), At: time.Now()}, nil
}

// accepted is the tokens answered 2xx so far.
func (r *bcReceiver) accepted() []logoutToken {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]logoutToken(nil), r.tokens...)
}

// all is every valid token received, including retried and refused ones.
func (r *bcReceiver) all() []logoutToken {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]logoutToken(nil), r.seen...)
}

func (r *bcReceiver) setStatus(f func(attempt int) int) { r.mu.Lock(); r.status = f; r.mu.Unlock() }

// checkValid fails the test if any token was invalid.
func (r *bcReceiver) checkValid() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) > 0 {
		r.t.Fatalf("receiver %s got invalid logout tokens: %q", r.clientID, r.problems)
	}
}

// waitAccepted waits up to 10 s for n accepted tokens.
func (r *bcReceiver) waitAccepted(n int) []logoutToken {
	r.t.Helper()
	waitUntil(r.t, fmt.Sprintf("%d logout tokens at %s", n, r.clientID), 10*time.Second, func() bool { return len(r.accepted()) >= n })
	r.checkValid()
	return r.accepted()
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newLogoutCluster is a single node with the rate limit off (the tests
// call introspection more than five times a minute) and an optional clock.
func newLogoutCluster(t *testing.T, now func() time.Time, configure ...func(*node.Config)) *testcluster.Cluster {
	return testcluster.New(t, testcluster.Options{Now: now, Configure: func(_ int, cfg *node.Config) {
		cfg.RateLimit = "off"
		for _, f := range configure {
			f(cfg)
		}
	}})
}

// setBackchannel registers uri as client's back-channel logout URI.
func setBackchannel(t *testing.T, c *testcluster.Cluster, clientID, uri string) {
	t.Helper()
	if resp := do(t, c, "PATCH", "/admin/v1/clients/"+url.PathEscape(clientID), testcluster.AdminToken,
		map[string]any{"backchannel_logout_uri": uri}, nil); resp.StatusCode != 200 {
		t.Fatalf("PATCH client %s: %d", clientID, resp.StatusCode)
	}
}

// session is one app's sign-in: its tokens and sid.
type session struct {
	idToken, access, sid, org string
}

// signInApp signs the browser in to r and exchanges the code.
func signInApp(t *testing.T, c *testcluster.Cluster, b *testcluster.Browser, r *rp, w world, extra ...oauth2.AuthCodeOption) session {
	t.Helper()
	pkce := oauth2.GenerateVerifier()
	q := signIn(t, c, b, r, w, pkce, "nonce-0123456789", extra...)
	tok, err := r.oauth.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	s := session{access: tok.AccessToken}
	s.idToken, _ = tok.Extra("id_token").(string)
	var claims struct {
		SID string `json:"sid"`
		Org string `json:"organization_id"`
	}
	if err := json.Unmarshal(payloadOf(t, s.idToken), &claims); err != nil || claims.SID == "" {
		t.Fatalf("ID token claims: %v %+v", err, claims)
	}
	s.sid, s.org = claims.SID, claims.Org
	return s
}

func payloadOf(t *testing.T, tok string) []byte {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logoutQuery builds a /logout URL from name, value pairs.
func logoutQuery(c *testcluster.Cluster, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return c.URL(0) + "/logout?" + v.Encode()
}

// promptNone asks for a silent sign-in and returns the callback query.
func promptNone(t *testing.T, b *testcluster.Browser, r *rp) url.Values {
	t.Helper()
	p := b.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()),
		oauth2.SetAuthURLParam("prompt", "none")))
	loc, err := url.Parse(p.Location())
	if err != nil || p.Location() == "" {
		t.Fatalf("prompt=none: %d %q", p.Status, p.Location())
	}
	return loc.Query()
}

// active reports introspection's answer for token, asked by the
// confidential app (it may introspect every app of its organization).
func active(t *testing.T, c *testcluster.Cluster, w world, token string) bool {
	t.Helper()
	status, body := clientPost(t, c, "/oauth2/introspect", w.confID, w.confSecret, url.Values{"token": {token}})
	var out struct {
		Active bool `json:"active"`
	}
	if err := json.Unmarshal([]byte(body), &out); status != 200 || err != nil {
		t.Fatalf("introspect: %d %s", status, body)
	}
	return out.Active
}

// validLocally checks token as a resource server would without asking
// the node: signature by the JWKS, iss and exp.
func validLocally(t *testing.T, c *testcluster.Cluster, token string, now func() time.Time) error {
	t.Helper()
	set, err := jwk.Fetch(context.Background(), c.URL(0)+"/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	if now == nil {
		now = time.Now
	}
	_, err = jwt.Parse([]byte(token), jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithIssuer(c.URL(0)), jwt.WithClock(jwt.ClockFunc(now)))
	return err
}

// metricValue reads an unlabelled metric from node 0's /metrics.
func metricValue(t *testing.T, c *testcluster.Cluster, name string) float64 {
	t.Helper()
	return metricOf(t, c, 0, name)
}

// metricsLines is node i's /metrics page, a line each.
func metricsLines(t *testing.T, c *testcluster.Cluster, i int) []string {
	t.Helper()
	resp, err := c.Client().Get(c.URL(i) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.Split(string(body), "\n")
}

// metricOf reads an unlabelled metric from node i's /metrics.
func metricOf(t *testing.T, c *testcluster.Cluster, i int, name string) float64 {
	t.Helper()
	for _, line := range metricsLines(t, c, i) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s at node %d's /metrics", name, i)
	return 0
}

func hasSessionCookie(b *testcluster.Browser, base string) bool {
	u, _ := url.Parse(base)
	for _, ck := range b.Client.Jar.Cookies(u) {
		if ck.Name == "oidcd_session" {
			return true
		}
	}
	return false
}

func TestLogoutThroughAnAppEndsEveryAppSessionOfTheSSOSession(t *testing.T) {
	c := newLogoutCluster(t, nil)
	w := provision(t, c)
	rConf, rPub, rMulti := newBCReceiver(t, c, w.confID, nil), newBCReceiver(t, c, w.publicID, nil), newBCReceiver(t, c, w.multiID, nil)
	setBackchannel(t, c, w.confID, rConf.URL())
	setBackchannel(t, c, w.publicID, rPub.URL())
	setBackchannel(t, c, w.multiID, rMulti.URL())
	for _, r := range []*bcReceiver{rConf, rPub, rMulti} { // slow enough to lose a race with the redirect
		r.setStatus(func(int) int { time.Sleep(150 * time.Millisecond); return http.StatusOK })
	}
	conf := newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID, "email")
	pub := newRP(t, c, w.publicID, "", w.cb, gooidc.ScopeOpenID)
	multi := newRP(t, c, w.multiID, "", w.cb, gooidc.ScopeOpenID)

	b := testcluster.NewBrowser(t)
	sConf := signInApp(t, c, b, conf, w)
	sPub := signInApp(t, c, b, pub, w)
	sMulti := signInApp(t, c, b, multi, w)
	other := testcluster.NewBrowser(t) // the same person in another browser
	sOther := signInApp(t, c, other, conf, w)
	if sOther.sid == sConf.sid || sMulti.org != w.orgB {
		t.Fatalf("sids: %s %s, multi org %s", sConf.sid, sOther.sid, sMulti.org)
	}
	if !active(t, c, w, sConf.access) {
		t.Fatal("introspection before logout: inactive")
	}

	// A hint of another session ends nothing, but the redirect happens.
	p := other.Get(logoutQuery(c, "id_token_hint", sConf.idToken, "post_logout_redirect_uri", w.cb, "state", "other-state"))
	if p.Status != http.StatusFound || p.Location() != w.cb+"?state=other-state" {
		t.Fatalf("foreign hint: got %d %q, want the redirect", p.Status, p.Location())
	}
	if status, _ := bearerGet(t, c, "/userinfo", sConf.access); status != 200 {
		t.Fatalf("userinfo after a foreign hint: %d, want 200", status)
	}
	if status, _ := bearerGet(t, c, "/userinfo", sOther.access); status != 200 {
		t.Fatalf("other browser's userinfo after its foreign hint: %d, want 200", status)
	}

	p = b.Get(logoutQuery(c, "id_token_hint", sConf.idToken, "client_id", w.confID, "post_logout_redirect_uri", w.cb, "state", "st 123/&"))
	returned := time.Now()
	if want := w.cb + "?state=st+123%2F%26"; p.Status != http.StatusFound || p.Location() != want || p.Body != "" {
		t.Fatalf("logout: got %d %q %q, want 302 %q", p.Status, p.Location(), p.Body, want)
	}
	if p.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control: %q", p.Header.Get("Cache-Control"))
	}
	// The front-channel wait: every receiver already has its token.
	for _, tt := range []struct {
		name string
		r    *bcReceiver
		s    session
	}{{"conf", rConf, sConf}, {"public", rPub, sPub}, {"multi", rMulti, sMulti}} {
		tt.r.checkValid()
		got := tt.r.accepted()
		if len(got) != 1 {
			t.Fatalf("%s: %d tokens when the browser was redirected, want 1", tt.name, len(got))
		}
		if tk := got[0]; !tk.HasSID || tk.SID != tt.s.sid || tk.Sub != w.user || tk.Org != tt.s.org || tk.At.After(returned) {
			t.Fatalf("%s: token %+v, want sid %s sub %s org %s before the redirect", tt.name, tk, tt.s.sid, w.user, tt.s.org)
		}
	}
	if hasSessionCookie(b, c.URL(0)) {
		t.Fatal("the SSO cookie survived the logout")
	}
	for _, s := range []session{sConf, sPub, sMulti} {
		if status, _ := bearerGet(t, c, "/userinfo", s.access); status != 401 {
			t.Fatalf("userinfo after logout: %d, want 401", status)
		}
		if active(t, c, w, s.access) {
			t.Fatal("introspection after logout: active")
		}
		if err := validLocally(t, c, s.access, nil); err != nil {
			t.Fatalf("the access token must still validate locally until exp: %v", err)
		}
	}
	if status, _ := bearerGet(t, c, "/userinfo", sOther.access); status != 200 {
		t.Fatalf("the other browser's session: userinfo %d, want 200", status)
	}
	for _, r := range []*rp{conf, pub, multi} {
		if q := promptNone(t, b, r); q.Get("error") != "login_required" {
			t.Fatalf("prompt=none after logout: %v, want login_required", q)
		}
	}
	if q := promptNone(t, other, conf); q.Get("code") == "" {
		t.Fatalf("prompt=none in the other browser: %v, want a code", q)
	}
	if got := metricValue(t, c, "oidcd_backchannel_sent_total"); got != 3 {
		t.Fatalf("oidcd_backchannel_sent_total: got %v, want 3", got)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(rConf.all()); n != 1 {
		t.Fatalf("conf receiver: %d tokens in all, want 1 (not the other browser's)", n)
	}
}

func TestLogoutByPOST(t *testing.T) {
	c := newLogoutCluster(t, nil)
	w := provision(t, c)
	rPub := newBCReceiver(t, c, w.publicID, nil)
	setBackchannel(t, c, w.publicID, rPub.URL())
	pub := newRP(t, c, w.publicID, "", w.cb, gooidc.ScopeOpenID)

	b := testcluster.NewBrowser(t)
	s := signInApp(t, c, b, pub, w)
	resp, err := b.Client.PostForm(c.URL(0)+"/logout", url.Values{"id_token_hint": {s.idToken}, "post_logout_redirect_uri": {w.cb}, "state": {"xyz"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != w.cb+"?state=xyz" || len(body) != 0 {
		t.Fatalf("POST logout: %d %q %q, want 302 without body", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if got := rPub.accepted(); len(got) != 1 || got[0].SID != s.sid {
		t.Fatalf("tokens: %+v", got)
	}

	s = signInApp(t, c, b, pub, w)
	resp, err = b.Client.PostForm(c.URL(0)+"/logout", url.Values{"id_token_hint": {s.idToken}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.Header.Get("Location") != "" {
		t.Fatalf("POST logout without redirect: %d %q, want 200 without body", resp.StatusCode, body)
	}
	if status, _ := bearerGet(t, c, "/userinfo", s.access); status != 401 {
		t.Fatalf("userinfo: %d, want 401", status)
	}
	if got := rPub.waitAccepted(2); got[1].SID != s.sid {
		t.Fatalf("second token: %+v", got[1])
	}

	// Without a redirect, GET shows the signed-out page.
	s = signInApp(t, c, b, pub, w)
	p := b.Get(logoutQuery(c, "id_token_hint", s.idToken))
	if p.Status != http.StatusOK || p.Location() != "" || !strings.Contains(p.Body, "You are signed out") {
		t.Fatalf("GET without redirect: %d %q\n%s", p.Status, p.Location(), p.Body)
	}
}

// foreignSigned re-signs tok's payload with a new RSA key under tok's kid.
func foreignSigned(t *testing.T, tok string) string {
	t.Helper()
	msg, err := jws.Parse([]byte(tok))
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	hdr.Set(jws.KeyIDKey, msg.Signatures()[0].ProtectedHeaders().KeyID())
	hdr.Set(jws.TypeKey, "JWT")
	out, err := jws.Sign(msg.Payload(), jws.WithKey(jwa.RS256, key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// algNone re-encodes tok's claims under an unsigned alg none header.
func algNone(tok string) string {
	parts := strings.Split(tok, ".")
	return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
}

func TestLogoutRefusesEveryInvalidRequestWithoutRedirect(t *testing.T) {
	clk := testclock.New(time.Now())
	c := newLogoutCluster(t, clk.Now)
	w := provision(t, c)
	rConf := newBCReceiver(t, c, w.confID, clk.Now)
	setBackchannel(t, c, w.confID, rConf.URL())
	conf := newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID)
	pub := newRP(t, c, w.publicID, "", w.cb, gooidc.ScopeOpenID)
	b := testcluster.NewBrowser(t)
	sConf := signInApp(t, c, b, conf, w)
	sPub := signInApp(t, c, b, pub, w)

	check := func(t *testing.T, params ...string) {
		t.Helper()
		p := b.Get(logoutQuery(c, params...))
		ref := p.Header.Get(httpx.HeaderCorrelationID)
		if p.Status != http.StatusBadRequest || p.Header.Get("Location") != "" {
			t.Fatalf("GET: got %d Location %q, want 400 without Location", p.Status, p.Header.Get("Location"))
		}
		if ref == "" || !strings.Contains(p.Body, ref) || !strings.Contains(p.Body, "Reference") || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET: error page without the reference %q:\n%s", ref, p.Body)
		}
		form := url.Values{}
		for i := 0; i+1 < len(params); i += 2 {
			form.Add(params[i], params[i+1])
		}
		resp, err := b.Client.PostForm(c.URL(0)+"/logout", form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" || len(body) != 0 {
			t.Fatalf("POST: got %d Location %q body %q, want 400 with neither", resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
	tests := []struct {
		name   string
		params []string
	}{
		{"missing hint", []string{"post_logout_redirect_uri", w.cb, "state", "s"}},
		{"post_logout_redirect_uri without a hint", []string{"post_logout_redirect_uri", w.cb, "client_id", w.confID}},
		{"hint re-signed with alg none", []string{"id_token_hint", algNone(sConf.idToken), "post_logout_redirect_uri", w.cb}},
		{"hint signed by a foreign RSA key", []string{"id_token_hint", foreignSigned(t, sConf.idToken), "post_logout_redirect_uri", w.cb}},
		{"hint for another app than client_id", []string{"id_token_hint", sConf.idToken, "client_id", w.publicID, "post_logout_redirect_uri", w.cb}},
		{"access token as hint", []string{"id_token_hint", sConf.access, "post_logout_redirect_uri", w.cb}},
		{"unregistered post_logout_redirect_uri", []string{"id_token_hint", sConf.idToken, "post_logout_redirect_uri", "http://127.0.0.1:9/elsewhere"}},
		{"registered URI with ?foo=bar", []string{"id_token_hint", sConf.idToken, "post_logout_redirect_uri", w.cb + "?foo=bar"}},
		{"registered URI with a trailing slash", []string{"id_token_hint", sConf.idToken, "post_logout_redirect_uri", w.cb + "/"}},
		{"registered URI in another case", []string{"id_token_hint", sConf.idToken, "post_logout_redirect_uri", strings.ToUpper(w.cb[:4]) + w.cb[4:]}},
		{"repeated hint", []string{"id_token_hint", sConf.idToken, "id_token_hint", sPub.idToken, "post_logout_redirect_uri", w.cb}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.params...) })
	}
	if status, _ := bearerGet(t, c, "/userinfo", sConf.access); status != 200 {
		t.Fatalf("a refused logout ended the session: userinfo %d", status)
	}
	// An expired hint: the ID token lives as long as the access token
	// (600 s); the SSO session stays live much longer.
	clk.Add(11 * time.Minute)
	t.Run("expired hint", func(t *testing.T) {
		check(t, "id_token_hint", sConf.idToken, "post_logout_redirect_uri", w.cb)
		check(t, "id_token_hint", sPub.idToken)
	})
	if q := promptNone(t, b, pub); q.Get("code") == "" {
		t.Fatalf("refused logouts ended the SSO session: prompt=none gave %v", q)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(rConf.all()); n != 0 {
		t.Fatalf("refused logouts sent %d logout tokens", n)
	}
}

func TestFreshAuthenticationSupersedesTheSessionAndNotifiesOldSIDs(t *testing.T) {
	c := newLogoutCluster(t, nil)
	w := provision(t, c)
	rConf, rPub := newBCReceiver(t, c, w.confID, nil), newBCReceiver(t, c, w.publicID, nil)
	setBackchannel(t, c, w.confID, rConf.URL())
	setBackchannel(t, c, w.publicID, rPub.URL())
	conf := newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID)
	pub := newRP(t, c, w.publicID, "", w.cb, gooidc.ScopeOpenID)
	b := testcluster.NewBrowser(t)
	oldConf := signInApp(t, c, b, conf, w)
	oldPub := signInApp(t, c, b, pub, w)

	fresh := signInApp(t, c, b, conf, w, oauth2.SetAuthURLParam("prompt", "login"))
	if fresh.sid == oldConf.sid {
		t.Fatal("prompt=login reused the app session")
	}
	for _, tt := range []struct {
		r   *bcReceiver
		old session
	}{{rConf, oldConf}, {rPub, oldPub}} {
		got := tt.r.waitAccepted(1)
		if !got[0].HasSID || got[0].SID != tt.old.sid || got[0].Sub != w.user {
			t.Fatalf("token %+v, want the old sid %s", got[0], tt.old.sid)
		}
	}
	for _, s := range []session{oldConf, oldPub} {
		if status, _ := bearerGet(t, c, "/userinfo", s.access); status != 401 {
			t.Fatalf("old session's userinfo: %d, want 401", status)
		}
		if active(t, c, w, s.access) {
			t.Fatal("old session's token introspects active")
		}
		if err := validLocally(t, c, s.access, nil); err != nil {
			t.Fatalf("old access token no longer validates locally: %v", err)
		}
	}
	if status, _ := bearerGet(t, c, "/userinfo", fresh.access); status != 200 {
		t.Fatalf("fresh session's userinfo: %d, want 200", status)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(rConf.all()) + len(rPub.all()); n != 2 {
		t.Fatalf("%d tokens in all, want 2", n)
	}
}

func TestAccountErasureSendsSubOnlyTokens(t *testing.T) {
	c := newLogoutCluster(t, nil)
	w := provision(t, c)
	rConf, rPub, rMulti := newBCReceiver(t, c, w.confID, nil), newBCReceiver(t, c, w.publicID, nil), newBCReceiver(t, c, w.multiID, nil)
	setBackchannel(t, c, w.confID, rConf.URL())
	setBackchannel(t, c, w.publicID, rPub.URL())
	setBackchannel(t, c, w.multiID, rMulti.URL())
	b := testcluster.NewBrowser(t)
	sConf := signInApp(t, c, b, newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID), w)
	sPub := signInApp(t, c, b, newRP(t, c, w.publicID, "", w.cb, gooidc.ScopeOpenID), w)
	sMulti := signInApp(t, c, b, newRP(t, c, w.multiID, "", w.cb, gooidc.ScopeOpenID), w)

	if resp := do(t, c, "DELETE", "/admin/v1/users/"+w.user, testcluster.AdminToken, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("erase: %d", resp.StatusCode)
	}
	for _, tt := range []struct {
		name string
		r    *bcReceiver
		org  string
	}{{"conf", rConf, w.orgA}, {"public", rPub, w.orgA}, {"multi", rMulti, w.orgB}} {
		got := tt.r.waitAccepted(1)
		if tk := got[0]; tk.HasSID || tk.Sub != w.user || tk.Org != tt.org {
			t.Fatalf("%s: token %+v, want the sub-only shape for %s in %s", tt.name, tk, w.user, tt.org)
		}
	}
	for _, s := range []session{sConf, sPub, sMulti} {
		if status, _ := bearerGet(t, c, "/userinfo", s.access); status != 401 {
			t.Fatalf("userinfo after erasure: %d, want 401", status)
		}
		if active(t, c, w, s.access) {
			t.Fatal("introspection after erasure: active")
		}
		if err := validLocally(t, c, s.access, nil); err != nil {
			t.Fatalf("access token no longer validates locally: %v", err)
		}
	}
}

func TestOrganizationDeletionNotifiesItsAppsAndMultiOrganizationApps(t *testing.T) {
	c := newLogoutCluster(t, nil)
	w := provision(t, c)
	var cl map[string]any
	do(t, c, "POST", "/admin/v1/clients", testcluster.AdminToken, map[string]any{"name": "Beta App", "redirect_uris": []string{w.cb},
		"scopes": []string{"openid"}, "organization_id": w.orgB, "skip_consent": true}, &cl)
	betaID, betaSecret := cl["client_id"].(string), cl["client_secret"].(string)
	rConf, rBeta, rMulti := newBCReceiver(t, c, w.confID, nil), newBCReceiver(t, c, betaID, nil), newBCReceiver(t, c, w.multiID, nil)
	setBackchannel(t, c, w.confID, rConf.URL())
	setBackchannel(t, c, betaID, rBeta.URL())
	setBackchannel(t, c, w.multiID, rMulti.URL())
	b := testcluster.NewBrowser(t)
	sConf := signInApp(t, c, b, newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID), w)
	sBeta := signInApp(t, c, b, newRP(t, c, betaID, betaSecret, w.cb, gooidc.ScopeOpenID), w)
	sMulti := signInApp(t, c, b, newRP(t, c, w.multiID, "", w.cb, gooidc.ScopeOpenID), w)
	if sBeta.org != w.orgB || sMulti.org != w.orgB || sConf.org != w.orgA {
		t.Fatalf("orgs: conf %s beta %s multi %s", sConf.org, sBeta.org, sMulti.org)
	}

	if resp := do(t, c, "DELETE", "/admin/v1/organizations/"+w.orgB, testcluster.AdminToken, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("delete organization: %d", resp.StatusCode)
	}
	if tk := rBeta.waitAccepted(1)[0]; tk.HasSID || tk.Sub != w.user || tk.Org != w.orgB {
		t.Fatalf("app registered to the organization: token %+v, want sub-only for %s", tk, w.orgB)
	}
	if tk := rMulti.waitAccepted(1)[0]; !tk.HasSID || tk.SID != sMulti.sid || tk.Org != w.orgB {
		t.Fatalf("multi-organization app: token %+v, want sid %s naming %s", tk, sMulti.sid, w.orgB)
	}
	for _, s := range []session{sBeta, sMulti} {
		if status, _ := bearerGet(t, c, "/userinfo", s.access); status != 401 {
			t.Fatalf("userinfo in the deleted organization: %d, want 401", status)
		}
		if err := validLocally(t, c, s.access, nil); err != nil {
			t.Fatalf("access token no longer validates locally: %v", err)
		}
	}
	if active(t, c, w, sMulti.access) {
		t.Fatal("multi app's token introspects active")
	}
	if status, body := clientPost(t, c, "/oauth2/introspect", betaID, betaSecret, url.Values{"token": {sBeta.access}}); status != 200 || body != `{"active":false}` {
		t.Fatalf("beta app's own token: %d %s, want inactive", status, body)
	}
	// The SSO session and the other organization's app session stay.
	if status, _ := bearerGet(t, c, "/userinfo", sConf.access); status != 200 {
		t.Fatalf("userinfo in the other organization: %d, want 200", status)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(rConf.all()); n != 0 {
		t.Fatalf("app of another organization got %d tokens", n)
	}
	if n := len(rBeta.all()) + len(rMulti.all()); n != 2 {
		t.Fatalf("%d tokens in all, want 2", n)
	}
}

func TestPlainExpirySendsNoLogoutToken(t *testing.T) {
	clk := testclock.New(time.Now())
	c := newLogoutCluster(t, clk.Now, func(cfg *node.Config) { cfg.ReapEvery = 50 * time.Millisecond })
	w := provision(t, c)
	rConf := newBCReceiver(t, c, w.confID, clk.Now)
	setBackchannel(t, c, w.confID, rConf.URL())
	conf := newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID)
	b := testcluster.NewBrowser(t)
	s := signInApp(t, c, b, conf, w)

	clk.Add(node.DefaultSessionIdle + time.Minute)
	if q := promptNone(t, b, conf); q.Get("error") != "login_required" {
		t.Fatalf("prompt=none after idle expiry: %v, want login_required", q)
	}
	if status, _ := bearerGet(t, c, "/userinfo", s.access); status != 401 {
		t.Fatalf("userinfo after expiry: %d", status)
	}
	clk.Add(10 * time.Minute) // let the reaper delete the expired session
	time.Sleep(300 * time.Millisecond)
	signInApp(t, c, b, conf, w) // a new session; nothing to supersede
	time.Sleep(1500 * time.Millisecond)
	if n := len(rConf.all()); n != 0 {
		t.Fatalf("plain expiry sent %d logout tokens", n)
	}
	if ds, err := c.Node(0).FSM().State().PendingDeliveries(10); err != nil || len(ds) != 0 {
		t.Fatalf("pending deliveries: %v %v", ds, err)
	}
	if got := metricValue(t, c, "oidcd_backchannel_sent_total"); got != 0 {
		t.Fatalf("sent_total: %v", got)
	}
}

func TestRevokingAnAccessTokenKeepsTheAppSessionAndItsLogout(t *testing.T) {
	c := newLogoutCluster(t, nil)
	w := provision(t, c)
	rConf := newBCReceiver(t, c, w.confID, nil)
	setBackchannel(t, c, w.confID, rConf.URL())
	conf := newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID)
	b := testcluster.NewBrowser(t)
	s := signInApp(t, c, b, conf, w)

	if status, _ := clientPost(t, c, "/oauth2/revoke", w.confID, w.confSecret, url.Values{"token": {s.access}}); status != 200 {
		t.Fatalf("revoke: %d", status)
	}
	if status, _ := bearerGet(t, c, "/userinfo", s.access); status != 401 {
		t.Fatalf("userinfo of the revoked token: %d, want 401", status)
	}
	// The app session lives on: a silent sign-in reuses its sid.
	pkce := oauth2.GenerateVerifier()
	p := b.Get(conf.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce), oauth2.SetAuthURLParam("prompt", "none")))
	loc, _ := url.Parse(p.Location())
	tok, err := conf.oauth.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("silent sign-in after revoke: %v (%s)", err, p.Location())
	}
	var claims struct {
		SID string `json:"sid"`
	}
	json.Unmarshal(payloadOf(t, tok.Extra("id_token").(string)), &claims)
	if claims.SID != s.sid {
		t.Fatalf("sid after revoke: got %s, want the same app session %s", claims.SID, s.sid)
	}
	if status, _ := bearerGet(t, c, "/userinfo", tok.AccessToken); status != 200 {
		t.Fatalf("new token's userinfo: %d", status)
	}
	if n := len(rConf.all()); n != 0 {
		t.Fatalf("revocation sent %d logout tokens", n)
	}

	p = b.Get(logoutQuery(c, "id_token_hint", s.idToken, "post_logout_redirect_uri", w.cb))
	if p.Status != http.StatusFound {
		t.Fatalf("logout: %d", p.Status)
	}
	if got := rConf.accepted(); len(got) != 1 || got[0].SID != s.sid {
		t.Fatalf("logout after revoke: tokens %+v, want one with sid %s", got, s.sid)
	}
	if status, _ := bearerGet(t, c, "/userinfo", tok.AccessToken); status != 401 {
		t.Fatalf("userinfo after logout: %d, want 401", status)
	}
}

func TestUnreachableReceiverIsRetriedThenAbandoned(t *testing.T) {
	clk := testclock.New(time.Now())
	c := newLogoutCluster(t, clk.Now)
	w := provision(t, c)
	rConf, rPub := newBCReceiver(t, c, w.confID, clk.Now), newBCReceiver(t, c, w.publicID, clk.Now)
	rConf.setStatus(func(int) int { return http.StatusServiceUnavailable })
	setBackchannel(t, c, w.confID, rConf.URL())
	setBackchannel(t, c, w.publicID, rPub.URL())
	b := testcluster.NewBrowser(t)
	sConf := signInApp(t, c, b, newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID), w)
	signInApp(t, c, b, newRP(t, c, w.publicID, "", w.cb, gooidc.ScopeOpenID), w)

	start := time.Now()
	p := b.Get(logoutQuery(c, "id_token_hint", sConf.idToken, "post_logout_redirect_uri", w.cb))
	if d := time.Since(start); p.Status != http.StatusFound || d > 4*time.Second {
		t.Fatalf("logout: %d after %s, want the redirect within the front-channel bound", p.Status, d)
	}
	if got := rPub.accepted(); len(got) != 1 {
		t.Fatalf("the healthy receiver: %d tokens at the redirect, want 1", len(got))
	}
	// Retries wait 1 s, 2 s, 4 s and 8 s on the node's clock: move it.
	waitUntil(t, "5 attempts", 20*time.Second, func() bool {
		clk.Add(5 * time.Second)
		time.Sleep(50 * time.Millisecond)
		return len(rConf.all()) >= 5 && metricValue(t, c, "oidcd_backchannel_abandoned_total") == 1
	})
	rConf.checkValid()
	got := rConf.all()
	if len(got) != 5 {
		t.Fatalf("attempts: %d, want 5", len(got))
	}
	for _, tk := range got {
		if tk.JTI != got[0].JTI || tk.SID != sConf.sid {
			t.Fatalf("retried token %+v, want jti %s sid %s", tk, got[0].JTI, sConf.sid)
		}
	}
	d, err := c.Node(0).FSM().State().Delivery(got[0].JTI)
	if err != nil || d.State != fsm.DeliveryAbandoned || d.Attempts != 5 {
		t.Fatalf("delivery %s: %+v %v, want abandoned after 5 attempts", got[0].JTI, d, err)
	}
	for name, want := range map[string]float64{
		"oidcd_backchannel_abandoned_total": 1, "oidcd_backchannel_retries_total": 4,
		"oidcd_backchannel_sent_total": 1, "oidcd_backchannel_pending": 0, "oidcd_backchannel_delivery_seconds_count": 1,
	} {
		if got := metricValue(t, c, name); got != want {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	clk.Add(time.Minute)
	time.Sleep(1200 * time.Millisecond)
	if n := len(rConf.all()); n != 5 {
		t.Fatalf("attempts after abandonment: %d", n)
	}
}

func TestPendingDeliveriesSurviveARestart(t *testing.T) {
	c := newLogoutCluster(t, nil)
	w := provision(t, c)
	rConf, rPub := newBCReceiver(t, c, w.confID, nil), newBCReceiver(t, c, w.publicID, nil)
	gate := make(chan struct{})
	for _, r := range []*bcReceiver{rConf, rPub} {
		r.mu.Lock()
		r.gate = gate // hold every request: nothing is delivered before the restart
		r.mu.Unlock()
	}
	setBackchannel(t, c, w.confID, rConf.URL())
	setBackchannel(t, c, w.publicID, rPub.URL())
	b := testcluster.NewBrowser(t)
	sConf := signInApp(t, c, b, newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID), w)
	sPub := signInApp(t, c, b, newRP(t, c, w.publicID, "", w.cb, gooidc.ScopeOpenID), w)

	p := b.Get(logoutQuery(c, "id_token_hint", sPub.idToken))
	if p.Status != http.StatusOK {
		t.Fatalf("logout: %d", p.Status)
	}
	c.Kill(0) // right after the acknowledgement
	if n := len(rConf.accepted()) + len(rPub.accepted()); n != 0 {
		t.Fatalf("%d tokens delivered before the restart", n)
	}
	close(gate)
	c.Restart(0)
	for _, tt := range []struct {
		r *bcReceiver
		s session
	}{{rConf, sConf}, {rPub, sPub}} {
		got := tt.r.waitAccepted(1)
		if got[0].SID != tt.s.sid {
			t.Fatalf("token after restart: %+v, want sid %s", got[0], tt.s.sid)
		}
	}
	waitUntil(t, "outcomes recorded", 5*time.Second, func() bool {
		ds, err := c.Node(0).FSM().State().PendingDeliveries(10)
		return err == nil && len(ds) == 0
	})
	if status, _ := bearerGet(t, c, "/userinfo", sConf.access); status != 401 {
		t.Fatalf("userinfo after restart: %d, want 401", status)
	}
}
