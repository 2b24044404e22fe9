package fsm

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

const (
	grantA = "00000000-0000-4000-8000-0000000000c1"
	grantB = "00000000-0000-4000-8000-0000000000c2"
	grantC = "00000000-0000-4000-8000-0000000000c3"
	keyA   = "00000000-0000-4000-8000-0000000000d1"
	keyB   = "00000000-0000-4000-8000-0000000000d2"
)

// seedCredentials adds, to seed's world, userA as admin and org_admin of
// orgA, userB as auditor, an admin key and an org_admin key of orgB.
func seedCredentials(h *harness) {
	h.mustApply(TypeCreateAdminGrant, CreateAdminGrant{Grant: AdminGrant{ID: grantA, UserID: userA, Role: RoleAdmin, CreatedAt: t0}})
	h.mustApply(TypeCreateAdminGrant, CreateAdminGrant{Grant: AdminGrant{ID: grantB, UserID: userA, Role: RoleOrgAdmin, OrgID: orgA, CreatedAt: t0.Add(time.Second)}})
	h.mustApply(TypeCreateAdminGrant, CreateAdminGrant{Grant: AdminGrant{ID: grantC, UserID: userB, Role: RoleAuditor, CreatedAt: t0}})
	h.mustApply(TypeCreateAPIKey, CreateAPIKey{Key: APIKey{ID: keyA, Name: "ci", Role: RoleAdmin, Hash: "kh1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}})
	h.mustApply(TypeCreateAPIKey, CreateAPIKey{Key: APIKey{ID: keyB, Name: "beta sync", Role: RoleOrgAdmin, OrgID: orgB, Hash: "kh2", CreatedAt: t0, ExpiresAt: t0.Add(MaxAPIKeyLifetime)}})
}

// credentialsConformance checks the outcomes of the grant and key
// commands on a store seeded by seed and seedCredentials.
func credentialsConformance(t *testing.T, h *harness) {
	grant := func(id, user, role, org string) CreateAdminGrant {
		return CreateAdminGrant{Grant: AdminGrant{ID: id, UserID: user, Role: role, OrgID: org, CreatedAt: t0}}
	}
	key := func(id, role, org string, life time.Duration) CreateAPIKey {
		return CreateAPIKey{Key: APIKey{ID: id, Name: "k", Role: role, OrgID: org, Hash: "h", CreatedAt: t0, ExpiresAt: t0.Add(life)}}
	}
	const fresh = "00000000-0000-4000-8000-0000000000e9"
	cases := []struct {
		name  string
		typ   Type
		cmd   any
		want  error
		field string // of a ConflictError or NotFoundError
	}{
		{"grant id taken", TypeCreateAdminGrant, grant(grantA, userB, RoleAdmin, ""), ErrConflict, "id"},
		{"grant to nobody", TypeCreateAdminGrant, grant(fresh, "nobody", RoleAdmin, ""), ErrNotFound, "user_id"},
		{"grant in an unknown org", TypeCreateAdminGrant, grant(fresh, userB, RoleOrgAdmin, "nope"), ErrNotFound, "organization_id"},
		{"the same role twice", TypeCreateAdminGrant, grant(fresh, userA, RoleAdmin, ""), ErrConflict, "role"},
		{"org_admin of the same org twice", TypeCreateAdminGrant, grant(fresh, userA, RoleOrgAdmin, orgA), ErrConflict, "role"},
		{"org_admin of a second org", TypeCreateAdminGrant, grant(fresh, userA, RoleOrgAdmin, orgB), ErrConflict, "organization_id"},
		{"org_admin without an org", TypeCreateAdminGrant, grant(fresh, userB, RoleOrgAdmin, ""), ErrInvalid, ""},
		{"admin with an org", TypeCreateAdminGrant, grant(fresh, userB, RoleAdmin, orgA), ErrInvalid, ""},
		{"unknown role", TypeCreateAdminGrant, grant(fresh, userB, "root", ""), ErrInvalid, ""},
		{"delete a missing grant", TypeDeleteAdminGrant, DeleteAdminGrant{ID: fresh}, ErrNotFound, ""},
		{"key id taken", TypeCreateAPIKey, key(keyA, RoleAuditor, "", time.Hour), ErrConflict, "id"},
		{"key in an unknown org", TypeCreateAPIKey, key(fresh, RoleOrgAdmin, "nope", time.Hour), ErrNotFound, "organization_id"},
		{"key for more than a year", TypeCreateAPIKey, key(fresh, RoleAdmin, "", MaxAPIKeyLifetime+time.Second), ErrInvalid, ""},
		{"key expired at birth", TypeCreateAPIKey, key(fresh, RoleAdmin, "", 0), ErrInvalid, ""},
		{"key without a hash", TypeCreateAPIKey, CreateAPIKey{Key: APIKey{ID: fresh, Name: "k", Role: RoleAdmin, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}}, ErrInvalid, ""},
		{"org_admin key without an org", TypeCreateAPIKey, key(fresh, RoleOrgAdmin, "", time.Hour), ErrInvalid, ""},
		{"delete a missing key", TypeDeleteAPIKey, DeleteAPIKey{ID: fresh}, ErrNotFound, ""},
		{"replace the admin token without a hash", TypeSetAdminToken, SetAdminToken{Replace: true}, ErrInvalid, ""},
		{"second org_admin after the first is gone", TypeDeleteAdminGrant, DeleteAdminGrant{ID: grantB}, nil, ""},
		{"then org_admin of another org", TypeCreateAdminGrant, grant(fresh, userA, RoleOrgAdmin, orgB), nil, ""},
		{"an auditor key", TypeCreateAPIKey, key(fresh, RoleAuditor, "", time.Minute), nil, ""},
		{"delete a key", TypeDeleteAPIKey, DeleteAPIKey{ID: keyA}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.f.Applied()
			r := h.apply(c.typ, c.cmd)
			if !errors.Is(r.Err, c.want) {
				t.Fatalf("got %v, want %v", r.Err, c.want)
			}
			var nf *NotFoundError
			var ce *ConflictError
			switch {
			case errors.As(r.Err, &nf) && nf.Field != c.field:
				t.Errorf("not found field: got %q, want %q", nf.Field, c.field)
			case errors.As(r.Err, &ce) && ce.Field != c.field:
				t.Errorf("conflict field: got %q, want %q", ce.Field, c.field)
			}
			if got := h.f.Applied(); got != before+1 {
				t.Fatalf("applied index: got %d, want %d", got, before+1)
			}
		})
	}
	st := h.f.State()
	gs, err := st.AdminGrantsOfUser(userA)
	if err != nil || len(gs) != 2 || gs[0].ID != grantA || gs[1].ID != fresh || gs[1].OrgID != orgB {
		t.Errorf("grants of userA: got %+v %v, want %s then %s (org_admin of orgB)", gs, err, grantA, fresh)
	}
	if _, err := st.AdminGrant(grantB); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted grant: got %v, want ErrNotFound", err)
	}
	if _, err := st.APIKey(keyA); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted key: got %v, want ErrNotFound", err)
	}
	if k, err := st.APIKey(keyB); err != nil || k.Hash != "kh2" || k.OrgID != orgB {
		t.Errorf("key B: got %+v %v", k, err)
	}
}

func TestCredentialsConformanceFresh(t *testing.T) {
	h := newHarness(t)
	seed(h)
	seedCredentials(h)
	credentialsConformance(t, h)
}

// TestCredentialsConformanceAfterSnapshotRestore: grants and keys travel
// in a snapshot, indexes included, and behave the same after a restore.
func TestCredentialsConformanceAfterSnapshotRestore(t *testing.T) {
	src := newHarness(t)
	seed(src)
	seedCredentials(src)
	dst := newHarness(t)
	restoreFrom(t, src.f, dst.f)
	dst.index = src.index
	if got, want := dump(t, dst.f), dump(t, src.f); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\ngot  %v\nwant %v", got, want)
	}
	if gs := dump(t, dst.f)["grants"].([]AdminGrant); len(gs) != 3 {
		t.Fatalf("restored grants: got %d, want 3", len(gs))
	}
	credentialsConformance(t, dst)
}

func TestDeleteUserRemovesTheirGrants(t *testing.T) {
	h := newHarness(t)
	seed(h)
	seedCredentials(h)
	h.mustApply(TypeDeleteUser, DeleteUser{ID: userA, At: t0})
	st := h.f.State()
	for _, id := range []string{grantA, grantB} {
		if _, err := st.AdminGrant(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("grant %s of the erased person: got %v, want ErrNotFound", id, err)
		}
	}
	if gs, err := st.AdminGrantsOfUser(userA); err != nil || len(gs) != 0 {
		t.Errorf("grants by user index: got %+v %v, want none", gs, err)
	}
	if _, err := st.AdminGrant(grantC); err != nil {
		t.Errorf("another person's grant: got %v, want kept", err)
	}
}

func TestDeleteOrgRemovesScopedCredentials(t *testing.T) {
	tests := []struct {
		org        string
		goneGrants []string
		goneKeys   []string
	}{
		{orgA, []string{grantB}, nil},
		{orgB, nil, []string{keyB}},
	}
	for _, tt := range tests {
		t.Run(tt.org, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			seedCredentials(h)
			h.mustApply(TypeDeleteOrg, DeleteOrg{ID: tt.org, At: t0})
			st := h.f.State()
			grants, total, _ := st.AdminGrants(Page{Page: 1, PageSize: 10})
			keys, _, _ := st.APIKeys(Page{Page: 1, PageSize: 10})
			if total != 3-len(tt.goneGrants) || len(keys) != 2-len(tt.goneKeys) {
				t.Errorf("left: %d grants %+v and keys %+v", total, grants, keys)
			}
			for _, id := range tt.goneGrants {
				if _, err := st.AdminGrant(id); !errors.Is(err, ErrNotFound) {
					t.Errorf("grant %s: got %v, want ErrNotFound", id, err)
				}
			}
			for _, id := range tt.goneKeys {
				if _, err := st.APIKey(id); !errors.Is(err, ErrNotFound) {
					t.Errorf("key %s: got %v, want ErrNotFound", id, err)
				}
			}
			if gs, _ := st.AdminGrantsOfUser(userA); len(gs) != 2-len(tt.goneGrants) {
				t.Errorf("userA's grants through the index: got %+v", gs)
			}
			if r := h.apply(TypeCreateAPIKey, CreateAPIKey{Key: APIKey{ID: "00000000-0000-4000-8000-0000000000e8", Name: "k", Role: RoleOrgAdmin, OrgID: tt.org,
				Hash: "h", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}}); !errors.Is(r.Err, ErrNotFound) {
				t.Errorf("a key for the deleted org: got %v, want ErrNotFound", r.Err)
			}
		})
	}
}

func TestReapSweepsExpiredAPIKeys(t *testing.T) {
	h := newHarness(t)
	seed(h)
	seedCredentials(h)
	r := h.mustApply(TypeReap, Reap{Before: t0.Add(time.Hour)}) // keyA expires at t0+1h: dead at Before
	if st := r.Value.(ReapStats); st.APIKeys != 1 {
		t.Errorf("reaped keys: got %d, want 1", st.APIKeys)
	}
	if _, err := h.f.State().APIKey(keyA); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired key: got %v, want reaped", err)
	}
	if _, err := h.f.State().APIKey(keyB); err != nil {
		t.Errorf("live key: got %v, want kept", err)
	}
}

func TestSetAdminTokenReplace(t *testing.T) {
	tests := []struct {
		name string
		cmd  SetAdminToken
		want error
		hash string
	}{
		{"seed when none", SetAdminToken{Hash: "h1"}, nil, "h1"},
		{"a seed does not replace", SetAdminToken{Hash: "h2"}, ErrConflict, "h1"},
		{"replace", SetAdminToken{Hash: "h3", Replace: true}, nil, "h3"},
		{"replace with nothing", SetAdminToken{Replace: true}, ErrInvalid, "h3"},
	}
	h := newHarness(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := h.apply(TypeSetAdminToken, tt.cmd); !errors.Is(r.Err, tt.want) {
				t.Fatalf("got %v, want %v", r.Err, tt.want)
			}
			if got, _ := h.f.State().AdminTokenHash(); got != tt.hash {
				t.Errorf("hash: got %q, want %q", got, tt.hash)
			}
		})
	}
}
