package fsm

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// Ids of the fuzz seeds' small world.
const (
	fzOrg   = "f0000000-0000-4000-8000-00000000000a"
	fzUser  = "f0000000-0000-4000-8000-0000000000a1"
	fzMem   = "f0000000-0000-4000-8000-0000000000f1"
	fzSSO   = "f0000000-0000-4000-8000-0000000000e1"
	fzGrant = "f0000000-0000-4000-8000-0000000000c1"
	fzKey   = "f0000000-0000-4000-8000-0000000000d1"
	fzInv   = "f0000000-0000-4000-8000-0000000000b1"
	fzNew   = "f0000000-0000-4000-8000-0000000000a2"
	fzReg   = "f0000000-0000-4000-8000-0000000000a3"
	fzMem2  = "f0000000-0000-4000-8000-0000000000f2"
	fzMem3  = "f0000000-0000-4000-8000-0000000000f3"
)

// fuzzSeeds are wire-form commands that build, use and tear down a small
// world in order, then a few malformed ones.
func fuzzSeeds() [][]byte {
	t := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	email := "ann2@example.com"
	hash := func(n int) string { return fmt.Sprintf("%064x", 0xf0+n) }
	msg := func(to, kind string) OutgoingEmail {
		return OutgoingEmail{To: to, Kind: kind, Locale: "en", UserID: fzUser, Body: []byte("sealed")}
	}
	cmds := []Command{
		MustCommand(TypeCreateOrg, CreateOrg{ID: fzOrg, Slug: "alpha", Name: "Alpha", CreatedAt: t}),
		MustCommand(TypeCreateUser, CreateUser{User: User{ID: fzUser, Email: "Ann@example.com", Phone: "+15550001", CreatedAt: t}}),
		MustCommand(TypeCreateMembership, CreateMembership{Membership: Membership{ID: fzMem, UserID: fzUser, OrgID: fzOrg, Status: MembershipActive}}),
		MustCommand(TypeCreateClient, PutClient{Create: true, Client: Client{ID: "app", Type: ClientPublic, OrganizationID: fzOrg,
			RedirectURIs: []string{"https://app/cb"}, BackchannelLogoutURI: "https://app/logout", UpdatedAt: t}}),
		MustCommand(TypeAddKey, AddKey{Key: Key{Kid: "k1", Private: []byte{1, 2, 3}, CreatedAt: t, ActivatesAt: t}}),
		MustCommand(TypeSetAdminToken, SetAdminToken{Hash: "h1"}),
		MustCommand(TypeSetSecret, SetSecret{Name: SecretBrowserKey, Value: bytes.Repeat([]byte{7}, 32)}),
		MustCommand(TypeStartSSOSession, StartSSOSession{TokenHash: "th1", Session: SSOSession{ID: fzSSO, UserID: fzUser,
			AuthTime: t, AMR: []string{"pwd"}, ACR: "pwd", CreatedAt: t, LastSeen: t, IdleExpiresAt: t.Add(time.Hour), ExpiresAt: t.Add(12 * time.Hour)}}),
		MustCommand(TypeIssueCode, IssueCode{NewSID: "sid1", IdleExpiresAt: t.Add(2 * time.Hour), Code: Code{Hash: "ch1", ClientID: "app",
			RedirectURI: "https://app/cb", UserID: fzUser, OrgID: fzOrg, SSOSessionID: fzSSO, Scopes: []string{"openid"},
			AuthTime: t, IssuedAt: t, ExpiresAt: t.Add(time.Minute)}}),
		MustCommand(TypeRedeemCode, RedeemCode{Hash: "ch1", ClientID: "app", At: t, AccessJTI: "jti1", AccessExpires: t.Add(10 * time.Minute)}),
		MustCommand(TypeRedeemCode, RedeemCode{Hash: "ch1", ClientID: "app", At: t, AccessJTI: "jti2", AccessExpires: t.Add(10 * time.Minute)}),
		MustCommand(TypeRevokeToken, RevokeToken{JTI: "jti1", ExpiresAt: t.Add(10 * time.Minute)}),
		MustCommand(TypeUpdateUser, UpdateUser{ID: fzUser, Email: &email, At: t}),
		MustCommand(TypeUpdateMembership, UpdateMembership{ID: fzMem, Status: MembershipSuspended, At: t}),
		MustCommand(TypeUpdateOrg, UpdateOrg{ID: fzOrg, Registration: &Registration{Enabled: true, EmailDomains: []string{"example.org"}}}),
		MustCommand(TypeIssueLink, IssueLink{Rules: []ThrottleRule{{Key: "reset/ann2@example.com", Limit: 3, Window: time.Hour, Lockout: time.Hour}},
			Link:  &Link{Hash: hash(1), Purpose: LinkPasswordReset, UserID: fzUser, CreatedAt: t, ExpiresAt: t.Add(30 * time.Minute)},
			Email: []OutgoingEmail{msg(email, EmailPasswordReset)}, At: t}),
		// The reset ends the live session, with a back-channel delivery.
		MustCommand(TypeUseLink, UseLink{Hash: hash(1), Purpose: LinkPasswordReset, At: t, PasswordHash: "$argon2id$new"}),
		MustCommand(TypeIssueLink, IssueLink{Link: &Link{Hash: hash(2), Purpose: LinkVerifyEmail, UserID: fzUser, Email: "ann3@example.com",
			CreatedAt: t, ExpiresAt: t.Add(24 * time.Hour)}, Email: []OutgoingEmail{msg("ann3@example.com", EmailVerify)}, At: t}),
		MustCommand(TypeUseLink, UseLink{Hash: hash(2), Purpose: LinkVerifyEmail, At: t, Email: []OutgoingEmail{msg(email, EmailChanged)}}),
		MustCommand(TypeCreateInvitation, CreateInvitation{Invitation: Invitation{ID: fzInv, Email: "new@example.com", OrgID: fzOrg, LinkHash: hash(3),
			CreatedAt: t, ExpiresAt: t.Add(7 * 24 * time.Hour)}, Email: msg("new@example.com", EmailInvitation), At: t}),
		MustCommand(TypeUseLink, UseLink{Hash: hash(3), Purpose: LinkInvitation, At: t, Membership: fzMem2,
			NewUser: &User{ID: fzNew, Email: "new@example.com", PasswordHash: "$argon2id$x"}}),
		MustCommand(TypeIssueLink, IssueLink{Link: &Link{Hash: hash(4), Purpose: LinkRegistration, OrgID: fzOrg, Email: "zed@example.org",
			Continue: "sealed", CreatedAt: t, ExpiresAt: t.Add(time.Hour)}, Email: []OutgoingEmail{msg("zed@example.org", EmailRegistration)}, At: t}),
		MustCommand(TypeUseLink, UseLink{Hash: hash(4), Purpose: LinkRegistration, At: t, Membership: fzMem3,
			NewUser: &User{ID: fzReg, Email: "zed@example.org", PasswordHash: "$argon2id$z"}}),
		MustCommand(TypeEnqueueEmail, EnqueueEmail{Emails: []OutgoingEmail{msg(email, EmailChanged), msg("new@example.com", EmailVerify)}, At: t}),
		// Seeds apply at indexes 1, 2, ... in order: the messages of the
		// reset (16), the address link (18) and the second just above (24).
		MustCommand(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{
			{ID: "00000000000000000016-0000", State: EmailSent, At: t},
			{ID: "00000000000000000024-0001", State: EmailPending, NextAttemptAt: t.Add(time.Minute), Error: "451 4.7.1 später"},
			{ID: "00000000000000000018-0000", State: EmailFailed, At: t, Error: "550"},
		}}),
		MustCommand(TypeDeleteInvitation, DeleteInvitation{ID: fzInv}),
		MustCommand(TypeEndSSOSession, EndSSOSession{ID: fzSSO, At: t, Reason: EndLogout}),
		MustCommand(TypeDeliveryOutcome, DeliveryOutcome{Outcomes: []Outcome{{ID: "d1", State: DeliverySent, At: t}}}),
		MustCommand(TypeCreateAdminGrant, CreateAdminGrant{Grant: AdminGrant{ID: fzGrant, UserID: fzUser, Role: RoleOrgAdmin, OrgID: fzOrg, CreatedAt: t}}),
		MustCommand(TypeCreateAPIKey, CreateAPIKey{Key: APIKey{ID: fzKey, Name: "ci", Role: RoleOrgAdmin, OrgID: fzOrg, Hash: "kh", CreatedAt: t, ExpiresAt: t.Add(time.Hour)}}),
		MustCommand(TypeSetAdminToken, SetAdminToken{Hash: "h2", Replace: true}),
		MustCommand(TypeReap, Reap{Before: t.Add(24 * time.Hour)}),
		MustCommand(TypeRemoveKey, RemoveKey{Kid: "k1"}),
		MustCommand(TypeDeleteClient, DeleteClient{ID: "app"}),
		MustCommand(TypeDeleteMembership, DeleteMembership{ID: fzMem}),
		MustCommand(TypeDeleteUser, DeleteUser{ID: fzUser, At: t}),
		MustCommand(TypeDeleteOrg, DeleteOrg{ID: fzOrg, At: t}),
		MustCommand(TypeNoop, struct{}{}),
	}
	out := make([][]byte, 0, len(cmds)+8)
	for _, c := range cmds {
		out = append(out, c.Encode())
	}
	return append(out,
		nil, []byte{1}, []byte{byte(TypeInvalid), 0}, []byte{200, 0, '{', '}'}, []byte{200, FlagIgnorable, '{', '}'},
		append([]byte{byte(TypeCreateOrg), 0}, "not json"...), append([]byte{byte(TypeCreateUser), 0}, "[]"...),
		[]byte{byte(TypeNoop), FlagIgnorable},
	)
}

// FuzzDecodeCommand: every input either fails to decode (shorter than the
// envelope) or decodes to a command that re-encodes to itself; applying it
// either panics by design (unknown type, undecodable payload), leaving
// the state as it was, or returns a Result. Either way the state file
// still opens, passes bbolt's consistency check, and its reads work.
func FuzzDecodeCommand(f *testing.F) {
	path := filepath.Join(f.TempDir(), "state.db")
	fz, err := Open(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { fz.Close() })
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	var index uint64

	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := Decode(data)
		if len(data) < 2 {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode(%q): got %v, want ErrMalformed", data, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Decode(%q): %v", data, err)
		}
		if got := cmd.Encode(); !bytes.Equal(got, data) {
			t.Fatalf("Encode(Decode(%q)) = %q", data, got)
		}

		index++
		before, beforeAccess := fz.Applied(), accessDigest(t, fz)
		res, panicked := fuzzApply(fz, index, data)
		checkAccessEpoch(t, cmd.Type.String(), beforeAccess, accessDigest(t, fz))
		_, known := handlers[cmd.Type]
		want := index
		switch {
		case panicked != "" && !panicByDesign(known, cmd, panicked):
			t.Fatalf("%s (flags %#x) payload %q: panic: %s", cmd.Type, cmd.Flags, cmd.Payload, panicked)
		case panicked != "":
			want = before
		case !known && (res.Value != nil || res.Err != nil):
			t.Fatalf("ignorable unknown %s: got %+v, want an empty Result", cmd.Type, res)
		}
		if got := fz.Applied(); got != want {
			t.Fatalf("applied index: got %d, want %d", got, want)
		}

		if err := fz.Close(); err != nil {
			t.Fatal(err)
		}
		if fz, err = Open(path); err != nil {
			t.Fatalf("the state file no longer opens: %v", err)
		}
		if got := fz.Applied(); got != want {
			t.Fatalf("applied index after reopening: got %d, want %d", got, want)
		}
		checkState(t, fz)
	})
}

// fuzzApply applies data at index and returns the Result, or the panic it
// caused.
func fuzzApply(f *FSM, index uint64, data []byte) (res Result, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprint(r)
			if panicked == "" {
				panicked = "(empty panic)"
			}
		}
	}()
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(Result), ""
}

// panicByDesign: a corrupt log entry (DESIGN.md, "Commands") panics: an unknown
// type not marked ignorable, or a payload that does not decode into the
// type's command.
func panicByDesign(known bool, cmd Command, msg string) bool {
	if !known {
		return cmd.Flags&FlagIgnorable == 0 && strings.Contains(msg, "unknown command")
	}
	return strings.HasPrefix(msg, "fsm: decode payload:")
}

// checkState runs bbolt's consistency check and every read of the State,
// and checks that the indexes agree with the records.
func checkState(t *testing.T, f *FSM) {
	t.Helper()
	if err := f.view(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() { // drain: Check's walker sends until done
			first = cmp.Or(first, err)
		}
		return first
	}); err != nil {
		t.Fatalf("bbolt check: %v", err)
	}
	st := f.State()
	readBack(t, "org", st.Orgs, st.Org, func(o Org) string { return o.ID })
	for _, u := range readBack(t, "user", st.Users, st.User, func(u User) string { return u.ID }) {
		byEmail, err := st.UserByEmail(u.Email)
		mustRead(t, "user by email "+u.Email, err)
		if byEmail.ID != u.ID {
			t.Fatalf("user by email %q: got %q, want %q", u.Email, byEmail.ID, u.ID)
		}
		ms, err := st.MembershipsOfUser(u.ID)
		mustRead(t, "memberships of "+u.ID, err)
		for _, m := range ms {
			if m.UserID != u.ID {
				t.Fatalf("memberships of %q: got %q of %q", u.ID, m.ID, m.UserID)
			}
		}
	}
	for _, m := range readBack(t, "membership", st.Memberships, st.Membership, func(m Membership) string { return m.ID }) {
		byPair, err := st.MembershipOf(m.UserID, m.OrgID)
		mustRead(t, "membership of "+m.UserID+" in "+m.OrgID, err)
		if byPair.ID != m.ID {
			t.Fatalf("membership of %q in %q: got %q, want %q", m.UserID, m.OrgID, byPair.ID, m.ID)
		}
		_, err = st.User(m.UserID)
		mustRead(t, "user of membership "+m.ID, err)
		_, err = st.Org(m.OrgID)
		mustRead(t, "organization of membership "+m.ID, err)
	}
	readBack(t, "client", st.Clients, st.Client, func(c Client) string { return c.ID })
	_, _, err := st.Keys()
	mustRead(t, "keys", err)
	_, err = st.AdminTokenHash()
	mustRead(t, "admin token", err)
	if _, err := st.Secret(SecretBrowserKey); err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatalf("secret: %v", err)
	}
	_, err = st.PendingDeliveries(1 << 20)
	mustRead(t, "deliveries", err)
	readBack(t, "email", st.Emails, st.Email, func(e Email) string { return e.ID })
	pending, err := st.PendingEmails(1 << 20)
	mustRead(t, "pending emails", err)
	for _, e := range pending {
		if e.State != EmailPending {
			t.Fatalf("pending email %s is %s", e.ID, e.State)
		}
	}
	stats, err := st.EmailStats()
	mustRead(t, "email stats", err)
	if stats.Pending != len(pending) {
		t.Fatalf("email stats count %d pending, the pending index %d", stats.Pending, len(pending))
	}
	readBack(t, "invitation", st.Invitations, st.Invitation, func(in Invitation) string { return in.ID })
	checkLinkIndex(t, f)
}

// checkLinkIndex: every link of a person has its links_by_user entry and
// every entry its link, of that person and purpose.
func checkLinkIndex(t *testing.T, f *FSM) {
	t.Helper()
	if err := f.view(func(tx *bolt.Tx) error {
		links := 0
		if err := tx.Bucket(bucketLinks).ForEach(func(k, v []byte) error {
			var l Link
			if err := decodeRecord(v, &l); err != nil {
				return fmt.Errorf("link %x: %w", k, err)
			}
			if l.UserID != "" {
				links++
				if !exists(tx, bucketLinkByU, linkByUserKey(&l)) {
					return fmt.Errorf("link %s of %s has no links_by_user entry", l.Hash, l.UserID)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		entries := 0
		err := tx.Bucket(bucketLinkByU).ForEach(func(k, _ []byte) error {
			entries++
			parts := strings.Split(string(k), "/")
			var l Link
			if len(parts) != 3 || !get(tx, bucketLinks, parts[2], &l) || l.UserID != parts[0] || l.Purpose != parts[1] {
				return fmt.Errorf("links_by_user entry %q: no such link", k)
			}
			return nil
		})
		if err == nil && entries != links {
			err = fmt.Errorf("%d links of people, %d links_by_user entries", links, entries)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// readBack lists every record of a kind and reads each back by its id.
func readBack[T any](t *testing.T, kind string, list func(Page) ([]T, int, error), get func(string) (T, error), id func(T) string) []T {
	t.Helper()
	all, _, err := list(Page{Page: 1, PageSize: 1 << 20})
	mustRead(t, kind+" list", err)
	for _, v := range all {
		_, err := get(id(v))
		mustRead(t, kind+" "+id(v), err)
	}
	return all
}

func mustRead(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
