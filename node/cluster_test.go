package node_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// rpOn is a relying party whose browser starts at node a and whose back
// end exchanges codes at node b: a load balancer in front of the cluster.
func rpOn(t testing.TB, c *testcluster.Cluster, a, b int, clientID, secret, cb string) *rp {
	r := newRPTB(t, c, clientID, secret, cb, gooidc.ScopeOpenID, "email")
	r.oauth.Endpoint = oauth2.Endpoint{AuthURL: c.URL(a) + "/authorize", TokenURL: c.URL(b) + "/oauth2/token"}
	return r
}

// TestSignInAcrossThreeNodes: the sign-in starts on node A, the code is
// exchanged on node B, userinfo and introspection answer on node C.
func TestSignInAcrossThreeNodes(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	w := provision(t, c)
	ctx := context.Background()
	for _, nodes := range [][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}} {
		r := rpOn(t, c, nodes[0], nodes[1], w.confID, w.confSecret, w.cb)
		b := testcluster.NewBrowser(t)
		pkce := oauth2.GenerateVerifier()
		q := signIn(t, c, b, r, w, pkce, "nonce-0123456789")
		tok, err := r.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
		if err != nil {
			t.Fatalf("exchange on node %d: %v", nodes[1], err)
		}
		if _, err := r.verifier.Verify(ctx, tok.Extra("id_token").(string)); err != nil {
			t.Fatal(err)
		}
		if status, body := bearerGetOn(t, c, nodes[2], "/userinfo", tok.AccessToken); status != 200 || body["sub"] != w.user {
			t.Fatalf("userinfo on node %d: %d %v", nodes[2], status, body)
		}
		// Revoked on one node: no node may act as if it had not happened.
		if status, _ := clientPostOn(t, c, nodes[0], "/oauth2/revoke", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}}); status != 200 {
			t.Fatalf("revoke: %d", status)
		}
		for i := 0; i < 3; i++ {
			if status, _ := bearerGetOn(t, c, i, "/userinfo", tok.AccessToken); status != 401 {
				t.Fatalf("userinfo on node %d right after revocation on node %d: got %d, want 401", i, nodes[0], status)
			}
		}
	}
}

func bearerGetOn(t testing.TB, c *testcluster.Cluster, i int, path, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", c.URL(i)+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	return decodeResp(t, c, req)
}

func clientPostOn(t testing.TB, c *testcluster.Cluster, i int, path, id, secret string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", c.URL(i)+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	return decodeResp(t, c, req)
}

// TestCodeRedeemedOnceWhenTwoNodesRaceForIt: the same code reaches two
// nodes at the same moment; exactly one exchange succeeds.
func TestCodeRedeemedOnceWhenTwoNodesRaceForIt(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	for round := 0; round < 5; round++ {
		r := rpOn(t, c, 0, 0, w.confID, w.confSecret, w.cb)
		pkce := oauth2.GenerateVerifier()
		q := signIn(t, c, testcluster.NewBrowser(t), r, w, pkce, "nonce-0123456789")
		form := url.Values{"grant_type": {"authorization_code"}, "code": {q.Get("code")}, "redirect_uri": {w.cb}, "code_verifier": {pkce}}
		var ok atomic.Int32
		var wg sync.WaitGroup
		for _, i := range []int{1, 2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if status, _ := clientPostOn(t, c, i, "/oauth2/token", w.confID, w.confSecret, form); status == 200 {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		if got := ok.Load(); got != 1 {
			t.Fatalf("round %d: %d exchanges succeeded, want exactly 1", round, got)
		}
	}
}

// TestRateLimitHoldsForTheWholeCluster: five token requests spread over
// three nodes use up the budget; the sixth is refused wherever it lands.
func TestRateLimitHoldsForTheWholeCluster(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	w := provision(t, c)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {"nope"}, "redirect_uri": {w.cb}, "code_verifier": {strings.Repeat("v", 43)}}
	for i := 0; i < 5; i++ {
		if status, _ := clientPostOn(t, c, i%3, "/oauth2/token", w.confID, w.confSecret, form); status != 400 {
			t.Fatalf("request %d on node %d: got %d, want 400 (within the limit)", i+1, i%3, status)
		}
	}
	status, body := clientPostOn(t, c, 2, "/oauth2/token", w.confID, w.confSecret, form)
	if status != 429 {
		t.Fatalf("sixth request: got %d %v, want 429", status, body)
	}
}

// TestLeaderKilledSignInsResume: after the leader dies, sign-ins work again
// within 5 s of the new leader's election, and nothing acknowledged is lost.
func TestLeaderKilledSignInsResume(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	w := provision(t, c)
	old := c.WaitNewLeader()
	c.Kill(old)
	start := time.Now()
	leader := c.WaitNewLeader()
	t.Logf("new leader %d elected %v after the kill", leader, time.Since(start))
	elected := time.Now()
	other := 3 - old - leader
	for {
		err := trySignIn(t, c, other, leader, w)
		if err == nil {
			break
		}
		if time.Since(elected) > 5*time.Second {
			t.Fatalf("sign-in still failing 5 s after the new leader: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The provisioning done before the kill is all there.
	if status, _ := clientPostOn(t, c, other, "/oauth2/introspect", w.confID, w.confSecret, url.Values{"token": {"x"}}); status != 200 {
		t.Fatalf("the client registered before the kill is unknown: %d", status)
	}
	c.Restart(old)
	if status, _ := clientPostOn(t, c, old, "/oauth2/introspect", w.confID, w.confSecret, url.Values{"token": {"x"}}); status != 200 {
		t.Fatalf("restarted node: %d", status)
	}
}

// trySignIn runs a whole sign-in through node a (browser) and b (exchange).
func trySignIn(t *testing.T, c *testcluster.Cluster, a, b int, w world) (err error) {
	r := rpOn(t, c, a, b, w.publicID, "", w.cb)
	br := testcluster.NewBrowser(t)
	pkce := oauth2.GenerateVerifier()
	page := br.Follow(br.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce))), c.URL(a))
	if !strings.Contains(page.Body, `name="password"`) {
		return errorf("no sign-in page: %d", page.Status)
	}
	page = br.Follow(br.Submit(page, map[string]string{"email": w.email, "password": w.password}, "method", "password"), c.URL(a))
	loc, _ := url.Parse(page.Location())
	if loc == nil || loc.Query().Get("code") == "" {
		return errorf("no code: %d %s", page.Status, page.Location())
	}
	_, err = r.oauth.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkce))
	return err
}

// TestMinorityAnswers503AndCatchesUpAfterHeal: a node cut off from the
// others cannot vouch for its state: writes and liveness checks answer
// 503, /readyz 503, while discovery and JWKS keep serving. The majority
// keeps serving; after the heal the minority recovers by itself.
func TestMinorityAnswers503AndCatchesUpAfterHeal(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	w := provision(t, c)
	r := rpOn(t, c, 0, 0, w.confID, w.confSecret, w.cb)
	pkce := oauth2.GenerateVerifier()
	q := signIn(t, c, testcluster.NewBrowser(t), r, w, pkce, "nonce-0123456789")
	tok, err := r.oauth.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatal(err)
	}
	minority := c.Followers()[0]
	c.Partition(minority)
	majority := c.Followers()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _ := bearerGetOn(t, c, minority, "/userinfo", tok.AccessToken)
		ready := get(t, c, minority, "/readyz")
		if status == 503 && ready == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("minority node: userinfo %d, readyz %d; want 503 and 503", status, ready)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, path := range []string{"/.well-known/openid-configuration", "/.well-known/jwks.json"} {
		if got := get(t, c, minority, path); got != 200 {
			t.Fatalf("minority %s: got %d, want 200 from local state", path, got)
		}
	}
	// The majority signs people in and revokes.
	var served int
	for _, i := range []int{0, 1, 2} {
		if i == minority {
			continue
		}
		served = i
		if status, _ := bearerGetOn(t, c, i, "/userinfo", tok.AccessToken); status != 200 {
			t.Fatalf("majority node %d userinfo: %d", i, status)
		}
	}
	_ = majority
	if status, _ := clientPostOn(t, c, served, "/oauth2/revoke", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}}); status != 200 {
		t.Fatalf("revoke on the majority: %d", status)
	}
	c.Heal()
	deadline = time.Now().Add(15 * time.Second)
	for {
		status, _ := bearerGetOn(t, c, minority, "/userinfo", tok.AccessToken)
		if status == 401 && get(t, c, minority, "/readyz") == 200 {
			break // caught up: it knows of the revocation made while it was cut off
		}
		if time.Now().After(deadline) {
			t.Fatalf("after heal the minority answers %d, want 401 (revoked while it was cut off)", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(t testing.TB, c *testcluster.Cluster, i int, path string) int {
	resp, err := c.Client().Get(c.URL(i) + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSignInThroughTheBalancer: a balancer spreads one browser's steps over
// the nodes (sign-in form on one, consent on the next, ...), so a step can
// reach a node that has not yet applied the session the previous step
// opened. The person must never be asked for the password twice.
func TestSignInThroughTheBalancer(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	r := newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID) // endpoints on the balancer
	base := r.authBase()
	for round := 0; round < 10; round++ {
		b := testcluster.NewBrowser(t)
		pkce := oauth2.GenerateVerifier()
		page := b.Follow(b.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce))), base)
		page = b.Follow(b.Submit(page, map[string]string{"email": w.email, "password": w.password}, "method", "password"), base)
		if strings.Contains(page.Body, `name="password"`) {
			t.Fatalf("round %d: asked for the password again right after signing in", round)
		}
		if strings.Contains(page.Body, `value="allow"`) {
			page = b.Follow(b.Submit(page, nil, "decision", "allow"), base)
		}
		loc, err := url.Parse(page.Location())
		if err != nil || loc.Query().Get("code") == "" {
			t.Fatalf("round %d: no code: %d %q", round, page.Status, page.Location())
		}
		if _, err := r.oauth.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkce)); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// TestLogoutDeliveredByTheNextLeader: a logout acknowledged by a follower,
// the leader killed right after while the receivers still hold every
// request: the new leader delivers every token.
func TestLogoutDeliveredByTheNextLeader(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	rConf, rPub := newBCReceiver(t, c, w.confID, nil), newBCReceiver(t, c, w.publicID, nil)
	gate := make(chan struct{})
	for _, r := range []*bcReceiver{rConf, rPub} {
		r.mu.Lock()
		r.gate = gate // nothing is answered before the leader dies
		r.mu.Unlock()
	}
	setBackchannel(t, c, w.confID, rConf.URL())
	setBackchannel(t, c, w.publicID, rPub.URL())
	b := testcluster.NewBrowser(t)
	sConf := signInApp(t, c, b, newRP(t, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID), w)
	sPub := signInApp(t, c, b, newRP(t, c, w.publicID, "", w.cb, gooidc.ScopeOpenID), w)

	leader := c.WaitNewLeader()
	follower := (leader + 1) % 3
	v := url.Values{"id_token_hint": {sPub.idToken}}
	if p := b.Get(c.URL(follower) + "/logout?" + v.Encode()); p.Status != http.StatusOK {
		t.Fatalf("logout on follower %d: %d", follower, p.Status)
	}
	c.Kill(leader) // right after the acknowledgement
	close(gate)
	c.WaitNewLeader()
	for _, tt := range []struct {
		r *bcReceiver
		s session
	}{{rConf, sConf}, {rPub, sPub}} {
		got := tt.r.waitAccepted(1)
		if got[0].SID != tt.s.sid {
			t.Fatalf("token: %+v, want sid %s", got[0], tt.s.sid)
		}
	}
	if status, _ := bearerGetOn(t, c, follower, "/userinfo", sConf.access); status != 401 {
		t.Fatalf("userinfo after logout: %d, want 401", status)
	}
}

// TestFiveNodes: sign-ins spread over five nodes; with the leader and one
// more node dead (two of five), the remaining three still sign people in
// and a revocation made there is seen by every surviving node.
func TestFiveNodes(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 5, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	ctx := context.Background()
	for _, pair := range [][2]int{{0, 3}, {4, 1}, {2, 2}} {
		if err := trySignIn(t, c, pair[0], pair[1], w); err != nil {
			t.Fatalf("sign-in on %d, exchange on %d: %v", pair[0], pair[1], err)
		}
	}
	leader := c.WaitNewLeader()
	other := (leader + 1) % 5
	c.Kill(leader)
	c.Kill(other)
	c.WaitNewLeader()
	var alive []int
	for i := 0; i < 5; i++ {
		if c.Node(i) != nil {
			alive = append(alive, i)
		}
	}
	r := rpOn(t, c, alive[0], alive[1], w.confID, w.confSecret, w.cb)
	pkce := oauth2.GenerateVerifier()
	q := signIn(t, c, testcluster.NewBrowser(t), r, w, pkce, "nonce-0123456789")
	tok, err := r.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("exchange with two of five nodes down: %v", err)
	}
	if status, _ := clientPostOn(t, c, alive[2], "/oauth2/revoke", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}}); status != 200 {
		t.Fatalf("revoke: %d", status)
	}
	for _, i := range alive {
		if status, _ := bearerGetOn(t, c, i, "/userinfo", tok.AccessToken); status != 401 {
			t.Fatalf("node %d after revocation: %d, want 401", i, status)
		}
	}
}
