package cli

import (
	"strings"
	"testing"
)

// TestStaleFlag: --stale (before the command or after it) adds
// stale=true to a read's query, keeping the read's own parameters; it is
// refused, with nothing sent, on a write; without it a read asks for
// nothing (the server's default, a linearizable read).
func TestStaleFlag(t *testing.T) {
	const id = "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b"
	reads := []struct {
		args  []string
		path  string
		query string
	}{
		{[]string{"org", "get", id}, "/admin/v1/organizations/" + id, ""},
		{[]string{"org", "get", id, "--stale"}, "/admin/v1/organizations/" + id, "stale=true"},
		{[]string{"--stale", "org", "list", "--page", "2"}, "/admin/v1/organizations", "page=2&stale=true"},
		{[]string{"user", "list", "--email", "a@example.com", "--stale"}, "/admin/v1/users", "email=a%40example.com&stale=true"},
		{[]string{"keys", "list", "--stale=true"}, "/admin/v1/keys", "stale=true"},
		{[]string{"org", "list", "--stale=false"}, "/admin/v1/organizations", ""},
	}
	for _, tt := range reads {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := newFakeAPI(t)
			f.answer(200, `{"data":[],"pagination":{"page":1,"page_size":20,"total_items":0,"total_pages":0,"has_next":false,"has_previous":false}}`)
			if r := run(t, f.env(), "", append(tt.args, "--json")...); r.code != ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			got := f.only(t)
			if got.Method != "GET" || got.Path != tt.path || got.Query != tt.query {
				t.Errorf("got %s %s?%s, want GET %s?%s", got.Method, got.Path, got.Query, tt.path, tt.query)
			}
		})
	}
	for _, args := range [][]string{
		{"org", "create", "--slug", "a", "--name", "A", "--stale"},
		{"--stale", "org", "delete", id},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			f := newFakeAPI(t)
			r := run(t, f.env(), "", args...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, "--stale") {
				t.Errorf("got exit %d, %q; want %d naming --stale", r.code, r.stderr, ExitUsage)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("got %d requests, want none", n)
			}
		})
	}
}
