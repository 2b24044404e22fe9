package logout

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// q builds a raw query from name, value pairs, in order.
func q(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(kv[i]) + "=" + url.QueryEscape(kv[i+1]))
	}
	return b.String()
}

// algNone re-encodes tok's payload under an alg none header.
func algNone(tok string) string {
	parts := strings.Split(tok, ".")
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	return hdr + "." + parts[1] + "."
}

// foreignSigned re-signs tok's payload with a fresh RSA key under the kid
// of tok: the kid is published, the key is not ours.
func foreignSigned(t *testing.T, tok string) string {
	t.Helper()
	msg, err := jws.Parse([]byte(tok))
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	hdr.Set(jws.KeyIDKey, msg.Signatures()[0].ProtectedHeaders().KeyID())
	hdr.Set(jws.TypeKey, "JWT")
	out, err := jws.Sign(msg.Payload(), jws.WithKey(jwa.RS256, key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestLogoutRefusesWhatCannotBeValidated(t *testing.T) {
	h := newHarness(t)
	sess := h.ssoSession(hUser)
	sid, good := h.signIn(sess, hUser, hAppA, hOrgA)
	now := h.clock.Now()
	hint := func(c map[string]any) string {
		c["sid"] = sid
		if _, ok := c["aud"]; !ok {
			c["aud"] = []string{hAppA}
		}
		return h.idToken(c)
	}
	_, suspendedHint := h.signIn(sess, hUser, hSuspended, hOrgA)
	tests := []struct {
		name, query string
	}{
		{"missing hint", q("post_logout_redirect_uri", hRedirect, "state", "s1")},
		{"empty hint", q("id_token_hint", "", "post_logout_redirect_uri", hRedirect)},
		{"malformed query", "id_token_hint=%zz&post_logout_redirect_uri=" + url.QueryEscape(hRedirect)},
		{"repeated hint", q("id_token_hint", good, "id_token_hint", good, "post_logout_redirect_uri", hRedirect)},
		{"repeated state", q("id_token_hint", good, "post_logout_redirect_uri", hRedirect, "state", "a", "state", "b")},
		{"repeated redirect", q("id_token_hint", good, "post_logout_redirect_uri", hRedirect, "post_logout_redirect_uri", hRedirect)},
		{"not a JWT", q("id_token_hint", "not-a-token", "post_logout_redirect_uri", hRedirect)},
		{"padded JWT", q("id_token_hint", " "+good, "post_logout_redirect_uri", hRedirect)},
		{"alg none", q("id_token_hint", algNone(good), "post_logout_redirect_uri", hRedirect)},
		{"foreign key", q("id_token_hint", foreignSigned(t, good), "post_logout_redirect_uri", hRedirect)},
		{"tampered payload", q("id_token_hint", tamper(good), "post_logout_redirect_uri", hRedirect)},
		{"other issuer", q("id_token_hint", hint(map[string]any{"iss": "https://evil.example"}), "post_logout_redirect_uri", hRedirect)},
		{"issuer with slash", q("id_token_hint", hint(map[string]any{"iss": h.s.cfg.Issuer + "/"}), "post_logout_redirect_uri", hRedirect)},
		{"expired", q("id_token_hint", hint(map[string]any{"exp": now.Add(-10 * time.Second).Unix()}), "post_logout_redirect_uri", hRedirect)},
		{"no exp", q("id_token_hint", hint(map[string]any{"exp": nil}), "post_logout_redirect_uri", hRedirect)},
		{"aud string (logout token shape)", q("id_token_hint", hint(map[string]any{"aud": hAppA}), "post_logout_redirect_uri", hRedirect)},
		{"aud empty (access token)", q("id_token_hint", hint(map[string]any{"aud": []string{}}), "post_logout_redirect_uri", hRedirect)},
		{"aud absent", q("id_token_hint", hint(map[string]any{"aud": nil}), "post_logout_redirect_uri", hRedirect)},
		{"events claim", q("id_token_hint", hint(map[string]any{"events": map[string]any{eventBackchannelLogout: map[string]any{}}}), "post_logout_redirect_uri", hRedirect)},
		{"no sid", h.noSID(hRedirect)},
		{"no sub", q("id_token_hint", hint(map[string]any{"sub": nil}), "post_logout_redirect_uri", hRedirect)},
		{"client_id not the audience", q("id_token_hint", good, "client_id", hAppB, "post_logout_redirect_uri", hRedirect)},
		{"unknown client", q("id_token_hint", hint(map[string]any{"aud": []string{"nobody"}}), "post_logout_redirect_uri", hRedirect)},
		{"suspended client", q("id_token_hint", suspendedHint, "post_logout_redirect_uri", hRedirect)},
		{"unregistered redirect", q("id_token_hint", good, "post_logout_redirect_uri", "https://evil.example/cb")},
		{"redirect with extra query", q("id_token_hint", good, "post_logout_redirect_uri", hRedirect+"?foo=bar")},
		{"redirect with trailing slash", q("id_token_hint", good, "post_logout_redirect_uri", hRedirect+"/")},
		{"redirect in another case", q("id_token_hint", good, "post_logout_redirect_uri", "https://APP.example/cb")},
		{"registered query extended", q("id_token_hint", good, "post_logout_redirect_uri", hRedirectQuery+"&foo=bar")},
		{"redirect without hint", q("post_logout_redirect_uri", hRedirect, "client_id", hAppA)},
	}
	for _, tt := range tests {
		t.Run("GET "+tt.name, func(t *testing.T) {
			r := h.get(tt.query, sess.secret)
			if r.status != http.StatusBadRequest || r.location() != "" {
				t.Fatalf("got %d Location %q, want 400 and no Location", r.status, r.location())
			}
			ref := r.header.Get(httpx.HeaderCorrelationID)
			if ref == "" || !strings.Contains(r.body, "Reference: <code>"+ref+"</code>") {
				t.Fatalf("error page without reference %q:\n%s", ref, r.body)
			}
			if strings.Contains(r.body, "app.example") || strings.Contains(r.body, "evil.example") {
				t.Fatalf("error page links back:\n%s", r.body)
			}
			if len(r.header.Values("Set-Cookie")) != 0 {
				t.Fatalf("Set-Cookie on a refused request: %q", r.header.Values("Set-Cookie"))
			}
		})
		t.Run("POST "+tt.name, func(t *testing.T) {
			vals, err := url.ParseQuery(tt.query)
			if err != nil { // a malformed body: send the raw bytes
				req, _ := http.NewRequest("POST", h.srv.URL+Path, strings.NewReader(tt.query))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				r := h.do(req, sess.secret)
				if r.status != http.StatusBadRequest || r.location() != "" || r.body != "" {
					t.Fatalf("got %d Location %q body %q, want 400 without either", r.status, r.location(), r.body)
				}
				return
			}
			r := h.post(vals, sess.secret)
			if r.status != http.StatusBadRequest || r.location() != "" || r.body != "" {
				t.Fatalf("got %d Location %q body %q, want 400 without either", r.status, r.location(), r.body)
			}
		})
	}
	if h.ended(sess.id) {
		t.Fatal("a refused request ended the session")
	}
	if ds, _ := h.applier.State().PendingDeliveries(100); len(ds) != 0 {
		t.Fatalf("refused requests created deliveries: %+v", ds)
	}
}

// noSID is a hint of app A without a sid claim.
func (h *harness) noSID(redirect string) string {
	return q("id_token_hint", h.idToken(map[string]any{"sid": nil}), "post_logout_redirect_uri", redirect)
}

// tamper flips the payload's sub without re-signing.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	c := claimsOf(tok)
	c["sub"] = hUser2
	b, _ := json.Marshal(c)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
}

func TestLogoutEndsTheBrowsersSessionAndRedirectsAfterDelivery(t *testing.T) {
	h := newHarness(t)
	h.runSender()
	for _, r := range []*receiver{h.recvA, h.recvB, h.recvM} { // slow enough to lose a race with the redirect
		r.delay.Store(int64(150 * time.Millisecond))
	}
	sess := h.ssoSession(hUser)
	sidA, hint := h.signIn(sess, hUser, hAppA, hOrgA)
	sidB, _ := h.signIn(sess, hUser, hAppB, hOrgA)
	sidM, _ := h.signIn(sess, hUser, hMulti, hOrgB)
	h.signIn(sess, hUser, hSilent, hOrgA)
	other := h.ssoSession(hUser) // another browser of the same person
	sidOther, _ := h.signIn(other, hUser, hAppA, hOrgA)

	r := h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirectQuery, "client_id", hAppA, "state", "st&x=1 y"), sess.secret)
	if want := hRedirectQuery + "&state=st%26x%3D1+y"; r.status != http.StatusFound || r.location() != want {
		t.Fatalf("got %d %q, want 302 %q", r.status, r.location(), want)
	}
	if r.header.Get("Cache-Control") != "no-store" || r.body != "" {
		t.Fatalf("redirect: Cache-Control %q body %q", r.header.Get("Cache-Control"), r.body)
	}
	// The front-channel wait: every receiver has its token by now.
	for _, rc := range []struct {
		name string
		r    *receiver
		sid  string
		org  string
	}{{"A", h.recvA, sidA, hOrgA}, {"B", h.recvB, sidB, hOrgA}, {"multi", h.recvM, sidM, hOrgB}} {
		got := rc.r.done()
		if len(got) != 1 {
			t.Fatalf("receiver %s: %d tokens answered before the redirect, want 1", rc.name, len(got))
		}
		if c := claimsOf(got[0]); c["sid"] != rc.sid || c["organization_id"] != rc.org || c["sub"] != hUser {
			t.Fatalf("receiver %s: claims %v, want sid %s org %s", rc.name, c, rc.sid, rc.org)
		}
	}
	cookies := (&http.Response{Header: r.header}).Cookies()
	if len(cookies) != 1 {
		t.Fatalf("Set-Cookie: %q, want one clearing the session cookie", r.header.Values("Set-Cookie"))
	}
	if c := cookies[0]; c.Name != hCookie || c.Value != "" || c.MaxAge != -1 || c.Path != "/" || !c.HttpOnly || c.Secure || c.SameSite != http.SameSiteLaxMode {
		t.Fatalf("clearing cookie: %+v", c)
	}
	if !h.ended(sess.id) || h.ended(other.id) {
		t.Fatalf("ended: this session %v, the other %v; want only this one", h.ended(sess.id), h.ended(other.id))
	}
	for _, sid := range []string{sidA, sidB, sidM} {
		if a, _ := h.applier.State().AppSession(sid); a.EndedAt.IsZero() || a.EndReason != fsm.EndLogout {
			t.Fatalf("app session %s: %+v, want ended by logout", sid, a)
		}
	}
	if a, _ := h.applier.State().AppSession(sidOther); !a.EndedAt.IsZero() {
		t.Fatalf("the other browser's app session ended: %+v", a)
	}

	// Signing out again with the same hint ends nothing more and still
	// redirects.
	r = h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirect), sess.secret)
	if r.status != http.StatusFound || r.location() != hRedirect {
		t.Fatalf("second logout: got %d %q", r.status, r.location())
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(h.recvA.received()); n != 1 {
		t.Fatalf("second logout: receiver A got %d tokens in all, want 1", n)
	}
}

func TestLogoutSecureCookie(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Sessions = newSessions(t, "https://idp.example", c.State)
		c.FrontChannelWait = -1
	})
	sess := h.ssoSession(hUser)
	_, hint := h.signIn(sess, hUser, hAppA, hOrgA)
	r := h.get(q("id_token_hint", hint), sess.secret)
	cookies := (&http.Response{Header: r.header}).Cookies()
	if r.status != http.StatusOK || len(cookies) != 1 || !cookies[0].Secure || cookies[0].MaxAge != -1 || cookies[0].Name != "__Host-"+hCookie {
		t.Fatalf("got %d cookies %+v, want 200 and a Secure clearing cookie", r.status, cookies)
	}
}

func TestLogoutHintOfAnotherSessionEndsNothingButRedirects(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FrontChannelWait = -1 })
	mine := h.ssoSession(hUser)
	_, hint := h.signIn(mine, hUser, hAppA, hOrgA)
	browser := h.ssoSession(hUser2)
	h.signIn(browser, hUser2, hAppA, hOrgA)

	for _, tt := range []struct{ name, cookie string }{
		{"other session's cookie", browser.secret},
		{"no cookie", ""},
		{"unknown cookie", "0123456789abcdef"},
		{"oversized cookie", strings.Repeat("a", 65)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirect, "state", "abc"), tt.cookie)
			if r.status != http.StatusFound || r.location() != hRedirect+"?state=abc" {
				t.Fatalf("got %d %q, want the redirect", r.status, r.location())
			}
			if len(r.header.Values("Set-Cookie")) != 0 {
				t.Fatalf("Set-Cookie: %q", r.header.Values("Set-Cookie"))
			}
			r = h.post(url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {hRedirect}}, tt.cookie)
			if r.status != http.StatusFound || r.location() != hRedirect || r.body != "" {
				t.Fatalf("POST: got %d %q %q, want the redirect without body", r.status, r.location(), r.body)
			}
		})
	}
	if h.ended(mine.id) || h.ended(browser.id) {
		t.Fatal("a hint of another session ended a session")
	}
	r := h.get(q("id_token_hint", hint), browser.secret)
	if r.status != http.StatusOK || !strings.Contains(r.body, "was not ended") {
		t.Fatalf("page for another session's hint: %d\n%s", r.status, r.body)
	}
	r = h.get(q("id_token_hint", hint), "")
	if r.status != http.StatusOK || !strings.Contains(r.body, "You are signed out.") {
		t.Fatalf("page without a session: %d\n%s", r.status, r.body)
	}
}

func TestLogoutWithoutRedirect(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FrontChannelWait = -1 })
	sess := h.ssoSession(hUser)
	_, hint := h.signIn(sess, hUser, hAppA, hOrgA)
	r := h.get(q("id_token_hint", hint, "state", "ignored"), sess.secret)
	if r.status != http.StatusOK || r.location() != "" || !strings.Contains(r.body, "You are signed out.") || !strings.Contains(r.body, "Signed out") {
		t.Fatalf("got %d %q:\n%s", r.status, r.location(), r.body)
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers: %v", r.header)
	}
	if !h.ended(sess.id) {
		t.Fatal("session not ended")
	}

	sess2 := h.ssoSession(hUser)
	_, hint2 := h.signIn(sess2, hUser, hAppA, hOrgA)
	r = h.post(url.Values{"id_token_hint": {hint2}, "client_id": {hAppA}}, sess2.secret)
	if r.status != http.StatusOK || r.body != "" || r.location() != "" {
		t.Fatalf("POST: got %d %q %q, want 200 without body", r.status, r.location(), r.body)
	}
	if !h.ended(sess2.id) {
		t.Fatal("POST: session not ended")
	}
}

func TestLogoutPostForm(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FrontChannelWait = -1 })
	sess := h.ssoSession(hUser)
	_, hint := h.signIn(sess, hUser, hAppA, hOrgA)
	body := url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {hRedirect}}.Encode()
	for _, tt := range []struct {
		name, path, contentType, body string
	}{
		{"query string", Path + "?state=x", "application/x-www-form-urlencoded", body},
		{"hint in the query", Path + "?" + q("id_token_hint", hint), "application/x-www-form-urlencoded", ""},
		{"JSON", Path, "application/json", `{"id_token_hint":"` + hint + `"}`},
		{"no content type", Path, "", body},
		{"too large", Path, "application/x-www-form-urlencoded", body + "&state=" + strings.Repeat("a", maxForm)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.srv.URL+tt.path, strings.NewReader(tt.body))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			r := h.do(req, sess.secret)
			if r.status != http.StatusBadRequest || r.body != "" || r.location() != "" {
				t.Fatalf("got %d %q %q, want 400 without body", r.status, r.location(), r.body)
			}
		})
	}
	if h.ended(sess.id) {
		t.Fatal("refused POSTs ended the session")
	}
	req, _ := http.NewRequest("POST", h.srv.URL+Path, strings.NewReader(body+"&state=s%20t"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=UTF-8")
	r := h.do(req, sess.secret)
	if r.status != http.StatusFound || r.location() != hRedirect+"?state=s+t" || r.body != "" {
		t.Fatalf("got %d %q %q, want 302 without body", r.status, r.location(), r.body)
	}
	if !h.ended(sess.id) {
		t.Fatal("session not ended")
	}
}

func TestLogoutHintWithinSkewIsAccepted(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FrontChannelWait = -1 })
	sess := h.ssoSession(hUser)
	sid, _ := h.signIn(sess, hUser, hAppA, hOrgA)
	hint := h.idToken(map[string]any{"sid": sid, "exp": h.clock.Now().Add(-2 * time.Second).Unix()})
	if r := h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirect), sess.secret); r.status != http.StatusFound {
		t.Fatalf("got %d, want 302 within the skew", r.status)
	}
}

func TestLogoutStoreUnavailable(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FrontChannelWait = -1 })
	sess := h.ssoSession(hUser)
	_, hint := h.signIn(sess, hUser, hAppA, hOrgA)
	h.applier.failOn(fsm.TypeEndSSOSession, errors.New("no leader"))
	r := h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirect), sess.secret)
	ref := r.header.Get(httpx.HeaderCorrelationID)
	if r.status != http.StatusServiceUnavailable || r.location() != "" || !strings.Contains(r.body, ref) || !strings.Contains(r.body, "Temporarily unavailable") {
		t.Fatalf("GET: got %d %q:\n%s", r.status, r.location(), r.body)
	}
	if len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatal("cookie cleared although the session was not ended")
	}
	r = h.post(url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {hRedirect}}, sess.secret)
	if r.status != http.StatusServiceUnavailable || r.location() != "" || r.body != "" {
		t.Fatalf("POST: got %d %q %q", r.status, r.location(), r.body)
	}
	if h.ended(sess.id) {
		t.Fatal("session ended")
	}
}

func TestLogoutOfExpiredSessionSendsNothing(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FrontChannelWait = -1 })
	sess := h.ssoSession(hUser)
	sid, _ := h.signIn(sess, hUser, hAppA, hOrgA)
	hint := h.idToken(map[string]any{"sid": sid, "exp": h.clock.Now().Add(24 * time.Hour).Unix()})
	h.clock.Add(3 * time.Hour) // past the idle lifetime
	r := h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirect), sess.secret)
	if r.status != http.StatusFound || len(r.header.Values("Set-Cookie")) != 1 {
		t.Fatalf("got %d cookies %q, want a redirect clearing the cookie", r.status, r.header.Values("Set-Cookie"))
	}
	if h.ended(sess.id) {
		t.Fatal("an expired session was ended as a logout")
	}
	if ds, _ := h.applier.State().PendingDeliveries(10); len(ds) != 0 {
		t.Fatalf("deliveries for plain expiry: %+v", ds)
	}
}

func TestFrontChannelWaitIsBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FrontChannelWait = 200 * time.Millisecond })
	h.s.backoff = []time.Duration{time.Hour}
	h.runSender()
	h.recvA.status.Store(http.StatusServiceUnavailable) // stays pending
	sess := h.ssoSession(hUser)
	_, hint := h.signIn(sess, hUser, hAppA, hOrgA)
	start := time.Now()
	r := h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirect), sess.secret)
	if d := time.Since(start); r.status != http.StatusFound || d < 190*time.Millisecond || d > 2*time.Second {
		t.Fatalf("got %d after %s, want 302 after about 200ms", r.status, d)
	}
	if len(h.recvA.received()) == 0 {
		t.Fatal("the receiver was not tried")
	}
}

func TestNewRequiresItsDependencies(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New(Config{}) succeeded")
	}
}
