package fsm

import (
	"sort"
	"strings"
	"testing"
	"time"
)

// deliveryWorld: userA signed in (sso1) to a single-org app of org A with a
// back-channel URI, to a multi-org app in orgs A and B, and to an app
// without a back-channel URI.
func deliveryWorld(t *testing.T) *harness {
	h := signedIn(t)
	h.mustApply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: "m-b", UserID: userA, OrgID: orgB, Status: MembershipActive}})
	h.mustApply(TypeCreateClient, PutClient{Create: true, Client: Client{ID: "bc-single", OrganizationID: orgA, BackchannelLogoutURI: "https://single/bc"}})
	h.mustApply(TypeCreateClient, PutClient{Create: true, Client: Client{ID: "bc-multi", OrganizationID: orgA, MultiOrganization: true, BackchannelLogoutURI: "https://multi/bc"}})
	for i, c := range []struct{ client, org string }{{"bc-single", orgA}, {"bc-multi", orgA}, {"bc-multi", orgB}, {"app", orgA}} {
		h.mustApply(TypeIssueCode, IssueCode{NewSID: "sid-" + string(rune('0'+i)), IdleExpiresAt: t0.Add(time.Hour), Code: Code{
			Hash: "code-" + string(rune('0'+i)), ClientID: c.client, UserID: userA, OrgID: c.org, SSOSessionID: "sso1",
			IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}})
	}
	return h
}

// shapes renders deliveries as "client org sid|-" lines, sorted.
func shapes(ds []Delivery) string {
	var out []string
	for _, d := range ds {
		sid := d.SID
		if sid == "" {
			sid = "-"
		}
		org := "A"
		if d.OrgID == orgB {
			org = "B"
		}
		out = append(out, d.ClientID+" "+org+" "+sid)
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func TestLogoutDeliveriesPerCause(t *testing.T) {
	cases := []struct {
		name string
		typ  Type
		cmd  any
		want string
	}{
		{"sign-out: sid per ended app session, only apps with a URI", TypeEndSSOSession, EndSSOSession{ID: "sso1", At: t0, Reason: EndLogout},
			"bc-multi A sid-1; bc-multi B sid-2; bc-single A sid-0"},
		{"plain expiry sends nothing", TypeEndSSOSession, EndSSOSession{ID: "sso1", At: t0, Reason: EndPlainExpiry}, ""},
		{"supersede: sid", TypeStartSSOSession, StartSSOSession{TokenHash: "tok2", Supersedes: "sso1", Session: SSOSession{
			ID: "sso2", UserID: userA, CreatedAt: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Hour)}},
			"bc-multi A sid-1; bc-multi B sid-2; bc-single A sid-0"},
		{"erasure: sub-only once per app and organization", TypeDeleteUser, DeleteUser{ID: userA, At: t0},
			"bc-multi A -; bc-multi B -; bc-single A -"},
		{"org deletion: sub-only to its own apps, sid to multi-org apps", TypeDeleteOrg, DeleteOrg{ID: orgA, At: t0},
			"bc-multi A sid-1; bc-single A -"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := deliveryWorld(t)
			ended := h.mustApply(c.typ, c.cmd).Value.(EndedApps)
			if got := shapes(ended.Deliveries); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			stored, _ := h.f.State().DeliveriesOf(ended.Index)
			if got := shapes(stored); got != c.want {
				t.Fatalf("stored: got %q, want %q", got, c.want)
			}
			pending, _ := h.f.State().PendingDeliveries(100)
			if len(pending) != len(ended.Deliveries) {
				t.Fatalf("pending: got %d, want %d", len(pending), len(ended.Deliveries))
			}
		})
	}
}

func TestDeliveryOutcomes(t *testing.T) {
	h := deliveryWorld(t)
	ended := h.mustApply(TypeEndSSOSession, EndSSOSession{ID: "sso1", At: t0, Reason: EndLogout}).Value.(EndedApps)
	ds := ended.Deliveries
	h.mustApply(TypeDeliveryOutcome, DeliveryOutcome{Outcomes: []Outcome{
		{ID: ds[0].ID, State: DeliverySent, At: t0.Add(time.Second)},
		{ID: ds[1].ID, State: DeliveryPending, At: t0.Add(time.Second), NextAttemptAt: t0.Add(3 * time.Second), Error: "503"},
		{ID: ds[2].ID, State: DeliveryAbandoned, At: t0.Add(time.Second), Error: "timeout"},
	}})
	// A late duplicate outcome (a new leader retried) must not reopen a
	// finished delivery.
	h.mustApply(TypeDeliveryOutcome, DeliveryOutcome{Outcomes: []Outcome{{ID: ds[0].ID, State: DeliveryPending, NextAttemptAt: t0}}})
	pending, _ := h.f.State().PendingDeliveries(100)
	if len(pending) != 1 || pending[0].ID != ds[1].ID || pending[0].Attempts != 1 || !pending[0].NextAttemptAt.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("pending: got %+v", pending)
	}
	if d, _ := h.f.State().Delivery(ds[0].ID); d.State != DeliverySent || d.Attempts != 1 {
		t.Fatalf("sent delivery: got %+v", d)
	}
	st := h.mustApply(TypeReap, Reap{Before: t0.Add(time.Minute)}).Value.(ReapStats)
	if st.Deliveries != 2 {
		t.Fatalf("reaped deliveries: got %d, want the 2 finished ones", st.Deliveries)
	}
	if pending, _ := h.f.State().PendingDeliveries(100); len(pending) != 1 {
		t.Fatalf("reap dropped a pending delivery")
	}
}

// TestCredentialChangeEndsSessions: every command that changes a
// credential and carries EndSessions ends the person's SSO sessions but
// the one excepted, in the same apply, and owes logout tokens with sid;
// without EndSessions it ends nothing (an older proposer's command).
func TestCredentialChangeEndsSessions(t *testing.T) {
	pw := "new-hash"
	phone := "+15550000000"
	end := func(except string) *EndSessions { return &EndSessions{Except: except, At: t0.Add(time.Minute)} }
	all := "bc-multi A sid-1; bc-multi B sid-2; bc-single A sid-0"
	cases := []struct {
		name    string
		typ     Type
		cmd     func(e *EndSessions) any
		except  string
		want    string
		sso1End bool
	}{
		{"password", TypeUpdateUser, func(e *EndSessions) any { return UpdateUser{ID: userA, PasswordHash: &pw, At: t0, EndSessions: e} }, "", all, true},
		{"phone", TypeUpdateUser, func(e *EndSessions) any { return UpdateUser{ID: userA, Phone: &phone, At: t0, EndSessions: e} }, "", all, true},
		{"totp", TypeSetTOTP, func(e *EndSessions) any { return SetTOTP{UserID: userA, Secret: []byte("s"), At: t0, EndSessions: e} }, "", all, true},
		{"recovery codes", TypeSetRecoveryCodes, func(e *EndSessions) any {
			return SetRecoveryCodes{UserID: userA, Hashes: []string{"h"}, At: t0, EndSessions: e}
		}, "", all, true},
		{"passkey added", TypeAddPasskey, func(e *EndSessions) any {
			return AddPasskey{UserID: userA, Passkey: Passkey{ID: []byte{1}, Name: "k"}, EndSessions: e}
		}, "", all, true},
		{"the session making the change stays", TypeSetTOTP, func(e *EndSessions) any { return SetTOTP{UserID: userA, At: t0, EndSessions: e} }, "sso1", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := deliveryWorld(t)
			h.mustApply(TypeStartSSOSession, StartSSOSession{TokenHash: "tok9", Session: SSOSession{
				ID: "sso9", UserID: userA, CreatedAt: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Hour)}})
			res := h.mustApply(c.typ, c.cmd(end(c.except)))
			s1, _ := h.f.State().SSOSession("sso1")
			s9, _ := h.f.State().SSOSession("sso9")
			if got := !s1.EndedAt.IsZero(); got != c.sso1End {
				t.Fatalf("sso1 ended: got %v, want %v", got, c.sso1End)
			}
			if s9.EndedAt.IsZero() || s9.EndReason != EndCredential {
				t.Fatalf("sso9: got ended %v reason %q, want %q", s9.EndedAt, s9.EndReason, EndCredential)
			}
			if ended, ok := res.Value.(EndedApps); ok {
				if got := shapes(ended.Deliveries); got != c.want {
					t.Fatalf("deliveries: got %q, want %q", got, c.want)
				}
			}
			pending, _ := h.f.State().PendingDeliveries(100)
			if got := shapes(pending); got != c.want {
				t.Fatalf("pending: got %q, want %q", got, c.want)
			}

			// Without EndSessions nothing ends.
			h2 := deliveryWorld(t)
			h2.mustApply(c.typ, c.cmd(nil))
			if s, _ := h2.f.State().SSOSession("sso1"); !s.EndedAt.IsZero() {
				t.Fatal("a command without EndSessions ended a session")
			}
		})
	}
}
