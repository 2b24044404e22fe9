package signin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/html"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/internal/testkit/htmlform"
	"github.com/oidcd/oidcd/internal/testkit/promtest"
	"github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/webui"
)

// The sign-in's tests drive Step through a stand-in for the
// authorization flow of package oidc (testFlow below): it keeps the
// pending request sealed in every form as oidc does, shows the sign-in
// page while the browser has no session, the second-factor page while
// the request asks for mfa and the session lacks it, and answers
// "signed in" (200, JSON of the session) where oidc would go on to the
// picker, the consent and the code. So every factor is tested here on a
// real bbolt FSM (fsmtest) and the real pages, without oidc, keys or a
// cluster.

// testClock is an adjustable clock shared by the sign-in and the test.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// Fixed ids of the seeded world.
const (
	hOrgA     = "0a000000-0000-4000-8000-000000000001"
	hUser     = "1a000000-0000-4000-8000-000000000001"
	hUserB    = "1b000000-0000-4000-8000-000000000002"
	hEmail    = "ann@example.com"
	hEmailB   = "bob@example.com"
	hPassword = "correct horse battery"
	hPublic   = "public-app"
	hAppName  = "Public App"
)

// harness is a Signin over a real bbolt FSM and real pages, behind the
// stand-in flow, served by httptest on 127.0.0.1.
type harness struct {
	t       testing.TB
	clock   *testClock
	applier *fsmtest.Applier
	p       *Signin
	srv     *httptest.Server
	hasher  *password.Hasher
}

// newHarness builds the harness; opts tweak the Config before New (they
// run after the defaults, so they may replace the issuer).
func newHarness(t testing.TB, opts ...func(*Config)) *harness {
	t.Helper()
	// The clock starts at the real time: cookie expiry set from it is
	// judged by the cookie jar against the real clock.
	h := &harness{t: t, clock: &testClock{t: time.Now().UTC().Truncate(time.Second)}}
	h.applier = fsmtest.New(t)
	h.hasher = password.New(password.Params{Memory: 64, Time: 1, Threads: 1}, 4)
	ui, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewUnstartedServer(nil)
	cfg := Config{
		Issuer: "http://" + h.srv.Listener.Addr().String(), State: h.applier.State(), Applier: h.applier,
		UI: ui, Hasher: h.hasher, Now: h.clock.Now,
	}
	for _, f := range opts {
		f(&cfg)
	}
	if cfg.Sessions == nil {
		// As node does: one browser session, after the issuer is known.
		cfg.Sessions = newSessions(t, cfg.Issuer, cfg.State, cfg.KEK)
	}
	h.p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.p.Register(mux)
	mux.HandleFunc("GET /authorize", h.handleAuthorize)
	mux.HandleFunc("POST /authorize", h.handleAuthorizePost)
	mux.Handle("/static/", ui.Static())
	h.srv.Config.Handler = mux
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	h.seed()
	return h
}

// newSessions is the browser session of a sign-in over st.
func newSessions(t testing.TB, issuer string, st *fsm.State, k *kek.KEK) *session.Manager {
	t.Helper()
	m, err := session.New(session.Config{Issuer: issuer, State: st, KEK: k})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (h *harness) apply(typ fsm.Type, v any) fsm.Result {
	h.t.Helper()
	res, err := h.applier.Apply(context.Background(), fsm.MustCommand(typ, v))
	if err != nil || res.Err != nil {
		h.t.Fatalf("%s: %v %v", typ, err, res.Err)
	}
	return res
}

func (h *harness) hash(s string) string {
	h.t.Helper()
	out, err := h.hasher.Hash(context.Background(), s)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) seed() {
	now := h.clock.Now()
	h.apply(fsm.TypeSetSecret, fsm.SetSecret{Name: fsm.SecretBrowserKey, Value: bytes.Repeat([]byte{7}, 32)})
	h.apply(fsm.TypeCreateOrg, fsm.CreateOrg{ID: hOrgA, Slug: "alpha", Name: "Org alpha", CreatedAt: now})
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: hUser, Email: hEmail, EmailVerified: true, PasswordHash: h.hash(hPassword), CreatedAt: now}})
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: hUserB, Email: hEmailB, PasswordHash: h.hash(hPassword), CreatedAt: now}})
	h.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{
		ID: hPublic, Name: hAppName, Type: fsm.ClientPublic, Scopes: []string{"openid"}, OrganizationID: hOrgA,
		SkipConsent: true, RedirectURIs: []string{"https://app.example/cb"}, AccessTokenTTL: 600, CreatedAt: now, UpdatedAt: now,
	}})
}

// ---- the stand-in for oidc's authorization flow ----

// testRequest is the stand-in's authorization request: the client, and
// whether acr_values asks for mfa.
type testRequest struct {
	ClientID    string    `json:"client_id"`
	MFA         bool      `json:"mfa,omitempty"`
	OrgHint     string    `json:"organization_hint,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
}

// resume is the query that asks for the request again, as oidc's is.
func (r testRequest) resume() string {
	q := authzQuery(r.ClientID, r.MFA)
	if r.OrgHint != "" {
		q.Set("organization_hint", r.OrgHint)
	}
	return q.Encode()
}

// testPending is sealed as oidc's pending request is: the request beside
// the shared authn.Pending.
type testPending struct {
	Req testRequest `json:"req"`
	authn.Pending
}

// signedIn is the stand-in's answer once the sign-in is complete.
type signedIn struct {
	SSO    string   `json:"sso"`
	User   string   `json:"user"`
	ACR    string   `json:"acr"`
	AMR    []string `json:"amr"`
	StepUp bool     `json:"stepup"`
}

// authzQuery is the query of GET /authorize for client (mfa: asks for
// acr mfa).
func authzQuery(client string, mfa bool) url.Values {
	q := url.Values{"client_id": {client}}
	if mfa {
		q.Set("acr_values", authn.ACRMFA)
	}
	return q
}

func authzPath(q url.Values) string { return "/authorize?" + q.Encode() }

// turn is one request of the stand-in flow.
type turn struct {
	h     *harness
	w     http.ResponseWriter
	r     *http.Request
	pend  *testPending
	sess  fsm.SSOSession
	user  fsm.User
	found bool
	csrf  string
	ref   string
}

func (h *harness) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tr := &turn{h: h, w: w, r: r, pend: &testPending{Req: testRequest{
		ClientID: q.Get("client_id"), MFA: q.Get("acr_values") == authn.ACRMFA, OrgHint: q.Get("organization_hint"), RequestedAt: h.clock.Now().UTC(),
	}, Pending: authn.Pending{UILocales: i18n.UILocale(q.Get("ui_locales"))}}}
	if !tr.load() {
		return
	}
	tr.proceed()
}

func (h *harness) handleAuthorizePost(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, authn.MaxPageForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "form", http.StatusBadRequest)
		return
	}
	box, err := h.p.sessions.Box()
	if err != nil {
		http.Error(w, "sealer", http.StatusServiceUnavailable)
		return
	}
	step, _ := authn.FormValue(r.PostForm, "step")
	var pd testPending
	if box.Open("authz", step, h.clock.Now().UTC(), &pd) != nil ||
		!slices.Contains([]string{authn.StageSignIn, authn.StageMFA, authn.StageSMSCode}, pd.Stage) {
		http.Error(w, "step", http.StatusBadRequest)
		return
	}
	token, _ := authn.FormValue(r.PostForm, "csrf_token")
	if !authn.CSRFMatch(h.p.cookieValue(r, session.CSRFCookie, "/"), token, pd.CSRF) {
		http.Error(w, "csrf", http.StatusForbidden)
		return
	}
	tr := &turn{h: h, w: w, r: r, pend: &pd, csrf: pd.CSRF}
	if !tr.load() {
		return
	}
	tr.step(r.PostForm, "")
}

func (tr *turn) load() bool {
	s, u, found, err := tr.h.p.browserSession(tr.r, tr.h.clock.Now().UTC())
	if err != nil {
		http.Error(tr.w, err.Error(), http.StatusServiceUnavailable)
		return false
	}
	tr.sess, tr.user, tr.found = s, u, found
	return true
}

// step hands one turn to the sign-in, as oidc's flow.step does.
func (tr *turn) step(form url.Values, show string) {
	appName := ""
	if c, err := tr.h.applier.State().Client(tr.pend.Req.ClientID); err == nil {
		appName = c.Name
	}
	st := &authn.Step{
		Pending: &tr.pend.Pending,
		Seal: func() (string, error) {
			box, err := tr.h.p.sessions.Box()
			if err != nil {
				return "", err
			}
			return box.Seal("authz", tr.pend, tr.pend.Req.RequestedAt.Add(10*time.Minute))
		},
		Form: form, Show: show, ClientID: tr.pend.Req.ClientID, AppName: appName, Turn: &authn.Turn{CSRF: tr.csrf, Ref: tr.ref},
		OrgHint: tr.pend.Req.OrgHint, Resume: tr.pend.Req.resume(),
	}
	var sess fsm.SSOSession
	if tr.found {
		sess = tr.sess
	}
	s, u, ok := tr.h.p.Step(tr.w, tr.r, st, sess, tr.user)
	tr.csrf, tr.ref = st.CSRF, st.Ref
	if !ok {
		return
	}
	tr.sess, tr.user, tr.found = s, u, s.ID != ""
	tr.proceed()
}

// proceed is the stand-in's pipeline: authenticate, then strength.
func (tr *turn) proceed() {
	pd := tr.pend
	if pd.SSOID != "" && (!tr.found || tr.sess.ID != pd.SSOID) {
		pd.SSOID, pd.StepUp = "", false
	}
	if pd.SSOID == "" {
		if !tr.found {
			tr.step(nil, authn.StageSignIn)
			return
		}
		pd.SSOID = tr.sess.ID
	}
	if pd.Req.MFA && tr.sess.ACR != authn.ACRMFA {
		if pd.StepUp { // a recovery code: oidc denies here
			http.Error(tr.w, "second factor too weak", http.StatusForbidden)
			return
		}
		tr.step(nil, authn.StageMFA)
		return
	}
	tr.w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(tr.w).Encode(signedIn{SSO: tr.sess.ID, User: tr.user.ID, ACR: tr.sess.ACR, AMR: tr.sess.AMR, StepUp: pd.StepUp})
}

// ---- the browser ----

// browser is a person's browser: a cookie jar and a client that does not
// follow redirects.
type browser struct {
	t   testing.TB
	h   *harness
	jar *cookiejar.Jar
	c   *http.Client
}

func (h *harness) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return &browser{t: h.t, h: h, jar: jar, c: &http.Client{
		Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// page is a response as the browser saw it.
type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) abs(ref string) string {
	if strings.HasPrefix(ref, "http") {
		return ref
	}
	return b.h.srv.URL + ref
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *browser) get(ref string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.abs(ref), nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

func (b *browser) post(ref string, form url.Values) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.abs(ref), strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// cookie is the browser's cookie name for path ("" when none).
func (b *browser) cookie(path, name string) string {
	u, err := url.Parse(b.abs(path))
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range b.jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// htmlForm is a parsed <form>.
type htmlForm struct {
	action, method string
	hidden         url.Values
	inputs         []string
	buttons        [][2]string
}

func parseForms(t testing.TB, body string) []htmlForm {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out []htmlForm
	for _, f := range htmlform.Forms(doc) {
		out = append(out, htmlForm{action: f.Action, method: f.Method, hidden: f.Hidden, inputs: f.Inputs, buttons: f.Buttons})
	}
	return out
}

// postForm finds the post form of p that has the named button.
func postForm(t testing.TB, p page, button string) htmlForm {
	t.Helper()
	for _, f := range parseForms(t, p.body) {
		if f.method != "post" {
			continue
		}
		for _, b := range f.buttons {
			if b[0] == button {
				return f
			}
		}
	}
	t.Fatalf("no post form with a %q button (status %d):\n%s", button, p.status, p.body)
	return htmlForm{}
}

// submit posts form f with its hidden inputs, fields and the button
// name=value.
func (b *browser) submit(f htmlForm, button, value string, fields map[string]string) page {
	b.t.Helper()
	if !slices.Contains(f.buttons, [2]string{button, value}) {
		b.t.Fatalf("form has no button %s=%s: %v", button, value, f.buttons)
	}
	v := url.Values{}
	for k, vs := range f.hidden {
		v[k] = slices.Clone(vs)
	}
	for k, val := range fields {
		v.Set(k, val)
	}
	v.Set(button, value)
	return b.post(f.action, v)
}

// signIn posts the sign-in form of p.
func (b *browser) signIn(p page, email, password string) page {
	b.t.Helper()
	if p.status != http.StatusOK && p.status != http.StatusBadRequest {
		b.t.Fatalf("sign-in page status %d, want 200:\n%s", p.status, p.body)
	}
	return b.submit(postForm(b.t, p, "method"), "method", "password", map[string]string{"email": email, "password": password})
}

// done decodes the stand-in's "signed in" answer, failing the test on
// anything else.
func done(t testing.TB, p page) signedIn {
	t.Helper()
	var s signedIn
	if p.status != http.StatusOK || !strings.HasPrefix(p.header.Get("Content-Type"), "application/json") {
		t.Fatalf("want signed in, got status %d:\n%s", p.status, p.body)
	}
	if err := json.Unmarshal([]byte(p.body), &s); err != nil || s.SSO == "" {
		t.Fatalf("signed in: %v %q", err, p.body)
	}
	return s
}

// fullSignInWith signs in from a fresh request of client q and returns
// the session the stand-in flow went on with.
func (b *browser) fullSignInWith(q url.Values, email, password string) signedIn {
	b.t.Helper()
	return done(b.t, b.signIn(b.get(authzPath(q)), email, password))
}

// bcGather flattens reg into name{labels} -> value (histograms as _count).
func bcGather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	return promtest.Gather(t, reg)
}

// formWith finds the post form of p that has the button name=value.
func formWith(t testing.TB, p page, name, value string) htmlForm {
	t.Helper()
	for _, f := range parseForms(t, p.body) {
		if f.method == "post" && slices.Contains(f.buttons, [2]string{name, value}) {
			return f
		}
	}
	t.Fatalf("no post form with the button %s=%s (status %d):\n%s", name, value, p.status, p.body)
	return htmlForm{}
}
