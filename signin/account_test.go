package signin

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/webui"
)

// accountSignIn opens /account in b and signs in on its form, returning
// the home page.
func (b *browser) accountSignIn(email, password string) page {
	b.t.Helper()
	p := b.get(PathAccount)
	if p.status != http.StatusOK || !strings.Contains(p.body, "Sign in to your account") {
		b.t.Fatalf("/account without a session: %d\n%s", p.status, p.body)
	}
	p = b.signIn(p, email, password)
	if p.status != http.StatusOK || !strings.Contains(p.body, `value="password-change"`) {
		b.t.Fatalf("/account after signing in: %d\n%s", p.status, p.body)
	}
	return p
}

// accountEvents are the account audit events of subject.
func (h *harness) accountEvents(subject string) []fsm.Event {
	h.t.Helper()
	evs, err := h.applier.State().AuditEvents(fsm.AuditQuery{Type: fsm.EventAccount, Subject: subject, Limit: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

// TestAccountPasswordChange: /account asks a browser without a session to
// sign in; the password changes only with the current one (a wrong one is
// a counted failure); the change ends the person's other sessions and is
// an account event; the new password signs in.
func TestAccountPasswordChange(t *testing.T) {
	h := newHarness(t)
	elsewhere := h.browser().fullSignInWith(authzQuery(hPublic, false), hEmail, hPassword)
	b := h.browser()
	p := b.accountSignIn(hEmail, hPassword)
	if b.cookie("/", session.SSOCookie) == "" {
		t.Fatal("no session cookie after the account sign-in")
	}

	const next = "a brand new passphrase"
	bad := b.submit(formWith(t, p, "action", "password-change"), "action", "password-change", map[string]string{"current_password": "not it", "new_password": next})
	if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, "Your current password is not correct.") {
		t.Fatalf("wrong current password: %d\n%s", bad.status, bad.body)
	}
	p = b.submit(formWith(t, p, "action", "password-change"), "action", "password-change", map[string]string{"current_password": hPassword, "new_password": next})
	if p.status != http.StatusOK || !strings.Contains(p.body, "Your password was changed") {
		t.Fatalf("password change: %d\n%s", p.status, p.body)
	}
	if s, err := h.applier.State().SSOSession(elsewhere.SSO); err != nil || s.Live(h.clock.Now()) && s.EndedAt.IsZero() {
		t.Fatalf("the other session lives on: %+v %v", s, err)
	}
	found := false
	for _, e := range h.accountEvents(hUser) {
		if e.Detail["action"] == "password-change" && e.Actor == fsm.ActorPerson && e.Outcome == fsm.OutcomeSuccess {
			found = true
		}
	}
	if !found {
		t.Errorf("no password-change event: %+v", h.accountEvents(hUser))
	}
	if got := h.browser().fullSignInWith(authzQuery(hPublic, false), hEmail, next); got.User != hUser {
		t.Fatalf("new password: %+v", got)
	}
}

// TestAccountNeedsARecentSignIn: a session older than accountFresh gets
// the account's sign-in form, and signing in there refreshes the same
// session instead of opening another.
func TestAccountNeedsARecentSignIn(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	first := b.fullSignInWith(authzQuery(hPublic, false), hEmail, hPassword)
	if p := b.get(PathAccount); !strings.Contains(p.body, `value="password-change"`) {
		t.Fatalf("fresh session: the home page expected\n%s", p.body)
	}
	h.clock.Add(accountFresh + time.Minute)
	p := b.get(PathAccount)
	if p.status != http.StatusOK || !strings.Contains(p.body, "Sign in to your account") {
		t.Fatalf("old session: %d\n%s", p.status, p.body)
	}
	b.signIn(p, hEmail, hPassword)
	s, err := h.applier.State().SSOSession(first.SSO)
	if err != nil || !s.AuthTime.Equal(h.clock.Now()) {
		t.Fatalf("session after the account sign-in: %+v %v (want auth_time refreshed)", s, err)
	}
}

// totpSecretRE finds the key on the setup page, in its groups of four.
var totpSecretRE = regexp.MustCompile(`<code id="totp-secret">([A-Z2-7]{4}(?: [A-Z2-7]{1,4})*)</code>`)

// TestAccountTOTPAndRecoveryCodes: an authenticator app is enrolled with a
// code from it; from then on a change needs a second factor verified in
// this session, and with it new recovery codes are shown once.
func TestAccountTOTPAndRecoveryCodes(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.accountSignIn(hEmail, hPassword)
	p = b.submit(formWith(t, p, "action", "totp-setup"), "action", "totp-setup", nil)
	m := totpSecretRE.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("TOTP setup: %d\n%s", p.status, p.body)
	}
	secret := strings.ReplaceAll(m[1], " ", "")
	if bad := b.submit(formWith(t, p, "action", "totp-confirm"), "action", "totp-confirm", map[string]string{"code": "000000"}); bad.status != http.StatusBadRequest {
		t.Fatalf("wrong confirming code: %d", bad.status)
	}
	code, err := factor.TOTPCode(secret, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	p = b.submit(formWith(t, p, "action", "totp-confirm"), "action", "totp-confirm", map[string]string{"code": code})
	if p.status != http.StatusOK || !strings.Contains(p.body, "Your authenticator app is set up.") {
		t.Fatalf("TOTP confirm: %d\n%s", p.status, p.body)
	}
	if f, err := h.applier.State().Factors(hUser); err != nil || f.TOTP == nil {
		t.Fatalf("factors: %+v %v", f, err)
	}

	// A change now needs the app: the gate asks for it.
	p = b.submit(formWith(t, p, "action", "recovery-new"), "action", "recovery-new", nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, "Confirm it’s you") {
		t.Fatalf("recovery-new without a verified factor: %d\n%s", p.status, p.body)
	}
	h.clock.Add(30 * time.Second) // the confirming code's step is spent
	code, _ = factor.TOTPCode(secret, h.clock.Now())
	// Verified, the change that asked goes on: no second click.
	p = b.submit(postForm(t, p, "method"), "method", webui.MethodOTP, map[string]string{"code": code})
	codes := regexp.MustCompile(`<li><code>([^<]+)</code></li>`).FindAllStringSubmatch(p.body, -1)
	if p.status != http.StatusOK || len(codes) == 0 {
		t.Fatalf("recovery codes page: %d\n%s", p.status, p.body)
	}
	if f, err := h.applier.State().Factors(hUser); err != nil || f.RecoveryLeft() != len(codes) {
		t.Fatalf("recovery codes stored: %d of %d, %v", f.RecoveryLeft(), len(codes), err)
	}
}

// TestAccountFormChecks: a post without a valid step is 400, and one whose
// CSRF token does not match the browser's is 403.
func TestAccountFormChecks(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	if p := b.post(PathAccount, map[string][]string{"step": {"junk"}}); p.status != http.StatusBadRequest {
		t.Fatalf("junk step: %d", p.status)
	}
	f := postForm(t, b.get(PathAccount), "method")
	v := f.hidden
	v.Set("csrf_token", authn.NewID())
	v.Set("method", "password")
	if p := b.post(f.action, v); p.status != http.StatusForbidden {
		t.Fatalf("CSRF mismatch: %d", p.status)
	}
}

// TestVerifyGoesOnToTheChange: a change that takes no field of its own
// (new recovery codes, a new authenticator app, a passkey) goes on once
// the verification it asked for succeeds, also after a wrong code on the
// way; a change with fields of its own (a password) shows the home page
// again, confirmed, to be posted with them.
func TestVerifyGoesOnToTheChange(t *testing.T) {
	for _, tc := range []struct {
		action string
		want   string // what the page after the verification holds
	}{
		{"recovery-new", `id="recovery-codes"`},
		{"totp-setup", `id="totp-secret"`},
		{"password-change", "Confirmed."},
	} {
		t.Run(tc.action, func(t *testing.T) {
			h := newHarness(t)
			b := h.browser()
			p := b.accountSignIn(hEmail, hPassword)
			p = b.submit(formWith(t, p, "action", "totp-setup"), "action", "totp-setup", nil)
			secret := strings.ReplaceAll(totpSecretRE.FindStringSubmatch(p.body)[1], " ", "")
			code, _ := factor.TOTPCode(secret, h.clock.Now())
			p = b.submit(formWith(t, p, "action", "totp-confirm"), "action", "totp-confirm", map[string]string{"code": code})
			h.clock.Add(30 * time.Second) // the confirming code's step is spent; the session has no second factor yet

			p = b.submit(formWith(t, p, "action", tc.action), "action", tc.action, nil)
			if !strings.Contains(p.body, "Confirm it’s you") {
				t.Fatalf("%s without a fresh factor: %d\n%s", tc.action, p.status, p.body)
			}
			p = b.submit(postForm(t, p, "method"), "method", webui.MethodOTP, map[string]string{"code": "000000"})
			if p.status != http.StatusBadRequest {
				t.Fatalf("a wrong code: %d", p.status)
			}
			code, _ = factor.TOTPCode(secret, h.clock.Now())
			p = b.submit(postForm(t, p, "method"), "method", webui.MethodOTP, map[string]string{"code": code})
			if p.status != http.StatusOK || !strings.Contains(p.body, tc.want) {
				t.Fatalf("after the verification: %d, want %q\n%s", p.status, tc.want, p.body)
			}
		})
	}
}
