package signin

import (
	"net/http"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

// TestFailedSignInNamesNoOutsiderToTheOrganization: anyone can type any
// address with a wrong password on an organization's sign-in page, and
// the organization's org_admins read the events that name it. A failed
// sign-in of a person who is no member of the client's organization is
// recorded for the site (no organization), so it does not hand the
// org_admin the person's id; a member's failure, and an unknown
// address's, still name the organization.
func TestFailedSignInNamesNoOutsiderToTheOrganization(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	h.apply(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{
		ID: "2b000000-0000-4000-8000-000000000002", UserID: hUserB, OrgID: hOrgA, Status: fsm.MembershipActive, CreatedAt: now, UpdatedAt: now}})
	for _, addr := range []string{hEmail, hEmailB, "nobody@example.com"} {
		b := h.browser()
		if p := b.signIn(b.get(authzPath(authzQuery(hPublic, false))), addr, "not the password"); p.status != http.StatusBadRequest {
			t.Fatalf("%s with a wrong password: %d", addr, p.status)
		}
	}
	evs, err := h.applier.State().AuditEvents(fsm.AuditQuery{Type: fsm.EventSignin, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // subject -> organization
	for _, e := range evs {
		if e.Outcome != fsm.OutcomeFailure {
			t.Errorf("event %+v", e)
		}
		got[e.Subject] = e.OrgID
	}
	want := map[string]string{hUser: "", hUserB: hOrgA, "": hOrgA}
	for s, org := range want {
		if o, ok := got[s]; !ok || o != org {
			t.Errorf("the failure of %q names organization %q (found %v), want %q", s, o, ok, org)
		}
	}
	// What an org_admin of alpha reads names Ann nowhere.
	mine, err := h.applier.State().AuditEvents(fsm.AuditQuery{OrgID: hOrgA, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range mine {
		if e.Subject == hUser {
			t.Errorf("alpha's trail names Ann: %+v", e)
		}
	}
}
