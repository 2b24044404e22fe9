package oidc

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
)

// liveSession plants a live SSO session for userID in browser b, as an
// earlier sign-in would have, and returns its id.
func (h *harness) liveSession(b *browser, userID, acr string, amr ...string) string {
	h.t.Helper()
	now := h.clock.Now()
	secret, id := authn.NewID(), uuid.NewString()
	h.apply(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: authn.HashToken(secret), Session: fsm.SSOSession{
		ID: id, UserID: userID, AuthTime: now, AMR: amr, ACR: acr,
		CreatedAt: now, LastSeen: now, IdleExpiresAt: now.Add(2 * time.Hour), ExpiresAt: now.Add(12 * time.Hour),
	}})
	b.setCookie(cookieSession, secret)
	return id
}

// TestAuthorizeErrorPages covers every error-page rule of /authorize and
// hostile redirect URIs: an error page, never a Location.
func TestAuthorizeErrorPages(t *testing.T) {
	h := newHarness(t)
	h.updateClient(hOtherOrgApp, func(c *fsm.Client) { c.Suspended = true })
	type m = map[string]string
	for _, tc := range []struct {
		name   string
		client string
		mod    m
		raw    string // appended to the query as is
	}{
		{name: "client_id missing", mod: m{"client_id": ""}},
		{name: "client_id unknown", mod: m{"client_id": "nope"}},
		{name: "client suspended", client: hOtherOrgApp},
		{name: "redirect_uri missing", mod: m{"redirect_uri": ""}},
		{name: "redirect_uri unregistered", mod: m{"redirect_uri": "https://evil.example/cb"}},
		{name: "redirect_uri plus query", mod: m{"redirect_uri": hRedirect + "?foo=bar"}},
		{name: "redirect_uri other scheme", mod: m{"redirect_uri": "http://app.example/cb"}},
		{name: "redirect_uri other host", mod: m{"redirect_uri": "https://app.example.evil/cb"}},
		{name: "redirect_uri other port", mod: m{"redirect_uri": "https://app.example:8443/cb"}},
		{name: "redirect_uri other path", mod: m{"redirect_uri": "https://app.example/cb2"}},
		{name: "redirect_uri trailing slash", mod: m{"redirect_uri": hRedirect + "/"}},
		{name: "redirect_uri fragment", mod: m{"redirect_uri": hRedirect + "#x"}},
		{name: "redirect_uri unregistered with prompt none", mod: m{"redirect_uri": "https://evil.example/cb", "prompt": "none"}},
		{name: "response_type missing", mod: m{"response_type": ""}},
		{name: "response_type token", mod: m{"response_type": "token"}},
		{name: "code_challenge missing", mod: m{"code_challenge": ""}},
		{name: "code_challenge empty", raw: "code_challenge=", mod: m{"code_challenge": ""}},
		{name: "code_challenge not S256 output", mod: m{"code_challenge": "abc"}},
		{name: "code_challenge_method missing", mod: m{"code_challenge_method": ""}},
		{name: "code_challenge_method plain", mod: m{"code_challenge_method": "plain"}},
		{name: "scope missing", mod: m{"scope": ""}},
		{name: "scope empty", raw: "scope=", mod: m{"scope": ""}},
		{name: "scope unknown", mod: m{"scope": "openid offline_access"}},
		{name: "scope unregistered", client: hPublic, mod: m{"scope": "openid profile"}},
		{name: "state missing", mod: m{"state": ""}},
		{name: "state 7 bytes", mod: m{"state": "1234567"}},
		{name: "nonce empty", raw: "nonce=", mod: m{"nonce": ""}},
		{name: "nonce 7 bytes", mod: m{"nonce": "1234567"}},
		{name: "nonce 513 bytes", mod: m{"nonce": strings.Repeat("n", 513)}},
		{name: "prompt empty", raw: "prompt=", mod: m{}},
		{name: "prompt unknown", mod: m{"prompt": "consent"}},
		{name: "prompt none combined", mod: m{"prompt": "none login"}},
		{name: "prompt repeated value", mod: m{"prompt": "login login"}},
		{name: "prompt double space", mod: m{"prompt": "login  select_account"}},
		{name: "max_age negative", mod: m{"max_age": "-1"}},
		{name: "max_age not a number", mod: m{"max_age": "soon"}},
		{name: "max_age empty", raw: "max_age=", mod: m{}},
		{name: "max_age beyond int64", mod: m{"max_age": "9223372036854775808"}},
		{name: "acr_values empty", raw: "acr_values=", mod: m{}},
		{name: "acr_values too long", mod: m{"acr_values": ACRPwd + " " + strings.Repeat("a", 512)}},
		{name: "acr_values double space", mod: m{"acr_values": ACRPwd + "  " + ACRMFA}},
		{name: "acr_values control character", mod: m{"acr_values": "urn:\x7f"}},
		{name: "organization_hint not a uuid", client: hMulti, mod: m{"organization_hint": "beta"}},
		{name: "parameter repeated", raw: "state=another-state"},
		{name: "malformed query", raw: "x=%zz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := cmpOr(tc.client, hConfidential)
			path := authzPath(authzQuery(client, tc.mod))
			if tc.raw != "" {
				path += "&" + tc.raw
			}
			p := h.browser().get(path)
			wantErrorPage(t, p, http.StatusBadRequest)
			if strings.Contains(p.body, "evil") {
				t.Errorf("the page echoes the redirect URI")
			}
			// The page names the broken rule in its fixed sentence.
			for prefix, detail := range map[string]string{
				"client": detailClient, "redirect_uri": detailRedirectURI, "response_type": detailResponseType,
				"code_challenge": detailPKCE, "scope": detailScope, "state": detailState, "nonce": detailNonce,
				"prompt": detailPrompt, "max_age": detailMaxAge, "acr_values": detailACRValues,
				"organization_hint": detailOrgHint, "parameter repeated": detailRepeated,
			} {
				if detail = h.p.cfg.UI.Text(language.English, detail); strings.HasPrefix(tc.name, prefix) && !strings.Contains(p.body, detail) {
					t.Errorf("got page without %q:\n%s", detail, p.body)
				}
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestAuthorizeRedirectErrors covers every error redirected to the client.
func TestAuthorizeRedirectErrors(t *testing.T) {
	type m = map[string]string
	for _, tc := range []struct {
		name string
		// session, when set, plants a live session before the request;
		// signIn drives the sign-in form as email instead.
		session func(h *harness, b *browser)
		signIn  string
		client  string
		mod     m
		code    string
		desc    string
	}{
		{name: "prompt none without session", mod: m{"prompt": "none"},
			code: "login_required", desc: "The Authorization Server requires End-User authentication."},
		{name: "prompt none with an ended session", mod: m{"prompt": "none"},
			session: func(h *harness, b *browser) {
				id := h.liveSession(b, hUser, ACRPwd, AMRPassword)
				h.apply(fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: id, At: h.clock.Now(), Reason: fsm.EndLogout})
			},
			code: "login_required", desc: "The Authorization Server requires End-User authentication."},
		{name: "prompt none with max_age exceeded", mod: m{"prompt": "none", "max_age": "0"},
			session: func(h *harness, b *browser) { h.liveSession(b, hUser, ACRPwd, AMRPassword) },
			code:    "login_required", desc: "The Authorization Server requires End-User authentication."},
		{name: "prompt none with an erased person", client: hPublic, mod: m{"prompt": "none"},
			session: func(h *harness, b *browser) {
				h.liveSession(b, hUserB, ACRPwd, AMRPassword)
				h.apply(fsm.TypeDeleteUser, fsm.DeleteUser{ID: hUserB, At: h.clock.Now()})
			},
			code: "login_required", desc: "The Authorization Server requires End-User authentication."},
		{name: "prompt none must pick an organization", client: hMulti, mod: m{"prompt": "none"},
			session: func(h *harness, b *browser) { h.liveSession(b, hUser, ACRPwd, AMRPassword) },
			code:    "interaction_required", desc: "organization_selection_required"},
		{name: "not a member of the client's organization", signIn: hEmailB,
			code: "access_denied", desc: "organization_access_denied"},
		{name: "suspended member", signIn: hEmail,
			session: func(h *harness, b *browser) {
				h.apply(fsm.TypeUpdateMembership, fsm.UpdateMembership{ID: hMemA, Status: fsm.MembershipSuspended, At: h.clock.Now()})
			},
			code: "access_denied", desc: "organization_access_denied"},
		{name: "member of no organization the multi app serves", client: hMulti, signIn: hEmailB,
			code: "access_denied", desc: "organization_access_denied"},
		{name: "hinted organization not the person's", client: hMulti, mod: m{"organization_hint": hOrgC}, signIn: hEmail,
			code: "access_denied", desc: "organization_access_denied"},
		{name: "hinted organization, silent", client: hMulti, mod: m{"organization_hint": hOrgC, "prompt": "none"},
			session: func(h *harness, b *browser) { h.liveSession(b, hUser, ACRPwd, AMRPassword) },
			code:    "access_denied", desc: "organization_access_denied"},
		{name: "mfa required after sign-in", mod: m{"acr_values": ACRMFA}, signIn: hEmail,
			code: "access_denied", desc: "strong authentication required; no second factor enrolled"},
		{name: "mfa required, silent", mod: m{"acr_values": ACRMFA, "prompt": "none"},
			session: func(h *harness, b *browser) { h.liveSession(b, hUser, ACRPwd, AMRPassword) },
			code:    "access_denied", desc: "strong authentication required; no second factor enrolled"},
		{name: "pwd required of a text-message session", client: hPublic, mod: m{"acr_values": ACRPwd},
			session: func(h *harness, b *browser) { h.liveSession(b, hUser, ACRPhone, AMRSMS) },
			code:    "access_denied", desc: "strong authentication required; no second factor enrolled"},
		{name: "unsupported acr value", mod: m{"acr_values": ACRPwd + " urn:x"},
			code: "invalid_request", desc: "unsupported acr value: urn:x"},
		{name: "prompt none needs consent", mod: m{"prompt": "none"},
			session: func(h *harness, b *browser) { h.liveSession(b, hUser, ACRPwd, AMRPassword) },
			code:    "interaction_required", desc: "consent_required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			b := h.browser()
			if tc.session != nil {
				tc.session(h, b)
			}
			p := b.get(authzPath(authzQuery(cmpOr(tc.client, hConfidential), tc.mod)))
			status := http.StatusFound
			if tc.signIn != "" {
				wantH1(t, p, "Sign in")
				p = b.signIn(p, tc.signIn, hPassword)
				status = http.StatusSeeOther
			}
			wantRedirectError(t, p, status, tc.code, tc.desc)
		})
	}
}

// TestRedirectKeepsRegisteredQuery: the parameters are added to the
// registered URI's own query.
func TestRedirectKeepsRegisteredQuery(t *testing.T) {
	h := newHarness(t)
	const uri = "https://app.example/cb?tenant=a%2Fb&x"
	h.updateClient(hPublic, func(c *fsm.Client) { c.RedirectURIs = append(c.RedirectURIs, uri) })
	b := h.browser()
	p := b.get(authzPath(authzQuery(hPublic, map[string]string{"redirect_uri": uri, "prompt": "none"})))
	want := uri + "&error=login_required&error_description=The+Authorization+Server+requires+End-User+authentication.&iss=" + url.QueryEscape(p.issuer) + "&state=" + tState
	if got := p.location(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	h.liveSession(b, hUser, ACRPwd, AMRPassword)
	p = b.get(authzPath(authzQuery(hPublic, map[string]string{"redirect_uri": uri})))
	if got := p.location(); !strings.HasPrefix(got, uri+"&code=") || !strings.HasSuffix(got, "&state="+tState) {
		t.Errorf("got %q, want %s&code=...&state=%s", got, uri, tState)
	}
}

// TestSignInConsentFlow: the confidential client, password sign-in,
// consent, code; then consent is remembered and the browser signs in
// silently.
func TestSignInConsentFlow(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	q := authzQuery(hConfidential, map[string]string{"scope": "openid email"})
	p := b.get(authzPath(q))
	if p.status != http.StatusOK {
		t.Fatalf("status: got %d, want 200:\n%s", p.status, p.body)
	}
	wantH1(t, p, "Sign in")
	f := postForm(t, p, "method")
	if f.action != "/authorize" {
		t.Errorf("action: got %q, want %q", f.action, "/authorize")
	}
	if f.hidden.Get("step") == "" || f.hidden.Get("csrf_token") == "" {
		t.Errorf("hidden inputs missing: %v", f.hidden)
	}
	if got := b.cookie("/", cookieCSRF); got != f.hidden.Get("csrf_token") {
		t.Errorf("csrf cookie: got %q, want the form's %q", got, f.hidden.Get("csrf_token"))
	}
	if !slices.Contains(f.inputs, "email") || !slices.Contains(f.inputs, "password") {
		t.Errorf("inputs: got %q, want email and password", f.inputs)
	}

	p = b.signIn(p, strings.ToUpper(hEmail), hPassword) // email is case-insensitive
	if p.status != http.StatusOK {
		t.Fatalf("after sign-in: got %d, want the consent page:\n%s", p.status, p.body)
	}
	wantH1(t, p, "Allow access?")
	for _, s := range []string{"Confidential App", "Sign you in", "Your email address", "Org alpha"} {
		if !strings.Contains(p.body, s) {
			t.Errorf("consent page lacks %q", s)
		}
	}
	cf := postForm(t, p, "decision")
	if !cf.hasButton("decision", "allow") || !cf.hasButton("decision", "deny") {
		t.Errorf("buttons: got %v", cf.buttons)
	}
	start := h.clock.Now()
	h.clock.Add(5 * time.Second)
	p = b.submit(cf, "decision", "allow", nil)
	code := codeFrom(t, p, http.StatusSeeOther)

	c := h.codeRecord(code)
	now := h.clock.Now()
	for _, x := range []struct{ name, got, want string }{
		{"client", c.ClientID, hConfidential},
		{"redirect_uri", c.RedirectURI, hRedirect},
		{"user", c.UserID, hUser},
		{"org", c.OrgID, hOrgA},
		{"nonce", c.Nonce, tNonce},
		{"challenge", c.Challenge, authn.S256(tVerifier)},
		{"scopes", strings.Join(c.Scopes, " "), "openid email"},
		{"acr", c.ACR, ACRPwd},
		{"amr", strings.Join(c.AMR, " "), AMRPassword},
		{"rat", c.RequestedAt.String(), start.String()},
		{"issued", c.IssuedAt.String(), now.String()},
		{"expires", c.ExpiresAt.String(), now.Add(60 * time.Second).String()},
		{"auth_time", c.AuthTime.String(), start.String()},
	} {
		if x.got != x.want {
			t.Errorf("code %s: got %q, want %q", x.name, x.got, x.want)
		}
	}
	app, err := h.p.cfg.State.AppSession(c.SID)
	if err != nil || app.SSOSessionID != c.SSOSessionID || app.OrgID != hOrgA {
		t.Errorf("app session %q: %+v %v", c.SID, app, err)
	}
	consent, err := h.p.cfg.State.Consent(hUser, hConfidential)
	if err != nil || strings.Join(consent.Scopes, " ") != "email openid" {
		t.Errorf("consent: got %+v %v, want email openid", consent, err)
	}

	// The same browser: silent, same app session.
	p = b.get(authzPath(q))
	c2 := h.codeRecord(codeFrom(t, p, http.StatusFound))
	if c2.SID != c.SID {
		t.Errorf("sid: got %q, want the same %q", c2.SID, c.SID)
	}

	// Another browser: sign in, consent remembered.
	b2 := h.browser()
	p = b2.signIn(b2.get(authzPath(q)), hEmail, hPassword)
	codeFrom(t, p, http.StatusSeeOther)

	// A scope not yet granted asks again, and the grant grows.
	p = b2.get(authzPath(authzQuery(hConfidential, map[string]string{"scope": "openid profile"})))
	wantH1(t, p, "Allow access?")
	codeFrom(t, b2.submit(postForm(t, p, "decision"), "decision", "allow", nil), http.StatusSeeOther)
	consent, _ = h.p.cfg.State.Consent(hUser, hConfidential)
	if got := strings.Join(consent.Scopes, " "); got != "email openid profile" {
		t.Errorf("consent: got %q, want %q", got, "email openid profile")
	}
}

func TestSessionCookie(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.signIn(b.get(authzPath(authzQuery(hPublic))), hEmail, hPassword)
	codeFrom(t, p, http.StatusSeeOther)
	var sc *http.Cookie
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == cookieSession {
			sc = c
		}
	}
	if sc == nil {
		t.Fatalf("no %s cookie set: %q", cookieSession, p.header.Values("Set-Cookie"))
	}
	if !sc.HttpOnly || sc.SameSite != http.SameSiteLaxMode || sc.Path != "/" || sc.Secure {
		t.Errorf("cookie attributes: got %+v", sc)
	}
	if want := h.clock.Now().Add(12 * time.Hour); !sc.Expires.Equal(want) {
		t.Errorf("expires: got %v, want %v", sc.Expires, want)
	}
	s, err := h.p.cfg.State.SSOSessionByToken(authn.HashToken(sc.Value))
	if err != nil || s.UserID != hUser {
		t.Errorf("the cookie names no session of the person: %+v %v", s, err)
	}
}

func TestSkipConsentPublic(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.signIn(b.get(authzPath(authzQuery(hPublic, map[string]string{"scope": "openid email"}))), hEmail, hPassword)
	c := h.codeRecord(codeFrom(t, p, http.StatusSeeOther))
	if c.ClientID != hPublic || c.OrgID != hOrgA {
		t.Errorf("code: got client %q org %q", c.ClientID, c.OrgID)
	}
	if _, err := h.p.cfg.State.Consent(hUser, hPublic); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("consent recorded for a skip_consent app: %v", err)
	}
}

func TestConsentDeny(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.signIn(b.get(authzPath(authzQuery(hConfidential))), hEmail, hPassword)
	p = b.submit(postForm(t, p, "decision"), "decision", "deny", nil)
	if p.status != http.StatusOK || p.location() != "" {
		t.Fatalf("got %d Location %q, want 200 and no redirect", p.status, p.location())
	}
	if want := "You declined to share your details with Confidential App."; !strings.Contains(p.body, want) {
		t.Errorf("body lacks %q:\n%s", want, p.body)
	}
	if _, err := h.p.cfg.State.Consent(hUser, hConfidential); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("consent recorded after deny: %v", err)
	}
}

func TestWrongPassword(t *testing.T) {
	h := newHarness(t)
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: uuid.NewString(), Email: "nopass@example.com"}})
	for _, tc := range []struct{ name, email, password string }{
		{"wrong password", hEmail, "wrong"},
		{"unknown person", "nobody@example.com", hPassword},
		{"person without password", "nopass@example.com", ""},
		{"empty", "", ""},
		{"overlong email", strings.Repeat("a", 300) + "@example.com", hPassword},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := h.browser()
			p := b.signIn(b.get(authzPath(authzQuery(hPublic))), tc.email, tc.password)
			if p.status != http.StatusBadRequest || p.location() != "" {
				t.Fatalf("got %d Location %q, want 400 and no redirect", p.status, p.location())
			}
			wantH1(t, p, "Sign in")
			if !strings.Contains(p.body, "Incorrect email or password.") {
				t.Errorf("no error message:\n%s", p.body)
			}
			if tc.email != "" && !strings.Contains(p.body, `value="`+tc.email+`"`) {
				t.Errorf("email not kept")
			}
			if b.cookie("/", cookieSession) != "" {
				t.Errorf("session cookie set after a failed sign-in")
			}
			// The re-shown form works.
			codeFrom(t, b.signIn(p, hEmail, hPassword), http.StatusSeeOther)
		})
	}
}

func TestSMSNotAvailable(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	f := postForm(t, b.get(authzPath(authzQuery(hPublic))), "method")
	v := url.Values{"method": {"sms"}, "phone": {"+15551234567"}}
	for k := range f.hidden {
		v.Set(k, f.hidden.Get(k))
	}
	p := b.post(f.action, v)
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "Text-message sign-in is not available.") {
		t.Errorf("got %d, want 400 with the message:\n%s", p.status, p.body)
	}
	wantH1(t, p, "Sign in")
}

// TestSilentSignIn: with a live session, prompt=none and no prompt both go
// straight back with a code, reusing the app session.
func TestSilentSignIn(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	first := h.codeRecord(b.fullSignIn(authzQuery(hPublic), hEmail))
	for _, prompt := range []string{"none", ""} {
		t.Run("prompt="+prompt, func(t *testing.T) {
			h.clock.Add(time.Minute)
			p := b.get(authzPath(authzQuery(hPublic, map[string]string{"prompt": prompt})))
			c := h.codeRecord(codeFrom(t, p, http.StatusFound))
			if c.SID != first.SID || c.SSOSessionID != first.SSOSessionID {
				t.Errorf("sid: got %q, want %q", c.SID, first.SID)
			}
			if !c.AuthTime.Equal(first.AuthTime) {
				t.Errorf("auth_time: got %v, want the original %v", c.AuthTime, first.AuthTime)
			}
		})
	}
	// The idle deadline moved with the use.
	s, _ := h.p.cfg.State.SSOSession(first.SSOSessionID)
	if want := h.clock.Now().Add(2 * time.Hour); !s.IdleExpiresAt.Equal(want) {
		t.Errorf("idle expiry: got %v, want %v", s.IdleExpiresAt, want)
	}
	// Another app of the same organization: a new app session, no page.
	c := h.codeRecord(codeFrom(t, b.get(authzPath(authzQuery(hSiblingApp))), http.StatusFound))
	if c.SID == first.SID || c.SSOSessionID != first.SSOSessionID {
		t.Errorf("sibling app: sid %q sso %q", c.SID, c.SSOSessionID)
	}
}

// TestFreshAuthentication: prompt=login and max_age=0 ask for the
// password again although a session is live; the new session supersedes
// the old one, which ends with its app sessions.
func TestFreshAuthentication(t *testing.T) {
	for _, mod := range []map[string]string{{"prompt": "login"}, {"max_age": "0"}, {"prompt": "login select_account"}} {
		t.Run(url.Values{"x": {mod["prompt"] + mod["max_age"]}}.Encode(), func(t *testing.T) {
			h := newHarness(t)
			b := h.browser()
			old := h.codeRecord(b.fullSignIn(authzQuery(hPublic), hEmail))
			h.clock.Add(time.Minute)
			p := b.get(authzPath(authzQuery(hPublic, mod)))
			wantH1(t, p, "Sign in")
			h.clock.Add(2 * time.Second) // slow typist: max_age=0 must not loop
			c := h.codeRecord(codeFrom(t, b.signIn(p, hEmail, hPassword), http.StatusSeeOther))
			if c.SID == old.SID || c.SSOSessionID == old.SSOSessionID {
				t.Errorf("sid %q / sso %q reused, want new ones", c.SID, c.SSOSessionID)
			}
			s, err := h.p.cfg.State.SSOSession(old.SSOSessionID)
			if err != nil || s.EndedAt.IsZero() || s.EndReason != fsm.EndSuperseded {
				t.Errorf("old SSO session: got %+v %v, want ended as superseded", s, err)
			}
			if a, _ := h.p.cfg.State.AppSession(old.SID); a.EndedAt.IsZero() {
				t.Errorf("old app session not ended")
			}
			if !c.AuthTime.Equal(h.clock.Now()) {
				t.Errorf("auth_time: got %v, want now %v", c.AuthTime, h.clock.Now())
			}
		})
	}
}

func TestMaxAge(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	b.fullSignIn(authzQuery(hPublic), hEmail)
	h.clock.Add(5 * time.Minute)
	q := authzQuery(hPublic, map[string]string{"max_age": "600"})
	codeFrom(t, b.get(authzPath(q)), http.StatusFound)
	h.clock.Add(5*time.Minute + time.Second)
	wantH1(t, b.get(authzPath(q)), "Sign in")
}

// TestSignInAsSomeoneElse: a different person signing in supersedes the
// browser's session.
func TestSignInAsSomeoneElse(t *testing.T) {
	h := newHarness(t)
	h.addMember(hUserB, hOrgA)
	b := h.browser()
	old := h.codeRecord(b.fullSignIn(authzQuery(hPublic), hEmail))
	p := b.get(authzPath(authzQuery(hPublic, map[string]string{"prompt": "login"})))
	c := h.codeRecord(codeFrom(t, b.signIn(p, hEmailB, hPassword), http.StatusSeeOther))
	if c.UserID != hUserB {
		t.Errorf("user: got %q, want %q", c.UserID, hUserB)
	}
	if s, _ := h.p.cfg.State.SSOSession(old.SSOSessionID); s.EndReason != fsm.EndSuperseded {
		t.Errorf("old session end reason: got %q, want %q", s.EndReason, fsm.EndSuperseded)
	}
}

func TestMultiOrganization(t *testing.T) {
	t.Run("hint chooses", func(t *testing.T) {
		h := newHarness(t)
		b := h.browser()
		c := h.codeRecord(b.fullSignIn(authzQuery(hMulti, map[string]string{"organization_hint": strings.ToUpper(hOrgB)}), hEmail))
		if c.OrgID != hOrgB {
			t.Errorf("org: got %q, want %q", c.OrgID, hOrgB)
		}
	})
	t.Run("single candidate picked", func(t *testing.T) {
		h := newHarness(t)
		h.addMember(hUserB, hOrgC)
		b := h.browser()
		c := h.codeRecord(b.fullSignIn(authzQuery(hMulti), hEmailB))
		if c.OrgID != hOrgC {
			t.Errorf("org: got %q, want %q", c.OrgID, hOrgC)
		}
	})
	t.Run("only served organizations count", func(t *testing.T) {
		h := newHarness(t)
		h.updateClient(hMulti, func(c *fsm.Client) { c.Organizations = []string{hOrgA, hOrgC} })
		b := h.browser()
		if c := h.codeRecord(b.fullSignIn(authzQuery(hMulti), hEmail)); c.OrgID != hOrgA {
			t.Errorf("org: got %q, want %q", c.OrgID, hOrgA)
		}
	})
	t.Run("suspended membership and deleted organization do not count", func(t *testing.T) {
		h := newHarness(t)
		h.addMember(hUser, hOrgC)
		h.apply(fsm.TypeUpdateMembership, fsm.UpdateMembership{ID: hMemA, Status: fsm.MembershipSuspended, At: h.clock.Now()})
		h.apply(fsm.TypeDeleteOrg, fsm.DeleteOrg{ID: hOrgB, At: h.clock.Now()})
		b := h.browser()
		if c := h.codeRecord(b.fullSignIn(authzQuery(hMulti), hEmail)); c.OrgID != hOrgC {
			t.Errorf("org: got %q, want %q", c.OrgID, hOrgC)
		}
	})
	t.Run("picker for two candidates", func(t *testing.T) {
		h := newHarness(t)
		b := h.browser()
		p := b.signIn(b.get(authzPath(authzQuery(hMulti))), hEmail, hPassword)
		if p.status != http.StatusSeeOther || p.location() != "/authorize/organization" {
			t.Fatalf("got %d %q, want 303 to the picker", p.status, p.location())
		}
		if b.cookie("/authorize/organization", cookieAuthz) == "" {
			t.Fatalf("no %s cookie", cookieAuthz)
		}
		if b.cookie("/", cookieAuthz) != "" {
			t.Errorf("%s cookie sent outside /authorize", cookieAuthz)
		}
		p = b.get(p.location())
		wantH1(t, p, "Choose an organization")
		f := postForm(t, p, "organization_id")
		if !f.hasButton("organization_id", hOrgA) || !f.hasButton("organization_id", hOrgB) || len(f.buttons) != 2 {
			t.Errorf("buttons: got %v", f.buttons)
		}
		if f.action != "/authorize/organization" {
			t.Errorf("action: got %q", f.action)
		}
		// A non-candidate is refused with the picker again.
		v := url.Values{"organization_id": {hOrgC}}
		for k := range f.hidden {
			v.Set(k, f.hidden.Get(k))
		}
		bad := b.post(f.action, v)
		if bad.status != http.StatusBadRequest || bad.location() != "" || !strings.Contains(bad.body, "Choose one of the organizations listed.") {
			t.Errorf("non-candidate: got %d %q:\n%s", bad.status, bad.location(), bad.body)
		}
		wantH1(t, bad, "Choose an organization")
		p = b.submit(postForm(t, bad, "organization_id"), "organization_id", hOrgB, nil)
		c := h.codeRecord(codeFrom(t, p, http.StatusSeeOther))
		if c.OrgID != hOrgB {
			t.Errorf("org: got %q, want %q", c.OrgID, hOrgB)
		}
		if b.cookie("/authorize/organization", cookieAuthz) != "" {
			t.Errorf("%s cookie not cleared", cookieAuthz)
		}
		// Silent again for the same organization: hint keeps it, same sid.
		p = b.get(authzPath(authzQuery(hMulti, map[string]string{"organization_hint": hOrgB, "prompt": "none"})))
		if c2 := h.codeRecord(codeFrom(t, p, http.StatusFound)); c2.SID != c.SID {
			t.Errorf("sid: got %q, want %q", c2.SID, c.SID)
		}
		// Switching organization: a new app session.
		p = b.get(authzPath(authzQuery(hMulti, map[string]string{"organization_hint": hOrgA, "prompt": "none"})))
		if c3 := h.codeRecord(codeFrom(t, p, http.StatusFound)); c3.SID == c.SID || c3.OrgID != hOrgA {
			t.Errorf("switch: got sid %q org %q", c3.SID, c3.OrgID)
		}
	})
	t.Run("select_account shows the picker", func(t *testing.T) {
		h := newHarness(t)
		b := h.browser()
		h.liveSession(b, hUser, ACRPwd, AMRPassword)
		for _, mod := range []map[string]string{{"prompt": "select_account"}, {"prompt": "select_account", "organization_hint": hOrgA}} {
			p := b.get(authzPath(authzQuery(hMulti, mod)))
			if p.status != http.StatusFound || p.location() != "/authorize/organization" {
				t.Fatalf("%v: got %d %q, want 302 to the picker", mod, p.status, p.location())
			}
		}
		p := b.get("/authorize/organization")
		p = b.submit(postForm(t, p, "organization_id"), "organization_id", hOrgA, nil)
		if c := h.codeRecord(codeFrom(t, p, http.StatusSeeOther)); c.OrgID != hOrgA {
			t.Errorf("org: got %q, want %q", c.OrgID, hOrgA)
		}
	})
	t.Run("consent after the picker", func(t *testing.T) {
		h := newHarness(t)
		h.updateClient(hMulti, func(c *fsm.Client) { c.SkipConsent = false })
		b := h.browser()
		h.liveSession(b, hUser, ACRPwd, AMRPassword)
		p := b.get(b.get(authzPath(authzQuery(hMulti))).location())
		p = b.submit(postForm(t, p, "organization_id"), "organization_id", hOrgB, nil)
		wantH1(t, p, "Allow access?")
		if !strings.Contains(p.body, "Org beta") {
			t.Errorf("consent page does not name the organization")
		}
		p = b.submit(postForm(t, p, "decision"), "decision", "allow", nil)
		if c := h.codeRecord(codeFrom(t, p, http.StatusSeeOther)); c.OrgID != hOrgB {
			t.Errorf("org: got %q, want %q", c.OrgID, hOrgB)
		}
	})
}

// links returns the href of each <a rel=...> on the page.
func links(t *testing.T, body string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rel := range []string{"prev", "next"} {
		i := strings.Index(body, `rel="`+rel+`"`)
		if i < 0 {
			continue
		}
		start := strings.LastIndex(body[:i], `<a href="`)
		href := body[start+len(`<a href="`) : i]
		href = strings.TrimSuffix(strings.TrimSpace(href), `"`)
		out[rel] = strings.ReplaceAll(href, "&amp;", "&")
	}
	return out
}

func TestPickerSearchAndPaging(t *testing.T) {
	h := newHarness(t)
	for i := 1; i <= 12; i++ {
		id := uuidLike("team" + string(rune('a'+i)))
		h.addOrgMember(id, "team-"+string(rune('a'+i)), "Team "+string(rune('A'+i)), hUser)
	}
	b := h.browser()
	h.liveSession(b, hUser, ACRPwd, AMRPassword)
	if p := b.get(authzPath(authzQuery(hMulti))); p.location() != "/authorize/organization" {
		t.Fatalf("got %d %q, want the picker", p.status, p.location())
	}
	h.updateClient(hMulti, func(c *fsm.Client) { c.Organizations = nil }) // all organizations

	names := func(p page) []string {
		t.Helper()
		if p.status != http.StatusOK {
			t.Fatalf("status %d:\n%s", p.status, p.body)
		}
		var out []string
		for _, f := range parseForms(t, p.body) {
			for _, bt := range f.buttons {
				if bt[0] == "organization_id" {
					o, _ := h.p.cfg.State.Org(bt[1])
					out = append(out, o.Slug)
				}
			}
		}
		return out
	}
	p := b.get("/authorize/organization")
	first := names(p)
	if len(first) != 10 || first[0] != "alpha" || first[1] != "beta" || first[2] != "team-b" {
		t.Fatalf("first page: got %q", first)
	}
	l := links(t, p.body)
	if l["prev"] != "" || !strings.HasPrefix(l["next"], "/authorize/organization?after=") {
		t.Fatalf("links: got %v", l)
	}
	p = b.get(l["next"])
	second := names(p)
	if want := []string{"team-j", "team-k", "team-l", "team-m"}; !slices.Equal(second, want) {
		t.Errorf("second page: got %q, want %q", second, want)
	}
	l = links(t, p.body)
	if l["next"] != "" || !strings.HasPrefix(l["prev"], "/authorize/organization?before=") {
		t.Fatalf("links: got %v", l)
	}
	if back := names(b.get(l["prev"])); !slices.Equal(back, first) {
		t.Errorf("previous page: got %q, want %q", back, first)
	}

	p = b.get("/authorize/organization?q=TEAM")
	if got := names(p); len(got) != 10 || got[0] != "team-b" {
		t.Errorf("search: got %q", got)
	}
	l = links(t, p.body)
	nu, _ := url.Parse(l["next"])
	if nu.Path != "/authorize/organization" || nu.Query().Get("q") != "TEAM" || len(nu.Query()) != 2 {
		t.Errorf("search next link: got %q", l["next"])
	}
	if got := names(b.get(l["next"])); !slices.Equal(got, []string{"team-l", "team-m"}) {
		t.Errorf("search second page: got %q", got)
	}
	if got := names(b.get("/authorize/organization?q=et")); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("search by name: got %q", got)
	}
	if p := b.get("/authorize/organization?q=nothing-like-it"); !strings.Contains(p.body, "No organizations found.") {
		t.Errorf("empty search:\n%s", p.body)
	}

	for _, bad := range []string{"q=" + strings.Repeat("x", 65), "after=x", "before=1", "after=" + hOrgA + "&before=" + hOrgB, "q=a&q=b"} {
		t.Run(bad, func(t *testing.T) {
			wantErrorPage(t, b.get("/authorize/organization?"+bad), http.StatusBadRequest)
		})
	}
	// The choice still works from a later page.
	p = b.get("/authorize/organization?q=team-m")
	p = b.submit(postForm(t, p, "organization_id"), "organization_id", uuidLike("team"+string(rune('a'+12))), nil)
	codeFrom(t, p, http.StatusSeeOther)
}

func TestPickerWithoutPendingRequest(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	wantErrorPage(t, b.get("/authorize/organization"), http.StatusBadRequest)
	b.jar.SetCookies(mustURL(t, b.abs("/authorize")), []*http.Cookie{{Name: cookieAuthz, Value: "junk", Path: "/authorize"}})
	wantErrorPage(t, b.get("/authorize/organization"), http.StatusBadRequest)
}

// TestPickerAfterSignOut: the picker of a session that ended starts the
// sign-in again instead of listing organizations.
func TestPickerAfterSignOut(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	id := h.liveSession(b, hUser, ACRPwd, AMRPassword)
	b.get(authzPath(authzQuery(hMulti)))
	h.apply(fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: id, At: h.clock.Now(), Reason: fsm.EndLogout})
	wantH1(t, b.get("/authorize/organization"), "Sign in")
}

func TestCSRFAndStep(t *testing.T) {
	h := newHarness(t)
	// signInForm returns a browser at the sign-in form and the form.
	signInForm := func() (*browser, htmlForm) {
		b := h.browser()
		return b, postForm(t, b.get(authzPath(authzQuery(hPublic))), "method")
	}
	fields := func(f htmlForm, change func(url.Values)) url.Values {
		v := url.Values{"email": {hEmail}, "password": {hPassword}, "method": {"password"}}
		for k := range f.hidden {
			v.Set(k, f.hidden.Get(k))
		}
		if change != nil {
			change(v)
		}
		return v
	}
	type tcase struct {
		name   string
		run    func() page
		status int
	}
	tampered := func(s string) string {
		b := []byte(s)
		if b[10] == 'A' {
			b[10] = 'B'
		} else {
			b[10] = 'A'
		}
		return string(b)
	}
	for _, tc := range []tcase{
		{"missing cookie", func() page {
			b, f := signInForm()
			b.jar.SetCookies(mustURL(t, b.abs("/")), []*http.Cookie{{Name: cookieCSRF, Path: "/", MaxAge: -1}})
			return b.post(f.action, fields(f, nil))
		}, http.StatusForbidden},
		{"missing token", func() page {
			b, f := signInForm()
			return b.post(f.action, fields(f, func(v url.Values) { v.Del("csrf_token") }))
		}, http.StatusForbidden},
		{"wrong token", func() page {
			b, f := signInForm()
			return b.post(f.action, fields(f, func(v url.Values) { v.Set("csrf_token", authn.NewID()) }))
		}, http.StatusForbidden},
		{"token and step from another browser", func() page {
			_, fa := signInForm()
			b, _ := signInForm()
			return b.post(fa.action, fields(fa, nil))
		}, http.StatusForbidden},
		{"step from another browser", func() page {
			_, fa := signInForm()
			b, fb := signInForm()
			return b.post(fa.action, fields(fb, func(v url.Values) { v.Set("step", fa.hidden.Get("step")) }))
		}, http.StatusForbidden},
		{"cookie and token forged alike", func() page {
			b, f := signInForm()
			forged := authn.NewID()
			b.setCookie(cookieCSRF, forged)
			return b.post(f.action, fields(f, func(v url.Values) { v.Set("csrf_token", forged) }))
		}, http.StatusForbidden},
		{"tampered step", func() page {
			b, f := signInForm()
			return b.post(f.action, fields(f, func(v url.Values) { v.Set("step", tampered(v.Get("step"))) }))
		}, http.StatusBadRequest},
		{"missing step", func() page {
			b, f := signInForm()
			return b.post(f.action, fields(f, func(v url.Values) { v.Del("step") }))
		}, http.StatusBadRequest},
		{"repeated step", func() page {
			b, f := signInForm()
			return b.post(f.action, fields(f, func(v url.Values) { v.Add("step", v.Get("step")) }))
		}, http.StatusBadRequest},
		{"sign-in step posted to the picker", func() page {
			b, f := signInForm()
			return b.post("/authorize/organization", fields(f, nil))
		}, http.StatusBadRequest},
		{"expired step", func() page {
			b, f := signInForm()
			h.clock.Add(11 * time.Minute)
			return b.post(f.action, fields(f, nil))
		}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.run()
			wantErrorPage(t, p, tc.status)
			if p.header.Get("Set-Cookie") != "" && strings.Contains(strings.Join(p.header.Values("Set-Cookie"), ";"), cookieSession) {
				t.Errorf("a session was started")
			}
		})
	}
	t.Run("consent form checked too", func(t *testing.T) {
		b := h.browser()
		p := b.signIn(b.get(authzPath(authzQuery(hConfidential))), hEmail, hPassword)
		f := postForm(t, p, "decision")
		v := url.Values{"decision": {"allow"}, "step": {f.hidden.Get("step")}, "csrf_token": {authn.NewID()}}
		wantErrorPage(t, b.post(f.action, v), http.StatusForbidden)
	})
	t.Run("picker form checked too", func(t *testing.T) {
		b := h.browser()
		h.liveSession(b, hUser, ACRPwd, AMRPassword)
		p := b.get(b.get(authzPath(authzQuery(hMulti))).location())
		f := postForm(t, p, "organization_id")
		v := url.Values{"organization_id": {hOrgA}, "step": {f.hidden.Get("step")}}
		wantErrorPage(t, b.post(f.action, v), http.StatusForbidden)
	})
}

// TestConsentForAnotherPerson: a consent form shown to one person does not
// grant for whoever holds the browser's session later. The other sign-in
// rotated the browser's CSRF token, so the old form is refused outright.
func TestConsentForAnotherPerson(t *testing.T) {
	h := newHarness(t)
	h.addMember(hUserB, hOrgA)
	b := h.browser()
	p := b.signIn(b.get(authzPath(authzQuery(hConfidential))), hEmail, hPassword)
	consentForm := postForm(t, p, "decision")
	// In another tab, someone else signs in.
	p2 := b.get(authzPath(authzQuery(hPublic, map[string]string{"prompt": "login"})))
	codeFrom(t, b.signIn(p2, hEmailB, hPassword), http.StatusSeeOther)
	p = b.submit(consentForm, "decision", "allow", nil)
	wantErrorPage(t, p, http.StatusForbidden)
	if _, err := h.p.cfg.State.Consent(hUserB, hConfidential); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("consent recorded for the other person: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.get(authzPath(authzQuery(hPublic)))
	h.applier.Fail = errors.New("no quorum")
	wantErrorPage(t, b.signIn(p, hEmail, hPassword), http.StatusServiceUnavailable)
	h.applier.Fail = nil

	// Issuing the code fails too.
	b2 := h.browser()
	h.liveSession(b2, hUser, ACRPwd, AMRPassword)
	h.applier.Fail = errors.New("no quorum")
	wantErrorPage(t, b2.get(authzPath(authzQuery(hPublic))), http.StatusServiceUnavailable)
	h.applier.Fail = nil
}

// TestClientChangedMidFlow: a client suspended between the pages gets no
// redirect.
func TestClientChangedMidFlow(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.get(authzPath(authzQuery(hPublic)))
	h.updateClient(hPublic, func(c *fsm.Client) { c.Suspended = true })
	wantErrorPage(t, b.signIn(p, hEmail, hPassword), http.StatusBadRequest)
}

func TestAuthorizeNotFound(t *testing.T) {
	h := newHarness(t)
	for _, path := range []string{"/authorize/nope", "/authorize/organization/x"} {
		wantErrorPage(t, h.browser().get(path), http.StatusNotFound)
	}
}

func TestStaticMounted(t *testing.T) {
	h := newHarness(t)
	mux := http.NewServeMux()
	h.p.Register(mux)
	for _, tc := range []struct {
		method string
		want   int
	}{{http.MethodGet, 200}, {http.MethodHead, 200}, {http.MethodPost, 405}} {
		req, _ := http.NewRequest(tc.method, h.srv.URL+h.p.cfg.UI.StyleURL(), nil)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: got %d, want %d", tc.method, rec.Code, tc.want)
		}
	}
}

// TestSignInRotatesCSRF: the CSRF cookie a browser held before signing in
// is replaced by the sign-in, and the next form carries the new token.
func TestSignInRotatesCSRF(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.get(authzPath(authzQuery(hConfidential)))
	before := postForm(t, p, "method").hidden.Get("csrf_token")
	p = b.signIn(p, hEmail, hPassword)
	after := postForm(t, p, "decision").hidden.Get("csrf_token")
	if before == "" || after == "" || before == after {
		t.Fatalf("csrf token before sign-in %q, after %q: want two different tokens", before, after)
	}
	p = b.submit(postForm(t, p, "decision"), "decision", "allow", nil)
	if p.status != http.StatusSeeOther && p.status != http.StatusFound {
		t.Fatalf("consent with the rotated token: got %d", p.status)
	}
}

// TestHugeParametersMakeShortLogLines: a 20 KB client_id, redirect_uri or
// state reaches the log capped, not as a 20 KB line.
func TestHugeParametersMakeShortLogLines(t *testing.T) {
	var logs bytes.Buffer
	h := newHarness(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	huge := strings.Repeat("A", 20000)
	for _, mod := range []map[string]string{{"client_id": huge}, {"redirect_uri": huge}, {"state": "s", "nonce": huge}, {"scope": huge}} {
		wantErrorPage(t, h.browser().get(authzPath(authzQuery(hConfidential, mod))), http.StatusBadRequest)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) < 4 {
		t.Fatalf("got %d log lines, want at least 4:\n%s", len(lines), logs.String())
	}
	for _, l := range lines {
		if len(l) > 1024 {
			t.Errorf("got a log line of %d bytes, want at most 1024: %.200s…", len(l), l)
		}
	}
}

// TestConsentIsPerPersonAndApp: consent covers what the app receives
// (its scopes), for the person, whichever organization they pick: a
// multi-organization app consented to in organization A is not asked
// again when the same person picks B. The pick itself is the person's
// explicit choice on the picker page. (docs/application-developers.md, "What happens where during a sign-in".)
func TestConsentIsPerPersonAndApp(t *testing.T) {
	h := newHarness(t)
	h.updateClient(hMulti, func(c *fsm.Client) { c.SkipConsent = false })
	b := h.browser()
	h.liveSession(b, hUser, ACRPwd, AMRPassword)
	pick := func(org string, extra map[string]string) page {
		t.Helper()
		p := b.get(authzPath(authzQuery(hMulti, extra)))
		if p.location() != "/authorize/organization" {
			t.Fatalf("got %d %q, want the picker", p.status, p.location())
		}
		return b.submit(postForm(t, b.get(p.location()), "organization_id"), "organization_id", org, nil)
	}
	p := pick(hOrgA, nil)
	wantH1(t, p, "Allow access?")
	codeFrom(t, b.submit(postForm(t, p, "decision"), "decision", "allow", nil), http.StatusSeeOther)
	p = pick(hOrgB, map[string]string{"prompt": "select_account"})
	codeFrom(t, p, http.StatusSeeOther) // no consent page for B
}
