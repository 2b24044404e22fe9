package admin

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// logBuffer is a slog handler's output, safe for the handler's writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// failingWrites is one write of each kind (create, change, erase, a key
// rotation), for the tables of Applier errors.
func failingWrites(e *env) []struct{ method, path, body string } {
	org := e.createOrg("acme")
	user := e.createUser(`{"email":"a@example.com"}`)
	m := e.createMembership(user.ID, org.ID)
	return []struct{ method, path, body string }{
		{"POST", "/admin/v1/organizations", `{"slug":"other","name":"Other"}`},
		{"PATCH", "/admin/v1/organizations/" + org.ID, `{"name":"Acme 2"}`},
		{"POST", "/admin/v1/users", `{"email":"b@example.com"}`},
		{"DELETE", "/admin/v1/users/" + user.ID, ""},
		{"PATCH", "/admin/v1/memberships/" + m.ID, `{"status":"suspended"}`},
		{"POST", "/admin/v1/clients", `{"name":"App","redirect_uris":["https://app.example/cb"],"organization_id":"` + org.ID + `"}`},
		{"PUT", "/admin/v1/branding", `{"display_name":"Example"}`},
	}
}

// TestApplyRefusedByTheFormatGate: a write the cluster's state format
// cannot take yet (a rolling upgrade under way) answers 409 CONFLICT
// naming the feature, the formats, the release it needs and each member
// to upgrade (a detail each), logged at Info; nothing is written.
func TestApplyRefusedByTheFormatGate(t *testing.T) {
	var logs logBuffer
	e := newEnv(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	writes := failingWrites(e)
	e.app.Fail = &fsm.FormatError{Feature: "set_state_format", Need: fsm.FormatGate, Have: fsm.FormatBase,
		Members: []string{"n2 (0.3.0)", "n3 (0.3.0)"}}
	before := e.app.FSM.Applied()
	const want = "set_state_format needs state format 2 (oidcd 0.4.0 or newer on every node); the cluster runs format 1; " +
		"upgrade first: n2 (0.3.0), n3 (0.3.0). Nothing was written: send it again once every node runs the newer release"
	for _, tt := range writes {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := e.do(tt.method, tt.path, tt.body)
			env := checkEnvelope(t, w, http.StatusConflict, httpx.CodeConflict)
			if env.Message != want {
				t.Errorf("message: got %q, want %q", env.Message, want)
			}
			if len(env.Details) != 2 {
				t.Fatalf("details: got %+v, want one per member to upgrade", env.Details)
			}
			for i, m := range []string{"n2 (0.3.0)", "n3 (0.3.0)"} {
				if d := env.Details[i]; d.Field != "members" || d.Code != "needs_upgrade" || !strings.Contains(d.Message, m) {
					t.Errorf("details[%d]: got %+v, want field members, code needs_upgrade, naming %q", i, d, m)
				}
			}
			if got := w.Header().Get("Retry-After"); got != "" {
				t.Errorf("Retry-After: got %q, want none (waiting does not help: an upgrade does)", got)
			}
		})
	}
	if got := e.app.FSM.Applied(); got != before {
		t.Errorf("applied index: got %d, want %d", got, before)
	}
	out := logs.String()
	if !strings.Contains(out, "level=INFO") || !strings.Contains(out, "state format") || strings.Contains(out, "level=WARN") {
		t.Errorf("log: got\n%s\nwant the refusals at INFO and no WARN", out)
	}

	// Without the members (a proposer that does not know them), and the
	// bare sentinel wrapped: still 409, still saying what to do.
	// A made-up format past this build's, which no release names.
	madeUp := fsm.CurrentFormat + 1
	e.app.Fail = &fsm.FormatError{Feature: "PutClient.Foo", Need: madeUp, Have: fsm.CurrentFormat}
	env := checkEnvelope(t, e.do("POST", "/admin/v1/organizations", `{"slug":"x","name":"X"}`), http.StatusConflict, httpx.CodeConflict)
	if want := fmt.Sprintf("PutClient.Foo needs state format %d; the cluster runs format %d. Nothing was written: send it again once every node runs the newer release", madeUp, fsm.CurrentFormat); env.Message != want || len(env.Details) != 0 {
		t.Errorf("no members: got %q %+v, want %q and no details", env.Message, env.Details, want)
	}
	e.app.Fail = fmt.Errorf("cluster: refused: %w", fsm.ErrFormat)
	env = checkEnvelope(t, e.do("POST", "/admin/v1/organizations", `{"slug":"x","name":"X"}`), http.StatusConflict, httpx.CodeConflict)
	if !strings.Contains(env.Message, "newer state format") {
		t.Errorf("sentinel: got %q, want it to say the format is the reason", env.Message)
	}

	// A key rotation (proposed by package keys) is refused alike.
	e.keys.err = &fsm.FormatError{Feature: "add_key", Need: 2, Have: 1, Members: []string{"n2 (0.3.0)"}}
	checkEnvelope(t, e.do("POST", "/admin/v1/keys/rotate", ""), http.StatusConflict, httpx.CodeConflict)
}

// TestApplyMaybeApplied: a write whose fate the Applier lost answers 503
// with Retry-After, saying it may have been applied and how to find out;
// a plain Applier error keeps saying "try again" (nothing was written).
func TestApplyMaybeApplied(t *testing.T) {
	e := newEnv(t)
	writes := failingWrites(e)
	for _, c := range []struct {
		name, want string
		err        error
	}{
		{"maybe applied", maybeAppliedMessage(httptestRequest()), fmt.Errorf("cluster: leader lost after append: %w", fsm.ErrMaybeApplied)},
		{"not applied", "cluster unavailable, try again", errDown},
	} {
		e.app.Fail = c.err
		for _, tt := range writes {
			t.Run(c.name+" "+tt.method+" "+tt.path, func(t *testing.T) {
				w := e.do(tt.method, tt.path, tt.body)
				env := checkEnvelope(t, w, http.StatusServiceUnavailable, httpx.CodeUnavailable)
				if env.Message != c.want {
					t.Errorf("message: got %q, want %q", env.Message, c.want)
				}
				if got := w.Header().Get("Retry-After"); got != "1" {
					t.Errorf("Retry-After: got %q, want %q", got, "1")
				}
			})
		}
	}
	if m := maybeAppliedMessage(httptestRequest()); !strings.Contains(m, "may have been applied") || !strings.Contains(m, "Read it back") {
		t.Errorf("maybe-applied message: got %q, want it to say it may have been applied and how to find out", m)
	}
	e.keys.err = fmt.Errorf("keys: %w", fsm.ErrMaybeApplied)
	env := checkEnvelope(t, e.do("POST", "/admin/v1/keys/rotate", ""), http.StatusServiceUnavailable, httpx.CodeUnavailable)
	if !strings.Contains(env.Message, "may have been applied") {
		t.Errorf("key rotation: got %q, want the maybe-applied message", env.Message)
	}
}

func httptestRequest() *http.Request {
	r, _ := http.NewRequest("POST", "/admin/v1/organizations", nil)
	return r
}
