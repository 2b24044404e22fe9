package oidc

import (
	"net/http"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

// TestSigninEventNamesTheClientsOrganization: the signin events of an
// authorization request name the client and, for a client of one
// organization, that organization (a wrong password and the sign-in
// alike); a multi-organization client's organization is chosen after the
// sign-in, so its events name none.
func TestSigninEventNamesTheClientsOrganization(t *testing.T) {
	cases := []struct {
		client, wantOrg string
	}{
		{hPublic, hOrgA},
		{hMulti, ""},
	}
	for _, tc := range cases {
		t.Run(tc.client, func(t *testing.T) {
			h := newHarness(t)
			b := h.browser()
			form := postForm(t, b.get(authzPath(authzQuery(tc.client))), "method")
			if p := b.submit(form, "method", "password", map[string]string{"email": hEmail, "password": "wrong password"}); p.status != http.StatusBadRequest {
				t.Fatalf("wrong password: got %d, want 400", p.status)
			}
			form = postForm(t, b.get(authzPath(authzQuery(tc.client))), "method")
			if p := b.submit(form, "method", "password", map[string]string{"email": hEmail, "password": hPassword}); p.status >= 400 {
				t.Fatalf("sign-in: got %d\n%s", p.status, p.body)
			}
			events, err := h.applier.State().AuditEvents(fsm.AuditQuery{Type: fsm.EventSignin, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			outcomes := map[string]bool{}
			for _, e := range events {
				outcomes[e.Outcome] = true
				if e.Subject != hUser || e.ClientID != tc.client || e.OrgID != tc.wantOrg {
					t.Errorf("%s event: got subject %q, client_id %q, organization_id %q; want %q, %q, %q",
						e.Outcome, e.Subject, e.ClientID, e.OrgID, hUser, tc.client, tc.wantOrg)
				}
			}
			if !outcomes[fsm.OutcomeFailure] || !outcomes[fsm.OutcomeSuccess] {
				t.Errorf("got signin events %+v, want a failure and a success", events)
			}
		})
	}
}
