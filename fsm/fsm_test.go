package fsm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// harness applies commands to an FSM at increasing indexes.
type harness struct {
	t     *testing.T
	f     *FSM
	index uint64
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	f, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &harness{t: t, f: f}
}

func (h *harness) apply(typ Type, v any) Result {
	h.t.Helper()
	h.index++
	before := accessDigest(h.t, h.f)
	res := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: MustCommand(typ, v).Encode()}).(Result)
	checkAccessEpoch(h.t, typ.String(), before, accessDigest(h.t, h.f))
	return res
}

func (h *harness) mustApply(typ Type, v any) Result {
	h.t.Helper()
	r := h.apply(typ, v)
	if r.Err != nil {
		h.t.Fatalf("%s: %v", typ, r.Err)
	}
	return r
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

const (
	orgA  = "00000000-0000-4000-8000-00000000000a"
	orgB  = "00000000-0000-4000-8000-00000000000b"
	userA = "00000000-0000-4000-8000-0000000000a1"
	userB = "00000000-0000-4000-8000-0000000000b1"
	memA  = "00000000-0000-4000-8000-0000000000f1"
)

// seed builds a small world used by several tests.
func seed(h *harness) {
	h.mustApply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "alpha", Name: "Alpha", CreatedAt: t0})
	h.mustApply(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "beta", Name: "Beta", CreatedAt: t0})
	h.mustApply(TypeCreateUser, CreateUser{User: User{ID: userA, Email: "Ann@Example.com", Phone: "+15550001", CreatedAt: t0}})
	h.mustApply(TypeCreateUser, CreateUser{User: User{ID: userB, Email: "bob@example.com", CreatedAt: t0}})
	h.mustApply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: memA, UserID: userA, OrgID: orgA, Status: MembershipActive}})
	h.mustApply(TypeCreateClient, PutClient{Create: true, Client: Client{ID: "app", Name: "App", Type: ClientPublic, OrganizationID: orgA, RedirectURIs: []string{"https://app/cb"}, UpdatedAt: t0}})
	h.mustApply(TypeAddKey, AddKey{Key: Key{Kid: "k1", Private: []byte{1, 2, 3}, CreatedAt: t0, ActivatesAt: t0}})
	h.mustApply(TypeSetAdminToken, SetAdminToken{Hash: "h1"})
}

// conformance checks the outcome of commands on a seeded store. It runs on a
// fresh FSM and on one rebuilt from a snapshot, which must behave the same.
func conformance(t *testing.T, h *harness) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		typ  Type
		cmd  any
		want error
	}{
		{"duplicate slug", TypeCreateOrg, CreateOrg{ID: "00000000-0000-4000-8000-0000000000cc", Slug: "alpha", Name: "x"}, ErrConflict},
		{"duplicate org id", TypeCreateOrg, CreateOrg{ID: orgA, Slug: "other", Name: "x"}, ErrConflict},
		{"delete missing org", TypeDeleteOrg, DeleteOrg{ID: "nope"}, ErrNotFound},
		{"duplicate email any case", TypeCreateUser, CreateUser{User: User{ID: "u3", Email: "ann@EXAMPLE.com"}}, ErrConflict},
		{"duplicate phone", TypeCreateUser, CreateUser{User: User{ID: "u3", Email: "c@x", Phone: "+15550001"}}, ErrConflict},
		{"update email to taken", TypeUpdateUser, UpdateUser{ID: userB, Email: str("ann@example.com")}, ErrConflict},
		{"update missing user", TypeUpdateUser, UpdateUser{ID: "nope", Email: str("z@x")}, ErrNotFound},
		{"membership twice", TypeCreateMembership, CreateMembership{Membership: Membership{ID: "m2", UserID: userA, OrgID: orgA, Status: MembershipActive}}, ErrConflict},
		{"membership unknown user", TypeCreateMembership, CreateMembership{Membership: Membership{ID: "m2", UserID: "nope", OrgID: orgA}}, ErrNotFound},
		{"membership unknown org", TypeCreateMembership, CreateMembership{Membership: Membership{ID: "m2", UserID: userB, OrgID: "nope"}}, ErrNotFound},
		{"client twice", TypeCreateClient, PutClient{Create: true, Client: Client{ID: "app", OrganizationID: orgA}}, ErrConflict},
		{"client unknown org", TypeCreateClient, PutClient{Create: true, Client: Client{ID: "app2", OrganizationID: "nope"}}, ErrNotFound},
		{"update missing client", TypeUpdateClient, PutClient{Client: Client{ID: "nope", OrganizationID: orgA}}, ErrNotFound},
		{"stale client update", TypeUpdateClient, PutClient{Client: Client{ID: "app", OrganizationID: orgA}, ExpectUpdatedAt: t0.Add(time.Second)}, ErrConflict},
		{"key twice", TypeAddKey, AddKey{Key: Key{Kid: "k1"}}, ErrConflict},
		{"remove missing key", TypeRemoveKey, RemoveKey{Kid: "nope"}, ErrNotFound},
		{"admin token kept", TypeSetAdminToken, SetAdminToken{Hash: "h2"}, ErrConflict},
		{"email change frees old", TypeUpdateUser, UpdateUser{ID: userB, Email: str("robert@example.com")}, nil},
		{"old email reusable", TypeCreateUser, CreateUser{User: User{ID: "u4", Email: "bob@example.com"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.f.Applied()
			r := h.apply(c.typ, c.cmd)
			if !errors.Is(r.Err, c.want) {
				t.Fatalf("got %v, want %v", r.Err, c.want)
			}
			if got := h.f.Applied(); got != before+1 {
				t.Fatalf("applied index: got %d, want %d (an error must still advance it)", got, before+1)
			}
		})
	}
	st := h.f.State()
	if u, err := st.UserByEmail("ANN@example.com"); err != nil || u.ID != userA {
		t.Fatalf("UserByEmail: got %v %v", u.ID, err)
	}
	if u, err := st.UserByPhone("+15550001"); err != nil || u.ID != userA {
		t.Fatalf("UserByPhone: got %v %v", u.ID, err)
	}
	if h, _ := st.AdminTokenHash(); h != "h1" {
		t.Fatalf("admin token: got %q, want h1", h)
	}
}

func TestConformanceFresh(t *testing.T) {
	h := newHarness(t)
	seed(h)
	conformance(t, h)
}

func TestConformanceAfterSnapshotRestore(t *testing.T) {
	src := newHarness(t)
	seed(src)
	dst := newHarness(t)
	restoreFrom(t, src.f, dst.f)
	dst.index = src.index
	if got, want := dst.f.Applied(), src.f.Applied(); got != want {
		t.Fatalf("applied after restore: got %d, want %d", got, want)
	}
	if got, want := dump(t, dst.f), dump(t, src.f); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\ngot  %v\nwant %v", got, want)
	}
	conformance(t, dst)
}

type sink struct {
	bytes.Buffer
	cancelled bool
}

func (s *sink) ID() string    { return "test" }
func (s *sink) Close() error  { return nil }
func (s *sink) Cancel() error { s.cancelled = true; return nil }

func restoreFrom(t *testing.T, src, dst *FSM) {
	t.Helper()
	restoreBytes(t, dst, snapshotBytes(t, src))
}

// dump reads every record through the State view.
func dump(t *testing.T, f *FSM) map[string]any {
	t.Helper()
	st := f.State()
	all := Page{Page: 1, PageSize: 1000}
	orgs, _, err1 := st.Orgs(all)
	users, _, err2 := st.Users(all)
	mems, _, err3 := st.Memberships(all)
	clients, _, err4 := st.Clients(all)
	ks, ver, err5 := st.Keys()
	tok, err6 := st.AdminTokenHash()
	grants, _, err7 := st.AdminGrants(all)
	apiKeys, _, err8 := st.APIKeys(all)
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7, err8); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"orgs": orgs, "users": users, "memberships": mems, "clients": clients, "keys": ks, "keys_version": ver, "token": tok,
		"grants": grants, "api_keys": apiKeys}
}

func TestRestartKeepsStateAndSkipsReplayedEntries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, f: f}
	seed(h)
	want := dump(t, f)
	f.Close()

	f2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if got := f2.Applied(); got != h.index {
		t.Fatalf("applied after reopen: got %d, want %d", got, h.index)
	}
	// raft replays the log tail after a restart; entries already applied
	// must not run again (the org would conflict, the slug index change).
	r := f2.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: MustCommand(TypeDeleteOrg, DeleteOrg{ID: orgA, At: t0}).Encode()}).(Result)
	if r.Err != nil {
		t.Fatalf("replayed entry: got %v, want skipped", r.Err)
	}
	if got := dump(t, f2); !reflect.DeepEqual(got, want) {
		t.Fatalf("state after replay differs")
	}
}

func TestDeleteUserRemovesMembershipsAndIndexes(t *testing.T) {
	h := newHarness(t)
	seed(h)
	h.mustApply(TypeDeleteUser, DeleteUser{ID: userA})
	st := h.f.State()
	if _, err := st.Membership(memA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("membership after erasure: got %v, want ErrNotFound", err)
	}
	if _, err := st.MembershipOf(userA, orgA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pair index after erasure: got %v", err)
	}
	if _, err := st.UserByEmail("ann@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("email index after erasure: got %v", err)
	}
	h.mustApply(TypeCreateUser, CreateUser{User: User{ID: "u9", Email: "ann@example.com", Phone: "+15550001"}})
}

func TestDeletedOrgKeepsSlugAndRefusesMembers(t *testing.T) {
	h := newHarness(t)
	seed(h)
	h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgB, At: t0})
	o, err := h.f.State().Org(orgB)
	if err != nil || o.Status != OrgDeleted || !o.DeletedAt.Equal(t0) {
		t.Fatalf("got %+v %v, want deleted at %v", o, err, t0)
	}
	if r := h.apply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: "m9", UserID: userB, OrgID: orgB}}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("member of deleted org: got %v, want ErrNotFound", r.Err)
	}
	if r := h.apply(TypeCreateOrg, CreateOrg{ID: "o9", Slug: "beta"}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("reused slug: got %v, want ErrConflict", r.Err)
	}
}

func TestEmergencyKeySupersedesPending(t *testing.T) {
	h := newHarness(t)
	h.mustApply(TypeAddKey, AddKey{Key: Key{Kid: "a", ActivatesAt: t0}})
	h.mustApply(TypeAddKey, AddKey{Key: Key{Kid: "next", ActivatesAt: t0.Add(10 * time.Minute)}})
	_, v1, _ := h.f.State().Keys()
	h.mustApply(TypeAddKey, AddKey{Key: Key{Kid: "urgent", ActivatesAt: t0.Add(time.Minute)}, SupersedePending: true})
	ks, v2, _ := h.f.State().Keys()
	var kids []string
	for _, k := range ks {
		kids = append(kids, k.Kid)
	}
	if want := []string{"a", "urgent"}; !reflect.DeepEqual(kids, want) {
		t.Fatalf("got %v, want %v", kids, want)
	}
	if v2 <= v1 {
		t.Fatalf("keys version did not advance: %d then %d", v1, v2)
	}
}

func TestPagination(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 5; i++ {
		h.mustApply(TypeCreateOrg, CreateOrg{ID: string(rune('a' + i)), Slug: string(rune('a' + i)), Name: "n"})
	}
	cases := []struct {
		page, size int
		want       []string
	}{
		{1, 2, []string{"a", "b"}},
		{2, 2, []string{"c", "d"}},
		{3, 2, []string{"e"}},
		{4, 2, nil},
		{1, 100, []string{"a", "b", "c", "d", "e"}},
	}
	for _, c := range cases {
		orgs, total, err := h.f.State().Orgs(Page{Page: c.page, PageSize: c.size})
		if err != nil || total != 5 {
			t.Fatalf("total: got %d %v, want 5", total, err)
		}
		var got []string
		for _, o := range orgs {
			got = append(got, o.ID)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("page %d size %d: got %v, want %v", c.page, c.size, got, c.want)
		}
	}
}

func TestCorruptEntriesPanicUnlessIgnorable(t *testing.T) {
	cases := []struct {
		name      string
		data      []byte
		wantPanic bool
	}{
		{"too short", []byte{1}, true},
		{"unknown type", []byte{200, 0, '{', '}'}, true},
		{"unknown ignorable type", []byte{200, FlagIgnorable, '{', '}'}, false},
		{"bad payload", append([]byte{byte(TypeCreateOrg), 0}, "not json"...), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			defer func() {
				if got := recover() != nil; got != c.wantPanic {
					t.Fatalf("panic: got %v, want %v", got, c.wantPanic)
				}
			}()
			h.f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: c.data})
		})
	}
}

func TestRestoreRejectsGarbageAndKeepsState(t *testing.T) {
	h := newHarness(t)
	seed(h)
	want := dump(t, h.f)
	if err := h.f.Restore(io.NopCloser(bytes.NewReader([]byte("this is not a bbolt file")))); err == nil {
		t.Fatal("restore of garbage: got nil error")
	}
	if got := dump(t, h.f); !reflect.DeepEqual(got, want) {
		t.Fatal("state changed after a failed restore")
	}
	if _, err := os.Stat(h.f.path + ".restore"); !os.IsNotExist(err) {
		t.Fatalf("temporary restore file left behind: %v", err)
	}
}

func TestStateFileMode(t *testing.T) {
	h := newHarness(t)
	fi, err := os.Stat(h.f.path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("mode: got %o, want 600", got)
	}
}

func TestWaitApplied(t *testing.T) {
	h := newHarness(t)
	done := make(chan error, 1)
	go func() { done <- h.f.WaitApplied(t.Context(), 2) }()
	h.mustApply(TypeNoop, struct{}{})
	select {
	case <-done:
		t.Fatal("WaitApplied returned before index 2")
	case <-time.After(20 * time.Millisecond):
	}
	h.mustApply(TypeNoop, struct{}{})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("WaitApplied did not return after index 2")
	}
}

func BenchmarkApplyCreateUser(b *testing.B) {
	f, err := Open(filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := time.Duration(i).String()
		f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: MustCommand(TypeCreateUser, CreateUser{User: User{ID: id, Email: id + "@x"}}).Encode()})
	}
}

func TestResultAt(t *testing.T) {
	h := newHarness(t)
	seed(h)
	r := h.apply(TypeCreateOrg, CreateOrg{ID: "dup", Slug: "alpha"})
	got, ok := h.f.ResultAt(h.index)
	if !ok || !errors.Is(got.Err, ErrConflict) || !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("ResultAt(%d): got %+v %v, want the conflict", h.index, got, ok)
	}
	if _, ok := h.f.ResultAt(h.index + 1); ok {
		t.Fatal("ResultAt of a future index: got ok")
	}
	logs := make([]*raft.Log, resultRing)
	for i := range logs {
		h.index++
		logs[i] = &raft.Log{Index: h.index, Type: raft.LogCommand, Data: MustCommand(TypeNoop, struct{}{}).Encode()}
	}
	h.f.ApplyBatch(logs) // one transaction: the test needs the ring, not 8192 fsyncs
	if _, ok := h.f.ResultAt(h.index - resultRing); ok {
		t.Fatal("ResultAt of an index pushed out of the ring: got ok")
	}
}

// TestInvalidKeysAreRefusedNotPanics: a command that decodes but names an
// empty, slash-carrying or oversized key is refused with ErrInvalid. A
// panic would crash every replica on the same log entry.
func TestInvalidKeysAreRefusedNotPanics(t *testing.T) {
	cases := []struct {
		name string
		typ  Type
		cmd  any
	}{
		{"empty org", TypeCreateOrg, CreateOrg{}},
		{"empty user", TypeCreateUser, CreateUser{}},
		{"user without email", TypeCreateUser, CreateUser{User: User{ID: "u9"}}},
		{"slash in user id", TypeCreateUser, CreateUser{User: User{ID: userA + "/x", Email: "x@y"}}},
		{"slash in membership id", TypeCreateMembership, CreateMembership{Membership: Membership{ID: "m/1", UserID: userA, OrgID: orgA}}},
		{"oversized key", TypeAddKey, AddKey{Key: Key{Kid: string(make([]byte, 40000))}}},
		{"empty client", TypeCreateClient, PutClient{Create: true}},
		{"empty sso", TypeStartSSOSession, StartSSOSession{}},
		{"empty code", TypeIssueCode, IssueCode{}},
		{"empty revoke", TypeRevokeToken, RevokeToken{}},
		{"empty secret name", TypeSetSecret, SetSecret{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			before := dump(t, h.f)
			if r := h.apply(c.typ, c.cmd); !errors.Is(r.Err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", r.Err)
			}
			if !reflect.DeepEqual(dump(t, h.f), before) {
				t.Fatal("a refused command changed the state")
			}
		})
	}
}
