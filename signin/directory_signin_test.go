package signin

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/directory"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/testkit/ldaptest"
)

const hDirID = "3d000000-0000-4000-8000-000000000001"

// putDirectory records the slapd s as directory hDirID, people found by
// mail, its group of organization A mapped to hOrgA.
func (h *harness) putDirectory(s *ldaptest.Server) {
	h.t.Helper()
	now := h.clock.Now()
	bind, err := (*kek.KEK)(nil).Seal([]byte(ldaptest.AdminPassword), fsm.DirectoryAAD(hDirID))
	if err != nil {
		h.t.Fatal(err)
	}
	h.apply(fsm.TypePutDirectory, fsm.PutDirectory{Create: true, Directory: fsm.Directory{
		ID: hDirID, Name: "Corp", URL: s.LDAPSURL(), CAPEM: s.CAPEM, BindDN: ldaptest.AdminDN, BindPassword: bind,
		UserBase: "ou=people," + ldaptest.Base, UserFilter: "(&(objectClass=inetOrgPerson)(mail=%s))",
		IDAttribute: "entryUUID", EmailAttribute: "mail", SyncInterval: time.Hour, CreatedAt: now, UpdatedAt: now}})
}

// TestDirectorySignIn: an address no local person holds is checked by the
// directory. The right password creates the person at the first sign-in,
// under the id derived from the directory and the entry's id attribute;
// a wrong one is refused like a wrong local password; a directory that
// cannot be reached answers 503 with Retry-After and says why.
func TestDirectorySignIn(t *testing.T) {
	s := ldaptest.Start(t, ldaptest.Person("dee", "dee@corp.example", "dee-directory-pw"))
	h := newHarness(t)
	h.putDirectory(s)
	want := directory.UserID(hDirID, s.EntryUUID(ldaptest.PersonDN("dee")))

	b := h.browser()
	p := b.signIn(b.get(authzPath(authzQuery(hPublic, false))), "dee@corp.example", "wrong")
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "Incorrect email or password.") {
		t.Fatalf("wrong directory password: %d\n%s", p.status, p.body)
	}
	if _, err := h.applier.State().User(want); err == nil {
		t.Fatal("a refused sign-in created the person")
	}

	got := done(t, b.signIn(p, "dee@corp.example", "dee-directory-pw"))
	if got.User != want || got.ACR != authn.ACRPwd {
		t.Fatalf("signed in: %+v, want user %s", got, want)
	}
	u, err := h.applier.State().User(want)
	if err != nil || u.DirectoryID != hDirID || u.Email != "dee@corp.example" || u.PasswordHash != "" {
		t.Fatalf("directory person: %+v %v", u, err)
	}

	// A local person's address is never asked of the directory.
	if got := h.browser().fullSignInWith(authzQuery(hPublic, false), hEmail, hPassword); got.User != hUser {
		t.Fatalf("local person: %+v", got)
	}

	s.Stop()
	b = h.browser()
	p = b.signIn(b.get(authzPath(authzQuery(hPublic, false))), "dee@corp.example", "dee-directory-pw")
	if p.status != http.StatusServiceUnavailable || p.header.Get("Retry-After") != "30" || !strings.Contains(p.body, "cannot be reached right now") {
		t.Fatalf("directory down: %d (Retry-After %q)\n%s", p.status, p.header.Get("Retry-After"), p.body)
	}
}
