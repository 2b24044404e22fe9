package console

import (
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

const testToken = "console-test-admin-token-0123456789"

type fakeKeys struct {
	mu      sync.Mutex
	rotated []bool
}

func (k *fakeKeys) Rotate(_ context.Context, immediate bool) (admin.KeyInfo, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rotated = append(k.rotated, immediate)
	return admin.KeyInfo{Kid: "kid-2", State: "next", CreatedAt: time.Now()}, nil
}

func (k *fakeKeys) List() ([]admin.KeyInfo, error) {
	return []admin.KeyInfo{{Kid: "kid-1", State: "active", CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}}, nil
}

type fakeCluster struct{}

func (fakeCluster) Status(context.Context) (admin.ClusterStatus, error) {
	return admin.ClusterStatus{Leader: "node-0", Members: []admin.ClusterMember{
		{ID: "node-0", RaftAddr: "127.0.0.1:8300", GossipAddr: "127.0.0.1:8301", HTTPAddr: "127.0.0.1:8080", State: "alive", Voter: true},
	}}, nil
}
func (fakeCluster) RemoveNode(context.Context, string) error     { return nil }
func (fakeCluster) SetVoter(context.Context, string, bool) error { return nil }
func (fakeCluster) Backup(context.Context, io.Writer) error      { return nil }
func (fakeCluster) Restore(context.Context, io.Reader) error     { return nil }

// env is a console over a real FSM (no raft) behind a real HTTP server.
type env struct {
	t       *testing.T
	state   *fsm.State
	app     *fsmtest.Applier
	keys    *fakeKeys
	srv     *httptest.Server
	client  *http.Client
	console *Console
	token   atomic.Value // the admin token hash the console checks
}

// newEnv is the console over a fresh state; opts change the admin API's
// configuration (withMail).
func newEnv(t *testing.T, opts ...func(*admin.Config)) *env {
	t.Helper()
	a := fsmtest.New(t)
	key := make([]byte, 32)
	rand.Read(key)
	e := &env{t: t, state: a.State(), app: a, keys: &fakeKeys{}}
	e.token.Store(admin.HashToken(testToken))
	// Wired as a node wires them: the admin API beside the console, one
	// guard for both.
	ac := admin.Config{
		State:     a.State(),
		Applier:   a,
		Keys:      e.keys,
		Cluster:   fakeCluster{},
		Hasher:    password.New(password.Params{Memory: 64, Time: 1, Threads: 1}, 2),
		TokenHash: func() string { return e.token.Load().(string) },
		Guard:     admin.NewGuard(nil),
	}
	for _, o := range opts {
		o(&ac)
	}
	e.console = New(Config{Issuer: "http://127.0.0.1", Secret: []byte("node secret"), BrowserKey: func() ([]byte, error) { return key, nil }, Admin: ac})
	mux := http.NewServeMux()
	mux.Handle(Prefix, e.console)
	mux.Handle(admin.Prefix+"/", admin.New(ac))
	e.srv = httptest.NewServer(httpx.Correlation(mux))
	t.Cleanup(e.srv.Close)
	jar, _ := cookiejar.New(nil)
	e.client = &http.Client{
		Jar:           jar,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return e
}

// resp is an answer with its body read.
type resp struct {
	Status   int
	Header   http.Header
	Body     string
	Location string
}

func (e *env) do(req *http.Request) resp {
	e.t.Helper()
	r, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{Status: r.StatusCode, Header: r.Header, Body: string(b), Location: r.Header.Get("Location")}
}

func (e *env) get(path string) resp {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	return e.do(req)
}

// post posts form with the browser's CSRF token added (unless the form
// sets csrf_token itself).
func (e *env) post(path string, form url.Values) resp {
	e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf_token"]; !ok {
		form.Set("csrf_token", e.csrf())
	}
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.do(req)
}

// csrf returns the browser's CSRF cookie, fetching the sign-in page first
// when it has none.
func (e *env) csrf() string {
	e.t.Helper()
	if v := e.cookie(cookieCSRF); v != "" {
		return v
	}
	e.get(Prefix + "signin")
	v := e.cookie(cookieCSRF)
	if v == "" {
		e.t.Fatal("no CSRF cookie after the sign-in page")
	}
	return v
}

func (e *env) cookie(name string) string {
	u, _ := url.Parse(e.srv.URL + Prefix)
	for _, c := range e.client.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

func (e *env) signIn() {
	e.t.Helper()
	r := e.post(Prefix+"signin", url.Values{"token": {testToken}})
	if r.Status != http.StatusSeeOther || r.Location != Prefix {
		e.t.Fatalf("sign in: got %d to %q, want 303 to %q\n%s", r.Status, r.Location, Prefix, r.Body)
	}
}

// wantStatus fails unless r has the status.
func wantStatus(t *testing.T, what string, r resp, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: got status %d, want %d\n%s", what, r.Status, status, r.Body)
	}
}

// wantBody fails unless the body holds every string.
func wantBody(t *testing.T, what string, r resp, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.Body, s) {
			t.Errorf("%s: body lacks %q\n%s", what, s, r.Body)
		}
	}
}
