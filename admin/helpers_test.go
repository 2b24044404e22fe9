package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

// cheap keeps argon2id fast in tests.
var cheap = password.Params{Memory: 64, Time: 1, Threads: 1}

// clock advances by step on every reading.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// hookApplier runs before (once) ahead of the next Apply, to slip in a
// concurrent write.
type hookApplier struct {
	*fsmtest.Applier
	mu     sync.Mutex
	before func()
}

func (h *hookApplier) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	h.mu.Lock()
	f := h.before
	h.before = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return h.Applier.Apply(ctx, cmd)
}

type fakeKeys struct {
	mu        sync.Mutex
	immediate []bool
	keys      []KeyInfo
	err       error
}

func (k *fakeKeys) Rotate(_ context.Context, immediate bool) (KeyInfo, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return KeyInfo{}, k.err
	}
	k.immediate = append(k.immediate, immediate)
	at := time.Date(2025, 1, 1, 0, 5, 0, 0, time.UTC)
	state := "next"
	if immediate {
		state = "active"
	}
	ki := KeyInfo{Kid: "kid-new", State: state, CreatedAt: at.Add(-5 * time.Minute), ActivatesAt: &at}
	k.keys = append(k.keys, ki)
	return ki, nil
}

func (k *fakeKeys) List() ([]KeyInfo, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.err
}

type fakeCluster struct {
	status    ClusterStatus
	err       error
	removed   []string
	removeErr error
	roles     map[string]bool // SetVoter's calls: id -> voter
	roleErr   error

	backup     []byte // what Backup writes
	backupErr  error  // returned by Backup after writing backupCut bytes
	backupCut  int
	restored   []byte // the last body Restore read
	restoreErr error
}

func (c *fakeCluster) Backup(_ context.Context, w io.Writer) error {
	if c.backupErr != nil {
		w.Write(c.backup[:c.backupCut])
		return c.backupErr
	}
	_, err := w.Write(c.backup)
	return err
}

func (c *fakeCluster) Restore(_ context.Context, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if c.restoreErr != nil {
		return c.restoreErr
	}
	c.restored = b
	return nil
}

func (c *fakeCluster) Status(context.Context) (ClusterStatus, error) { return c.status, c.err }

func (c *fakeCluster) RemoveNode(_ context.Context, id string) error {
	if c.removeErr != nil {
		return c.removeErr
	}
	c.removed = append(c.removed, id)
	return nil
}

func (c *fakeCluster) SetVoter(_ context.Context, id string, voter bool) error {
	if c.roleErr != nil {
		return c.roleErr
	}
	if c.roles == nil {
		c.roles = map[string]bool{}
	}
	c.roles[id] = voter
	return nil
}

// env is one admin API over a fresh FSM.
type env struct {
	t       testing.TB
	app     *fsmtest.Applier
	hook    *hookApplier
	state   *fsm.State
	clock   *clock
	keys    *fakeKeys
	cluster *fakeCluster
	hasher  *password.Hasher
	token   string
	h       http.Handler
	cfg     Config // as newEnv's options left it
}

func newEnv(t testing.TB, opts ...func(*Config)) *env {
	t.Helper()
	app := fsmtest.New(t)
	e := &env{
		t:       t,
		app:     app,
		hook:    &hookApplier{Applier: app},
		state:   app.State(),
		clock:   &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), step: time.Second},
		keys:    &fakeKeys{},
		cluster: &fakeCluster{},
		hasher:  password.New(cheap, 2),
		token:   GenerateToken(),
	}
	res, err := app.Apply(context.Background(), fsm.MustCommand(fsm.TypeSetAdminToken, fsm.SetAdminToken{Hash: HashToken(e.token)}))
	if err != nil || res.Err != nil {
		t.Fatalf("set admin token: %v %v", err, res.Err)
	}
	cfg := Config{
		State:   e.state,
		Applier: e.hook,
		Keys:    e.keys,
		Cluster: e.cluster,
		Hasher:  e.hasher,
		Now:     e.clock.now,
	}
	for _, o := range opts {
		o(&cfg)
	}
	e.cfg = cfg
	e.h = httpx.Correlation(New(cfg))
	return e
}

// do sends a request with the admin token and, when there is a body, a JSON
// content type. hdr holds name, value pairs that override; an empty value
// removes the header.
func (e *env) do(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", "Bearer "+e.token)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			r.Header.Del(hdr[i])
		} else {
			r.Header.Set(hdr[i], hdr[i+1])
		}
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if w.Header().Get(httpx.HeaderCorrelationID) == "" {
		e.t.Errorf("%s %s: no %s header", method, path, httpx.HeaderCorrelationID)
	}
	return w
}

// must sends a request and fails the test unless it answers status.
func (e *env) must(status int, method, path, body string) *httptest.ResponseRecorder {
	e.t.Helper()
	w := e.do(method, path, body)
	if w.Code != status {
		e.t.Fatalf("%s %s: got %d, want %d; body %s", method, path, w.Code, status, w.Body)
	}
	return w
}

func decodeAs[T any](t testing.TB, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %q: %v", w.Body, err)
	}
	return v
}

func (e *env) createOrg(slug string) Org {
	e.t.Helper()
	return decodeAs[Org](e.t, e.must(201, "POST", "/admin/v1/organizations", `{"slug":"`+slug+`","name":"Org `+slug+`"}`))
}

func (e *env) createUser(body string) User {
	e.t.Helper()
	return decodeAs[User](e.t, e.must(201, "POST", "/admin/v1/users", body))
}

func (e *env) createMembership(userID, orgID string) Membership {
	e.t.Helper()
	return decodeAs[Membership](e.t, e.must(201, "POST", "/admin/v1/memberships",
		`{"user_id":"`+userID+`","org_id":"`+orgID+`"}`))
}

func (e *env) createClient(body string) Client {
	e.t.Helper()
	return decodeAs[Client](e.t, e.must(201, "POST", "/admin/v1/clients", body))
}

// checkEnvelope asserts an error answer: status, JSON, the envelope's code,
// a message, the correlation id of the header, an RFC 3339 timestamp and
// complete details. It returns the envelope.
func checkEnvelope(t testing.TB, w *httptest.ResponseRecorder, status int, code string) httpx.EnvelopeError {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status: got %d, want %d; body %s", w.Code, status, w.Body)
	}
	if got := w.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("content type: got %q, want %q", got, "application/json")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil || len(raw) != 1 || raw["error"] == nil {
		t.Fatalf("body: got %s, want one key \"error\"", w.Body)
	}
	var env httpx.Envelope
	dec := json.NewDecoder(strings.NewReader(w.Body.String()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("envelope %s: %v", w.Body, err)
	}
	e := env.Error
	if e.Code != code {
		t.Errorf("code: got %q, want %q (message %q)", e.Code, code, e.Message)
	}
	if e.Message == "" {
		t.Errorf("message: got %q, want non-empty", e.Message)
	}
	if want := w.Header().Get(httpx.HeaderCorrelationID); e.CorrelationID == "" || e.CorrelationID != want {
		t.Errorf("correlation_id: got %q, want %q", e.CorrelationID, want)
	}
	if _, err := time.Parse(time.RFC3339, e.Timestamp); err != nil {
		t.Errorf("timestamp: got %q, want RFC 3339", e.Timestamp)
	}
	if e.Code == httpx.CodeValidation && len(e.Details) == 0 {
		t.Errorf("details: got none, want at least one for %s", code)
	}
	for _, d := range e.Details {
		if d.Field == "" || d.Message == "" || d.Code == "" {
			t.Errorf("detail: got %+v, want field, message and code", d)
		}
	}
	return e
}

// hasDetail reports whether e holds a detail for field with code.
func hasDetail(e httpx.EnvelopeError, field, code string) bool {
	for _, d := range e.Details {
		if d.Field == field && (code == "" || d.Code == code) {
			return true
		}
	}
	return false
}

// tc is one request of an endpoint table.
type tc struct {
	name   string
	method string
	path   string
	body   string
	hdr    []string
	status int
	code   string // envelope code; "" for a success
	field  string // a detail expected on this field
	dcode  string // and its code
}

// unchangedStatuses are answers given before anything is proposed.
var unchangedStatuses = map[int]bool{400: true, 401: true, 405: true, 413: true, 415: true, 501: true}

// run executes a table. Answers in unchangedStatuses must not have applied
// anything.
func (e *env) run(t *testing.T, tests []tc) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.app.FSM.Applied()
			w := e.do(tt.method, tt.path, tt.body, tt.hdr...)
			if tt.code == "" {
				if w.Code != tt.status {
					t.Fatalf("status: got %d, want %d; body %s", w.Code, tt.status, w.Body)
				}
				return
			}
			env := checkEnvelope(t, w, tt.status, tt.code)
			if tt.field != "" && !hasDetail(env, tt.field, tt.dcode) {
				t.Errorf("details: got %+v, want field %q code %q", env.Details, tt.field, tt.dcode)
			}
			if unchangedStatuses[tt.status] {
				if got := e.app.FSM.Applied(); got != before {
					t.Errorf("applied index: got %d, want %d (nothing proposed)", got, before)
				}
			}
		})
	}
}

var errDown = errors.New("no leader")
