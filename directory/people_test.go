package directory

import (
	"reflect"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

// TestRecord: groups map to organizations (DNs compared as DNs,
// each organization once), the typed address stands in for a missing
// one, and only a phone text messages can reach is kept.
func TestRecord(t *testing.T) {
	d := fsm.Directory{Organizations: []fsm.DirectoryOrg{
		{GroupDN: "cn=staff,ou=groups,dc=example,dc=com", OrgID: "org-a"},
		{GroupDN: "CN=Admins,OU=Groups,DC=example,DC=com", OrgID: "org-b"},
		{GroupDN: "cn=admins2,ou=groups,dc=example,dc=com", OrgID: "org-b"},
	}}
	for _, tc := range []struct {
		name      string
		p         Person
		wantOrgs  []string
		wantEmail string
		wantPhone string
	}{
		{"two groups", Person{ID: "u1", Email: "a@x", Phone: "+1 555-010-0100",
			Groups: []string{"CN=Staff, OU=Groups, DC=example, DC=com", "cn=admins,ou=groups,dc=example,dc=com", "cn=admins2,ou=groups,dc=example,dc=com", "cn=other,dc=example,dc=com"}},
			[]string{"org-a", "org-b"}, "a@x", "+15550100100"},
		{"no address, a bad phone", Person{ID: "u2", Phone: "ext. 4411"}, nil, "typed@x", ""},
		{"a local number", Person{ID: "u3", Email: "c@x", Phone: "0301234567"}, nil, "c@x", ""},
	} {
		got := Record(d, tc.p, "typed@x")
		if !reflect.DeepEqual(got.OrgIDs, tc.wantOrgs) || len(got.MembershipIDs) != len(tc.wantOrgs) || got.Email != tc.wantEmail || got.Phone != tc.wantPhone || got.UID != tc.p.ID {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
	if a, b := UserID("d1", "u1"), UserID("d1", "u1"); a != b || a == UserID("d2", "u1") {
		t.Error("UserID is not a function of the directory and the id")
	}
}
