package logout

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/webui"
)

// Fixed ids of the seeded world.
const (
	hOrgA  = "0a000000-0000-4000-8000-000000000001"
	hOrgB  = "0b000000-0000-4000-8000-000000000002"
	hUser  = "1a000000-0000-4000-8000-000000000001"
	hUser2 = "1b000000-0000-4000-8000-000000000002"

	hAppA      = "app-a"      // org A, back-channel receiver recvA
	hAppB      = "app-b"      // org A, back-channel receiver recvB
	hMulti     = "multi-app"  // multi-organization, registered to A, receiver recvM
	hSilent    = "silent-app" // org A, no back-channel URI
	hSuspended = "suspended-app"

	hRedirect      = "https://app.example/cb"
	hRedirectQuery = "https://app.example/cb?tenant=1"

	hCookie = "oidcd_session"
)

// clock is real time plus an adjustable offset, so timers and the injected
// clock agree until a test moves the clock.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.off += d; c.mu.Unlock() }

// applier is the fsmtest applier with a switchable failure for some
// command types.
type applier struct {
	*fsmtest.Applier
	mu   sync.Mutex
	fail map[fsm.Type]error
}

func (a *applier) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	a.mu.Lock()
	err := a.fail[cmd.Type]
	a.mu.Unlock()
	if err != nil {
		return fsm.Result{}, err
	}
	return a.Applier.Apply(ctx, cmd)
}

func (a *applier) failOn(t fsm.Type, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail == nil {
		a.fail = map[fsm.Type]error{}
	}
	a.fail[t] = err
}

// receiver is a relying party's back-channel endpoint. It records every
// logout_token posted and answers with status (200 by default).
type receiver struct {
	srv    *httptest.Server
	status atomic.Int32
	delay  atomic.Int64 // nanoseconds to hold each request

	mu          sync.Mutex
	tokens      []string       // every request, as it arrives
	answered    []string       // requests answered, after the delay
	active      map[string]int // jti -> attempts in progress
	inFlight    int
	maxInFlight int
	overlap     bool // two attempts of one jti at once
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{active: map[string]int{}}
	r.status.Store(http.StatusOK)
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if err := req.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	tok := req.PostForm.Get("logout_token")
	jti := claimsOf(tok)["jti"].(string)
	r.mu.Lock()
	r.tokens = append(r.tokens, tok)
	r.active[jti]++
	if r.active[jti] > 1 {
		r.overlap = true
	}
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	r.mu.Unlock()
	if d := time.Duration(r.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-req.Context().Done():
		}
	}
	r.mu.Lock()
	r.active[jti]--
	r.inFlight--
	r.answered = append(r.answered, tok)
	r.mu.Unlock()
	w.WriteHeader(int(r.status.Load()))
}

func (r *receiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tokens...)
}

func (r *receiver) done() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.answered...)
}

// claimsOf decodes a JWT's payload without checking it.
func claimsOf(tok string) map[string]any {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return map[string]any{"jti": ""}
	}
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var m map[string]any
	json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{"jti": ""}
	}
	return m
}

// harness is a Service over a real bbolt FSM, real keys and real pages,
// served by httptest behind the correlation middleware.
type harness struct {
	t       *testing.T
	clock   *clock
	applier *applier
	keys    *keys.Manager
	s       *Service
	srv     *httptest.Server
	reg     *prometheus.Registry
	recvA   *receiver
	recvB   *receiver
	recvM   *receiver
}

// newSessions is the browser session of issuer over st, as node builds it.
func newSessions(t *testing.T, issuer string, st *fsm.State) *session.Manager {
	t.Helper()
	m, err := session.New(session.Config{Issuer: issuer, State: st})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newHarness(t *testing.T, tweak ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: &clock{}, reg: prometheus.NewRegistry()}
	h.applier = &applier{Applier: fsmtest.New(t)}
	h.keys = keys.New(keys.Config{State: h.applier.State(), Applier: h.applier, Now: h.clock.Now})
	if err := h.keys.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	ui, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewUnstartedServer(nil)
	cfg := Config{
		Issuer: "http://" + h.srv.Listener.Addr().String(), State: h.applier.State(), Applier: h.applier,
		Keys: h.keys, UI: ui, Now: h.clock.Now, Registerer: h.reg,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	if cfg.Sessions == nil {
		cfg.Sessions = newSessions(t, cfg.Issuer, cfg.State)
	}
	h.s, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.s.tick = 20 * time.Millisecond
	h.s.backoff = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}
	h.s.sendTimeout = time.Second
	h.applier.FSM.OnApply = h.s.OnApply // as node does
	mux := http.NewServeMux()
	h.s.Register(mux)
	h.srv.Config.Handler = httpx.Correlation(mux)
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	h.recvA, h.recvB, h.recvM = newReceiver(t), newReceiver(t), newReceiver(t)
	h.seed()
	return h
}

func (h *harness) apply(typ fsm.Type, v any) fsm.Result {
	h.t.Helper()
	res, err := h.applier.Applier.Apply(context.Background(), fsm.MustCommand(typ, v))
	if err != nil || res.Err != nil {
		h.t.Fatalf("%s: %v %v", typ, err, res.Err)
	}
	return res
}

func (h *harness) seed() {
	now := h.clock.Now()
	for _, o := range []struct{ id, slug string }{{hOrgA, "alpha"}, {hOrgB, "beta"}} {
		h.apply(fsm.TypeCreateOrg, fsm.CreateOrg{ID: o.id, Slug: o.slug, Name: "Org " + o.slug, CreatedAt: now})
	}
	for i, u := range []string{hUser, hUser2} {
		h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: u, Email: fmt.Sprintf("p%d@example.com", i), CreatedAt: now}})
		for j, org := range []string{hOrgA, hOrgB} {
			h.apply(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{
				ID: fmt.Sprintf("2%d000000-0000-4000-8000-00000000000%d", i, j), UserID: u, OrgID: org, Status: fsm.MembershipActive}})
		}
	}
	clients := []fsm.Client{
		{ID: hAppA, BackchannelLogoutURI: h.recvA.srv.URL + "/bcl", OrganizationID: hOrgA},
		{ID: hAppB, BackchannelLogoutURI: h.recvB.srv.URL + "/bcl", OrganizationID: hOrgA},
		{ID: hMulti, BackchannelLogoutURI: h.recvM.srv.URL + "/bcl", OrganizationID: hOrgA, MultiOrganization: true, Organizations: []string{hOrgA, hOrgB}},
		{ID: hSilent, OrganizationID: hOrgA},
		{ID: hSuspended, OrganizationID: hOrgA, Suspended: true},
	}
	for _, c := range clients {
		c.Name, c.Type, c.Scopes = c.ID, fsm.ClientPublic, []string{"openid"}
		c.RedirectURIs = []string{hRedirect, hRedirectQuery}
		c.AccessTokenTTL = 600
		c.CreatedAt, c.UpdatedAt = now, now
		h.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: c})
	}
}

// browserSSO is a browser's SSO session: its id and its cookie secret.
type browserSSO struct{ id, secret string }

// ssoSession opens a live SSO session for user.
func (h *harness) ssoSession(user string) browserSSO {
	h.t.Helper()
	now := h.clock.Now()
	s := browserSSO{id: uuid.NewString(), secret: httpx.NewID()}
	h.apply(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: authn.HashToken(s.secret), Session: fsm.SSOSession{
		ID: s.id, UserID: user, AuthTime: now, AMR: []string{"pwd"}, ACR: "urn:service:sso:acr:pwd",
		CreatedAt: now, LastSeen: now, IdleExpiresAt: now.Add(2 * time.Hour), ExpiresAt: now.Add(12 * time.Hour),
	}})
	return s
}

// signIn opens (or reuses) the app session of client in org under sess, as
// the authorize flow does, and returns an ID token for it.
func (h *harness) signIn(sess browserSSO, user, client, org string) (sid, idToken string) {
	h.t.Helper()
	now := h.clock.Now()
	res := h.apply(fsm.TypeIssueCode, fsm.IssueCode{NewSID: uuid.NewString(), IdleExpiresAt: now.Add(2 * time.Hour), Code: fsm.Code{
		Hash: authn.HashToken(httpx.NewID()), ClientID: client, RedirectURI: hRedirect, UserID: user, OrgID: org,
		SSOSessionID: sess.id, Scopes: []string{"openid"}, Challenge: "x", AuthTime: now, AMR: []string{"pwd"},
		ACR: "urn:service:sso:acr:pwd", RequestedAt: now, IssuedAt: now, ExpiresAt: now.Add(time.Minute),
	}})
	sid = res.Value.(string)
	return sid, h.idToken(map[string]any{"sub": user, "aud": []string{client}, "sid": sid, "organization_id": org})
}

// idToken signs an ID token like oidc's, with claims overriding the
// defaults (a nil value deletes the claim).
func (h *harness) idToken(claims map[string]any) string {
	h.t.Helper()
	now := h.clock.Now()
	c := map[string]any{
		"iss": h.s.cfg.Issuer, "sub": hUser, "aud": []string{hAppA}, "exp": now.Add(10 * time.Minute).Unix(),
		"iat": now.Unix(), "auth_time": now.Unix(), "acr": "urn:service:sso:acr:pwd", "amr": []string{"pwd"},
		"sid": "none", "organization_id": hOrgA, "at_hash": "x", "jti": uuid.NewString(), "rat": now.Unix(),
	}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	tok, err := h.keys.Sign(c, keys.TypJWT)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(tok)
}

// runSender runs the sender until the test ends.
func (h *harness) runSender() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.s.RunSender(ctx); close(done) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			h.t.Error("RunSender did not return after cancel")
		}
	})
}

// response is an answer of the logout endpoint.
type response struct {
	status int
	header http.Header
	body   string
}

func (r response) location() string { return r.header.Get("Location") }

// get calls GET /logout with the raw query and an optional cookie secret.
func (h *harness) get(rawQuery, cookie string) response {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.srv.URL+Path+"?"+rawQuery, nil)
	return h.do(req, cookie)
}

// post calls POST /logout with form as the body.
func (h *harness) post(form url.Values, cookie string) response {
	h.t.Helper()
	req, _ := http.NewRequest("POST", h.srv.URL+Path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return h.do(req, cookie)
}

func (h *harness) do(req *http.Request, cookie string) response {
	h.t.Helper()
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: session.CookieName(hCookie, "/", h.s.cfg.Sessions.Secure()), Value: cookie})
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// ended reports whether the SSO session has ended.
func (h *harness) ended(id string) bool {
	h.t.Helper()
	s, err := h.applier.State().SSOSession(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return !s.EndedAt.IsZero()
}

// waitFor polls cond for up to 5 s.
// waitMetric waits for a metric to reach want: the sender counts an outcome
// after its write is applied, so a test that saw the state can be ahead.
func (h *harness) waitMetric(name string, want float64) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := h.metric(name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: got %v, want %v", name, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
