package cli

import "testing"

// TestClientRateLimitFlag: --rate-limit sends rate_limit as given, and
// only when given; empty sends "" (back to the server's limit).
func TestClientRateLimitFlag(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		status int
		method string
		path   string
		body   string
	}{
		{"create", []string{"client", "create", "--name", "Portal", "--org", "o1", "--redirect-uri", "https://p.example/cb", "--rate-limit", "600/60s"},
			201, "POST", "/admin/v1/clients", `{"name":"Portal","organization_id":"o1","redirect_uris":["https://p.example/cb"],"rate_limit":"600/60s"}`},
		{"create without", []string{"client", "create", "--name", "Portal", "--org", "o1", "--redirect-uri", "https://p.example/cb"},
			201, "POST", "/admin/v1/clients", `{"name":"Portal","organization_id":"o1","redirect_uris":["https://p.example/cb"]}`},
		{"update", []string{"client", "update", "portal", "--rate-limit", "20/1m"},
			200, "PATCH", "/admin/v1/clients/portal", `{"rate_limit":"20/1m"}`},
		{"update back to the server's", []string{"client", "update", "portal", "--rate-limit="},
			200, "PATCH", "/admin/v1/clients/portal", `{"rate_limit":""}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAPI(t)
			f.answer(c.status, `{"client_id":"portal"}`)
			if r := run(t, f.env(), "", c.args...); r.code != ExitOK {
				t.Fatalf("exit %d, want %d: %s", r.code, ExitOK, r.stderr)
			}
			req := f.only(t)
			if req.Method != c.method || req.Path != c.path || !sameJSON(t, req.Body, c.body) {
				t.Errorf("got %s %s %s, want %s %s %s", req.Method, req.Path, req.Body, c.method, c.path, c.body)
			}
		})
	}
}
