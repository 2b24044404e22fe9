package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/htmlform"
	"github.com/oidcd/oidcd/testcluster"
)

// This file is the workload of TestChaos: workers that sign people in,
// exchange codes (sometimes the same code twice, concurrently, on two
// nodes), revoke tokens, sign out, check tokens and create organizations,
// recording every operation in the history. Workers never call t.Fatal or
// t.Error: under faults every failure is an outcome to record, and the
// checker decides afterwards.

// chaosHTTPTimeout bounds each request. It is a little above the nodes'
// own bounds (5 s for a write, 3 s for a read index) so that a node that
// gives up answers 503 before the client gives up on it.
const chaosHTTPTimeout = 6 * time.Second

// chaosScenarioTimeout bounds one scenario (a sign-in and what follows),
// so that workers stop soon after the deadline whatever the cluster does.
const chaosScenarioTimeout = 20 * time.Second

// chaosView is what the workers know of the nemesis: which node is down
// (so they rarely waste a request on it), and a lock that keeps requests
// through the balancer out of a restart.
//
// The lock works around a data race in testcluster: Cluster.start sets
// member.node without holding Cluster.mu while Cluster.Node (called by the
// balancer for every request) reads it under the lock, so any balancer
// request during Restart is reported by -race. With start assigning
// under c.mu the lock can go.
type chaosView struct {
	down    atomic.Int32 // the node the nemesis killed, -1 when none
	restart sync.RWMutex // held by the nemesis across Restart
}

func newChaosView() *chaosView {
	v := &chaosView{}
	v.down.Store(-1)
	return v
}

// chaosWorker is one client of the workload, with its own random stream.
type chaosWorker struct {
	id  int
	c   *testcluster.Cluster
	v   *chaosView
	w   world
	h   *chaosHistory
	rng *rand.Rand
	tr  *http.Transport
	api *http.Client // no cookies: back channel and admin API

	killed []int // tokens whose end this worker saw acknowledged
	orgs   int
}

func newChaosWorker(id int, seed uint64, c *testcluster.Cluster, v *chaosView, w world, h *chaosHistory) *chaosWorker {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 5 * time.Second}
	return &chaosWorker{
		id: id, c: c, v: v, w: w, h: h, tr: tr,
		// Each worker draws from its own stream of the run's seed.
		rng: rand.New(rand.NewPCG(seed, uint64(id)+1)),
		api: &http.Client{Transport: tr, Timeout: chaosHTTPTimeout, CheckRedirect: noRedirect},
	}
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// run loops until deadline; each iteration is bounded by
// chaosScenarioTimeout and stops early when stop is cancelled.
func (wk *chaosWorker) run(stop context.Context, deadline time.Time) {
	defer wk.tr.CloseIdleConnections()
	for time.Now().Before(deadline) && stop.Err() == nil {
		ctx, cancel := context.WithTimeout(stop, chaosScenarioTimeout)
		switch p := wk.rng.IntN(100); {
		case p < 20:
			wk.createOrg(ctx, wk.pick(true))
		case p < 30 && len(wk.killed) > 0:
			// An ended token stays ended, on every node, later too.
			tok := wk.killed[wk.rng.IntN(len(wk.killed))]
			wk.check(ctx, tok, wk.pick(false))
		default:
			wk.scenario(ctx)
		}
		cancel()
	}
}

// pick returns a random running node, or -1 (the balancer) when
// balancer is set, one time in five.
func (wk *chaosWorker) pick(balancer bool) int {
	if balancer && wk.rng.IntN(5) == 0 {
		return -1
	}
	return wk.pickOther(-1)
}

// pickOther returns a random running node other than not (any node when
// none other runs). A node cut off by a partition is running: requests
// to it are part of the test.
func (wk *chaosWorker) pickOther(not int) int {
	var live, all []int
	down := int(wk.v.down.Load())
	for i := range wk.c.Size() {
		if i != not {
			all = append(all, i)
			if i != down {
				live = append(live, i)
			}
		}
	}
	if len(live) == 0 {
		live = all
	}
	return live[wk.rng.IntN(len(live))]
}

// viaBalancer runs f, holding off restarts when node is the balancer
// (see chaosView).
func (wk *chaosWorker) viaBalancer(node int, f func()) {
	if node < 0 {
		wk.v.restart.RLock()
		defer wk.v.restart.RUnlock()
	}
	f()
}

func (wk *chaosWorker) base(node int) string {
	if node < 0 {
		return wk.c.Issuer()
	}
	return wk.c.URL(node)
}

// chaosSession is one browser and the tokens its SSO session got.
type chaosSession struct {
	id     int
	client *http.Client
	tokens []int
}

func (wk *chaosWorker) newSession() *chaosSession {
	jar, _ := cookiejar.New(nil)
	return &chaosSession{id: wk.h.newSession(), client: &http.Client{
		Jar: jar, Transport: wk.tr, Timeout: chaosHTTPTimeout, CheckRedirect: noRedirect,
	}}
}

// scenario: a fresh browser signs in on one node and the code is
// exchanged on another (sometimes twice, concurrently, on two nodes);
// sometimes a second, silent sign-in adds a token to the same session;
// then the token is checked, and revoked or the session signed out (or
// left alone), and checked again on another node right after the
// acknowledgement.
func (wk *chaosWorker) scenario(ctx context.Context) {
	s := wk.newSession()
	a := wk.pick(true)
	if !wk.signInAndExchange(ctx, s, a, false) {
		return
	}
	if wk.rng.IntN(4) == 0 {
		wk.signInAndExchange(ctx, s, wk.pick(true), true)
	}
	wk.check(ctx, s.tokens[wk.rng.IntN(len(s.tokens))], wk.pick(false))
	switch p := wk.rng.IntN(100); {
	case p < 40:
		tok := s.tokens[wk.rng.IntN(len(s.tokens))]
		x := wk.pick(false)
		if wk.revoke(ctx, tok, x) {
			wk.killed = append(wk.killed, tok)
			wk.check(ctx, tok, wk.pickOther(x))
		}
	case p < 75:
		x := wk.pick(false)
		if wk.logout(ctx, s, x) {
			wk.killed = append(wk.killed, s.tokens...)
			y := wk.pickOther(x)
			for _, tok := range s.tokens {
				wk.check(ctx, tok, y)
			}
		}
	}
}

// signInAndExchange runs the browser through /authorize on node a (silent
// when the session exists) and exchanges the code on another node, or on
// two others at once. It reports whether a token was added to s.
func (wk *chaosWorker) signInAndExchange(ctx context.Context, s *chaosSession, a int, silent bool) bool {
	code := wk.h.newCode()
	verifier := oauth2.GenerateVerifier()
	op := chaosOp{Kind: opSignIn, Worker: wk.id, Node: a, Code: code, Session: s.id, Start: time.Now()}
	var raw string
	var status int
	var err error
	wk.viaBalancer(a, func() { raw, status, err = wk.signIn(ctx, s, a, verifier, silent) })
	op.End, op.Status = time.Now(), status
	switch {
	case err == nil:
		op.Outcome = chaosOK
	case status >= 400 && status < 500:
		op.Outcome, op.Err = chaosFail, err.Error()
	default:
		op.Outcome, op.Err = chaosUnknown, err.Error()
	}
	wk.h.record(op)
	if err != nil {
		return false
	}
	if wk.rng.IntN(4) != 0 || wk.c.Size() < 3 {
		if tok := wk.exchange(ctx, s, code, raw, verifier, wk.pickOther(a), false); tok != 0 {
			s.tokens = append(s.tokens, tok)
			return true
		}
		return false
	}
	// Two exchanges of one code race on two nodes: at most one may win,
	// and the loser's refusal revokes the winner's token.
	b := wk.pickOther(-1)
	d := wk.pickOther(b)
	var wg sync.WaitGroup
	toks := make([]int, 2)
	start := make(chan struct{})
	for k, node := range []int{b, d} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			toks[k] = wk.exchange(ctx, s, code, raw, verifier, node, true)
		}()
	}
	close(start)
	wg.Wait()
	won := false
	for _, tok := range toks {
		if tok != 0 {
			s.tokens = append(s.tokens, tok)
			wk.check(ctx, tok, wk.pick(false))
			won = true
		}
	}
	return won
}

// signIn returns the code of the callback, or an error with the last
// status seen.
func (wk *chaosWorker) signIn(ctx context.Context, s *chaosSession, a int, verifier string, silent bool) (string, int, error) {
	base := wk.base(a)
	cfg := oauth2.Config{ClientID: wk.w.confID, RedirectURL: wk.w.cb, Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: base + "/authorize"}}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", "nonce-0123456789")}
	if silent {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "none"))
	}
	p, err := chaosGet(ctx, s.client, cfg.AuthCodeURL("state-0123456789", opts...))
	for i := 0; err == nil && i < 8; i++ {
		if loc := p.location(); loc != "" {
			if !strings.HasPrefix(loc, base) {
				break
			}
			p, err = chaosGet(ctx, s.client, loc)
			continue
		}
		switch {
		case p.status != http.StatusOK:
			return "", p.status, fmt.Errorf("page %d at %s", p.status, p.url.Path)
		case strings.Contains(p.body, `name="password"`):
			p, err = chaosSubmit(ctx, s.client, p, map[string]string{"email": wk.w.email, "password": wk.w.password}, "method", "password")
		case strings.Contains(p.body, `value="allow"`):
			p, err = chaosSubmit(ctx, s.client, p, nil, "decision", "allow")
		default:
			return "", p.status, fmt.Errorf("unexpected page at %s", p.url.Path)
		}
	}
	if err != nil {
		return "", 0, err
	}
	loc, perr := url.Parse(p.location())
	if perr != nil || !strings.HasPrefix(p.location(), wk.w.cb) {
		return "", p.status, fmt.Errorf("flow ended at %d %q", p.status, p.location())
	}
	q := loc.Query()
	if q.Get("code") == "" {
		// An error redirect: temporarily_unavailable is the cluster's
		// problem, anything else the request's.
		status := http.StatusBadRequest
		if e := q.Get("error"); e == "temporarily_unavailable" || e == "server_error" {
			status = http.StatusServiceUnavailable
		}
		return "", status, fmt.Errorf("callback error %s", q.Get("error"))
	}
	return q.Get("code"), p.status, nil
}

// exchange redeems code on node and records the token it got (0: none).
// It runs concurrently with itself (double exchanges): it does not touch s
// or the worker's random stream.
func (wk *chaosWorker) exchange(ctx context.Context, s *chaosSession, code int, raw, verifier string, node int, double bool) int {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {raw}, "redirect_uri": {wk.w.cb}, "code_verifier": {verifier}}
	op := chaosOp{Kind: opExchange, Worker: wk.id, Node: node, Code: code, Session: s.id, Double: double, Start: time.Now()}
	status, body, err := wk.clientPost(ctx, node, "/oauth2/token", form)
	op.End, op.Status, op.Outcome = time.Now(), status, chaosClassify(status, err)
	var resp struct {
		AccessToken string `json:"access_token"`
		IDToken     string `json:"id_token"`
		Error       string `json:"error"`
	}
	json.Unmarshal(body, &resp)
	op.Err = chaosErr(err, resp.Error)
	if op.Outcome == chaosOK {
		if resp.AccessToken == "" || resp.IDToken == "" {
			// A 200 without tokens is a broken answer, not a redemption
			// we can follow; keep it visible in the history.
			op.Outcome, op.Err = chaosUnknown, "200 without tokens"
		} else {
			op.Token = wk.h.addToken(chaosToken{Raw: resp.AccessToken, IDToken: resp.IDToken, Code: code, Session: s.id, IssuedAt: op.End})
		}
	}
	wk.h.record(op)
	return op.Token
}

func (wk *chaosWorker) token(id int) chaosToken {
	wk.h.mu.Lock()
	defer wk.h.mu.Unlock()
	return wk.h.tokens[id-1]
}

// revoke revokes token on node with the confidential client and reports
// whether the revocation was acknowledged.
func (wk *chaosWorker) revoke(ctx context.Context, token, node int) bool {
	op := chaosOp{Kind: opRevoke, Worker: wk.id, Node: node, Token: token, Session: wk.token(token).Session, Start: time.Now()}
	status, body, err := wk.clientPost(ctx, node, "/oauth2/revoke", url.Values{"token": {wk.token(token).Raw}})
	op.End, op.Status, op.Outcome = time.Now(), status, chaosClassify(status, err)
	op.Err = chaosErr(err, oauthError(body))
	wk.h.record(op)
	return op.Outcome == chaosOK
}

// logout signs the browser out through node with the hint of its last ID
// token and reports whether the logout was acknowledged: the redirect to
// the registered URI with our state.
func (wk *chaosWorker) logout(ctx context.Context, s *chaosSession, node int) bool {
	state := fmt.Sprintf("st-%d-%d", wk.id, s.id)
	q := url.Values{"id_token_hint": {wk.token(s.tokens[len(s.tokens)-1]).IDToken}, "client_id": {wk.w.confID},
		"post_logout_redirect_uri": {wk.w.cb}, "state": {state}}
	op := chaosOp{Kind: opLogout, Worker: wk.id, Node: node, Session: s.id, Start: time.Now()}
	p, err := chaosGet(ctx, s.client, wk.base(node)+"/logout?"+q.Encode())
	op.End = time.Now()
	switch {
	case err != nil:
		op.Outcome, op.Err = chaosUnknown, err.Error()
	case p.status == http.StatusFound && p.location() == wk.w.cb+"?state="+state:
		op.Outcome, op.Status = chaosOK, p.status
	case p.status == http.StatusFound:
		op.Outcome, op.Status, op.Err = chaosUnknown, p.status, "redirect to "+p.location()
	default:
		op.Status, op.Outcome = p.status, chaosClassify(p.status, nil)
		if op.Outcome == chaosOK { // a 200 page: we asked for a redirect
			op.Outcome, op.Err = chaosUnknown, "no redirect"
		}
	}
	wk.h.record(op)
	return op.Outcome == chaosOK
}

// check asks node whether token is active, by userinfo or introspection
// (one or the other at random), and records the answer.
func (wk *chaosWorker) check(ctx context.Context, token, node int) chaosOp {
	op := wk.checkOnce(ctx, token, node, wk.rng.IntN(2) == 0)
	wk.h.record(op)
	return op
}

func (wk *chaosWorker) checkOnce(ctx context.Context, token, node int, userinfo bool) chaosOp {
	raw := wk.token(token).Raw
	op := chaosOp{Kind: opIntrospect, Worker: wk.id, Node: node, Token: token, Start: time.Now()}
	if userinfo {
		op.Kind = opUserinfo
		req, _ := http.NewRequestWithContext(ctx, "GET", wk.base(node)+"/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+raw)
		status, body, err := chaosDo(wk.api, req)
		op.End, op.Status, op.Outcome = time.Now(), status, chaosClassify(status, err)
		op.Err = chaosErr(err, oauthError(body))
		op.Active = status == http.StatusOK
		return op
	}
	status, body, err := wk.clientPost(ctx, node, "/oauth2/introspect", url.Values{"token": {raw}})
	op.End, op.Status, op.Outcome = time.Now(), status, chaosClassify(status, err)
	var out struct {
		Active bool   `json:"active"`
		Error  string `json:"error"`
	}
	json.Unmarshal(body, &out)
	op.Err = chaosErr(err, out.Error)
	op.Active = status == http.StatusOK && out.Active
	return op
}

// createOrg creates an organization with a slug never used before.
func (wk *chaosWorker) createOrg(ctx context.Context, node int) {
	wk.orgs++
	slug := fmt.Sprintf("chaos-w%d-%d", wk.id, wk.orgs)
	op := chaosOp{Kind: opCreateOrg, Worker: wk.id, Node: node, Slug: slug, Start: time.Now()}
	var status int
	var body []byte
	var err error
	wk.viaBalancer(node, func() {
		status, body, err = chaosAdminPost(ctx, wk.api, wk.base(node), "/admin/v1/organizations", map[string]any{"slug": slug, "name": "Chaos " + slug})
	})
	op.End, op.Status, op.Outcome = time.Now(), status, chaosClassify(status, err)
	op.Err = chaosErr(err, "")
	if op.Outcome == chaosOK {
		var o struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(body, &o); o.ID == "" || status != http.StatusCreated {
			op.Outcome, op.Err = chaosUnknown, fmt.Sprintf("answer %d %.80s", status, body)
		}
		op.OrgID = o.ID
	}
	wk.h.record(op)
}

func chaosAdminPost(ctx context.Context, hc *http.Client, base, path string, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	return chaosDo(hc, req)
}

// clientPost posts form to node with the confidential client's secret.
func (wk *chaosWorker) clientPost(ctx context.Context, node int, path string, form url.Values) (int, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", wk.base(node)+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(wk.w.confID), url.QueryEscape(wk.w.confSecret))
	return chaosDo(wk.api, req)
}

func chaosDo(hc *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

func oauthError(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	json.Unmarshal(body, &e)
	return e.Error
}

// chaosErr is what the history keeps of an error: the transport error
// (shortened), else the OAuth error code.
func chaosErr(err error, code string) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case err != nil:
		s := err.Error()
		if i := strings.LastIndex(s, ": "); i >= 0 {
			s = s[i+2:]
		}
		return s
	}
	return code
}

// chaosPage is a fetched response. The testcluster.Browser helpers call
// t.Fatal on any transport error, which a worker under faults must not
// do, hence this small error-returning browser.
type chaosPage struct {
	url    *url.URL
	status int
	header http.Header
	body   string
}

func (p *chaosPage) location() string {
	loc := p.header.Get("Location")
	if loc == "" {
		return ""
	}
	u, err := p.url.Parse(loc)
	if err != nil {
		return loc
	}
	return u.String()
}

func chaosGet(ctx context.Context, hc *http.Client, raw string) (*chaosPage, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", raw, nil)
	if err != nil {
		return nil, err
	}
	return chaosFetch(hc, req)
}

func chaosFetch(hc *http.Client, req *http.Request) (*chaosPage, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	return &chaosPage{url: resp.Request.URL, status: resp.StatusCode, header: resp.Header, body: string(body)}, nil
}

// chaosSubmit posts the page's form holding the button name=value, with
// fields set.
func chaosSubmit(ctx context.Context, hc *http.Client, p *chaosPage, fields map[string]string, name, value string) (*chaosPage, error) {
	action, values, err := htmlform.FindIn(strings.NewReader(p.body), name, value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.url.Path, err)
	}
	for k, v := range fields {
		values.Set(k, v)
	}
	values.Set(name, value)
	target, err := p.url.Parse(action)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", target.String(), strings.NewReader(values.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return chaosFetch(hc, req)
}
