package fsm

import (
	"errors"
	"testing"
	"time"
)

// TestRevokeConsent: withdrawing a consent deletes it and ends the
// person's live app sessions of that app (not of others), recording a
// logout for each; a consent that is not there is ErrNotFound.
func TestRevokeConsent(t *testing.T) {
	h := signedIn(t)
	h.mustApply(TypeIssueCode, IssueCode{NewSID: "sid-1", IdleExpiresAt: t0.Add(time.Hour), Consent: &Consent{UserID: userA, ClientID: "app", Scopes: []string{"openid"}, At: t0},
		Code: Code{Hash: "c1", ClientID: "app", UserID: userA, OrgID: orgA, SSOSessionID: "sso1", IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}})
	if cs, _ := h.f.State().ConsentsOf(userA); len(cs) != 1 || cs[0].ClientID != "app" {
		t.Fatalf("consents: %+v", cs)
	}
	if r := h.apply(TypeRevokeConsent, RevokeConsent{UserID: userA, ClientID: "other", At: t0}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("no such consent: %v", r.Err)
	}
	ended := h.mustApply(TypeRevokeConsent, RevokeConsent{UserID: userA, ClientID: "app", At: t0.Add(time.Minute)}).Value.(EndedApps)
	if len(ended.Apps) != 1 || ended.Apps[0].ID != "sid-1" || ended.Apps[0].EndReason != EndConsentRevoked {
		t.Fatalf("ended: %+v", ended)
	}
	if cs, _ := h.f.State().ConsentsOf(userA); len(cs) != 0 {
		t.Fatalf("consents after the revoke: %+v", cs)
	}
	if e := h.lastEvent(); e.Type != EventLogout || e.SID != "sid-1" || e.Detail["cause"] != EndConsentRevoked {
		t.Fatalf("logout event: %+v", e)
	}
	sessions, apps, err := h.f.State().SSOSessionsOf(userA, t0.Add(time.Minute))
	if err != nil || len(sessions) != 1 || len(apps["sso1"]) != 0 {
		t.Fatalf("the SSO session stays, without the app: %+v %+v %v", sessions, apps, err)
	}
}
