package fsm

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Keys of the maker tests, beside seedCredentials' keyA (admin, made by
// the token) and keyB (org_admin of orgB, made by the token).
const (
	keyPA = "00000000-0000-4000-8000-0000000000f1" // admin, made by userA
	keyPO = "00000000-0000-4000-8000-0000000000f2" // org_admin of orgA, made by userA
	keyKA = "00000000-0000-4000-8000-0000000000f3" // org_admin of orgA, made by keyPA
	keyKK = "00000000-0000-4000-8000-0000000000f4" // org_admin of orgA, made by keyKA
	keyPB = "00000000-0000-4000-8000-0000000000f5" // auditor, made by userB
)

func madeKey(id, role, org, kind, maker string, life time.Duration) CreateAPIKey {
	return CreateAPIKey{Key: APIKey{ID: id, Name: "k " + id[len(id)-2:], Role: role, OrgID: org, Hash: "h" + id,
		CreatedAt: t0, ExpiresAt: t0.Add(life), MakerKind: kind, MakerID: maker}}
}

// seedMadeKeys adds, to seedCredentials' world (userA admin and org_admin
// of orgA, userB auditor), keys made by people and by keys.
func seedMadeKeys(h *harness) {
	h.mustApply(TypeCreateAPIKey, madeKey(keyPA, RoleAdmin, "", MakerPerson, userA, 48*time.Hour))
	h.mustApply(TypeCreateAPIKey, madeKey(keyPO, RoleOrgAdmin, orgA, MakerPerson, userA, MaxAPIKeyLifetime))
	h.mustApply(TypeCreateAPIKey, madeKey(keyKA, RoleOrgAdmin, orgA, MakerAPIKey, keyPA, 24*time.Hour))
	h.mustApply(TypeCreateAPIKey, madeKey(keyKK, RoleOrgAdmin, orgA, MakerAPIKey, keyKA, time.Hour))
	h.mustApply(TypeCreateAPIKey, madeKey(keyPB, RoleAuditor, "", MakerPerson, userB, time.Hour))
}

func keyIDs(t *testing.T, st *State) []string {
	t.Helper()
	ks, _, err := st.APIKeys(Page{Page: 1, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range ks {
		ids = append(ids, k.ID)
	}
	return ids
}

// TestAPIKeyMadeOnlyWithinTheMakersAuthority: a key is made only while its
// maker holds the authority for it, so no write can leave behind a key
// its maker could not have made.
func TestAPIKeyMadeOnlyWithinTheMakersAuthority(t *testing.T) {
	const fresh = "00000000-0000-4000-8000-0000000000e7"
	const nobody = "00000000-0000-4000-8000-0000000000e6"
	tests := []struct {
		name string
		cmd  CreateAPIKey
		want error
	}{
		{"an admin person: any key", madeKey(fresh, RoleAuditor, "", MakerPerson, userA, time.Hour), nil},
		{"an admin person: a key of any organization", madeKey(fresh, RoleOrgAdmin, orgB, MakerPerson, userA, time.Hour), nil},
		{"an auditor person: an auditor key", madeKey(fresh, RoleAuditor, "", MakerPerson, userB, time.Hour), nil},
		{"an auditor person: an admin key", madeKey(fresh, RoleAdmin, "", MakerPerson, userB, time.Hour), ErrMakerLapsed},
		{"an auditor person: an org_admin key", madeKey(fresh, RoleOrgAdmin, orgA, MakerPerson, userB, time.Hour), ErrMakerLapsed},
		{"a person with no grant", madeKey(fresh, RoleAuditor, "", MakerPerson, nobody, time.Hour), ErrMakerLapsed},
		{"a key: within its role", madeKey(fresh, RoleOrgAdmin, orgA, MakerAPIKey, keyKA, time.Hour), nil},
		{"a key: another organization", madeKey(fresh, RoleOrgAdmin, orgB, MakerAPIKey, keyKA, time.Hour), ErrMakerLapsed},
		{"a key: a wider role", madeKey(fresh, RoleAdmin, "", MakerAPIKey, keyKA, time.Hour), ErrMakerLapsed},
		{"a key of the token", madeKey(fresh, RoleAuditor, "", MakerAPIKey, keyA, time.Hour), nil},
		{"a missing key", madeKey(fresh, RoleAuditor, "", MakerAPIKey, nobody, time.Hour), ErrMakerLapsed},
		{"a key outliving the key that makes it", madeKey(fresh, RoleOrgAdmin, orgA, MakerAPIKey, keyKK, 2*time.Hour), ErrInvalid},
		{"a key four deep already", madeKey(fresh, RoleOrgAdmin, orgA, MakerAPIKey, "00000000-0000-4000-8000-0000000000f9", time.Minute), ErrMakerLapsed},
		{"the token, named", madeKey(fresh, RoleAuditor, "", MakerToken, userA, time.Hour), ErrInvalid},
		{"a maker of no known kind", madeKey(fresh, RoleAuditor, "", "robot", userA, time.Hour), ErrInvalid},
		{"a person without an id", madeKey(fresh, RoleAuditor, "", MakerPerson, "", time.Hour), ErrInvalid},
		{"the key itself", madeKey(fresh, RoleAuditor, "", MakerAPIKey, fresh, time.Hour), ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			seedCredentials(h)
			seedMadeKeys(h)
			// keyKK is the third of a line; a fourth below it.
			h.mustApply(TypeCreateAPIKey, madeKey("00000000-0000-4000-8000-0000000000f9", RoleOrgAdmin, orgA, MakerAPIKey, keyKK, time.Minute))
			r := h.apply(TypeCreateAPIKey, tt.cmd)
			if !errors.Is(r.Err, tt.want) {
				t.Fatalf("got %v, want %v", r.Err, tt.want)
			}
			k, err := h.f.State().APIKey(fresh)
			if tt.want != nil {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("a refused key: got %+v %v, want none stored", k, err)
				}
				return
			}
			if err != nil || k.MakerKind != tt.cmd.Key.MakerKind || k.MakerID != tt.cmd.Key.MakerID {
				t.Errorf("stored: got %+v %v, want maker %s %s", k, err, tt.cmd.Key.MakerKind, tt.cmd.Key.MakerID)
			}
		})
	}
}

// TestAPIKeyMadeByAnExpiredKey: a key made at or after its maker key's
// expiry is refused (the create's time is the proposer's stamp).
func TestAPIKeyMadeByAnExpiredKey(t *testing.T) {
	h := newHarness(t)
	seed(h)
	seedCredentials(h)
	seedMadeKeys(h)
	c := madeKey("00000000-0000-4000-8000-0000000000e7", RoleOrgAdmin, orgA, MakerAPIKey, keyKK, 0)
	c.Key.CreatedAt = t0.Add(time.Hour) // keyKK expires at t0+1h
	c.Key.ExpiresAt = c.Key.CreatedAt.Add(time.Minute)
	if r := h.apply(TypeCreateAPIKey, c); !errors.Is(r.Err, ErrMakerLapsed) {
		t.Fatalf("got %v, want ErrMakerLapsed", r.Err)
	}
}

// TestKeysEndWithTheirMakersAuthority: the write that takes a maker's
// authority away ends, in the same transaction, every key it no longer
// covers and every key those made; the rest stay.
func TestKeysEndWithTheirMakersAuthority(t *testing.T) {
	everyKey := []string{keyA, keyB, keyPA, keyPO, keyKA, keyKK, keyPB}
	tests := []struct {
		name  string
		typ   Type
		cmd   any
		ended []string
	}{
		// userA keeps org_admin of orgA: the admin key and the keys it made
		// end, the org_admin key of orgA stays.
		{"remove the admin grant", TypeDeleteAdminGrant, DeleteAdminGrant{ID: grantA}, []string{keyPA, keyKA, keyKK}},
		// userA is still admin, which covers every key.
		{"remove the narrower grant", TypeDeleteAdminGrant, DeleteAdminGrant{ID: grantB}, nil},
		{"remove the auditor's grant", TypeDeleteAdminGrant, DeleteAdminGrant{ID: grantC}, []string{keyPB}},
		{"erase the person", TypeDeleteUser, DeleteUser{ID: userA, At: t0}, []string{keyPA, keyPO, keyKA, keyKK}},
		{"delete a key", TypeDeleteAPIKey, DeleteAPIKey{ID: keyPA}, []string{keyPA, keyKA, keyKK}},
		{"delete a key in the middle", TypeDeleteAPIKey, DeleteAPIKey{ID: keyKA}, []string{keyKA, keyKK}},
		{"delete a key the token made", TypeDeleteAPIKey, DeleteAPIKey{ID: keyA}, []string{keyA}},
		// The organization's grant and keys go; userA is still admin.
		{"delete the organization", TypeDeleteOrg, DeleteOrg{ID: orgA, At: t0}, []string{keyPO, keyKA, keyKK}},
		// The token's authority passes to the new token.
		{"replace the break-glass token", TypeSetAdminToken, SetAdminToken{Hash: "h2", Replace: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			seedCredentials(h)
			seedMadeKeys(h)
			h.mustApply(tt.typ, tt.cmd)
			var want []string
			for _, id := range everyKey {
				if !slices.Contains(tt.ended, id) {
					want = append(want, id)
				}
			}
			slices.Sort(want)
			if got := keyIDs(t, h.f.State()); !slices.Equal(got, want) {
				t.Errorf("keys left: got %v, want %v", got, want)
			}
		})
	}
}

// TestAKeyOfAPersonWithTwoGrantsEndsWithTheLast: a person who holds
// admin and org_admin of orgA made an org_admin key of orgA; each grant
// covers it, so it ends only when neither is left.
func TestAKeyOfAPersonWithTwoGrantsEndsWithTheLast(t *testing.T) {
	h := newHarness(t)
	seed(h)
	seedCredentials(h)
	seedMadeKeys(h)
	h.mustApply(TypeDeleteAdminGrant, DeleteAdminGrant{ID: grantA})
	if _, err := h.f.State().APIKey(keyPO); err != nil {
		t.Fatalf("after the admin grant: got %v, want the org_admin key kept", err)
	}
	h.mustApply(TypeDeleteAdminGrant, DeleteAdminGrant{ID: grantB})
	if _, err := h.f.State().APIKey(keyPO); !errors.Is(err, ErrNotFound) {
		t.Errorf("after both grants: got %v, want ErrNotFound", err)
	}
}

// TestMakersTravelInASnapshot: a restored replica holds the same makers,
// and ends the same keys.
func TestMakersTravelInASnapshot(t *testing.T) {
	src := newHarness(t)
	seed(src)
	seedCredentials(src)
	seedMadeKeys(src)
	dst := newHarness(t)
	restoreFrom(t, src.f, dst.f)
	dst.index = src.index
	if got, want := dump(t, dst.f), dump(t, src.f); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\ngot  %v\nwant %v", got, want)
	}
	k, err := dst.f.State().APIKey(keyKA)
	if err != nil || k.MakerKind != MakerAPIKey || k.MakerID != keyPA {
		t.Fatalf("restored key: got %+v %v, want made by %s", k, err, keyPA)
	}
	dst.mustApply(TypeDeleteAdminGrant, DeleteAdminGrant{ID: grantA})
	want := []string{keyA, keyB, keyPO, keyPB}
	slices.Sort(want)
	if got := keyIDs(t, dst.f.State()); !slices.Equal(got, want) {
		t.Errorf("keys left on the restored replica: got %v, want %v", got, want)
	}
}

// TestAPIKeyLineage: the key and the keys that made it, and the first
// maker's grants, in one read.
func TestAPIKeyLineage(t *testing.T) {
	h := newHarness(t)
	seed(h)
	seedCredentials(h)
	seedMadeKeys(h)
	st := h.f.State()
	tests := []struct {
		id     string
		keys   []string
		grants int
	}{
		{keyA, []string{keyA}, 0},
		{keyPO, []string{keyPO}, 2},
		{keyKK, []string{keyKK, keyKA, keyPA}, 2},
		{keyPB, []string{keyPB}, 1},
	}
	for _, tt := range tests {
		l, err := st.APIKeyLineage(tt.id)
		if err != nil {
			t.Fatalf("%s: %v", tt.id, err)
		}
		var got []string
		for _, k := range l.Keys {
			got = append(got, k.ID)
		}
		if !slices.Equal(got, tt.keys) || len(l.Grants) != tt.grants || l.Broken {
			t.Errorf("%s: got keys %v, %d grants, broken %v; want %v, %d grants", tt.id, got, len(l.Grants), l.Broken, tt.keys, tt.grants)
		}
		if !l.InForce(t0) {
			t.Errorf("%s: got not in force at t0, want in force", tt.id)
		}
	}
	if _, err := st.APIKeyLineage("00000000-0000-4000-8000-0000000000e6"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing key: got %v, want ErrNotFound", err)
	}
}

// TestAPIKeyLineageInForce: the rule at every use, whatever path brought
// the state there.
func TestAPIKeyLineageInForce(t *testing.T) {
	at := t0.Add(time.Minute)
	key := func(id, role, org, kind, maker string) APIKey {
		return APIKey{ID: id, Role: role, OrgID: org, ExpiresAt: t0.Add(time.Hour), MakerKind: kind, MakerID: maker}
	}
	admin := AdminGrant{UserID: userA, Role: RoleAdmin}
	orgAdminA := AdminGrant{UserID: userA, Role: RoleOrgAdmin, OrgID: orgA}
	auditor := AdminGrant{UserID: userA, Role: RoleAuditor}
	expired := key(keyPA, RoleAdmin, "", MakerToken, "")
	expired.ExpiresAt = at
	tests := []struct {
		name string
		l    APIKeyLineage
		want bool
	}{
		{"the token's key", APIKeyLineage{Keys: []APIKey{key(keyA, RoleAdmin, "", MakerToken, "")}}, true},
		{"an expired key", APIKeyLineage{Keys: []APIKey{expired}}, false},
		{"a person's admin key, the person admin", APIKeyLineage{Keys: []APIKey{key(keyPA, RoleAdmin, "", MakerPerson, userA)}, Grants: []AdminGrant{admin}}, true},
		{"a person's admin key, the person now org_admin", APIKeyLineage{Keys: []APIKey{key(keyPA, RoleAdmin, "", MakerPerson, userA)}, Grants: []AdminGrant{orgAdminA}}, false},
		{"a person's admin key, the person now auditor", APIKeyLineage{Keys: []APIKey{key(keyPA, RoleAdmin, "", MakerPerson, userA)}, Grants: []AdminGrant{auditor}}, false},
		{"a person's org_admin key, the person now org_admin of it", APIKeyLineage{Keys: []APIKey{key(keyPO, RoleOrgAdmin, orgA, MakerPerson, userA)}, Grants: []AdminGrant{orgAdminA}}, true},
		{"a person's org_admin key, the person org_admin of another", APIKeyLineage{Keys: []APIKey{key(keyPO, RoleOrgAdmin, orgB, MakerPerson, userA)}, Grants: []AdminGrant{orgAdminA}}, false},
		{"a person's auditor key, the person org_admin", APIKeyLineage{Keys: []APIKey{key(keyPB, RoleAuditor, "", MakerPerson, userA)}, Grants: []AdminGrant{orgAdminA}}, false},
		{"a person's key, no grant", APIKeyLineage{Keys: []APIKey{key(keyPO, RoleOrgAdmin, orgA, MakerPerson, userA)}}, false},
		{"a key's key, the first maker admin", APIKeyLineage{Keys: []APIKey{
			key(keyKA, RoleOrgAdmin, orgA, MakerAPIKey, keyPA), key(keyPA, RoleAdmin, "", MakerPerson, userA)}, Grants: []AdminGrant{admin}}, true},
		{"a key's key, the first maker now org_admin", APIKeyLineage{Keys: []APIKey{
			key(keyKA, RoleOrgAdmin, orgA, MakerAPIKey, keyPA), key(keyPA, RoleAdmin, "", MakerPerson, userA)}, Grants: []AdminGrant{orgAdminA}}, false},
		{"a key's key, its maker expired", APIKeyLineage{Keys: []APIKey{
			key(keyKA, RoleAdmin, "", MakerAPIKey, keyPA), expired}}, false},
		{"a key's key wider than its maker", APIKeyLineage{Keys: []APIKey{
			key(keyKA, RoleAdmin, "", MakerAPIKey, keyPO), key(keyPO, RoleOrgAdmin, orgA, MakerPerson, userA)}, Grants: []AdminGrant{admin}}, false},
		{"a broken line", APIKeyLineage{Keys: []APIKey{key(keyKA, RoleAuditor, "", MakerAPIKey, keyPA)}, Broken: true}, false},
		{"a maker of no known kind", APIKeyLineage{Keys: []APIKey{key(keyKA, RoleAuditor, "", "robot", userA)}, Grants: []AdminGrant{admin}}, false},
		{"nothing", APIKeyLineage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.InForce(at); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
