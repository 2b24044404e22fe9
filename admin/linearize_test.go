package admin

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oidcd/oidcd/docs"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

func TestParseStale(t *testing.T) {
	tests := []struct {
		query string
		stale bool
		bad   bool
	}{
		{"", false, false},
		{"page=2", false, false},
		{"stale=true", true, false},
		{"stale=false", false, false},
		{"stale=true&page=1", true, false},
		{"stale=", false, true},
		{"stale", false, true},
		{"stale=TRUE", false, true},
		{"stale=1", false, true},
		{"stale=yes", false, true},
		{"stale=true&stale=true", false, true},
		{"stale=true&stale=false", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			stale, bad := parseStale(q)
			if stale != tt.stale {
				t.Errorf("stale: got %v, want %v", stale, tt.stale)
			}
			if got := len(bad) > 0; got != tt.bad {
				t.Errorf("problems: got %+v, want some: %v", bad, tt.bad)
			}
			for _, d := range bad {
				if d.Field != staleParam || d.Code != codeInvalid {
					t.Errorf("detail: got %+v, want field %q code %q", d, staleParam, codeInvalid)
				}
			}
		})
	}
}

// readIndexCounter is a Config.ReadIndex that counts its calls and fails
// with err when set.
type readIndexCounter struct {
	calls atomic.Int64
	err   error
	then  func() // runs inside each call, before it returns
}

func (c *readIndexCounter) readIndex(context.Context) error {
	c.calls.Add(1)
	if c.then != nil {
		c.then()
	}
	return c.err
}

func withReadIndex(c *readIndexCounter) func(*Config) {
	return func(cfg *Config) { cfg.ReadIndex = c.readIndex }
}

// getPaths is every GET route of the table, with its path values filled in.
func getPaths(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range Routes() {
		m, p, _ := strings.Cut(r, " ")
		if m != "GET" {
			continue
		}
		p = strings.ReplaceAll(p, "{id}", "00000000-0000-4000-8000-000000000000")
		p = strings.ReplaceAll(p, "{key}", "password:nobody")
		out = append(out, Prefix+p)
	}
	if len(out) < 15 {
		t.Fatalf("only %d GET routes: %v", len(out), out)
	}
	return out
}

// TestEveryGETWaitsForTheReadIndex walks every GET route: each but the
// node-local ones calls ReadIndex exactly once, answers 503
// SERVICE_UNAVAILABLE when it fails, and skips it with ?stale=true. GET
// /snapshot takes its own in the backup, but the break-glass token is
// first confirmed current after one (confirmToken), as it is for a write:
// a token replaced through another node opens nothing here. HEAD goes the
// same way; a request without the admin token never calls it.
func TestEveryGETWaitsForTheReadIndex(t *testing.T) {
	ri := &readIndexCounter{err: errDown}
	e := newEnv(t, withReadIndex(ri))
	e.cluster.backup = []byte("state")
	for _, p := range getPaths(t) {
		route := strings.TrimPrefix(p, Prefix)
		if i := strings.Index(route, "/00000000-"); i >= 0 {
			route = route[:i] + "/{id}" + route[i+len("/00000000-0000-4000-8000-000000000000"):]
		}
		route = strings.Replace(route, "/password:nobody", "/{key}", 1)
		mode, exempt := readModes[route]
		exempt = exempt && mode == nodeLocal
		for _, method := range []string{"GET", "HEAD"} {
			t.Run(method+" "+route, func(t *testing.T) {
				ri.calls.Store(0)
				w := e.do(method, p, "")
				switch {
				case exempt && (w.Code == 503 || ri.calls.Load() != 0):
					t.Errorf("read index: got %d calls and %d, want none (%s)", ri.calls.Load(), w.Code, w.Body)
				case !exempt && ri.calls.Load() != 1:
					t.Errorf("read index: got %d calls, want 1", ri.calls.Load())
				case !exempt && method == "GET":
					env := checkEnvelope(t, w, 503, httpx.CodeUnavailable)
					if w.Header().Get("Retry-After") == "" {
						t.Errorf("Retry-After: got none")
					}
					if !strings.Contains(env.Message, "stale=true") {
						t.Errorf("message: got %q, want the stale=true hint", env.Message)
					}
				case !exempt && w.Code != 503:
					t.Errorf("HEAD: got %d, want 503", w.Code)
				}
				ri.calls.Store(0)
				sep := "?"
				if strings.Contains(p, "?") {
					sep = "&"
				}
				if w := e.do(method, p+sep+"stale=true", ""); w.Code == 503 || ri.calls.Load() != 0 {
					t.Errorf("stale=true: got %d and %d read index calls, want no 503 and none (%s)", w.Code, ri.calls.Load(), w.Body)
				}
				if w := e.do(method, p+sep+"stale=maybe", ""); w.Code != 400 || ri.calls.Load() != 0 {
					t.Errorf("stale=maybe: got %d and %d read index calls, want 400 and none", w.Code, ri.calls.Load())
				}
			})
		}
	}
	ri.calls.Store(0)
	ri.err = nil
	e.must(201, "POST", "/admin/v1/organizations?stale=maybe", `{"slug":"w","name":"W"}`)
	if n := ri.calls.Load(); n != 1 {
		t.Fatalf("read index calls of a write with the token: got %d, want 1 (the token confirmed current)", n)
	}
	ri.calls.Store(0)
	if w := e.do("GET", "/admin/v1/organizations", "", "Authorization", "Bearer wrong"); w.Code != 401 {
		t.Fatalf("wrong token: got %d, want 401", w.Code)
	}
	if n := ri.calls.Load(); n != 0 {
		t.Fatalf("read index calls of an unauthenticated read: got %d, want 0", n)
	}
}

// TestReadIndexComesBeforeTheRead: a write that reaches this node while
// the read index is taken (the node catching up) is in the answer.
func TestReadIndexComesBeforeTheRead(t *testing.T) {
	ri := &readIndexCounter{}
	e := newEnv(t, withReadIndex(ri))
	const id = "11111111-1111-4111-8111-111111111111"
	ri.then = func() {
		ri.then = nil
		cmd := fsm.MustCommand(fsm.TypeCreateOrg, fsm.CreateOrg{ID: id, Slug: "late", Name: "Late", CreatedAt: e.clock.now()})
		if res, err := e.app.Apply(context.Background(), cmd); err != nil || res.Err != nil {
			t.Errorf("apply: %v %v", err, res.Err)
		}
	}
	if w := e.do("GET", "/admin/v1/organizations/"+id, ""); w.Code != 200 {
		t.Fatalf("got %d, want 200 (the write applied during the read index): %s", w.Code, w.Body)
	}
}

// TestStaleParameterChecked: a stale value other than true or false is a
// 400 VALIDATION_ERROR naming it; GET /audit, which refuses parameters it
// does not know, takes stale.
func TestStaleParameterChecked(t *testing.T) {
	e := newEnv(t)
	e.run(t, []tc{
		{name: "maybe", method: "GET", path: "/admin/v1/organizations?stale=maybe", status: 400, code: httpx.CodeValidation, field: "stale", dcode: codeInvalid},
		{name: "twice", method: "GET", path: "/admin/v1/users?stale=true&stale=true", status: 400, code: httpx.CodeValidation, field: "stale", dcode: codeInvalid},
		{name: "empty on a local route", method: "GET", path: "/admin/v1/status?stale=", status: 400, code: httpx.CodeValidation, field: "stale", dcode: codeInvalid},
		{name: "true", method: "GET", path: "/admin/v1/organizations?stale=true", status: 200},
		{name: "false", method: "GET", path: "/admin/v1/organizations?stale=false&page=1", status: 200},
		{name: "audit", method: "GET", path: "/admin/v1/audit?stale=true&limit=5", status: 200},
	})
}

// TestStaleIsDocumentedOnEveryGET: docs/openapi/admin.json offers the
// stale parameter on every GET the API serves.
func TestStaleIsDocumentedOnEveryGET(t *testing.T) {
	var doc struct {
		Components struct {
			Parameters map[string]struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"components"`
		Paths map[string]map[string]struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(docs.Admin, &doc); err != nil {
		t.Fatal(err)
	}
	if p := doc.Components.Parameters[staleParam]; p.Name != staleParam || p.In != "query" {
		t.Fatalf("components.parameters.stale: got %+v, want the query parameter %q", p, staleParam)
	}
	for _, r := range Routes() {
		m, path, _ := strings.Cut(r, " ")
		if m != "GET" {
			continue
		}
		found := false
		for _, p := range doc.Paths[path]["get"].Parameters {
			found = found || p["$ref"] == "#/components/parameters/stale"
		}
		if !found {
			t.Errorf("GET %s: the document does not offer ?stale", path)
		}
	}
}
