package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLockoutListNamesThePerson: where the API's answer names a person,
// lockout list shows the person's address beside the id (one lookup per
// person); a person who cannot be read keeps the id, a key that names
// nobody keeps "-", and --json prints the API's answer as it is.
func TestLockoutListNamesThePerson(t *testing.T) {
	const ann, gone = "0b1e6c3a-8d2f-4f7e-9a51-3c2d1e0f9a8b", "5d2e9f10-1111-4222-8333-944455566677"
	var lookups atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/v1/lockouts", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data":[` +
			`{"key":"code:` + ann + `","kind":"code","user_id":"` + ann + `","count":5,"locked_until":"2025-01-01T00:15:00Z"},` +
			`{"key":"pwd:x7a","kind":"password","user_id":"` + ann + `","count":10,"locked_until":"2025-01-01T00:16:00Z"},` +
			`{"key":"code:` + gone + `","kind":"code","user_id":"` + gone + `","count":5,"locked_until":"2025-01-01T00:17:00Z"},` +
			`{"key":"ip:10.0.0.9","kind":"ip","count":50,"locked_until":"2025-01-01T01:00:00Z"}]}`))
	})
	mux.HandleFunc("GET /admin/v1/users/{id}", func(w http.ResponseWriter, r *http.Request) {
		lookups.Add(1)
		if r.PathValue("id") != ann {
			http.Error(w, `{"error":{"code":"NOT_FOUND","message":"not found"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"` + ann + `","email":"ann@example.com","email_verified":true}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	env := map[string]string{EnvAddr: srv.URL, EnvToken: "tok"}

	r := run(t, env, "", "lockout", "list")
	if r.code != ExitOK {
		t.Fatalf("exit %d; stderr %q", r.code, r.stderr)
	}
	out := spaces.ReplaceAllString(r.stdout, " ")
	for _, want := range []string{
		"KEY KIND USER FAILURES LOCKED_UNTIL\n",
		"code:" + ann + " code ann@example.com (" + ann + ") 5 ",
		"pwd:x7a password ann@example.com (" + ann + ") 10 ",
		"code:" + gone + " code " + gone + " 5 ",
		"ip:10.0.0.9 ip - 50 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := lookups.Load(); n != 2 {
		t.Errorf("got %d person lookups, want 2 (one per person)", n)
	}

	r = run(t, env, "", "--json", "lockout", "list")
	if r.code != ExitOK || strings.Contains(r.stdout, "ann@example.com") || !strings.Contains(r.stdout, `"user_id": "`+ann+`"`) {
		t.Errorf("--json: got exit %d and\n%s\nwant the API's answer as it is", r.code, r.stdout)
	}
}
