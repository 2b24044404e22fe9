package fsm

import (
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"
)

const dirA = "00000000-0000-4000-8000-0000000000d1"

func dirPerson(uid, email string, orgs ...string) DirectoryPerson {
	p := DirectoryPerson{UID: uid, Email: email, OrgIDs: orgs}
	for i := range orgs {
		p.MembershipIDs = append(p.MembershipIDs, importID(500+i+len(uid)*10))
	}
	return p
}

func withDirectory(t *testing.T) *harness {
	h := newHarness(t)
	seed(h)
	h.mustApply(TypePutDirectory, PutDirectory{Create: true, Directory: Directory{ID: dirA, Name: "Corp", URL: "ldaps://dc:636",
		BindPassword: []byte("sealed"), Organizations: []DirectoryOrg{{GroupDN: "cn=a", OrgID: orgA}, {GroupDN: "cn=b", OrgID: orgB}}, CreatedAt: t0}})
	return h
}

func orgsOf(t *testing.T, h *harness, userID string) []string {
	t.Helper()
	ms, err := h.f.State().MembershipsOfUser(userID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		tag := m.OrgID
		if m.DirectoryID != "" {
			tag += "(dir)"
		}
		out = append(out, tag)
	}
	sort.Strings(out)
	return out
}

func TestPutDirectory(t *testing.T) {
	h := withDirectory(t)
	if r := h.apply(TypePutDirectory, PutDirectory{Create: true, Directory: Directory{ID: dirA, URL: "ldaps://x"}}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("create twice: %v", r.Err)
	}
	if r := h.apply(TypePutDirectory, PutDirectory{Directory: Directory{ID: importID(1), URL: "ldaps://x"}}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("replace a missing one: %v", r.Err)
	}
	if r := h.apply(TypePutDirectory, PutDirectory{Directory: Directory{ID: dirA, URL: "ldaps://x", Organizations: []DirectoryOrg{{GroupDN: "cn=x", OrgID: "nope"}}}}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("unknown organization: %v", r.Err)
	}
	h.mustApply(TypePutDirectory, PutDirectory{Directory: Directory{ID: dirA, Name: "Corp 2", URL: "ldaps://dc2:636"}})
	d, _ := h.f.State().Directory(dirA)
	if d.Name != "Corp 2" || string(d.BindPassword) != "sealed" || !d.CreatedAt.Equal(t0) {
		t.Fatalf("replaced: %+v (an empty password keeps the stored one)", d)
	}
	h.mustApply(TypeDeleteDirectory, DeleteDirectory{ID: dirA})
	if ds, _ := h.f.State().Directories(); len(ds) != 0 {
		t.Fatalf("after delete: %+v", ds)
	}
}

// TestDirectorySignIn: the first sign-in creates the person, verified,
// with the memberships of their groups; the next ones follow the
// directory (a new address, a group dropped) and never touch a membership
// an operator made; a local person's address is not taken over.
func TestDirectorySignIn(t *testing.T) {
	h := withDirectory(t)
	carol := importID(7)
	r := h.mustApply(TypeDirectorySignIn, DirectorySignIn{DirectoryID: dirA, UserID: carol, Person: dirPerson("uuid-carol", "carol@corp", orgA, orgB), At: t0})
	u := r.Value.(User)
	if u.ID != carol || !u.EmailVerified || u.DirectoryID != dirA || u.DirectoryUID != "uuid-carol" {
		t.Fatalf("created: %+v", u)
	}
	if got := orgsOf(t, h, carol); !reflect.DeepEqual(got, []string{orgA + "(dir)", orgB + "(dir)"}) {
		t.Fatalf("memberships: %v", got)
	}
	// Again, with another user id proposed: the same person.
	again := h.mustApply(TypeDirectorySignIn, DirectorySignIn{DirectoryID: dirA, UserID: importID(8), Person: dirPerson("uuid-carol", "carol.new@corp", orgA), At: t0.Add(time.Hour)}).Value.(User)
	if again.ID != carol || again.Email != "carol.new@corp" {
		t.Fatalf("second sign-in: %+v", again)
	}
	if _, err := h.f.State().UserByEmail("carol@corp"); !errors.Is(err, ErrNotFound) {
		t.Fatal("the old address still finds the person")
	}
	if got := orgsOf(t, h, carol); !reflect.DeepEqual(got, []string{orgA + "(dir)"}) {
		t.Fatalf("after group b was dropped: %v", got)
	}
	// An operator adds carol to b by hand; the directory leaves that alone.
	h.mustApply(TypeCreateMembership, CreateMembership{Membership: Membership{ID: importID(9), UserID: carol, OrgID: orgB, Status: MembershipActive}})
	h.mustApply(TypeDirectorySignIn, DirectorySignIn{DirectoryID: dirA, UserID: carol, Person: dirPerson("uuid-carol", "carol.new@corp"), At: t0})
	if got := orgsOf(t, h, carol); !reflect.DeepEqual(got, []string{orgB}) {
		t.Fatalf("no groups left: %v, want only the operator's membership", got)
	}
	// A directory person with a local person's address is refused.
	if r := h.apply(TypeDirectorySignIn, DirectorySignIn{DirectoryID: dirA, UserID: importID(10), Person: dirPerson("uuid-x", "ANN@example.com"), At: t0}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("a local person's address: %v", r.Err)
	}
	if r := h.apply(TypeDirectorySignIn, DirectorySignIn{DirectoryID: importID(99), UserID: importID(10), Person: dirPerson("uuid-x", "x@corp"), At: t0}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("unknown directory: %v", r.Err)
	}
}

// TestDirectorySyncBatch: a person gone from the directory loses every
// session, with a logout owed per app session (with sid), and the
// memberships the directory granted; a person dropped from one group
// loses that membership only; the status is recorded.
func TestDirectorySyncBatch(t *testing.T) {
	h := withDirectory(t)
	h.mustApply(TypeUpdateClient, PutClient{Client: Client{ID: "app", Name: "App", Type: ClientPublic, OrganizationID: orgA,
		RedirectURIs: []string{"https://app/cb"}, BackchannelLogoutURI: "https://app/bc", UpdatedAt: t0}})
	carol, dave := importID(7), importID(8)
	h.mustApply(TypeDirectorySignIn, DirectorySignIn{DirectoryID: dirA, UserID: carol, Person: dirPerson("uuid-carol", "carol@corp", orgA, orgB), At: t0})
	h.mustApply(TypeDirectorySignIn, DirectorySignIn{DirectoryID: dirA, UserID: dave, Person: dirPerson("uuid-dave", "dave@corp", orgA, orgB), At: t0})
	h.mustApply(TypeStartSSOSession, StartSSOSession{TokenHash: "tok-c", Session: SSOSession{ID: "sso-c", UserID: carol, AuthTime: t0,
		CreatedAt: t0, LastSeen: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(8 * time.Hour)}})
	h.mustApply(TypeIssueCode, IssueCode{NewSID: "sid-c", IdleExpiresAt: t0.Add(time.Hour), Code: Code{Hash: "code-c", ClientID: "app", UserID: carol, OrgID: orgA,
		SSOSessionID: "sso-c", IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}})

	status := &DirectorySync{At: t0.Add(time.Minute), OK: true, People: 2, Changed: 2, Ended: 1, Node: "n1"}
	r := h.mustApply(TypeDirectorySyncBatch, DirectorySyncBatch{DirectoryID: dirA, At: t0.Add(time.Minute), Status: status, People: []DirectoryPerson{
		{UID: "uuid-carol", Email: "carol@corp", Gone: true},
		dirPerson("uuid-dave", "dave@corp", orgB),
		dirPerson("uuid-never-signed-in", "zed@corp", orgA),
	}})
	ended := r.Value.(EndedApps)
	if len(ended.Apps) != 1 || ended.Apps[0].ID != "sid-c" || ended.Apps[0].EndReason != EndDirectory {
		t.Fatalf("ended: %+v", ended.Apps)
	}
	if len(ended.Deliveries) != 1 || ended.Deliveries[0].SID != "sid-c" || ended.Deliveries[0].Cause != CauseDirectory {
		t.Fatalf("deliveries: %+v", ended.Deliveries)
	}
	if s, _ := h.f.State().SSOSession("sso-c"); s.EndedAt.IsZero() {
		t.Fatal("carol's SSO session is still live")
	}
	if got := orgsOf(t, h, carol); len(got) != 0 {
		t.Fatalf("carol's memberships: %v", got)
	}
	if got := orgsOf(t, h, dave); !reflect.DeepEqual(got, []string{orgB + "(dir)"}) {
		t.Fatalf("dave's memberships: %v, want only b", got)
	}
	if _, err := h.f.State().UserByEmail("zed@corp"); !errors.Is(err, ErrNotFound) {
		t.Fatal("a sync created a person who never signed in")
	}
	d, _ := h.f.State().Directory(dirA)
	if d.LastSync == nil || *d.LastSync != *status {
		t.Fatalf("status: %+v", d.LastSync)
	}
	known, _ := h.f.State().DirectoryUsers(dirA)
	if len(known) != 2 || known["uuid-carol"].ID != carol || known["uuid-dave"].ID != dave {
		t.Fatalf("DirectoryUsers: %+v", known)
	}
	h.mustApply(TypeDeleteUser, DeleteUser{ID: dave, At: t0})
	if known, _ := h.f.State().DirectoryUsers(dirA); len(known) != 1 {
		t.Fatalf("after erasing dave: %+v", known)
	}
}
