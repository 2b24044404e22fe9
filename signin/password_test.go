package signin

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/language"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/session"
)

// signinEvents are the sign-in audit events of subject, oldest first.
func (h *harness) signinEvents(subject string) []fsm.Event {
	h.t.Helper()
	evs, err := h.applier.State().AuditEvents(fsm.AuditQuery{Type: fsm.EventSignin, Subject: subject, Limit: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

// TestPasswordSignIn: the sign-in page names the application; a wrong
// password re-shows it with 400 and counts a failure (audit, metric);
// the right one opens a session of acr pwd, sets the session cookie
// (HttpOnly, SameSite=Lax, path /), rotates the CSRF token and hands the
// request back to the flow.
func TestPasswordSignIn(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(c *Config) { c.Registerer = reg })
	b := h.browser()
	p := b.get(authzPath(authzQuery(hPublic, false)))
	if p.status != http.StatusOK || !strings.Contains(p.body, hAppName) {
		t.Fatalf("sign-in page: %d\n%s", p.status, p.body)
	}
	csrfBefore := b.cookie("/", session.CSRFCookie)
	if csrfBefore == "" {
		t.Fatal("no CSRF cookie on the sign-in page")
	}

	p = b.signIn(p, hEmail, "not the password")
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "Incorrect email or password.") {
		t.Fatalf("wrong password: %d\n%s", p.status, p.body)
	}
	if b.cookie("/", session.SSOCookie) != "" {
		t.Fatal("a wrong password set a session cookie")
	}

	p = b.signIn(p, hEmail, hPassword)
	got := done(t, p)
	if got.User != hUser || got.ACR != authn.ACRPwd || !slices.Equal(got.AMR, []string{authn.AMRPassword}) {
		t.Fatalf("signed in: %+v", got)
	}
	var sso *http.Cookie
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == session.SSOCookie {
			sso = c
		}
	}
	if sso == nil || !sso.HttpOnly || sso.Path != "/" || sso.SameSite != http.SameSiteLaxMode || sso.Secure {
		t.Fatalf("session cookie: %+v", sso)
	}
	if after := b.cookie("/", session.CSRFCookie); after == "" || after == csrfBefore {
		t.Error("the sign-in did not rotate the CSRF token")
	}
	s, err := h.applier.State().SSOSessionByToken(authn.HashToken(sso.Value))
	if err != nil || s.ID != got.SSO || s.UserID != hUser {
		t.Fatalf("stored session: %+v %v", s, err)
	}

	evs := h.signinEvents(hUser)
	if len(evs) != 2 || evs[0].Outcome != fsm.OutcomeFailure || evs[0].Detail["reason"] != "wrong_password" ||
		evs[1].Outcome != fsm.OutcomeSuccess || evs[1].ClientID != hPublic || evs[1].OrgID != hOrgA || evs[1].Detail["acr"] != authn.ACRPwd {
		t.Errorf("audit events: %+v", evs)
	}
	m := bcGather(t, reg)
	if m[`oidcd_authentications_total{method="pwd"}`] != 1 || m[`oidcd_credential_checks_total{kind="password"}`] != 2 {
		t.Errorf("metrics: %v", m)
	}

	// The session satisfies the next request of the same browser: no page.
	if again := done(t, b.get(authzPath(authzQuery(hPublic, false)))); again.SSO != got.SSO {
		t.Errorf("second request: session %s, want %s", again.SSO, got.SSO)
	}
}

// TestPasswordUnknownAddressAnswersAlike: an address nobody holds gets
// the answer a wrong password gets, and its failure names no person.
func TestPasswordUnknownAddressAnswersAlike(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.signIn(b.get(authzPath(authzQuery(hPublic, false))), "nobody@example.com", hPassword)
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "Incorrect email or password.") {
		t.Fatalf("unknown address: %d\n%s", p.status, p.body)
	}
	evs := h.signinEvents("")
	found := false
	for _, e := range evs {
		if e.Outcome == fsm.OutcomeFailure && e.Detail["reason"] == "unknown_account" && e.Subject == "" {
			found = true
		}
	}
	if !found {
		t.Errorf("no unknown_account failure among %+v", evs)
	}
}

// TestSignInWithoutBrowserKeyIs503: a node that has not received the
// browser key cannot seal a step, and says so with 503.
func TestSignInWithoutBrowserKeyIs503(t *testing.T) {
	h := newHarness(t)
	// A browser session over a state the key has not reached yet.
	h.p.sessions = newSessions(t, h.p.cfg.Issuer, fsmtest.New(t).State(), nil)
	p := h.browser().get(authzPath(authzQuery(hPublic, false)))
	if p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, testText(t, language.English, authn.MsgUnavailable)) {
		t.Fatalf("got %d\n%s", p.status, p.body)
	}
}
