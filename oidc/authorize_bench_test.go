package oidc

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// authzGet is GET path with the SSO session cookie secret, when not "".
func authzGet(tb testing.TB, h *harness, path, secret string) *httptest.ResponseRecorder {
	tb.Helper()
	r := bcReq{method: http.MethodGet, path: path}
	if secret != "" {
		r.header = map[string]string{"Cookie": (&http.Cookie{Name: cookieSession, Value: secret}).String()}
	}
	return bcDo(tb, h, r)
}

// TestNoBrowserKey: a node that has not received the browser key yet
// cannot show a form: 503, and silent sign-in still works.
func TestNoBrowserKey(t *testing.T) {
	h := newHarness(t, withoutBrowserKey)
	path := authzPath(authzQuery(hPublic))
	rec := authzGet(t, h, path, "")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Location") != "" {
		t.Errorf("got %d %q, want 503 without Location", rec.Code, rec.Header().Get("Location"))
	}
	if !strings.Contains(rec.Body.String(), `class="reference"`) {
		t.Errorf("no reference on the 503 page")
	}
	_, secret := h.ssoSession(hUser)
	rec = authzGet(t, h, path, secret)
	if rec.Code != http.StatusFound || !strings.HasPrefix(rec.Header().Get("Location"), hRedirect+"?code=") {
		t.Errorf("silent sign-in: got %d %q, want 302 with a code", rec.Code, rec.Header().Get("Location"))
	}
}

// TestSecureCookies: with an https issuer every cookie is Secure.
func TestSecureCookies(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Issuer = "https://idp.example" })
	cookies := authzGet(t, h, authzPath(authzQuery(hPublic)), "").Result().Cookies()
	if len(cookies) == 0 {
		t.Fatal("no cookie set with the sign-in form")
	}
	for _, c := range cookies {
		if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
			t.Errorf("cookie %s: got %+v, want Secure, HttpOnly, SameSite=Lax", c.Name, c)
		}
		// A sibling subdomain must not plant them: __Host- (path /, no
		// Domain) or, for a narrower path, __Secure-.
		host := strings.HasPrefix(c.Name, "__Host-") && c.Path == "/" && c.Domain == ""
		if !host && !strings.HasPrefix(c.Name, "__Secure-") {
			t.Errorf("cookie %s (path %s, domain %q): want the __Host- or __Secure- prefix", c.Name, c.Path, c.Domain)
		}
	}
}

// BenchmarkSilentAuthorize: GET /authorize with a live session cookie,
// answered 302 with a code (validation, session read, membership read,
// one IssueCode apply on a real bbolt FSM).
func BenchmarkSilentAuthorize(b *testing.B) {
	h := newHarness(b)
	_, secret := h.ssoSession(hUser)
	path := authzPath(authzQuery(hPublic))
	b.ReportAllocs()
	for b.Loop() {
		rec := authzGet(b, h, path, secret)
		if rec.Code != http.StatusFound || !strings.Contains(rec.Header().Get("Location"), "code=") {
			b.Fatalf("got %d %q", rec.Code, rec.Header().Get("Location"))
		}
	}
}
