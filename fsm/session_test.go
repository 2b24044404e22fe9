package fsm

import (
	"errors"
	"testing"
	"time"
)

// signedIn seeds the world and opens an SSO session "sso1" for userA.
func signedIn(t *testing.T) *harness {
	h := newHarness(t)
	seed(h)
	h.mustApply(TypeStartSSOSession, StartSSOSession{TokenHash: "tok1", Session: SSOSession{
		ID: "sso1", UserID: userA, AuthTime: t0, AMR: []string{"pwd"}, ACR: "pwd",
		CreatedAt: t0, LastSeen: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(8 * time.Hour),
	}})
	return h
}

func issue(h *harness, hash, org, newSID string, at time.Time) Result {
	h.t.Helper()
	return h.apply(TypeIssueCode, IssueCode{NewSID: newSID, IdleExpiresAt: at.Add(time.Hour), Code: Code{
		Hash: hash, ClientID: "app", UserID: userA, OrgID: org, SSOSessionID: "sso1",
		IssuedAt: at, ExpiresAt: at.Add(time.Minute),
	}})
}

func redeem(h *harness, hash, client, jti string, at time.Time) Result {
	h.t.Helper()
	return h.apply(TypeRedeemCode, RedeemCode{Hash: hash, ClientID: client, At: at, AccessJTI: jti, AccessExpires: at.Add(10 * time.Minute)})
}

func TestAppSessionReuseAndOrganizationSwitch(t *testing.T) {
	h := signedIn(t)
	h.mustApply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: "m-b", UserID: userA, OrgID: orgB, Status: MembershipActive}})
	sid1 := issue(h, "c1", orgA, "sid-1", t0).Value
	sid2 := issue(h, "c2", orgA, "sid-2", t0.Add(time.Second)).Value
	sid3 := issue(h, "c3", orgB, "sid-3", t0.Add(2*time.Second)).Value
	if sid1 != "sid-1" || sid2 != "sid-1" {
		t.Fatalf("repeat sign-in: got %v then %v, want sid-1 reused", sid1, sid2)
	}
	if sid3 != "sid-3" {
		t.Fatalf("organization switch: got %v, want new sid-3", sid3)
	}
	s, _ := h.f.State().SSOSession("sso1")
	if !s.IdleExpiresAt.Equal(t0.Add(2*time.Second + time.Hour)) {
		t.Fatalf("idle deadline not extended: %v", s.IdleExpiresAt)
	}
}

func TestRedeemCode(t *testing.T) {
	at := t0.Add(time.Second)
	cases := []struct {
		name    string
		hash    string
		prepare func(h *harness)
		client  string
		at      time.Time
		want    error
	}{
		{"ok", "c1", nil, "app", at, nil},
		{"just before code expiry", "c1", nil, "app", t0.Add(time.Minute - time.Nanosecond), nil},
		{"unknown code", "nope", nil, "app", at, ErrNotFound},
		{"other client", "c1", nil, "other", at, ErrMismatch},
		{"expired", "c1", nil, "app", t0.Add(time.Minute), ErrExpired},
		{"membership suspended", "c1", func(h *harness) {
			h.mustApply(TypeUpdateMembership, UpdateMembership{ID: memA, Status: MembershipSuspended})
		}, "app", at, ErrAccessChanged},
		{"membership removed", "c1", func(h *harness) { h.mustApply(TypeDeleteMembership, DeleteMembership{ID: memA}) }, "app", at, ErrAccessChanged},
		{"client suspended", "c1", func(h *harness) {
			c, _ := h.f.State().Client("app")
			c.Suspended = true
			h.mustApply(TypeUpdateClient, PutClient{Client: c})
		}, "app", at, ErrAccessChanged},
		{"session ended", "c1", func(h *harness) {
			h.mustApply(TypeEndSSOSession, EndSSOSession{ID: "sso1", At: t0, Reason: EndLogout})
		}, "app", at, ErrSessionEnded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := signedIn(t)
			issue(h, "c1", orgA, "sid-1", t0)
			if c.prepare != nil {
				c.prepare(h)
			}
			r := redeem(h, c.hash, c.client, "jti-1", c.at)
			if !errors.Is(r.Err, c.want) {
				t.Fatalf("got %v, want %v", r.Err, c.want)
			}
		})
	}
}

func TestSecondRedemptionRevokesFirstToken(t *testing.T) {
	h := signedIn(t)
	issue(h, "c1", orgA, "sid-1", t0)
	first := redeem(h, "c1", "app", "jti-1", t0.Add(time.Second))
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	if code := first.Value.(Code); code.SID != "sid-1" || code.AccessJTI != "jti-1" {
		t.Fatalf("redeemed code: got %+v", code)
	}
	if _, err := h.f.State().CheckAccess("jti-1", "sid-1", t0.Add(2*time.Second), false); err != nil {
		t.Fatalf("fresh token: got %v, want live", err)
	}
	if r := redeem(h, "c1", "app", "jti-2", t0.Add(2*time.Second)); !errors.Is(r.Err, ErrAlreadyUsed) {
		t.Fatalf("second redemption: got %v, want ErrAlreadyUsed", r.Err)
	}
	if _, err := h.f.State().CheckAccess("jti-1", "sid-1", t0.Add(3*time.Second), false); !errors.Is(err, ErrAlreadyUsed) {
		t.Fatalf("first token after replay: got %v, want revoked", err)
	}
}

func TestEndingCommandsReportEndedAppSessions(t *testing.T) {
	cases := []struct {
		name string
		typ  Type
		cmd  any
		want int
	}{
		{"logout", TypeEndSSOSession, EndSSOSession{ID: "sso1", At: t0, Reason: EndLogout}, 2},
		{"org deleted ends only that org", TypeDeleteOrg, DeleteOrg{ID: orgB, At: t0}, 1},
		{"erasure", TypeDeleteUser, DeleteUser{ID: userA, At: t0}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := signedIn(t)
			h.mustApply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: "m-b", UserID: userA, OrgID: orgB, Status: MembershipActive}})
			issue(h, "c1", orgA, "sid-a", t0)
			issue(h, "c2", orgB, "sid-b", t0)
			r := h.mustApply(c.typ, c.cmd)
			if got := len(r.Value.(EndedApps).Apps); got != c.want {
				t.Fatalf("ended app sessions: got %d, want %d", got, c.want)
			}
			if r2 := h.apply(c.typ, c.cmd); r2.Err == nil {
				if ended, ok := r2.Value.(EndedApps); ok && len(ended.Apps) != 0 {
					t.Fatalf("second time ended %d sessions again", len(ended.Apps))
				}
			}
		})
	}
}

func TestReapKeepsLiveAndDropsDead(t *testing.T) {
	h := signedIn(t)
	issue(h, "c1", orgA, "sid-1", t0)
	redeem(h, "c1", "app", "jti-1", t0.Add(time.Second))
	h.mustApply(TypeRevokeToken, RevokeToken{JTI: "jti-x", ExpiresAt: t0.Add(5 * time.Minute)})

	st := h.mustApply(TypeReap, Reap{Before: t0.Add(2 * time.Minute)}).Value.(ReapStats)
	if st != (ReapStats{Revocations: 0, Codes: 0}) {
		t.Fatalf("early reap: got %+v, want nothing (access token of the code still valid)", st)
	}
	st = h.mustApply(TypeReap, Reap{Before: t0.Add(2 * time.Hour)}).Value.(ReapStats)
	if st.Codes != 1 || st.Revocations != 1 || st.SSOSessions != 1 || st.AppSessions != 1 {
		t.Fatalf("late reap: got %+v, want one of each", st)
	}
	if _, err := h.f.State().SSOSessionByToken("tok1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("token index after reap: got %v", err)
	}
}

// TestRedeemedCodeIsSlimmed: after redemption the stored code keeps only
// what replay detection needs (and the sid its audit event names), and a
// replay still revokes the first token.
func TestRedeemedCodeIsSlimmed(t *testing.T) {
	h := signedIn(t)
	if r := issue(h, "c1", orgA, "sid-1", t0); r.Err != nil {
		t.Fatal(r.Err)
	}
	first := redeem(h, "c1", "app", "jti-1", t0.Add(time.Second))
	if full, ok := first.Value.(Code); !ok || full.UserID != userA || full.SID != "sid-1" {
		t.Fatalf("redeem must answer the whole code: %+v", first)
	}
	stored, _ := h.f.State().Code("c1")
	if stored.UserID != "" || stored.SSOSessionID != "" || stored.SID != "sid-1" || stored.AMR != nil || stored.AccessJTI != "jti-1" || stored.RedeemedAt.IsZero() || stored.ClientID != "app" {
		t.Fatalf("stored after redemption: %+v", stored)
	}
	if r := redeem(h, "c1", "app", "jti-2", t0.Add(2*time.Second)); !errors.Is(r.Err, ErrAlreadyUsed) {
		t.Fatalf("replay: %v", r.Err)
	}
	if ok, _ := h.f.State().Revoked("jti-1"); !ok {
		t.Fatal("a replay must revoke the first token")
	}
}
