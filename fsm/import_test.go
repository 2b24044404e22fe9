package fsm

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

func importID(i int) string { return fmt.Sprintf("00000000-0000-4000-9000-%012d", i) }

// TestImportUsers: one command creates every new person with their
// memberships and answers per person; an address already here, in any
// case or earlier in the batch, is "exists" with that person's id; an
// unknown organization or a taken phone fails that person only; sending
// the batch again changes nothing.
func TestImportUsers(t *testing.T) {
	h := newHarness(t)
	seed(h)
	batch := ImportUsers{At: t0, Users: []ImportedUser{
		{User: User{ID: importID(1), Email: "carol@example.com", EmailVerified: true, PasswordHash: "$2b$04$x"}, OrgIDs: []string{orgA, orgB}, MembershipIDs: []string{importID(101), importID(102)}},
		{User: User{ID: importID(2), Email: "ANN@example.com"}},                                                                    // seeded as Ann@Example.com
		{User: User{ID: importID(3), Email: "dave@example.com"}, OrgIDs: []string{"nope"}, MembershipIDs: []string{importID(103)}}, // unknown org
		{User: User{ID: importID(4), Email: "erin@example.com", Phone: "+15550001"}},                                               // Ann's phone
		{User: User{ID: importID(5), Email: "Carol@Example.com"}},                                                                  // earlier in this batch
		{User: User{ID: importID(6), Email: "frank@example.com"}, OrgIDs: []string{orgA, orgA}, MembershipIDs: []string{importID(106), importID(107)}},
		{User: User{ID: importID(7), Email: "gina@example.com", Phone: "+15550007"}},
	}}
	want := []ImportOutcome{
		{Status: ImportCreated, ID: importID(1)},
		{Status: ImportExists, ID: userA},
		{Status: ImportFailed, Field: "organizations", Code: "not_found"},
		{Status: ImportFailed, Field: "phone", Code: "conflict"},
		{Status: ImportExists, ID: importID(1)},
		{Status: ImportFailed, Field: "organizations", Code: "duplicate"},
		{Status: ImportCreated, ID: importID(7)},
	}
	got := h.mustApply(TypeImportUsers, batch).Value.([]ImportOutcome)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes:\n got %+v\nwant %+v", got, want)
	}
	st := h.f.State()
	carol, err := st.UserByEmail("carol@example.com")
	if err != nil || carol.ID != importID(1) || !carol.EmailVerified || carol.PasswordHash != "$2b$04$x" || !carol.CreatedAt.Equal(t0) {
		t.Fatalf("carol: %+v %v", carol, err)
	}
	ms, _ := st.MembershipsOfUser(importID(1))
	if len(ms) != 2 || ms[0].Status != MembershipActive || ms[1].Status != MembershipActive {
		t.Fatalf("carol's memberships: %+v", ms)
	}
	for _, email := range []string{"dave@example.com", "erin@example.com", "frank@example.com"} {
		if _, err := st.UserByEmail(email); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: created despite its error (%v)", email, err)
		}
	}
	if _, err := st.UserByPhone("+15550007"); err != nil {
		t.Fatalf("gina's phone is not indexed: %v", err)
	}

	// The same batch again: nobody is created twice.
	again := h.mustApply(TypeImportUsers, batch).Value.([]ImportOutcome)
	for i, o := range again {
		if o.Status == ImportCreated {
			t.Fatalf("person %d created again: %+v", i, o)
		}
	}
	if again[0] != (ImportOutcome{Status: ImportExists, ID: importID(1)}) || again[6] != (ImportOutcome{Status: ImportExists, ID: importID(7)}) {
		t.Fatalf("second send: %+v", again)
	}
	for _, bad := range []ImportUsers{{}, {Users: make([]ImportedUser, MaxImportBatch+1)}} {
		if r := h.apply(TypeImportUsers, bad); !errors.Is(r.Err, ErrInvalid) {
			t.Fatalf("%d people: got %v, want ErrInvalid", len(bad.Users), r.Err)
		}
	}
}

// TestImportUsersAuditEvent: the batch's admin event counts its outcomes.
func TestImportUsersAuditEvent(t *testing.T) {
	h := newHarness(t)
	seed(h)
	h.applyStamped(TypeImportUsers, ImportUsers{At: t0, Users: []ImportedUser{
		{User: User{ID: importID(1), Email: "carol@example.com"}},
		{User: User{ID: importID(2), Email: "ann@example.com"}},
		{User: User{ID: importID(3), Email: "dave@example.com"}, OrgIDs: []string{"nope"}, MembershipIDs: []string{importID(9)}},
	}}, admin("POST /users/import"))
	e := h.lastEvent()
	want := EventDetail{"action": "POST /users/import", "created": "1", "exists": "1", "error": "1"}
	if e.Type != EventAdmin || !reflect.DeepEqual(e.Detail, want) {
		t.Fatalf("event: %+v, want detail %v", e, want)
	}
}

// TestRehashPassword: the hash is replaced only while it is still the one
// the sign-in checked; no session ends.
func TestRehashPassword(t *testing.T) {
	h := signedIn(t)
	h.mustApply(TypeUpdateUser, UpdateUser{ID: userA, PasswordHash: ptr("$2b$04$old"), At: t0})
	if r := h.apply(TypeRehashPassword, RehashPassword{UserID: userA, Old: "$2b$04$other", New: "$argon2id$new", At: t0}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("stale old hash: got %v, want ErrConflict", r.Err)
	}
	if r := h.apply(TypeRehashPassword, RehashPassword{UserID: importID(9), Old: "x", New: "y", At: t0}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("unknown person: got %v, want ErrNotFound", r.Err)
	}
	h.mustApply(TypeRehashPassword, RehashPassword{UserID: userA, Old: "$2b$04$old", New: "$argon2id$new", At: t0})
	u, _ := h.f.State().User(userA)
	if u.PasswordHash != "$argon2id$new" {
		t.Fatalf("hash: got %q", u.PasswordHash)
	}
	if s, err := h.f.State().SSOSession("sso1"); err != nil || !s.EndedAt.IsZero() {
		t.Fatalf("the session ended on a rehash: %+v %v", s, err)
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkApplyImportUsers: one ImportUsers command of MaxImportBatch
// people (each with a bcrypt hash and two memberships) applied in its own
// bbolt transaction with its fsync: the state machine's ceiling for the
// import rate. people/s is reported.
func BenchmarkApplyImportUsers(b *testing.B) {
	f, err := Open(filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	index := uint64(0)
	apply := func(typ Type, v any) {
		index++
		f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: MustCommand(typ, v).Encode()})
	}
	apply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "alpha", Name: "Alpha", CreatedAt: t0})
	apply(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "beta", Name: "Beta", CreatedAt: t0})
	const hash = "$2b$10$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS"
	cmds := make([][]byte, b.N)
	n := 0
	for i := range cmds {
		c := ImportUsers{At: t0}
		for range MaxImportBatch {
			n++
			c.Users = append(c.Users, ImportedUser{User: User{ID: importID(n), Email: fmt.Sprintf("p%d@example.com", n), PasswordHash: hash},
				OrgIDs: []string{orgA, orgB}, MembershipIDs: []string{importID(10_000_000 + 2*n), importID(10_000_001 + 2*n)}})
		}
		cmds[i] = MustCommand(TypeImportUsers, c).Encode()
	}
	b.ResetTimer()
	for _, data := range cmds {
		index++
		if r := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(Result); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	b.ReportMetric(float64(b.N*MaxImportBatch)/b.Elapsed().Seconds(), "people/s")
}
