package fsm

import (
	"testing"
	"time"
)

// TestScopedReads: one organization's memberships, members and clients,
// paged, beside another organization's.
func TestScopedReads(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		orgO = "00000000-0000-4000-8000-00000000000a"
		orgP = "00000000-0000-4000-8000-00000000000b"
	)
	h.mustApply(TypeCreateOrg, CreateOrg{ID: orgO, Slug: "o", Name: "O", CreatedAt: at})
	h.mustApply(TypeCreateOrg, CreateOrg{ID: orgP, Slug: "p", Name: "P", CreatedAt: at})
	users := []string{
		"00000000-0000-4000-8000-000000000001",
		"00000000-0000-4000-8000-000000000002",
		"00000000-0000-4000-8000-000000000003",
	}
	for i, id := range users {
		h.mustApply(TypeCreateUser, CreateUser{User: User{ID: id, Email: string(rune('a'+i)) + "@example.com", CreatedAt: at}})
	}
	member := func(mid, uid, org string) {
		h.mustApply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: mid, UserID: uid, OrgID: org, Status: MembershipActive, CreatedAt: at}})
	}
	member("00000000-0000-4000-8000-000000000101", users[0], orgO)
	member("00000000-0000-4000-8000-000000000102", users[1], orgO)
	member("00000000-0000-4000-8000-000000000103", users[1], orgP)
	member("00000000-0000-4000-8000-000000000104", users[2], orgP)
	st := h.f.State()

	ms, total, err := st.MembershipsInOrg(orgO, Page{Page: 1, PageSize: 1})
	if err != nil || total != 2 || len(ms) != 1 || ms[0].UserID != users[0] {
		t.Fatalf("memberships of O, page 1: %+v %d %v", ms, total, err)
	}
	ms, total, _ = st.MembershipsInOrg(orgO, Page{Page: 2, PageSize: 1})
	if total != 2 || len(ms) != 1 || ms[0].UserID != users[1] {
		t.Fatalf("memberships of O, page 2: %+v %d", ms, total)
	}
	if ms, total, _ = st.MembershipsInOrg(orgO, Page{Page: 3, PageSize: 1}); total != 2 || len(ms) != 0 {
		t.Fatalf("memberships of O, page 3: %+v %d", ms, total)
	}
	us, total, err := st.MembersOfOrg(orgP, Page{Page: 1, PageSize: 10})
	if err != nil || total != 2 || len(us) != 2 || us[0].ID != users[1] || us[1].ID != users[2] {
		t.Fatalf("members of P: %+v %d %v", us, total, err)
	}

	for _, c := range []Client{
		{ID: "app-o", OrganizationID: orgO},
		{ID: "app-p", OrganizationID: orgP},
		{ID: "app-shared", OrganizationID: orgP, MultiOrganization: true, Organizations: []string{orgO, orgP}},
	} {
		c.Type, c.RedirectURIs, c.Scopes, c.AccessTokenTTL, c.CreatedAt = ClientPublic, []string{"https://app.example/cb"}, []string{"openid"}, 600, at
		h.mustApply(TypeCreateClient, PutClient{Client: c, Create: true})
	}
	inO := func(c Client) bool {
		if c.OrganizationID == orgO {
			return true
		}
		for _, o := range c.Organizations {
			if o == orgO {
				return true
			}
		}
		return false
	}
	cs, total, err := st.ClientsWhere(inO, Page{Page: 1, PageSize: 10})
	if err != nil || total != 2 || len(cs) != 2 || cs[0].ID != "app-o" || cs[1].ID != "app-shared" {
		t.Fatalf("clients of O: %+v %d %v", cs, total, err)
	}
	cs, total, _ = st.ClientsWhere(inO, Page{Page: 2, PageSize: 1})
	if total != 2 || len(cs) != 1 || cs[0].ID != "app-shared" {
		t.Fatalf("clients of O, page 2: %+v %d", cs, total)
	}
}
