package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
)

// apiStatus calls the admin API next to the console (same server, same
// address) with token and returns the answer's status and error code.
func (e *env) apiStatus(token string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+admin.Prefix+"/status", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	r := e.do(req)
	var env httpx.Envelope
	_ = json.Unmarshal([]byte(r.Body), &env)
	return r.Status, env.Error.Code
}

// TestTokenFormSharesTheAdminGuard: the console's token form counts its
// guesses in the node's guard, with the admin API: 19 wrong tokens on the
// API and one on the form use up the address's 20, and the 21st attempt,
// on either, is refused with 429 before its token is compared: the right
// token gets 429. The other way round too. An operator already signed in
// from that address keeps working: the console's in-process API calls are
// not counted against the person's address.
func TestTokenFormSharesTheAdminGuard(t *testing.T) {
	t.Run("API then form", func(t *testing.T) {
		e := newEnv(t)
		e.signIn()
		for i := range 19 {
			if got, _ := e.apiStatus("wrong"); got != http.StatusUnauthorized {
				t.Fatalf("wrong token %d on the API: got %d, want 401", i+1, got)
			}
		}
		r := e.post(Prefix+"signin", url.Values{"token": {"wrong"}})
		wantStatus(t, "20th attempt, on the form", r, http.StatusUnauthorized)
		r = e.post(Prefix+"signin", url.Values{"token": {testToken}})
		wantStatus(t, "21st attempt, the right token on the form", r, http.StatusTooManyRequests)
		wantBody(t, "refused form", r, "Too many admin token attempts", `name="token"`, `name="csrf_token"`)
		if got := r.Header.Get("Retry-After"); got != "60" {
			t.Errorf("Retry-After: got %q, want %q", got, "60")
		}
		if got, code := e.apiStatus(testToken); got != http.StatusTooManyRequests || code != httpx.CodeRateLimited {
			t.Errorf("the right token on the API: got %d %s, want 429 %s", got, code, httpx.CodeRateLimited)
		}
		// The session from before the guesses still works, reads and
		// writes (each page calls the in-process API from this address).
		wantStatus(t, "signed-in page", e.get(Prefix+"cluster"), http.StatusOK)
		r = e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
		if r.Status != http.StatusSeeOther {
			t.Errorf("signed-in write: got %d, want 303\n%s", r.Status, r.Body)
		}
	})
	t.Run("form then API", func(t *testing.T) {
		e := newEnv(t)
		for range 20 {
			r := e.post(Prefix+"signin", url.Values{"token": {"wrong"}})
			wantStatus(t, "wrong token on the form", r, http.StatusUnauthorized)
		}
		if got, _ := e.apiStatus(testToken); got != http.StatusTooManyRequests {
			t.Errorf("21st attempt, the right token on the API: got %d, want 429", got)
		}
		r := e.post(Prefix+"signin", url.Values{"token": {testToken}})
		wantStatus(t, "the right token on the form", r, http.StatusTooManyRequests)
		if e.cookie(cookieSession) != "" {
			t.Error("a refused attempt got a session cookie")
		}
	})
}
