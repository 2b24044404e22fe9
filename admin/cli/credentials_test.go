package cli

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCredentialsFile: the file sits under $XDG_CONFIG_HOME (else
// $HOME/.config) in oidcd/, the directory 0700 and the file 0600; sign-ins
// are kept per --addr, however the address is written; forgetting one
// keeps the others.
func TestCredentialsFile(t *testing.T) {
	xdg := t.TempDir()
	env := func(k string) string { return map[string]string{EnvXDGConfigHome: xdg, "HOME": "/nonexistent"}[k] }
	path, err := credentialsPath(env)
	if want := filepath.Join(xdg, "oidcd", "credentials.json"); err != nil || path != want {
		t.Fatalf("path: got %q %v, want %q", path, err, want)
	}
	if p, _ := credentialsPath(func(k string) string { return map[string]string{"HOME": "/home/ann"}[k] }); p != "/home/ann/.config/oidcd/credentials.json" {
		t.Errorf("without XDG_CONFIG_HOME: got %q", p)
	}
	if p, _ := credentialsPath(func(k string) string {
		return map[string]string{"HOME": "/home/ann", EnvXDGConfigHome: "relative"}[k]
	}); p != "/home/ann/.config/oidcd/credentials.json" {
		t.Errorf("a relative XDG_CONFIG_HOME is ignored: got %q", p)
	}
	if _, err := credentialsPath(func(string) string { return "" }); err != errNoHome {
		t.Errorf("no home: got %v, want errNoHome", err)
	}

	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := updateLogin(env, "127.0.0.1:8080", &login{Issuer: "http://127.0.0.1:8080", AccessToken: "tok-a", ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	if _, err := updateLogin(env, "https://b.example:9443/", &login{AccessToken: "tok-b", ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Dir(path), 0o700}, {path, 0o600}} {
		fi, err := os.Stat(p.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != p.mode {
			t.Errorf("%s: mode %o, want %o", p.path, got, p.mode)
		}
	}
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "tok-a", "http://127.0.0.1:8080/": "tok-a", "http://127.0.0.1:8080": "tok-a",
		"https://b.example:9443": "tok-b", "127.0.0.1:8081": "", "https://127.0.0.1:8080": "",
	} {
		l, ok, err := storedLogin(env, addr)
		if err != nil || ok != (want != "") || l.AccessToken != want {
			t.Errorf("%s: got %q %v %v, want %q", addr, l.AccessToken, ok, err, want)
		}
	}
	if _, err := updateLogin(env, "http://127.0.0.1:8080", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := storedLogin(env, "127.0.0.1:8080"); ok {
		t.Error("forgotten sign-in still there")
	}
	if l, ok, _ := storedLogin(env, "https://b.example:9443"); !ok || l.AccessToken != "tok-b" {
		t.Error("forgetting one sign-in lost another")
	}
	// No temporary files are left beside it.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want the file alone", len(entries))
	}
	// An existing, wider directory is narrowed.
	os.Chmod(filepath.Dir(path), 0o755)
	updateLogin(env, "127.0.0.1:1", &login{AccessToken: "x", ExpiresAt: exp})
	if fi, _ := os.Stat(filepath.Dir(path)); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %o after a write, want 700", fi.Mode().Perm())
	}
}

// TestStoredLoginPrecedence: --token, --token-file and $OIDCD_ADMIN_TOKEN
// win over the sign-in kept for --addr, which wins over ./data/admin-token
// and is sent only to its own --addr; an expired one is refused without
// a request.
func TestStoredLoginPrecedence(t *testing.T) {
	f := newFakeAPI(t)
	f.answer(http.StatusOK, `{"data":[]}`)
	xdg := t.TempDir()
	t.Chdir(t.TempDir())
	os.MkdirAll("data", 0o700)
	os.WriteFile(DefaultTokenFile, []byte("from-data-dir\n"), 0o600)
	tokenFile := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(tokenFile, []byte("from-file\n"), 0o600)
	env := map[string]string{EnvAddr: f.srv.URL, EnvXDGConfigHome: xdg}
	envFn := func(k string) string { return env[k] }
	if _, err := updateLogin(envFn, f.srv.URL, &login{AccessToken: "from-login", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	sent := func(args ...string) string {
		t.Helper()
		n := len(f.requests())
		r := run(t, env, "", append(args, "org", "list")...)
		if r.code != ExitOK {
			t.Fatalf("%v: exit %d %s", args, r.code, r.stderr)
		}
		return strings.TrimPrefix(f.requests()[n].Header.Get("Authorization"), "Bearer ")
	}
	if got := sent(); got != "from-login" {
		t.Errorf("stored sign-in: sent %q", got)
	}
	if got := sent("--token", "from-flag"); got != "from-flag" {
		t.Errorf("--token: sent %q", got)
	}
	if got := sent("--token-file", tokenFile); got != "from-file" {
		t.Errorf("--token-file: sent %q", got)
	}
	env[EnvToken] = "from-env"
	if got := sent(); got != "from-env" {
		t.Errorf("$%s: sent %q", EnvToken, got)
	}
	delete(env, EnvToken)
	// Another address has no sign-in: the data dir's token goes there.
	var got string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Write([]byte(`{"data":[]}`))
	}))
	defer other.Close()
	u, _ := url.Parse(other.URL)
	if r := run(t, env, "", "--addr", u.Host, "org", "list"); r.code != ExitOK || got != "Bearer from-data-dir" {
		t.Errorf("other addr: exit %d %s, sent %q", r.code, r.stderr, got)
	}
	// Expired: refused before anything is sent.
	updateLogin(envFn, f.srv.URL, &login{AccessToken: "from-login", ExpiresAt: time.Now().Add(-time.Minute)})
	n := len(f.requests())
	r := run(t, env, "", "org", "list")
	if r.code != ExitAuth || !strings.Contains(r.stderr, "oidcd admin login") || len(f.requests()) != n {
		t.Errorf("expired: exit %d, stderr %q, %d requests sent", r.code, r.stderr, len(f.requests())-n)
	}
}

// TestLogoutForgetsAndRevokes: logout posts the token to the revocation
// endpoint as the built-in client and forgets it; without a sign-in it
// says so.
func TestLogoutForgetsAndRevokes(t *testing.T) {
	var form url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		form = r.PostForm
	}))
	defer srv.Close()
	env := map[string]string{EnvAddr: srv.URL, EnvXDGConfigHome: t.TempDir()}
	envFn := func(k string) string { return env[k] }
	updateLogin(envFn, srv.URL, &login{AccessToken: "tok", ExpiresAt: time.Now().Add(time.Hour), RevocationURL: srv.URL + "/oauth2/revoke"})
	r := run(t, env, "", "logout")
	if r.code != ExitOK || !strings.Contains(r.stdout, "signed out of "+srv.URL) {
		t.Fatalf("logout: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if form.Get("token") != "tok" || form.Get("client_id") != LoginClientID {
		t.Errorf("revocation form %v", form)
	}
	if _, ok, _ := storedLogin(envFn, srv.URL); ok {
		t.Error("still signed in")
	}
	if r := run(t, env, "", "logout"); r.code != ExitOK || !strings.Contains(r.stdout, "not signed in") {
		t.Errorf("second logout: exit %d %q", r.code, r.stdout)
	}
}

// TestAdminCommands: grants, API keys and the break-glass token map to
// their calls; the key and the token are printed with a note.
func TestAdminCommands(t *testing.T) {
	const org = "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b"
	const u1 = "5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
	f := newFakeAPI(t)
	for _, tc := range []struct {
		args           []string
		method, path   string
		body           string
		answer         string
		stdout, stderr string
		code           int
	}{
		{args: []string{"admins", "create", "--user", u1, "--role", "org_admin", "--org", org}, method: "POST", path: "/admin/v1/admins",
			body: `{"user_id":"` + u1 + `","role":"org_admin","organization_id":"` + org + `"}`, answer: `{"id":"g1","user_id":"u1","role":"org_admin"}`, stdout: "g1"},
		{args: []string{"admins", "create", "--user", u1, "--role", "admin"}, method: "POST", path: "/admin/v1/admins",
			body: `{"user_id":"` + u1 + `","role":"admin"}`, answer: `{"id":"g2"}`, stdout: "g2"},
		{args: []string{"admins", "list"}, method: "GET", path: "/admin/v1/admins", answer: `{"data":[{"id":"g1","user_id":"` + u1 + `","role":"auditor"}]}`, stdout: "auditor"},
		{args: []string{"admins", "delete", "g1"}, method: "DELETE", path: "/admin/v1/admins/g1", stdout: "deleted grant g1"},
		{args: []string{"api-keys", "create", "--name", "ci", "--role", "auditor", "--expires-in", "720h"}, method: "POST", path: "/admin/v1/api-keys",
			body: `{"name":"ci","role":"auditor","expires_in":2592000}`, answer: `{"id":"k1","name":"ci","key":"secret-key"}`, stdout: "secret-key", stderr: "shown only this once"},
		{args: []string{"api-keys", "list"}, method: "GET", path: "/admin/v1/api-keys", answer: `{"data":[{"id":"k1","name":"ci"}]}`, stdout: "ci"},
		{args: []string{"api-keys", "delete", "k1"}, method: "DELETE", path: "/admin/v1/api-keys/k1", stdout: "deleted API key k1"},
		{args: []string{"admin-token", "rotate"}, method: "POST", path: "/admin/v1/admin-token", answer: `{"token":"new-token"}`, stdout: "new-token\n", stderr: "shown only this once"},
		{args: []string{"admins", "create", "--user", u1, "--role", "org_admin"}, code: ExitUsage, stderr: "needs --org"},
		{args: []string{"admins", "create", "--user", u1, "--role", "admin", "--org", org}, code: ExitUsage, stderr: "--org is for"},
		{args: []string{"admins", "create", "--user", u1, "--role", "root"}, code: ExitUsage, stderr: "role"},
		{args: []string{"api-keys", "create", "--name", "ci", "--role", "admin"}, code: ExitUsage, stderr: "--expires-in is required"},
		{args: []string{"api-keys", "create", "--name", "ci", "--role", "admin", "--expires-in", "9000h"}, code: ExitUsage, stderr: "a year"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			n := len(f.requests())
			status := http.StatusCreated
			if tc.answer == "" {
				status = http.StatusNoContent
			}
			f.answer(status, tc.answer)
			r := run(t, f.env(), "", tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", r.code, tc.code, r.stdout, tc.stdout, r.stderr, tc.stderr)
			}
			reqs := f.requests()[n:]
			if tc.code != ExitOK {
				if len(reqs) != 0 {
					t.Errorf("a usage error sent %d requests", len(reqs))
				}
				return
			}
			// A grant's verbs then read its person's address.
			if tc.args[0] == "admins" && tc.args[1] != "delete" {
				if len(reqs) != 2 || reqs[1].Method != "GET" || reqs[1].Path != "/admin/v1/users/"+u1 {
					t.Errorf("sent %+v, want the grant's call, then GET /admin/v1/users/%s", reqs, u1)
				}
				reqs = reqs[:min(len(reqs), 1)]
			}
			if len(reqs) != 1 || reqs[0].Method != tc.method || reqs[0].Path != tc.path || !sameJSON(t, reqs[0].Body, tc.body) {
				t.Errorf("sent %+v, want %s %s %s", reqs, tc.method, tc.path, tc.body)
			}
		})
	}
}
