package logout

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// hAdmin is the built-in client's id as node hands it (oidc.AdminClientID).
const hAdmin = "oidcd-admin"

// adminHint is an ID token of the built-in client as oidc signs it: no
// organization_id, and a sid naming the SSO session itself.
func (h *harness) adminHint(user, ssoID string) string {
	return h.idToken(map[string]any{"sub": user, "aud": []string{hAdmin}, "sid": ssoID, "organization_id": nil})
}

// TestLogoutWithTheBuiltInClientsHint: an ID token of oidcd-admin (the
// console's and the CLI's) ends the browser's SSO session like any
// client's, over GET and POST, with the app sessions under it and their
// back-channel tokens; it registers no post-logout redirect, so any
// post_logout_redirect_uri is refused and nothing ends.
func TestLogoutWithTheBuiltInClientsHint(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AdminClientID = hAdmin })
	h.runSender()

	t.Run("GET ends the session and its apps", func(t *testing.T) {
		sess := h.ssoSession(hUser)
		sidA, _ := h.signIn(sess, hUser, hAppA, hOrgA) // an app signed in on the same browser
		r := h.get(q("id_token_hint", h.adminHint(hUser, sess.id), "client_id", hAdmin, "state", "ignored"), sess.secret)
		if r.status != http.StatusOK || r.location() != "" || !strings.Contains(r.body, "You are signed out.") {
			t.Fatalf("got %d %q, want 200 and the signed-out page:\n%s", r.status, r.location(), r.body)
		}
		if !h.ended(sess.id) {
			t.Fatal("the SSO session was not ended")
		}
		if c := (&http.Response{Header: r.header}).Cookies(); len(c) != 1 || c[0].Name != hCookie || c[0].MaxAge != -1 {
			t.Fatalf("Set-Cookie %q, want the session cookie cleared", r.header.Values("Set-Cookie"))
		}
		waitFor(t, "app A's back-channel token", func() bool {
			got := h.recvA.received()
			return len(got) == 1 && claimsOf(got[0])["sid"] == sidA
		})
	})
	t.Run("POST ends the session", func(t *testing.T) {
		sess := h.ssoSession(hUser)
		r := h.post(url.Values{"id_token_hint": {h.adminHint(hUser, sess.id)}}, sess.secret)
		if r.status != http.StatusOK || r.body != "" || r.location() != "" {
			t.Fatalf("got %d %q %q, want 200 without body", r.status, r.location(), r.body)
		}
		if !h.ended(sess.id) {
			t.Fatal("the SSO session was not ended")
		}
	})

	// What must end nothing: every post-logout redirect (none is
	// registered, so none is an open redirect), and a hint that does not
	// name this browser's session of its person.
	sess := h.ssoSession(hUser)
	other := h.ssoSession(hUser2)
	appSID, _ := h.signIn(sess, hUser, hAppA, hOrgA)
	for _, uri := range []string{
		h.s.cfg.Issuer + "/console/callback", "http://127.0.0.1/callback", "http://127.0.0.1:49152/callback",
		"http://[::1]/callback", h.s.cfg.Issuer + "/console/", hRedirect, "https://evil.example/", "//evil.example/",
	} {
		t.Run("redirect "+uri, func(t *testing.T) {
			hint := h.adminHint(hUser, sess.id)
			if r := h.get(q("id_token_hint", hint, "post_logout_redirect_uri", uri), sess.secret); r.status != http.StatusBadRequest || r.location() != "" {
				t.Fatalf("GET: got %d %q, want 400 without a Location", r.status, r.location())
			}
			if r := h.post(url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {uri}}, sess.secret); r.status != http.StatusBadRequest || r.location() != "" {
				t.Fatalf("POST: got %d %q, want 400 without a Location", r.status, r.location())
			}
		})
	}
	for _, tt := range []struct{ name, hint, cookie string }{
		{"another person's session named", h.adminHint(hUser, other.id), other.secret},
		{"the hint's session, another browser", h.adminHint(hUser, sess.id), other.secret},
		{"no cookie", h.adminHint(hUser, sess.id), ""},
		{"an app session's sid", h.adminHint(hUser, appSID), sess.secret},
		{"an unknown session", h.adminHint(hUser, "5e000000-0000-4000-8000-000000000005"), sess.secret},
		{"an app's hint naming the SSO session", h.idToken(map[string]any{"sub": hUser, "aud": []string{hAppA}, "sid": sess.id}), sess.secret},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := h.get(q("id_token_hint", tt.hint), tt.cookie)
			if r.status != http.StatusOK || len(r.header.Values("Set-Cookie")) != 0 {
				t.Fatalf("got %d Set-Cookie %q, want 200 and the cookie kept", r.status, r.header.Values("Set-Cookie"))
			}
		})
	}
	if r := h.get(q("id_token_hint", h.adminHint(hUser, sess.id), "client_id", hAppA), sess.secret); r.status != http.StatusBadRequest {
		t.Fatalf("client_id outside the hint's audience: got %d, want 400", r.status)
	}
	if h.ended(sess.id) || h.ended(other.id) {
		t.Fatalf("ended: %v %v; a refused or foreign hint ended a session", h.ended(sess.id), h.ended(other.id))
	}
}

// TestLogoutWithoutTheBuiltInClientRefusesItsHint: a Service not told the
// built-in client's id takes its hint as an unknown client's.
func TestLogoutWithoutTheBuiltInClientRefusesItsHint(t *testing.T) {
	h := newHarness(t)
	sess := h.ssoSession(hUser)
	if r := h.get(q("id_token_hint", h.adminHint(hUser, sess.id)), sess.secret); r.status != http.StatusBadRequest {
		t.Fatalf("got %d, want 400", r.status)
	}
	if h.ended(sess.id) {
		t.Fatal("session ended")
	}
}
