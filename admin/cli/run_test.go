package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// recorded is one request the fake admin API received.
type recorded struct {
	Method string
	Path   string // escaped
	Query  string
	Header http.Header
	Body   string
}

// fakeAPI is an httptest.Server that records requests and answers with a
// canned status and body.
type fakeAPI struct {
	srv *httptest.Server

	mu     sync.Mutex
	reqs   []recorded
	status int
	body   string
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{status: http.StatusOK, body: "{}"}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(b)})
		status, body := f.status, f.body
		f.mu.Unlock()
		w.Header().Set("X-Correlation-ID", r.Header.Get("X-Correlation-ID"))
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) answer(status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.body = status, body
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fakeAPI) only(t *testing.T) recorded {
	t.Helper()
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	return reqs[0]
}

// env is the environment of a test run: the fake's address and a token.
func (f *fakeAPI) env(extra ...string) map[string]string {
	m := map[string]string{EnvAddr: f.srv.URL, EnvToken: "tok"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// sameJSON compares two JSON texts by value; "" means no body.
func sameJSON(t *testing.T, got, want string) bool {
	t.Helper()
	if got == "" || want == "" {
		return got == want
	}
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q is not JSON: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

func TestRequests(t *testing.T) {
	const id = "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b"
	tests := []struct {
		name   string
		args   []string
		stdin  string
		status int // answer; default 200
		method string
		path   string // under /admin/v1
		query  string
		body   string // JSON; "" = no body
	}{
		{name: "org create", args: []string{"org", "create", "--slug", "acme", "--name", "Acme Inc."},
			status: 201, method: "POST", path: "/organizations", body: `{"slug":"acme","name":"Acme Inc."}`},
		{name: "org list", args: []string{"org", "list"}, method: "GET", path: "/organizations"},
		{name: "org list paged", args: []string{"org", "list", "--page", "2", "--page-size", "5"},
			method: "GET", path: "/organizations", query: "page=2&page_size=5"},
		{name: "org get", args: []string{"org", "get", id}, method: "GET", path: "/organizations/" + id},
		{name: "org get escapes the id", args: []string{"org", "get", "a/b?c"}, method: "GET", path: "/organizations/a%2Fb%3Fc"},
		{name: "org delete", args: []string{"org", "delete", id}, status: 204, method: "DELETE", path: "/organizations/" + id},
		{name: "orgs alias", args: []string{"organizations", "list"}, method: "GET", path: "/organizations"},

		{name: "user create", args: []string{"user", "create", "--email", "ann@example.com"},
			method: "POST", path: "/users", body: `{"email":"ann@example.com"}`},
		{name: "user create all", args: []string{"user", "create", "--email", "ann@example.com", "--email-verified", "--phone", "+15551234567", "--password", "pw 1"},
			method: "POST", path: "/users", body: `{"email":"ann@example.com","email_verified":true,"phone":"+15551234567","password":"pw 1"}`},
		{name: "user create password-stdin", args: []string{"user", "create", "--email", "ann@example.com", "--password-stdin"}, stdin: "s3cret pass\n",
			method: "POST", path: "/users", body: `{"email":"ann@example.com","password":"s3cret pass"}`},
		{name: "user create password-stdin crlf", args: []string{"user", "create", "--email", "e@x", "--password-stdin"}, stdin: "pw\r\n",
			method: "POST", path: "/users", body: `{"email":"e@x","password":"pw"}`},
		{name: "user get", args: []string{"user", "get", id}, method: "GET", path: "/users/" + id},
		{name: "user list", args: []string{"user", "list", "--page-size", "100"}, method: "GET", path: "/users", query: "page_size=100"},
		{name: "user update only given", args: []string{"user", "update", id, "--email-verified=false"},
			method: "PATCH", path: "/users/" + id, body: `{"email_verified":false}`},
		{name: "user update email phone", args: []string{"user", "update", id, "--email", "b@x", "--phone", ""},
			method: "PATCH", path: "/users/" + id, body: `{"email":"b@x","phone":""}`},
		{name: "user update password-stdin", args: []string{"user", "update", "--password-stdin", id}, stdin: "new",
			method: "PATCH", path: "/users/" + id, body: `{"password":"new"}`},
		{name: "user delete", args: []string{"user", "delete", id}, status: 204, method: "DELETE", path: "/users/" + id},
		{name: "user totp", args: []string{"user", "totp", id}, status: 201, method: "POST", path: "/users/" + id + "/totp", body: `{}`},
		{name: "user recovery-codes", args: []string{"user", "recovery-codes", id}, status: 201, method: "POST", path: "/users/" + id + "/recovery-codes", body: `{}`},

		{name: "membership create", args: []string{"membership", "create", "--user", id, "--org", "o1"},
			status: 201, method: "POST", path: "/memberships", body: `{"user_id":"` + id + `","org_id":"o1"}`},
		{name: "membership create status", args: []string{"membership", "create", "--user", id, "--org", "o1", "--status", "suspended"},
			status: 201, method: "POST", path: "/memberships", body: `{"user_id":"` + id + `","org_id":"o1","status":"suspended"}`},
		{name: "membership list", args: []string{"membership", "list", "--page", "3"}, method: "GET", path: "/memberships", query: "page=3"},
		{name: "membership list of a user", args: []string{"membership", "list", "--user", id}, method: "GET", path: "/memberships", query: "user_id=" + id},
		{name: "membership get", args: []string{"membership", "get", id}, method: "GET", path: "/memberships/" + id},
		{name: "membership update", args: []string{"membership", "update", id, "--status", "active"},
			method: "PATCH", path: "/memberships/" + id, body: `{"status":"active"}`},
		{name: "membership delete", args: []string{"membership", "delete", id}, status: 204, method: "DELETE", path: "/memberships/" + id},

		{name: "client create minimal", args: []string{"client", "create", "--name", "Portal", "--org", "o1", "--redirect-uri", "https://p.example/cb"},
			status: 201, method: "POST", path: "/clients", body: `{"name":"Portal","organization_id":"o1","redirect_uris":["https://p.example/cb"]}`},
		{name: "client create all", args: []string{"client", "create", "--name", "Portal", "--org", "o1",
			"--redirect-uri", "https://p.example/cb", "--redirect-uri", "https://p.example/cb2,x",
			"--type", "public", "--scope", "openid,email", "--scope", "profile", "--multi-org",
			"--serve-org", "o2,o3", "--serve-org", "o4", "--access-token-ttl", "15m",
			"--backchannel-logout-uri", "https://p.example/bcl", "--skip-consent", "--suspended", "--client-id", "portal"},
			status: 201, method: "POST", path: "/clients", body: `{"client_id":"portal","name":"Portal","organization_id":"o1",
			"redirect_uris":["https://p.example/cb","https://p.example/cb2,x"],"type":"public","scopes":["openid","email","profile"],
			"multi_organization":true,"organizations":["o2","o3","o4"],"access_token_ttl":900,
			"backchannel_logout_uri":"https://p.example/bcl","skip_consent":true,"suspended":true}`},
		{name: "client get", args: []string{"client", "get", "portal"}, method: "GET", path: "/clients/portal"},
		{name: "client list", args: []string{"client", "list"}, method: "GET", path: "/clients"},
		{name: "client update only given", args: []string{"client", "update", "portal", "--suspended=false", "--access-token-ttl", "300", "--serve-org="},
			method: "PATCH", path: "/clients/portal", body: `{"suspended":false,"access_token_ttl":300,"organizations":[]}`},
		{name: "client update scopes", args: []string{"client", "update", "portal", "--scope", "openid email"},
			method: "PATCH", path: "/clients/portal", body: `{"scopes":["openid","email"]}`},
		{name: "client delete", args: []string{"client", "delete", "portal"}, status: 204, method: "DELETE", path: "/clients/portal"},

		{name: "keys list", args: []string{"keys", "list"}, method: "GET", path: "/keys"},
		{name: "keys rotate", args: []string{"keys", "rotate"}, status: 201, method: "POST", path: "/keys/rotate", body: `{}`},
		{name: "cluster remove-node", args: []string{"cluster", "remove-node", "node-2"}, status: 204, method: "DELETE", path: "/cluster/nodes/node-2"},
		{name: "cluster promote", args: []string{"cluster", "promote", "edge-1"}, status: 204, method: "POST", path: "/cluster/members/edge-1/promote"},
		{name: "cluster demote", args: []string{"cluster", "demote", "edge-1"}, status: 204, method: "POST", path: "/cluster/members/edge-1/demote"},
		{name: "keys rotate immediate", args: []string{"keys", "rotate", "--immediate"}, status: 201, method: "POST", path: "/keys/rotate", body: `{"immediate":true}`},
		{name: "cluster status", args: []string{"cluster", "status"}, method: "GET", path: "/cluster"},
		{name: "audit list", args: []string{"audit", "list"}, method: "GET", path: "/audit", query: "after=0&limit=100"},
		{name: "audit list filtered", args: []string{"audit", "list", "--after", "7", "--limit", "5", "--type", "signin", "--subject", "s1", "--client", "c1", "--org", "o1"},
			method: "GET", path: "/audit", query: "after=7&client_id=c1&limit=5&organization_id=o1&subject=s1&type=signin"},

		{name: "org update name", args: []string{"org", "update", id, "--name", "Acme Corp"},
			method: "PATCH", path: "/organizations/" + id, body: `{"name":"Acme Corp"}`},
		{name: "org update registration", args: []string{"orgs", "update", id, "--registration", "on", "--email-domains", "acme.example, bücher.example", "--email-domains", "b.example"},
			method: "PATCH", path: "/organizations/" + id, body: `{"registration":{"enabled":true,"email_domains":["acme.example","bücher.example","b.example"]}}`},
		{name: "org update registration off keeps the domains", args: []string{"org", "update", id, "--registration", "off"},
			method: "PATCH", path: "/organizations/" + id, body: `{"registration":{"enabled":false}}`},
		{name: "org update empties the domains", args: []string{"org", "update", id, "--email-domains="},
			method: "PATCH", path: "/organizations/" + id, body: `{"registration":{"email_domains":[]}}`},
		{name: "invitation create", args: []string{"invitation", "create", "--email", "ann@example.com", "--org", "o1"},
			status: 201, method: "POST", path: "/invitations", body: `{"email":"ann@example.com","organization_id":"o1"}`},
		{name: "invitation create expires-in duration", args: []string{"invitations", "create", "--email", "ann@example.com", "--org", "o1", "--expires-in", "72h"},
			status: 201, method: "POST", path: "/invitations", body: `{"email":"ann@example.com","organization_id":"o1","expires_in":259200}`},
		{name: "invitation create expires-in seconds", args: []string{"invite", "create", "--email", "ann@example.com", "--org", "o1", "--expires-in", "3600"},
			status: 201, method: "POST", path: "/invitations", body: `{"email":"ann@example.com","organization_id":"o1","expires_in":3600}`},
		{name: "invitation list", args: []string{"invitation", "list"}, method: "GET", path: "/invitations"},
		{name: "invitation list filtered", args: []string{"invitation", "list", "--org", "o1", "--status", "pending", "--page-size", "5"},
			method: "GET", path: "/invitations", query: "organization_id=o1&page_size=5&status=pending"},
		{name: "invitation get", args: []string{"invitation", "get", id}, method: "GET", path: "/invitations/" + id},
		{name: "invitation delete", args: []string{"invitation", "delete", id}, status: 204, method: "DELETE", path: "/invitations/" + id},
		{name: "user verify-email", args: []string{"user", "verify-email", id}, status: 202, method: "POST", path: "/users/" + id + "/verify-email"},
		{name: "user verify-email locale", args: []string{"user", "verify-email", id, "--locale", "ja"}, status: 202, method: "POST", path: "/users/" + id + "/verify-email", body: `{"locale":"ja"}`},
		{name: "invitation create locale", args: []string{"invitation", "create", "--email", "ann@example.com", "--org", "o1", "--locale", "de"},
			status: 201, method: "POST", path: "/invitations", body: `{"email":"ann@example.com","locale":"de","organization_id":"o1"}`},

		{name: "global flags before", args: []string{"--json", "--timeout", "5s", "org", "get", id}, method: "GET", path: "/organizations/" + id},
		{name: "global flags after the args", args: []string{"org", "get", id, "--json", "--timeout=5s"}, method: "GET", path: "/organizations/" + id},
		{name: "dash dash ends flags", args: []string{"org", "get", "--", "-odd"}, method: "GET", path: "/organizations/-odd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			if tc.status == 204 {
				f.answer(204, "")
			} else if tc.status != 0 {
				f.answer(tc.status, "{}")
			}
			r := run(t, f.env(), tc.stdin, tc.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d, want 0; stderr %q", r.code, r.stderr)
			}
			got := f.only(t)
			if got.Method != tc.method {
				t.Errorf("method: got %q, want %q", got.Method, tc.method)
			}
			if want := "/admin/v1" + tc.path; got.Path != want {
				t.Errorf("path: got %q, want %q", got.Path, want)
			}
			if got.Query != tc.query {
				t.Errorf("query: got %q, want %q", got.Query, tc.query)
			}
			if !sameJSON(t, got.Body, tc.body) {
				t.Errorf("body: got %s, want %s", got.Body, tc.body)
			}
			if a := got.Header.Get("Authorization"); a != "Bearer tok" {
				t.Errorf("Authorization: got %q, want %q", a, "Bearer tok")
			}
			wantCT := ""
			if tc.body != "" {
				wantCT = "application/json"
			}
			if ct := got.Header.Get("Content-Type"); ct != wantCT {
				t.Errorf("Content-Type: got %q, want %q", ct, wantCT)
			}
			if got.Header.Get("X-Correlation-ID") == "" {
				t.Error("no X-Correlation-ID sent")
			}
		})
	}
}

func TestCorrelationIDPerCall(t *testing.T) {
	f := newFakeAPI(t)
	for range 2 {
		if r := run(t, f.env(), "", "org", "list"); r.code != ExitOK {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	}
	reqs := f.requests()
	a, b := reqs[0].Header.Get("X-Correlation-ID"), reqs[1].Header.Get("X-Correlation-ID")
	if a == "" || a == b {
		t.Errorf("correlation ids %q and %q, want two different ones", a, b)
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		stdin      string
		status     int
		body       string
		want       int
		wantStderr []string
		sends      bool // whether a request reaches the server
	}{
		{name: "not found envelope", args: []string{"org", "get", "x"}, status: 404,
			body: `{"error":{"code":"NOT_FOUND","message":"organization not found","correlation_id":"corr-1","timestamp":"2025-01-01T00:00:00Z"}}`,
			want: ExitServerError, sends: true, wantStderr: []string{"error: NOT_FOUND: organization not found (correlation id corr-1)\n"}},
		{name: "validation details", args: []string{"org", "create", "--slug", "A B", "--name", "n"}, status: 400,
			body: `{"error":{"code":"VALIDATION_ERROR","message":"invalid request body","correlation_id":"corr-2","timestamp":"2025-01-01T00:00:00Z",
				"details":[{"field":"slug","message":"must be lowercase letters, digits and dashes","code":"invalid"},{"field":"name","message":"too short","code":"min"}]}}`,
			want: ExitServerError, sends: true, wantStderr: []string{
				"error: VALIDATION_ERROR: invalid request body (correlation id corr-2)\n  slug: must be lowercase letters, digits and dashes\n  name: too short\n"}},
		{name: "conflict", args: []string{"org", "create", "--slug", "a", "--name", "n"}, status: 409,
			body: `{"error":{"code":"CONFLICT","message":"slug already taken","correlation_id":"c3","timestamp":"t"}}`,
			want: ExitServerError, sends: true, wantStderr: []string{"error: CONFLICT: slug already taken (correlation id c3)"}},
		{name: "plain text 502", args: []string{"org", "list"}, status: 502, body: "bad gateway\nmore",
			want: ExitServerError, sends: true, wantStderr: []string{"error: HTTP 502: bad gateway (correlation id "}},
		{name: "answer that is not JSON", args: []string{"org", "list"}, status: 200, body: "<html>",
			want: ExitServerError, sends: true, wantStderr: []string{"error: HTTP 200: the answer is not the expected JSON"}},
		{name: "401", args: []string{"org", "list"}, status: 401,
			body: `{"error":{"code":"UNAUTHORIZED","message":"invalid admin token","correlation_id":"c4","timestamp":"t"}}`,
			want: ExitAuth, sends: true, wantStderr: []string{"error: UNAUTHORIZED: invalid admin token (correlation id c4)", "hint: check the admin token"}},

		{name: "no arguments", args: nil, want: ExitUsage, wantStderr: []string{"Usage: oidcd admin"}},
		{name: "unknown noun", args: []string{"frob"}, want: ExitUsage, wantStderr: []string{`error: unknown command "frob"`}},
		{name: "noun without verb", args: []string{"org"}, want: ExitUsage, wantStderr: []string{"error: org needs a verb", "Verbs:"}},
		{name: "unknown verb", args: []string{"org", "frob"}, want: ExitUsage, wantStderr: []string{`error: unknown verb "frob" for org`}},
		{name: "unknown global flag", args: []string{"--bogus", "org", "list"}, want: ExitUsage, wantStderr: []string{"flag provided but not defined: -bogus"}},
		{name: "unknown verb flag", args: []string{"org", "create", "--slug", "a", "--name", "b", "--bogus"}, want: ExitUsage,
			wantStderr: []string{"flag provided but not defined: -bogus", `run "oidcd admin org create -h" for usage`}},
		{name: "missing id", args: []string{"org", "get"}, want: ExitUsage, wantStderr: []string{"error: org get needs ID"}},
		{name: "extra args", args: []string{"org", "get", "a", "b"}, want: ExitUsage, wantStderr: []string{`got extra "b"`}},
		{name: "args to a verb without any", args: []string{"org", "list", "x"}, want: ExitUsage, wantStderr: []string{"org list takes no arguments"}},
		{name: "missing required flag", args: []string{"org", "create", "--slug", "a"}, want: ExitUsage, wantStderr: []string{"error: --name is required"}},
		{name: "missing email", args: []string{"user", "create"}, want: ExitUsage, wantStderr: []string{"error: --email is required"}},
		{name: "missing redirect uri", args: []string{"client", "create", "--name", "n", "--org", "o"}, want: ExitUsage, wantStderr: []string{"--redirect-uri is required"}},
		{name: "bad client type", args: []string{"client", "create", "--name", "n", "--org", "o", "--redirect-uri", "https://x/cb", "--type", "secret"},
			want: ExitUsage, wantStderr: []string{"--type must be one of confidential, public"}},
		{name: "bad ttl", args: []string{"client", "update", "c", "--access-token-ttl", "soon"}, want: ExitUsage, wantStderr: []string{"access-token-ttl"}},
		{name: "bad membership status", args: []string{"membership", "update", "m", "--status", "gone"}, want: ExitUsage, wantStderr: []string{"--status must be one of active, suspended"}},
		{name: "nothing to update", args: []string{"user", "update", "u"}, want: ExitUsage, wantStderr: []string{"nothing to update"}},
		{name: "client nothing to update", args: []string{"client", "update", "c"}, want: ExitUsage, wantStderr: []string{"nothing to update"}},
		{name: "two passwords", args: []string{"user", "create", "--email", "e", "--password", "p", "--password-stdin"}, stdin: "q",
			want: ExitUsage, wantStderr: []string{"not both"}},
		{name: "empty stdin password", args: []string{"user", "create", "--email", "e", "--password-stdin"},
			want: ExitUsage, wantStderr: []string{"standard input is empty"}},
		{name: "bad page", args: []string{"org", "list", "--page", "0"}, want: ExitUsage, wantStderr: []string{"--page must be 1 or more"}},
		{name: "non-numeric page", args: []string{"org", "list", "--page", "two"}, want: ExitUsage, wantStderr: []string{"invalid value"}},
		{name: "bad timeout", args: []string{"--timeout", "0s", "org", "list"}, want: ExitUsage, wantStderr: []string{"--timeout must be positive"}},
		{name: "bad addr", args: []string{"--addr", "ftp://x", "org", "list"}, want: ExitUsage, wantStderr: []string{"invalid --addr"}},
		{name: "token and token file", args: []string{"--token", "a", "--token-file", "b", "org", "list"}, want: ExitUsage, wantStderr: []string{"not both"}},
		{name: "missing token file", args: []string{"--token-file", "/nonexistent/admin-token", "org", "list"}, want: ExitUsage, wantStderr: []string{"--token-file: "}},
		{name: "help for unknown", args: []string{"help", "frob"}, want: ExitUsage, wantStderr: []string{"unknown command"}},
		{name: "client type cannot change", args: []string{"client", "update", "c", "--type", "public"}, want: ExitUsage, wantStderr: []string{"flag provided but not defined: -type"}},
		{name: "cluster remove-node needs an id", args: []string{"cluster", "remove-node"}, want: ExitUsage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			if tc.status != 0 {
				f.answer(tc.status, tc.body)
			}
			r := run(t, f.env(), tc.stdin, tc.args...)
			if r.code != tc.want {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tc.want, r.stderr)
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not contain %q", r.stderr, w)
				}
			}
			if n := len(f.requests()); (n > 0) != tc.sends {
				t.Errorf("got %d requests, want sent=%v", n, tc.sends)
			}
			if tc.want != ExitOK && r.stdout != "" {
				t.Errorf("stdout %q, want nothing on failure", r.stdout)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	addr := closed.URL
	closed.Close()

	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(hang) })

	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{name: "connection refused", args: []string{"--addr", addr, "org", "list"}, wantStderr: "error: cannot reach " + addr + "/admin/v1"},
		{name: "timeout", args: []string{"--addr", slow.URL, "--timeout", "100ms", "org", "list"}, wantStderr: "within 100ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, map[string]string{EnvToken: "tok"}, "", tc.args...)
			if r.code != ExitUnreachable {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, ExitUnreachable, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.wantStderr) {
				t.Errorf("stderr %q does not contain %q", r.stderr, tc.wantStderr)
			}
		})
	}
}

func TestToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(file, []byte("filetok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string // on top of the address
		args []string
		want string
	}{
		{name: "from env", env: map[string]string{EnvToken: "envtok"}, want: "envtok"},
		{name: "flag beats env", env: map[string]string{EnvToken: "envtok"}, args: []string{"--token", "flagtok"}, want: "flagtok"},
		{name: "token file", args: []string{"--token-file", file}, want: "filetok"},
		{name: "token file beats env", env: map[string]string{EnvToken: "envtok"}, args: []string{"--token-file", file}, want: "filetok"},
		{name: "token flag after the command", args: []string{"org", "list", "--token", "late"}, want: "late"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			env := map[string]string{EnvAddr: f.srv.URL}
			for k, v := range tc.env {
				env[k] = v
			}
			args := tc.args
			if len(args) == 0 || args[0] != "org" {
				args = append(append([]string{}, args...), "org", "list")
			}
			r := run(t, env, "", args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if got := f.only(t).Header.Get("Authorization"); got != "Bearer "+tc.want {
				t.Errorf("Authorization: got %q, want %q", got, "Bearer "+tc.want)
			}
		})
	}
}

// TestTokenDefaultFile changes the working directory, so it cannot run in
// parallel with anything.
func TestTokenDefaultFile(t *testing.T) {
	f := newFakeAPI(t)
	dir := t.TempDir()
	t.Chdir(dir)

	r := run(t, map[string]string{EnvAddr: f.srv.URL}, "", "org", "list")
	if r.code != ExitAuth {
		t.Fatalf("without a token: exit %d, want %d; stderr %q", r.code, ExitAuth, r.stderr)
	}
	if !strings.Contains(r.stderr, "no admin token") || !strings.Contains(r.stderr, "not found") {
		t.Errorf("stderr %q, want it to explain the missing token", r.stderr)
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("got %d requests without a token, want 0", n)
	}

	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "admin-token"), []byte("  datatok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, map[string]string{EnvAddr: f.srv.URL}, "", "org", "list")
	if r.code != ExitOK {
		t.Fatalf("with ./data/admin-token: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := f.only(t).Header.Get("Authorization"); got != "Bearer datatok" {
		t.Errorf("Authorization: got %q, want %q", got, "Bearer datatok")
	}
}

func TestAddr(t *testing.T) {
	f := newFakeAPI(t)
	hostPort := strings.TrimPrefix(f.srv.URL, "http://")
	tests := []struct {
		name string
		env  map[string]string
		args []string
	}{
		{name: "host:port without scheme", args: []string{"--addr", hostPort}},
		{name: "trailing slash", args: []string{"--addr", f.srv.URL + "/"}},
		{name: "from env", env: map[string]string{EnvAddr: hostPort}},
		{name: "flag beats env", env: map[string]string{EnvAddr: "127.0.0.1:1"}, args: []string{"--addr", f.srv.URL}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{EnvToken: "tok"}
			for k, v := range tc.env {
				env[k] = v
			}
			before := len(f.requests())
			r := run(t, env, "", append(tc.args, "org", "list")...)
			if r.code != ExitOK {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			reqs := f.requests()
			if len(reqs) != before+1 || reqs[before].Path != "/admin/v1/organizations" {
				t.Errorf("requests %+v, want one GET /admin/v1/organizations", reqs[before:])
			}
		})
	}
}

func TestBaseURL(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "127.0.0.1:8080", want: "http://127.0.0.1:8080/admin/v1"},
		{in: "http://127.0.0.1:8080/", want: "http://127.0.0.1:8080/admin/v1"},
		{in: "https://idp.example.com", want: "https://idp.example.com/admin/v1"},
		{in: "https://idp.example.com/prefix/", want: "https://idp.example.com/prefix/admin/v1"},
		{in: "localhost:8080", want: "http://localhost:8080/admin/v1"},
		{in: "", bad: true},
		{in: "ftp://x", bad: true},
		{in: "http://", bad: true},
	}
	for _, tc := range tests {
		got, err := baseURL(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("baseURL(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("baseURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "help", args: []string{"help"}, want: []string{"Usage: oidcd admin", "Exit codes:", "  3  the server could not be reached", "org create", "cluster status", "--token-file"}},
		{name: "-h", args: []string{"-h"}, want: []string{"Usage: oidcd admin", "Exit codes:"}},
		{name: "--help", args: []string{"--help"}, want: []string{"Usage: oidcd admin"}},
		{name: "noun help", args: []string{"org", "help"}, want: []string{"Usage: oidcd admin org <verb>", "create --slug S --name N", "delete ID"}},
		{name: "noun -h", args: []string{"client", "-h"}, want: []string{"Usage: oidcd admin client <verb>"}},
		{name: "help noun", args: []string{"help", "user"}, want: []string{"recovery-codes ADDRESS|ID", "totp-remove ADDRESS|ID", "factors ADDRESS|ID", "unlink ADDRESS|ID IDENTITY_ID", "named by their email address or user ID"}},
		{name: "help noun verb", args: []string{"help", "client", "create"}, want: []string{"--redirect-uri URI", "--serve-org ID", "shown only this once"}},
		{name: "verb -h", args: []string{"user", "update", "-h"}, want: []string{"Usage: oidcd admin user update ADDRESS|ID", "--email-verified", "Only the flags given are sent", "ADDRESS|ID is the person's email address (looked up first) or user ID.", "Exit codes:"}},
		{name: "user factors -h", args: []string{"user", "factors", "-h"}, want: []string{"Usage: oidcd admin user factors ADDRESS|ID", "ADDRESS|ID is the person's email address (looked up first) or user ID."}},
		{name: "membership create -h", args: []string{"membership", "create", "-h"}, want: []string{"--user address", "their email address or user ID", "--user is the person's email address (looked up first) or user ID."}},
		{name: "membership list -h", args: []string{"membership", "list", "-h"}, want: []string{"--user address", "their email address or user ID"}},
		{name: "org help create", args: []string{"org", "help", "create"}, want: []string{"--slug name"}},
		{name: "org help", args: []string{"org", "help"}, want: []string{"update ID [--name N] [--registration on|off] [--email-domains D,D...]"}},
		{name: "org update -h", args: []string{"org", "update", "-h"}, want: []string{"--registration on", "--email-domains domains", "replaces the list", "punycode", "at least one domain"}},
		{name: "invitation help", args: []string{"invitation", "help"}, want: []string{"Usage: oidcd admin invitation <verb>", "create --email E --org O [--expires-in D]", "list [--org O] [--status pending|accepted|expired]", "delete ID"}},
		{name: "invitations -h", args: []string{"invitations", "create", "-h"}, want: []string{"--expires-in seconds", "from 1h to 720h", "7 days", "--email-outbox"}},
		{name: "user verify-email -h", args: []string{"user", "verify-email", "-h"}, want: []string{"Usage: oidcd admin user verify-email ADDRESS|ID", "24 hours", "directory"}},
		{name: "help lists invitations", args: []string{"help"}, want: []string{"invitation create", "invitation delete ID", "user verify-email ADDRESS|ID", "user totp-remove ADDRESS|ID", "org update ID", "invitation create --email"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, nil, "", tc.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d, want 0; stderr %q", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout does not contain %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

// TestEveryVerbHasHelp runs -h on every verb: each prints its usage line
// and its own flags, and none needs a server.
func TestEveryVerbHasHelp(t *testing.T) {
	for _, n := range commands() {
		for _, v := range n.verbs {
			t.Run(n.name+" "+v.name, func(t *testing.T) {
				r := run(t, nil, "", n.name, v.name, "-h")
				if r.code != ExitOK {
					t.Fatalf("exit %d; stderr %q", r.code, r.stderr)
				}
				if want := "Usage: " + v.usageLine(&n); !strings.Contains(r.stdout, want) {
					t.Errorf("stdout does not contain %q", want)
				}
				fs := newFlagSet("x")
				v.setup(fs)
				fs.VisitAll(func(fl *flag.Flag) {
					if !strings.Contains(r.stdout, "--"+fl.Name) {
						t.Errorf("help does not mention --%s", fl.Name)
					}
				})
			})
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		json bool
	}{
		{args: []string{"a", "--json", "b"}, pos: []string{"a", "b"}, json: true},
		{args: []string{"--json", "a"}, pos: []string{"a"}, json: true},
		{args: []string{"a", "--", "--json"}, pos: []string{"a", "--json"}},
		{args: nil, pos: nil},
	}
	for _, tc := range tests {
		fs := newFlagSet("t")
		j := fs.Bool("json", false, "")
		pos, err := parseInterspersed(fs, tc.args)
		if err != nil {
			t.Fatalf("parseInterspersed(%q): %v", tc.args, err)
		}
		if !reflect.DeepEqual(pos, tc.pos) || *j != tc.json {
			t.Errorf("parseInterspersed(%q) = %q, json=%v; want %q, json=%v", tc.args, pos, *j, tc.pos, tc.json)
		}
	}
}
