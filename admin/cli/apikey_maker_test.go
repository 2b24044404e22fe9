package cli

import (
	"net/http"
	"strings"
	"testing"
)

// TestAPIKeyListShowsWhoMadeEachKey: `oidcd admin api-keys list` has a
// MADE_BY column: the person's sub, the key's id, or the token; an older
// server that names none shows "-".
func TestAPIKeyListShowsWhoMadeEachKey(t *testing.T) {
	f := newFakeAPI(t)
	f.answer(http.StatusOK, `{"data":[`+
		`{"id":"k1","name":"by-token","role":"admin","created_by":{"kind":"token"}},`+
		`{"id":"k2","name":"by-person","role":"org_admin","created_by":{"kind":"person","sub":"u-ada"}},`+
		`{"id":"k3","name":"by-key","role":"org_admin","created_by":{"kind":"api_key","id":"k2"}},`+
		`{"id":"k4","name":"older","role":"auditor"}]}`)
	r := run(t, f.env(), "", "api-keys", "list")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 5 || !strings.Contains(lines[0], "MADE_BY") {
		t.Fatalf("got %q, want a MADE_BY column", r.stdout)
	}
	for i, want := range []string{"token", "person u-ada", "api_key k2", "-"} {
		fields := strings.Fields(lines[i+1])
		if !strings.Contains(lines[i+1], " "+want+" ") || len(fields) < 4 {
			t.Errorf("row %d: got %q, want made by %q", i+1, lines[i+1], want)
		}
	}
	f.answer(http.StatusCreated, `{"id":"k5","name":"ci","role":"auditor","created_by":{"kind":"api_key","id":"k2"},"key":"secret-key"}`)
	r = run(t, f.env(), "", "api-keys", "create", "--name", "ci", "--role", "auditor", "--expires-in", "1h")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"kind":"api_key"`) {
		t.Errorf("create: exit %d, got %q, want created_by shown", r.code, r.stdout)
	}
}
