package node_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/testcluster"
)

// TestAccountPageSessionsActivityPasswordAndApps: on /account a person sees
// their recent sign-ins and their sessions; "sign out everywhere else"
// ends the other browser's session as a logout does (its back-channel
// token with sid goes out, its access token stops working); the password
// changes only with the current one; revoking the application's consent
// ends its session here too. Each change is an audit event with actor
// person.
func TestAccountPageSessionsActivityPasswordAndApps(t *testing.T) {
	c := newLogoutCluster(t, nil)
	w := provision(t, c)
	recv := newBCReceiver(t, c, w.confID, nil)
	setBackchannel(t, c, w.confID, recv.URL())
	r := newRP(t, c, w.confID, w.confSecret, w.cb, "openid", "email")

	here, there := testcluster.NewBrowser(t), testcluster.NewBrowser(t)
	mine := signInApp(t, c, here, r, w)
	other := signInApp(t, c, there, r, w)

	p := here.Get(c.Issuer() + "/account")
	for _, want := range []string{"Recent activity", "Signed in", "this browser", `value="sessions-end-others"`, `value="session-end"`, `value="password-change"`, `autocomplete="new-password"`} {
		if !strings.Contains(p.Body, want) {
			t.Fatalf("the account page lacks %q:\n%s", want, p.Body)
		}
	}

	p = here.Submit(p, nil, "action", "sessions-end-others")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "1 other session was signed out") {
		t.Fatalf("sign out everywhere else: %d\n%s", p.Status, p.Body)
	}
	if got := recv.waitAccepted(1); got[0].SID != other.sid {
		t.Fatalf("logout token: sid %q, want the other browser's %q", got[0].SID, other.sid)
	}
	if status, _ := bearerGet(t, c, "/userinfo", other.access); status != http.StatusUnauthorized {
		t.Fatalf("the other browser's token after its session was signed out: %d", status)
	}
	if status, _ := bearerGet(t, c, "/userinfo", mine.access); status != http.StatusOK {
		t.Fatalf("this browser's token: %d", status)
	}

	// The password changes only with the current one.
	const newPassword = "a brand new passphrase"
	if p2 := here.Submit(p, map[string]string{"current_password": "not it", "new_password": newPassword}, "action", "password-change"); p2.Status != http.StatusBadRequest {
		t.Fatalf("a wrong current password: %d", p2.Status)
	}
	p = here.Submit(p, map[string]string{"current_password": w.password, "new_password": newPassword}, "action", "password-change")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "Your password was changed") {
		t.Fatalf("password change: %d\n%s", p.Status, p.Body)
	}
	w.password = newPassword
	signInApp(t, c, testcluster.NewBrowser(t), r, w) // the new one works

	// Revoking the application's consent ends its session here too.
	if !strings.Contains(p.Body, `value="consent-revoke"`) {
		t.Fatalf("no application listed:\n%s", p.Body)
	}
	// The application's line names what it may do as the consent page
	// did, not by the scopes' codes.
	if !strings.Contains(p.Body, "Sign you in") || strings.Contains(p.Body, "openid email") {
		t.Errorf("the application's scopes are not named as on the consent page:\n%s", p.Body)
	}
	p = here.Submit(p, map[string]string{"client_id": w.confID}, "action", "consent-revoke")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "access was revoked") {
		t.Fatalf("revoke consent: %d\n%s", p.Status, p.Body)
	}
	if status, _ := bearerGet(t, c, "/userinfo", mine.access); status != http.StatusUnauthorized {
		t.Fatalf("the app's token after its consent was revoked: %d", status)
	}
	// It ends every session of the person with that app: this browser's
	// and the one the new password opened, each with its logout token.
	waitUntil(t, "a logout token for this browser's app session", 10*time.Second, func() bool {
		for _, tok := range recv.accepted() {
			if tok.SID == mine.sid {
				return true
			}
		}
		return false
	})
	recv.checkValid()

	es, _ := auditOn(t, c, 0)
	for _, action := range []string{"session-end", "password-change", "consent-revoke"} {
		if findEvent(es, func(e auditEvent) bool {
			return e.Type == "account" && e.Actor == "person" && e.Subject == w.user && e.Detail["action"] == action && e.Outcome == "success"
		}) == nil {
			t.Errorf("no account event for %s", action)
		}
	}
	if findEvent(es, func(e auditEvent) bool {
		return e.Type == "signin" && e.Outcome == "failure" && e.Subject == w.user && e.Detail["reason"] == "wrong_password"
	}) == nil {
		t.Error("the wrong current password left no failure event")
	}
}
