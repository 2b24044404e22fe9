package directory

import (
	"strings"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/fsm"
)

// What a directory's record and a directory's answer become here: the
// sign-in (package signin) and the leader's sync (Syncer) both go through
// these, so that a sign-in and a sync write the same person.

// userNamespace is the UUID namespace of directory people's ids: a
// person's sub is UUIDv5(namespace, directory id "/" id attribute), the
// same on every node and every sign-in, and never derived from the DN or
// the address.
var userNamespace = uuid.MustParse("8f3a1d52-4c1e-4f53-9a57-3d5f0e2b7c10")

// UserID is the user id (sub) of the person with id attribute value uid
// in directory dirID.
func UserID(dirID, uid string) string {
	return uuid.NewSHA1(userNamespace, []byte(dirID+"/"+uid)).String()
}

// ConfigOf is the client configuration of the replicated directory d,
// with its bind password in the clear.
func ConfigOf(d fsm.Directory, password string) Config {
	return Config{URL: d.URL, StartTLS: d.StartTLS, CAPEM: d.CAPEM, Insecure: d.Insecure,
		BindDN: d.BindDN, BindPassword: password, UserBase: d.UserBase, UserFilter: d.UserFilter,
		IDAttribute: d.IDAttribute, EmailAttribute: d.EmailAttribute, PhoneAttribute: d.PhoneAttribute,
		GroupBase: d.GroupBase, GroupFilter: d.GroupFilter}
}

// Record turns what directory d says of a person into the command's
// form: groups mapped to organizations (DNs compared as DNs, each
// organization once), a fresh membership id per organization, the address
// typed when the directory has none, and only a phone number text
// messages can reach.
func Record(d fsm.Directory, p Person, typed string) fsm.DirectoryPerson {
	out := fsm.DirectoryPerson{UID: p.ID, Email: p.Email, Gone: p.Disabled}
	if out.Email == "" {
		out.Email = typed
	}
	// Only a number text messages can reach: E.164 ("+" and 8 to 15
	// digits, spaces and dashes as directories often write them removed).
	if phone := strings.NewReplacer(" ", "", "-", "", "(", "", ")", "").Replace(p.Phone); e164(phone) {
		out.Phone = phone
	}
	seen := map[string]bool{}
	for _, m := range d.Organizations {
		for _, g := range p.Groups {
			if !seen[m.OrgID] && SameDN(g, m.GroupDN) {
				seen[m.OrgID] = true
				out.OrgIDs = append(out.OrgIDs, m.OrgID)
				out.MembershipIDs = append(out.MembershipIDs, uuid.NewString())
			}
		}
	}
	return out
}

// e164 reports whether s is "+" and 8 to 15 digits, the first not 0.
func e164(s string) bool {
	digits, ok := strings.CutPrefix(s, "+")
	return ok && len(digits) >= 8 && len(digits) <= 15 && digits[0] != '0' && strings.TrimLeft(digits, "0123456789") == ""
}
