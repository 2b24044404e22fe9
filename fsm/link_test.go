package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const (
	lkUser  = "00000000-0000-4000-8000-0000000000a9"
	lkUser2 = "00000000-0000-4000-8000-0000000000aa"
	lkInv   = "00000000-0000-4000-8000-0000000000e1"
	lkInv2  = "00000000-0000-4000-8000-0000000000e2"
	lkInv3  = "00000000-0000-4000-8000-0000000000e3"
	lkMem   = "00000000-0000-4000-8000-0000000000f9"
)

// lh is the n-th token hash (hex SHA-256 in real life).
func lh(n int) string { return fmt.Sprintf("%064x", n) }

func resetLink(n int, user string, at time.Time) *Link {
	return &Link{Hash: lh(n), Purpose: LinkPasswordReset, UserID: user, CreatedAt: at, ExpiresAt: at.Add(30 * time.Minute)}
}

func verifyLink(n int, user, email string, at time.Time) *Link {
	return &Link{Hash: lh(n), Purpose: LinkVerifyEmail, UserID: user, Email: email, CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
}

func registrationLink(n int, org, email string, at time.Time) *Link {
	return &Link{Hash: lh(n), Purpose: LinkRegistration, OrgID: org, Email: email, Continue: "sealed-request", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
}

// issueLink stores l with msgs, at l's creation.
func issueLink(h *harness, l *Link, msgs ...OutgoingEmail) IssuedLink {
	h.t.Helper()
	return h.mustApply(TypeIssueLink, IssueLink{Link: l, Email: msgs, At: l.CreatedAt}).Value.(IssuedLink)
}

// invite creates invitation id of email to org, its link lh(n), valid a
// week.
func invite(h *harness, id, email, org string, n int) Invitation {
	h.t.Helper()
	return h.mustApply(TypeCreateInvitation, CreateInvitation{
		Invitation: Invitation{ID: id, Email: email, OrgID: org, LinkHash: lh(n), CreatedAt: t0, ExpiresAt: t0.Add(7 * 24 * time.Hour)},
		Email:      mail(email, EmailInvitation), At: t0,
	}).Value.(Invitation)
}

// hasLink reports whether the link of hash lh(n) is still there.
func hasLink(t *testing.T, h *harness, n int) bool {
	t.Helper()
	_, err := h.f.State().Link(lh(n))
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// linkIndex lists the links_by_user entries.
func linkIndex(t *testing.T, h *harness) []string {
	t.Helper()
	var out []string
	if err := h.f.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLinkByU).ForEach(func(k, _ []byte) error { out = append(out, string(k)); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantErr checks err against want and, for a ConflictError or
// NotFoundError, its field.
func wantErr(t *testing.T, err, want error, field string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
	var nf *NotFoundError
	var ce *ConflictError
	switch {
	case errors.As(err, &nf) && nf.Field != field:
		t.Errorf("not found field: got %q, want %q", nf.Field, field)
	case errors.As(err, &ce) && ce.Field != field:
		t.Errorf("conflict field: got %q, want %q", ce.Field, field)
	case field != "" && nf == nil && ce == nil:
		t.Errorf("got %v, want an error naming %q", err, field)
	}
}

// TestIssueLinkThrottle: the rules are counted first, as ThrottleReserve
// counts them. The attempt that reaches a limit is still carried out; the
// next, while the key is locked, stores nothing, sends nothing and counts
// nothing (ErrLocked). Once the window and the lock are over, a fresh
// window starts.
func TestIssueLinkThrottle(t *testing.T) {
	h := newHarness(t)
	seed(h)
	rules := []ThrottleRule{
		{Key: "reset/addr/ann@example.com", Limit: 3, Window: time.Hour, Lockout: time.Hour},
		{Key: "reset/ip/192.0.2.7", Limit: 20, Window: time.Hour, Lockout: time.Hour},
	}
	steps := []struct {
		at        time.Time
		want      error
		wantCount int // of the address's key, after
	}{
		{t0, nil, 1},
		{t0.Add(time.Minute), nil, 2},
		{t0.Add(2 * time.Minute), nil, 3}, // reaches the limit: still sent
		{t0.Add(3 * time.Minute), ErrLocked, 3},
		{t0.Add(59 * time.Minute), ErrLocked, 3},
		{t0.Add(2*time.Hour + time.Minute), nil, 1}, // a fresh window
	}
	for i, s := range steps {
		n := i + 1
		before := mustDigest(t, h)
		emails, _, _ := h.f.State().Emails(Page{Page: 1, PageSize: 100})
		r := h.apply(TypeIssueLink, IssueLink{Rules: rules, Link: resetLink(n, userA, s.at), Email: []OutgoingEmail{mail("Ann@Example.com", EmailPasswordReset)}, At: s.at})
		if !errors.Is(r.Err, s.want) {
			t.Fatalf("step %d at %v: got %v, want %v", n, s.at, r.Err, s.want)
		}
		th, _ := h.f.State().Throttle(rules[0].Key)
		if th.Count != s.wantCount {
			t.Errorf("step %d: count %d, want %d", n, th.Count, s.wantCount)
		}
		after, _, _ := h.f.State().Emails(Page{Page: 1, PageSize: 100})
		if s.want != nil {
			if mustDigest(t, h) != before {
				t.Errorf("step %d: a locked request changed the state", n)
			}
			if hasLink(t, h, n) || len(after) != len(emails) {
				t.Errorf("step %d: a locked request stored its link or message", n)
			}
			continue
		}
		got := r.Value.(IssuedLink)
		if got.Link == nil || got.Link.Hash != lh(n) || len(got.Emails) != 1 || !hasLink(t, h, n) || len(after) != len(emails)+1 {
			t.Errorf("step %d: %+v, %d messages, want the link and one message more than %d", n, got, len(after), len(emails))
		}
	}
}

// TestIssueLinkShapes: a link with its message, a link alone, a message
// alone (a person of a directory told to use it) and neither (an address
// nobody has: only the rules are counted).
func TestIssueLinkShapes(t *testing.T) {
	rule := []ThrottleRule{{Key: "reset/addr/x", Limit: 3, Window: time.Hour, Lockout: time.Hour}}
	msg := []OutgoingEmail{mail("Ann@Example.com", EmailPasswordReset)}
	cases := []struct {
		name      string
		cmd       IssueLink
		wantLink  bool
		wantMails int
		wantIndex []string
	}{
		{"link and message", IssueLink{Rules: rule, Link: resetLink(1, userA, t0), Email: msg, At: t0}, true, 1,
			[]string{userA + "/password_reset/" + lh(1)}},
		{"link without a message", IssueLink{Link: verifyLink(1, userA, "ann@example.net", t0), At: t0}, true, 0,
			[]string{userA + "/verify_email/" + lh(1)}},
		{"message without a link", IssueLink{Rules: rule, Email: msg, At: t0}, false, 1, nil},
		{"neither: only counts", IssueLink{Rules: rule, At: t0}, false, 0, nil},
		{"a registration link: nobody's yet", IssueLink{Link: registrationLink(1, orgA, "zed@example.org", t0), Email: msg, At: t0}, true, 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			got := h.mustApply(TypeIssueLink, c.cmd).Value.(IssuedLink)
			if (got.Link != nil) != c.wantLink || len(got.Emails) != c.wantMails || got.Voided != 0 {
				t.Errorf("value: %+v", got)
			}
			if hasLink(t, h, 1) != c.wantLink {
				t.Errorf("stored link: got %v, want %v", !c.wantLink, c.wantLink)
			}
			if c.wantLink {
				if l, _ := h.f.State().Link(lh(1)); !reflect.DeepEqual(normTimes(l), normTimes(*c.cmd.Link)) {
					t.Errorf("stored link %+v, want %+v", l, *c.cmd.Link)
				}
			}
			if p, _ := h.f.State().PendingEmails(10); len(p) != c.wantMails {
				t.Errorf("pending messages: %d, want %d", len(p), c.wantMails)
			}
			if got := linkIndex(t, h); !reflect.DeepEqual(got, c.wantIndex) {
				t.Errorf("links_by_user: %v, want %v", got, c.wantIndex)
			}
			th, _ := h.f.State().Throttle("reset/addr/x")
			if want := min(len(c.cmd.Rules), 1); th.Count != want {
				t.Errorf("counted %d, want %d", th.Count, want)
			}
		})
	}
}

// TestIssueLinkRefuses: what IssueLink refuses, and that the refusal
// stores nothing. Rules are counted before the link is checked against
// the state, so a request for a gone person costs its count too (the
// answer and the cost must not tell who exists).
func TestIssueLinkRefuses(t *testing.T) {
	const dirUser = "00000000-0000-4000-8000-0000000000d9"
	rule := []ThrottleRule{{Key: "reset/addr/x", Limit: 3, Window: time.Hour, Lockout: time.Hour}}
	with := func(l *Link, f func(*Link)) *Link { f(l); return l }
	cases := []struct {
		name    string
		prepare func(h *harness)
		cmd     IssueLink
		want    error
		field   string
		counted bool
	}{
		{"a gone person", nil, IssueLink{Link: resetLink(1, "00000000-0000-4000-8000-000000000000", t0), At: t0}, ErrNotFound, "user_id", false},
		{"a gone person, counted", nil, IssueLink{Rules: rule, Link: resetLink(1, "00000000-0000-4000-8000-000000000000", t0), At: t0}, ErrNotFound, "user_id", true},
		{"an unknown organization", nil, IssueLink{Link: registrationLink(1, "nope", "zed@example.org", t0), At: t0}, ErrNotFound, "organization_id", false},
		{"a deleted organization", func(h *harness) { h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgB, At: t0}) },
			IssueLink{Link: registrationLink(1, orgB, "zed@example.org", t0), At: t0}, ErrNotFound, "organization_id", false},
		{"a hash in use", func(h *harness) { issueLink(h, verifyLink(1, userB, "bob@example.net", t0)) },
			IssueLink{Link: resetLink(1, userA, t0), At: t0}, ErrConflict, "hash", false},
		{"a reset link for a person of a directory", func(h *harness) {
			h.mustApply(TypeCreateUser, CreateUser{User: User{ID: dirUser, Email: "dee@example.com", DirectoryID: "d1", DirectoryUID: "dee"}})
		}, IssueLink{Rules: rule, Link: resetLink(1, dirUser, t0), At: t0}, ErrMismatch, "", true},
		{"an invitation: CreateInvitation's", nil, IssueLink{Link: &Link{Hash: lh(1), Purpose: LinkInvitation, Email: "x@example.com", OrgID: orgA,
			InvitationID: lkInv, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}, At: t0}, ErrInvalid, "", false},
		{"an unknown purpose", nil, IssueLink{Link: with(resetLink(1, userA, t0), func(l *Link) { l.Purpose = "login" }), At: t0}, ErrInvalid, "", false},
		{"a short hash", nil, IssueLink{Link: with(resetLink(1, userA, t0), func(l *Link) { l.Hash = l.Hash[:31] }), At: t0}, ErrInvalid, "", false},
		{"a hash with a slash", nil, IssueLink{Link: with(resetLink(1, userA, t0), func(l *Link) { l.Hash = "/" + l.Hash }), At: t0}, ErrInvalid, "", false},
		{"dead at birth", nil, IssueLink{Link: with(resetLink(1, userA, t0), func(l *Link) { l.ExpiresAt = l.CreatedAt }), At: t0}, ErrInvalid, "", false},
		{"a reset link of nobody", nil, IssueLink{Link: with(resetLink(1, userA, t0), func(l *Link) { l.UserID = "" }), At: t0}, ErrInvalid, "", false},
		{"an address link without an address", nil, IssueLink{Link: verifyLink(1, userA, "", t0), At: t0}, ErrInvalid, "", false},
		{"a registration link of a person", nil, IssueLink{Link: with(registrationLink(1, orgA, "zed@example.org", t0), func(l *Link) { l.UserID = userA }), At: t0},
			ErrInvalid, "", false},
		{"a registration link without an organization", nil, IssueLink{Link: registrationLink(1, "", "zed@example.org", t0), At: t0}, ErrInvalid, "", false},
		{"an oversized continuation", nil, IssueLink{Link: with(registrationLink(1, orgA, "zed@example.org", t0), func(l *Link) {
			l.Continue = strings.Repeat("x", 16<<10+1)
		}), At: t0}, ErrInvalid, "", false},
		{"a rule without a limit", nil, IssueLink{Rules: []ThrottleRule{{Key: "k", Window: time.Hour}}, Link: resetLink(1, userA, t0), At: t0}, ErrInvalid, "", false},
		{"a message of no kind", nil, IssueLink{Link: resetLink(1, userA, t0), Email: []OutgoingEmail{mail("a@example.com", "")}, At: t0}, ErrInvalid, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			if c.prepare != nil {
				c.prepare(h)
			}
			before := mustDigest(t, h)
			emails, _, _ := h.f.State().Emails(Page{Page: 1, PageSize: 10})
			links := linkIndex(t, h)
			r := h.apply(TypeIssueLink, c.cmd)
			wantErr(t, r.Err, c.want, c.field)
			th, _ := h.f.State().Throttle("reset/addr/x")
			if counted := th.Count == 1; counted != c.counted {
				t.Errorf("counted: got %v, want %v", counted, c.counted)
			}
			after, _, _ := h.f.State().Emails(Page{Page: 1, PageSize: 10})
			if len(after) != len(emails) || !reflect.DeepEqual(linkIndex(t, h), links) {
				t.Errorf("a refused request stored a message or a link")
			}
			if !c.counted && mustDigest(t, h) != before {
				t.Errorf("a refused request changed the state")
			}
		})
	}
}

// TestNewerLinkVoidsOlder: a person's new password_reset or verify_email
// link voids their older links of the same purpose, and no other.
func TestNewerLinkVoidsOlder(t *testing.T) {
	h := newHarness(t)
	seed(h)
	steps := []struct {
		link       *Link
		wantVoided int
		wantLinks  []int // the links left, by number
	}{
		{resetLink(1, userA, t0), 0, []int{1}},
		{verifyLink(2, userA, "ann@example.net", t0), 0, []int{1, 2}},
		{resetLink(3, userB, t0), 0, []int{1, 2, 3}},
		{resetLink(4, userA, t0.Add(time.Minute)), 1, []int{2, 3, 4}},
		{verifyLink(5, userA, "ann@example.org", t0.Add(time.Minute)), 1, []int{3, 4, 5}},
		{registrationLink(6, orgA, "zed@example.org", t0), 0, []int{3, 4, 5, 6}},
		{registrationLink(7, orgA, "zed@example.org", t0), 0, []int{3, 4, 5, 6, 7}},
	}
	for i, s := range steps {
		if got := issueLink(h, s.link); got.Voided != s.wantVoided {
			t.Errorf("step %d: voided %d, want %d", i+1, got.Voided, s.wantVoided)
		}
		var left []int
		for n := 1; n <= 7; n++ {
			if hasLink(t, h, n) {
				left = append(left, n)
			}
		}
		if !reflect.DeepEqual(left, s.wantLinks) {
			t.Errorf("step %d: links %v, want %v", i+1, left, s.wantLinks)
		}
	}
	want := []string{userA + "/password_reset/" + lh(4), userA + "/verify_email/" + lh(5), userB + "/password_reset/" + lh(3)}
	if got := linkIndex(t, h); !reflect.DeepEqual(got, want) {
		t.Errorf("links_by_user: %v, want %v", got, want)
	}
}

// linkKind builds a world with one link of a purpose (lh(1)) and the
// UseLink that follows it.
type linkKind struct {
	purpose string
	build   func(h *harness) (expires time.Time)
	use     func(at time.Time) UseLink
}

func linkKinds() []linkKind {
	newUser := func(email string) *User { return &User{ID: lkUser, Email: email, PasswordHash: "pw-hash"} }
	return []linkKind{
		{LinkPasswordReset, func(h *harness) time.Time { return issueLink(h, resetLink(1, userA, t0)).Link.ExpiresAt },
			func(at time.Time) UseLink {
				return UseLink{Hash: lh(1), Purpose: LinkPasswordReset, At: at, PasswordHash: "new-hash"}
			}},
		{LinkVerifyEmail, func(h *harness) time.Time {
			return issueLink(h, verifyLink(1, userA, "ann@example.net", t0)).Link.ExpiresAt
		},
			func(at time.Time) UseLink { return UseLink{Hash: lh(1), Purpose: LinkVerifyEmail, At: at} }},
		{LinkInvitation, func(h *harness) time.Time { return invite(h, lkInv, "new@example.com", orgB, 1).ExpiresAt },
			func(at time.Time) UseLink {
				return UseLink{Hash: lh(1), Purpose: LinkInvitation, At: at, NewUser: newUser("new@example.com"), Membership: lkMem}
			}},
		{LinkRegistration, func(h *harness) time.Time {
			h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgB, Registration: &Registration{Enabled: true, EmailDomains: []string{"example.org"}}})
			return issueLink(h, registrationLink(1, orgB, "zed@example.org", t0)).Link.ExpiresAt
		}, func(at time.Time) UseLink {
			return UseLink{Hash: lh(1), Purpose: LinkRegistration, At: at, NewUser: newUser("zed@example.org"), Membership: lkMem}
		}},
	}
}

// TestUseLinkOnceInTime: a link of any purpose works once, for its own
// purpose, strictly before its ExpiresAt; a refusal changes nothing.
func TestUseLinkOnceInTime(t *testing.T) {
	for _, k := range linkKinds() {
		t.Run(k.purpose, func(t *testing.T) {
			cases := []struct {
				name string
				cmd  func(expires time.Time) UseLink
				want error
			}{
				{"an unknown hash", func(e time.Time) UseLink { u := k.use(t0); u.Hash = lh(2); return u }, ErrNotFound},
				{"at its ExpiresAt", func(e time.Time) UseLink { return k.use(e) }, ErrExpired},
				{"after it", func(e time.Time) UseLink { return k.use(e.Add(time.Hour)) }, ErrExpired},
			}
			for _, other := range linkKinds() {
				if other.purpose != k.purpose {
					cases = append(cases, struct {
						name string
						cmd  func(expires time.Time) UseLink
						want error
					}{"as a " + other.purpose + " link", func(time.Time) UseLink { return other.use(t0.Add(time.Minute)) }, ErrNotFound})
				}
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					h := newHarness(t)
					seed(h)
					expires := k.build(h)
					before := mustDigest(t, h)
					if r := h.apply(TypeUseLink, c.cmd(expires)); !errors.Is(r.Err, c.want) {
						t.Fatalf("got %v, want %v", r.Err, c.want)
					}
					if mustDigest(t, h) != before || !hasLink(t, h, 1) {
						t.Fatal("a refused use changed the state")
					}
					// The link still works, once, up to its last nanosecond.
					r := h.apply(TypeUseLink, k.use(expires.Add(-time.Nanosecond)))
					if r.Err != nil || r.Value.(LinkUsed).Link.Hash != lh(1) {
						t.Fatalf("the first use: %+v", r)
					}
					if hasLink(t, h, 1) {
						t.Error("a used link is still there")
					}
					if r := h.apply(TypeUseLink, k.use(t0.Add(time.Minute))); !errors.Is(r.Err, ErrNotFound) {
						t.Errorf("a second use: got %v, want ErrNotFound", r.Err)
					}
				})
			}
		})
	}
}

// TestUseLinkRefusesMalformed: commands no proposer sends are ErrInvalid
// and change nothing.
func TestUseLinkRefusesMalformed(t *testing.T) {
	kinds := map[string]linkKind{}
	for _, k := range linkKinds() {
		kinds[k.purpose] = k
	}
	at := t0.Add(time.Minute)
	cases := []struct {
		name    string
		purpose string
		edit    func(u *UseLink)
	}{
		{"no hash", LinkPasswordReset, func(u *UseLink) { u.Hash = "" }},
		{"a hash with a slash", LinkPasswordReset, func(u *UseLink) { u.Hash = userA + "/x" }},
		{"no purpose", LinkPasswordReset, func(u *UseLink) { u.Purpose = "" }},
		{"an unknown purpose", LinkPasswordReset, func(u *UseLink) { u.Purpose = "login" }},
		{"a message of no kind", LinkVerifyEmail, func(u *UseLink) { u.Email = []OutgoingEmail{mail("a@example.com", "")} }},
		{"a reset without a password", LinkPasswordReset, func(u *UseLink) { u.PasswordHash = "" }},
		{"a reset creating a person", LinkPasswordReset, func(u *UseLink) { u.NewUser = &User{ID: lkUser, Email: "x@example.com", PasswordHash: "p"} }},
		{"an address link setting a password", LinkVerifyEmail, func(u *UseLink) { u.PasswordHash = "p" }},
		{"an address link creating a person", LinkVerifyEmail, func(u *UseLink) { u.NewUser = &User{ID: lkUser, Email: "ann@example.net", PasswordHash: "p"} }},
		{"an invitation setting a password", LinkInvitation, func(u *UseLink) { u.PasswordHash = "p" }},
		{"an invitation without a membership id", LinkInvitation, func(u *UseLink) { u.Membership = "" }},
		{"a membership id with a slash", LinkInvitation, func(u *UseLink) { u.Membership = "m/1" }},
		{"an invitation for nobody", LinkInvitation, func(u *UseLink) { u.NewUser = nil }},
		{"an invitation for two", LinkInvitation, func(u *UseLink) { u.UserID = userB }},
		{"a signed-in person's id with a slash", LinkInvitation, func(u *UseLink) { u.NewUser, u.UserID = nil, userB+"/x" }},
		{"a new person of another address", LinkInvitation, func(u *UseLink) { u.NewUser.Email = "other@example.com" }},
		{"a new person without an id", LinkInvitation, func(u *UseLink) { u.NewUser.ID = "" }},
		{"a new person of a directory", LinkInvitation, func(u *UseLink) { u.NewUser.DirectoryID = "d1" }},
		{"a new person without a password", LinkInvitation, func(u *UseLink) { u.NewUser.PasswordHash = "" }},
		{"a registration of a signed-in person", LinkRegistration, func(u *UseLink) { u.NewUser, u.UserID = nil, userB }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			k := kinds[c.purpose]
			k.build(h)
			u := k.use(at)
			c.edit(&u)
			unchanged(t, h, "a malformed UseLink", func() {
				if r := h.apply(TypeUseLink, u); !errors.Is(r.Err, ErrInvalid) {
					t.Fatalf("got %v, want ErrInvalid", r.Err)
				}
			})
		})
	}
}

// TestUseResetLink: following a reset link sets the password, voids the
// person's other reset links (not their address links, nor anyone
// else's), and ends every session of theirs in the same apply, with the
// back-channel logouts queued and one logout event per app session. No
// event holds the link's hash.
func TestUseResetLink(t *testing.T) {
	h := deliveryWorld(t)
	h.mustApply(TypeStartSSOSession, StartSSOSession{TokenHash: "tok9", Session: SSOSession{
		ID: "sso9", UserID: userA, CreatedAt: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Hour)}})
	issueLink(h, verifyLink(2, userA, "ann@example.net", t0))
	issueLink(h, resetLink(1, userA, t0))
	issueLink(h, resetLink(4, userB, t0))
	// A second live reset link of the same person, which IssueLink never
	// leaves (an older replica's, a restored backup's): the use voids it.
	if err := h.f.db.Update(func(tx *bolt.Tx) error { putLink(tx, resetLink(3, userA, t0)); return nil }); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Minute)
	stamp := Audit{Type: EventPasswordReset, Actor: ActorPerson, Subject: userA, IP: "192.0.2.7", Node: "n1", Time: at,
		Detail: map[string]string{"action": "completed"}}
	r := h.applyStamped(TypeUseLink, UseLink{Hash: lh(1), Purpose: LinkPasswordReset, At: at, PasswordHash: "new-hash"}, stamp)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	used := r.Value.(LinkUsed)
	if used.Link.Hash != lh(1) || used.User.ID != userA || used.User.PasswordHash != "new-hash" || !used.User.UpdatedAt.Equal(at) ||
		used.Membership != nil || used.OldEmail != "" {
		t.Errorf("value: %+v", used)
	}
	if u, _ := h.f.State().User(userA); u.PasswordHash != "new-hash" {
		t.Errorf("stored password hash %q", u.PasswordHash)
	}
	for n, want := range map[int]bool{1: false, 2: true, 3: false, 4: true} {
		if hasLink(t, h, n) != want {
			t.Errorf("link %d: there %v, want %v", n, !want, want)
		}
	}
	for _, id := range []string{"sso1", "sso9"} {
		if s, _ := h.f.State().SSOSession(id); s.EndedAt.IsZero() || s.EndReason != EndCredential {
			t.Errorf("%s: ended %v reason %q, want ended for the credential", id, s.EndedAt, s.EndReason)
		}
	}
	const all = "bc-multi A sid-1; bc-multi B sid-2; bc-single A sid-0"
	if len(used.Ended.Apps) != 4 || shapes(used.Ended.Deliveries) != all || used.Ended.Index != h.index {
		t.Errorf("ended %d app sessions, deliveries %q at %d; want 4, %q at %d", len(used.Ended.Apps), shapes(used.Ended.Deliveries), used.Ended.Index, all, h.index)
	}
	pending, _ := h.f.State().PendingDeliveries(100)
	if shapes(pending) != all {
		t.Errorf("pending deliveries %q, want %q", shapes(pending), all)
	}
	for _, d := range pending {
		if d.Cause != CauseCredential {
			t.Errorf("delivery %s: cause %q, want %q", d.ID, d.Cause, CauseCredential)
		}
	}
	events := h.events(AuditQuery{})
	var resets, logouts int
	for _, e := range events {
		b, _ := json.Marshal(e)
		for n := 1; n <= 4; n++ {
			if strings.Contains(string(b), lh(n)) {
				t.Errorf("event %d holds a link's hash: %s", e.Seq, b)
			}
		}
		switch e.Type {
		case EventPasswordReset:
			resets++
			if e.Subject != userA || e.Detail["action"] != "completed" || e.Outcome != OutcomeSuccess {
				t.Errorf("reset event: %+v", e)
			}
		case EventLogout:
			logouts++
			if e.Subject != userA || e.Actor != ActorPerson || e.Node != "n1" || e.SID == "" || e.Detail["cause"] != EndCredential {
				t.Errorf("logout event: %+v", e)
			}
		}
	}
	if resets != 1 || logouts != 4 {
		t.Errorf("events: %d password_reset and %d logout, want 1 and 4 (one per app session)", resets, logouts)
	}
	// A person of a directory: the directory keeps the password, even
	// with a link that got in somehow.
	if err := h.f.db.Update(func(tx *bolt.Tx) error {
		var u User
		get(tx, bucketUsers, userB, &u)
		u.DirectoryID, u.DirectoryUID = "d1", "bob"
		put(tx, bucketUsers, userB, u)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	unchanged(t, h, "a reset of a directory person", func() {
		if r := h.apply(TypeUseLink, UseLink{Hash: lh(4), Purpose: LinkPasswordReset, At: at, PasswordHash: "p"}); !errors.Is(r.Err, ErrMismatch) {
			t.Errorf("a directory person's reset: got %v, want ErrMismatch", r.Err)
		}
	})
}

// TestWhatVoidsResetLinks: a reset link dies with the password it was for
// and with the address it was sent to; nothing else touches it.
func TestWhatVoidsResetLinks(t *testing.T) {
	str := func(s string) *string { return &s }
	yes := true
	at := t0.Add(time.Minute)
	cases := []struct {
		name   string
		do     func(h *harness)
		voided bool
		other  bool // userB's voided
	}{
		{"a newer reset link", func(h *harness) { issueLink(h, resetLink(2, userA, at)) }, true, false},
		{"a password change", func(h *harness) {
			h.mustApply(TypeUpdateUser, UpdateUser{ID: userA, PasswordHash: str("changed"), At: at})
		}, true, false},
		{"an address change", func(h *harness) {
			h.mustApply(TypeUpdateUser, UpdateUser{ID: userA, Email: str("ann@example.net"), At: at})
		}, true, false},
		{"an address link followed to a new address", func(h *harness) {
			issueLink(h, verifyLink(2, userA, "ann@example.net", t0))
			h.mustApply(TypeUseLink, UseLink{Hash: lh(2), Purpose: LinkVerifyEmail, At: at})
		}, true, false},
		{"erasure", func(h *harness) { h.mustApply(TypeDeleteUser, DeleteUser{ID: userA, At: at}) }, true, false},
		{"an address link issued", func(h *harness) { issueLink(h, verifyLink(2, userA, "ann@example.net", t0)) }, false, false},
		{"an address link followed to the same address", func(h *harness) {
			issueLink(h, verifyLink(2, userA, "ann@example.com", t0))
			h.mustApply(TypeUseLink, UseLink{Hash: lh(2), Purpose: LinkVerifyEmail, At: at})
		}, false, false},
		{"the same address in another case", func(h *harness) {
			h.mustApply(TypeUpdateUser, UpdateUser{ID: userA, Email: str("ANN@example.com"), At: at})
		}, false, false},
		{"a phone change", func(h *harness) { h.mustApply(TypeUpdateUser, UpdateUser{ID: userA, Phone: str("+15550009"), At: at}) }, false, false},
		{"the address marked verified", func(h *harness) { h.mustApply(TypeUpdateUser, UpdateUser{ID: userA, EmailVerified: &yes, At: at}) }, false, false},
		{"another person's password change", func(h *harness) {
			h.mustApply(TypeUpdateUser, UpdateUser{ID: userB, PasswordHash: str("changed"), At: at})
		}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			issueLink(h, resetLink(1, userA, t0))
			issueLink(h, resetLink(9, userB, t0))
			c.do(h)
			if got := !hasLink(t, h, 1); got != c.voided {
				t.Errorf("voided: got %v, want %v", got, c.voided)
			}
			if got := !hasLink(t, h, 9); got != c.other {
				t.Errorf("another person's reset link voided: got %v, want %v", got, c.other)
			}
			for _, k := range linkIndex(t, h) {
				if _, err := h.f.State().Link(k[strings.LastIndexByte(k, '/')+1:]); err != nil {
					t.Errorf("links_by_user %s: its link is gone", k)
				}
			}
		})
	}
}

// TestUseVerifyLink: the person's address becomes the link's, verified,
// and the address index follows; the messages carried are committed with
// it; an address another person took meanwhile is a conflict that
// changes nothing.
func TestUseVerifyLink(t *testing.T) {
	at := t0.Add(time.Minute)
	cases := []struct {
		name    string
		email   string
		prepare func(h *harness)
		want    error
		field   string
		old     string // LinkUsed.OldEmail
	}{
		{"a new address", "Ann.New@example.com", nil, nil, "", "Ann@Example.com"},
		{"the same address, proved", "ann@example.com", nil, nil, "", ""},
		{"taken meanwhile", "carol@example.com", func(h *harness) {
			h.mustApply(TypeCreateUser, CreateUser{User: User{ID: lkUser, Email: "Carol@Example.com"}})
		}, ErrConflict, "email", ""},
		{"another person's", "bob@example.com", nil, ErrConflict, "email", ""},
		{"the person erased", "ann@example.net", func(h *harness) { h.mustApply(TypeDeleteUser, DeleteUser{ID: userA, At: t0}) }, ErrNotFound, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			issueLink(h, verifyLink(1, userA, c.email, t0))
			// An older address link IssueLink would have voided: the use
			// voids it too.
			if err := h.f.db.Update(func(tx *bolt.Tx) error { putLink(tx, verifyLink(2, userA, "ann@example.org", t0)); return nil }); err != nil {
				t.Fatal(err)
			}
			if c.prepare != nil {
				c.prepare(h)
			}
			before := mustDigest(t, h)
			r := h.apply(TypeUseLink, UseLink{Hash: lh(1), Purpose: LinkVerifyEmail, At: at,
				Email: []OutgoingEmail{mail("Ann@Example.com", EmailChanged)}})
			wantErr(t, r.Err, c.want, c.field)
			st := h.f.State()
			if c.want != nil {
				if mustDigest(t, h) != before {
					t.Error("a refused use changed the state")
				}
				return
			}
			used := r.Value.(LinkUsed)
			u, _ := st.User(userA)
			if used.OldEmail != c.old || used.User.Email != c.email || !used.User.EmailVerified || u.Email != c.email || !u.EmailVerified || !u.UpdatedAt.Equal(at) {
				t.Errorf("value %+v, stored %+v; want address %q verified, old %q", used, u, c.email, c.old)
			}
			if got, err := st.UserByEmail(strings.ToUpper(c.email)); err != nil || got.ID != userA {
				t.Errorf("UserByEmail(new): %v %v", got.ID, err)
			}
			if c.old != "" {
				if _, err := st.UserByEmail(c.old); !errors.Is(err, ErrNotFound) {
					t.Errorf("UserByEmail(old): %v, want ErrNotFound", err)
				}
				// The old address is free for another person.
				h.mustApply(TypeCreateUser, CreateUser{User: User{ID: lkUser2, Email: c.old}})
			}
			if len(used.Emails) != 1 || used.Emails[0].Kind != EmailChanged || used.Emails[0].To != "Ann@Example.com" {
				t.Errorf("messages: %+v", used.Emails)
			}
			if p, _ := st.PendingEmails(10); len(p) != 1 || p[0].ID != used.Emails[0].ID {
				t.Errorf("pending messages: %v", emailIDs(p))
			}
			if hasLink(t, h, 1) || hasLink(t, h, 2) || len(linkIndex(t, h)) != 0 {
				t.Errorf("address links left: %v", linkIndex(t, h))
			}
		})
	}
}

// TestUseInvitationLink: a new person is created with the link's
// address, verified, and an active membership; a signed-in person of the
// link's address gains one (or keeps theirs); the invitation is marked
// accepted. Every refusal changes nothing.
func TestUseInvitationLink(t *testing.T) {
	at := t0.Add(time.Minute)
	cases := []struct {
		name       string
		email, org string // invited
		prepare    func(h *harness)
		edit       func(u *UseLink)
		want       error
		field      string
		joined     string // the person who joined
		newMember  bool
	}{
		{name: "a new person", email: "new@example.com", org: orgB, joined: lkUser, newMember: true},
		{name: "a new person's address in another case", email: "new@example.com", org: orgB,
			edit: func(u *UseLink) { u.NewUser.Email = "NEW@Example.COM" }, joined: lkUser, newMember: true},
		{name: "a signed-in person", email: "bob@example.com", org: orgB, edit: func(u *UseLink) { u.NewUser, u.UserID = nil, userB },
			joined: userB, newMember: true},
		{name: "a signed-in person, the address in another case", email: "BOB@example.com", org: orgB,
			edit: func(u *UseLink) { u.NewUser, u.UserID = nil, userB }, joined: userB, newMember: true},
		{name: "a signed-in person already a member", email: "ann@example.com", org: orgA,
			edit: func(u *UseLink) { u.NewUser, u.UserID = nil, userA }, joined: userA},
		{name: "a signed-in person of another address", email: "new@example.com", org: orgB,
			edit: func(u *UseLink) { u.NewUser, u.UserID = nil, userB }, want: ErrMismatch},
		{name: "a signed-in person since erased", email: "bob@example.com", org: orgB,
			prepare: func(h *harness) { h.mustApply(TypeDeleteUser, DeleteUser{ID: userB, At: t0}) },
			edit:    func(u *UseLink) { u.NewUser, u.UserID = nil, userB }, want: ErrNotFound},
		{name: "a suspended member", email: "ann@example.com", org: orgA,
			prepare: func(h *harness) {
				h.mustApply(TypeUpdateMembership, UpdateMembership{ID: memA, Status: MembershipSuspended, At: t0})
			},
			edit: func(u *UseLink) { u.NewUser, u.UserID = nil, userA }, want: ErrConflict, field: "membership"},
		{name: "the address taken meanwhile", email: "new@example.com", org: orgB,
			prepare: func(h *harness) {
				h.mustApply(TypeCreateUser, CreateUser{User: User{ID: lkUser2, Email: "New@example.com"}})
			},
			want: ErrConflict, field: "email"},
		{name: "the new person's id taken", email: "new@example.com", org: orgB, edit: func(u *UseLink) { u.NewUser.ID = userB },
			want: ErrConflict, field: "id"},
		{name: "the membership id taken", email: "new@example.com", org: orgB, edit: func(u *UseLink) { u.Membership = memA },
			want: ErrConflict, field: "membership_id"},
		{name: "withdrawn", email: "new@example.com", org: orgB,
			prepare: func(h *harness) { h.mustApply(TypeDeleteInvitation, DeleteInvitation{ID: lkInv}) }, want: ErrNotFound},
		{name: "the organization deleted", email: "new@example.com", org: orgB,
			prepare: func(h *harness) { h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgB, At: t0}) }, want: ErrNotFound},
		{name: "the invitation gone, its link left", email: "new@example.com", org: orgB, prepare: func(h *harness) {
			if err := h.f.db.Update(func(tx *bolt.Tx) error { del(tx, bucketInvitations, lkInv); return nil }); err != nil {
				h.t.Fatal(err)
			}
		}, want: ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			invite(h, lkInv, c.email, c.org, 1)
			if c.prepare != nil {
				c.prepare(h)
			}
			u := UseLink{Hash: lh(1), Purpose: LinkInvitation, At: at, Membership: lkMem, NewUser: &User{
				ID: lkUser, Email: c.email, PasswordHash: "pw-hash", Phone: "+15559999", DirectoryUID: "uid", EmailVerified: false,
				CreatedAt: t0.Add(-time.Hour)}}
			if c.edit != nil {
				c.edit(&u)
			}
			var before User
			if u.UserID != "" {
				before, _ = h.f.State().User(u.UserID)
			}
			digest := mustDigest(t, h)
			r := h.apply(TypeUseLink, u)
			wantErr(t, r.Err, c.want, c.field)
			st := h.f.State()
			if c.want != nil {
				if mustDigest(t, h) != digest {
					t.Error("a refused use changed the state")
				}
				return
			}
			used := r.Value.(LinkUsed)
			if used.User.ID != c.joined || hasLink(t, h, 1) {
				t.Errorf("joined %q (link left: %v), want %q", used.User.ID, hasLink(t, h, 1), c.joined)
			}
			m, err := st.MembershipOf(c.joined, c.org)
			if err != nil || m.Status != MembershipActive {
				t.Errorf("membership: %+v %v, want active", m, err)
			}
			switch {
			case c.newMember && (used.Membership == nil || used.Membership.ID != lkMem || m.ID != lkMem || !m.CreatedAt.Equal(at)):
				t.Errorf("new membership: value %+v, stored %+v", used.Membership, m)
			case !c.newMember && (used.Membership != nil || m.ID != memA):
				t.Errorf("existing membership: value %+v (want nil), stored %+v", used.Membership, m)
			}
			in, _ := st.Invitation(lkInv)
			if !in.AcceptedAt.Equal(at) || in.AcceptedBy != c.joined {
				t.Errorf("invitation: accepted %v by %q, want %v by %q", in.AcceptedAt, in.AcceptedBy, at, c.joined)
			}
			got, _ := st.User(c.joined)
			if u.NewUser == nil {
				if !reflect.DeepEqual(normTimes(got), normTimes(before)) {
					t.Errorf("a signed-in person changed:\ngot  %+v\nwant %+v", got, before)
				}
				return
			}
			want := User{ID: lkUser, Email: c.email, EmailVerified: true, PasswordHash: "pw-hash", CreatedAt: at, UpdatedAt: at}
			if !reflect.DeepEqual(normTimes(got), normTimes(want)) || !reflect.DeepEqual(normTimes(used.User), normTimes(want)) {
				t.Errorf("new person:\ngot  %+v\nwant %+v", got, want)
			}
			if byEmail, err := st.UserByEmail(c.email); err != nil || byEmail.ID != lkUser {
				t.Errorf("UserByEmail: %v %v", byEmail.ID, err)
			}
			if _, err := st.UserByPhone("+15559999"); !errors.Is(err, ErrNotFound) {
				t.Errorf("the proposer's phone was indexed: %v", err)
			}
		})
	}
}

// TestUseRegistrationLink: a registration creates the person when the
// organization allows the address at the time of the use, not only when
// the link was sent.
func TestUseRegistrationLink(t *testing.T) {
	at := t0.Add(time.Minute)
	reg := func(h *harness, r *Registration) { h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgB, Registration: r}) }
	cases := []struct {
		name    string
		email   string
		prepare func(h *harness)
		edit    func(u *UseLink)
		want    error
		field   string
	}{
		{name: "allowed", email: "zed@example.org"},
		{name: "the link's address not lower case", email: "Zed@Example.ORG"},
		{name: "turned off since", email: "zed@example.org",
			prepare: func(h *harness) { reg(h, &Registration{Enabled: false, EmailDomains: []string{"example.org"}}) }, want: ErrMismatch},
		{name: "the domain taken off since", email: "zed@example.org",
			prepare: func(h *harness) { reg(h, &Registration{Enabled: true, EmailDomains: []string{"example.net"}}) }, want: ErrMismatch},
		{name: "only a subdomain now", email: "zed@example.org",
			prepare: func(h *harness) { reg(h, &Registration{Enabled: true, EmailDomains: []string{"sub.example.org"}}) }, want: ErrMismatch},
		{name: "the organization deleted", email: "zed@example.org",
			prepare: func(h *harness) { h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgB, At: t0}) }, want: ErrNotFound},
		{name: "the address taken meanwhile", email: "zed@example.org",
			prepare: func(h *harness) {
				h.mustApply(TypeCreateUser, CreateUser{User: User{ID: lkUser2, Email: "ZED@example.org"}})
			},
			want: ErrConflict, field: "email"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			reg(h, &Registration{Enabled: true, EmailDomains: []string{"example.org"}})
			issueLink(h, registrationLink(1, orgB, c.email, t0))
			if c.prepare != nil {
				c.prepare(h)
			}
			u := UseLink{Hash: lh(1), Purpose: LinkRegistration, At: at, Membership: lkMem,
				NewUser: &User{ID: lkUser, Email: c.email, PasswordHash: "pw-hash"},
				Email:   []OutgoingEmail{mail(c.email, EmailRegistration)}}
			if c.edit != nil {
				c.edit(&u)
			}
			digest := mustDigest(t, h)
			r := h.apply(TypeUseLink, u)
			wantErr(t, r.Err, c.want, c.field)
			if c.want != nil {
				if mustDigest(t, h) != digest || !hasLink(t, h, 1) {
					t.Error("a refused use changed the state")
				}
				return
			}
			used := r.Value.(LinkUsed)
			st := h.f.State()
			got, err := st.UserByEmail(c.email)
			if err != nil || got.ID != lkUser || !got.EmailVerified || got.Email != c.email || used.Link.Continue != "sealed-request" {
				t.Errorf("new person %+v %v, link %+v", got, err, used.Link)
			}
			if m, err := st.MembershipOf(lkUser, orgB); err != nil || m.Status != MembershipActive || used.Membership == nil {
				t.Errorf("membership %+v %v (value %+v)", m, err, used.Membership)
			}
			if len(used.Emails) != 1 {
				t.Errorf("messages: %+v", used.Emails)
			}
		})
	}
}

// TestCreateInvitation: the invitation, its link and its message in one
// apply; the link hash travels in the command although an Invitation
// never shows it as JSON.
func TestCreateInvitation(t *testing.T) {
	h := newHarness(t)
	seed(h)
	cmd := CreateInvitation{
		Invitation: Invitation{ID: lkInv, Email: "new@example.com", OrgID: orgB, LinkHash: lh(1), CreatedAt: t0, ExpiresAt: t0.Add(7 * 24 * time.Hour),
			AcceptedAt: t0, AcceptedBy: userA}, // not the proposer's to say
		Email: mail("new@example.com", EmailInvitation), At: t0,
	}
	wire := MustCommand(TypeCreateInvitation, cmd)
	if !strings.Contains(string(wire.Payload), `"link_hash":"`+lh(1)+`"`) {
		t.Errorf("the command's payload has no link_hash: %s", wire.Payload)
	}
	if back := decode[CreateInvitation](wire.Payload); !reflect.DeepEqual(normTimes(back), normTimes(cmd)) || back.Invitation.LinkHash != lh(1) {
		t.Errorf("the command does not decode to itself: %+v", back)
	}
	stamp := Audit{Type: EventInvitation, Actor: ActorAdmin, Node: "n1", Time: t0, Detail: map[string]string{"action": "sent"}}
	r := h.applyStamped(TypeCreateInvitation, cmd, stamp)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := cmd.Invitation
	want.AcceptedAt, want.AcceptedBy = time.Time{}, ""
	if got := r.Value.(Invitation); !reflect.DeepEqual(normTimes(got), normTimes(want)) || got.LinkHash != lh(1) {
		t.Errorf("value %+v, want %+v", got, want)
	}
	stored, err := h.f.State().Invitation(lkInv)
	if err != nil || stored.LinkHash != lh(1) || !stored.AcceptedAt.IsZero() {
		t.Errorf("stored %+v %v", stored, err)
	}
	b, _ := json.Marshal(stored)
	if strings.Contains(string(b), lh(1)) {
		t.Errorf("an invitation's JSON shows its link hash: %s", b)
	}
	l, err := h.f.State().Link(lh(1))
	wantLink := Link{Hash: lh(1), Purpose: LinkInvitation, Email: "new@example.com", OrgID: orgB, InvitationID: lkInv, CreatedAt: t0, ExpiresAt: want.ExpiresAt}
	if err != nil || !reflect.DeepEqual(normTimes(l), normTimes(wantLink)) {
		t.Errorf("link %+v %v, want %+v", l, err, wantLink)
	}
	if p, _ := h.f.State().PendingEmails(10); len(p) != 1 || p[0].Kind != EmailInvitation || p[0].To != "new@example.com" {
		t.Errorf("messages: %+v", p)
	}
	if list, total, _ := h.f.State().Invitations(Page{Page: 1, PageSize: 10}); total != 1 || list[0].ID != lkInv {
		t.Errorf("list: %+v", list)
	}
	if e := h.lastEvent(); e.Type != EventInvitation || strings.Contains(fmt.Sprint(e), lh(1)) {
		t.Errorf("event: %+v", e)
	}

	inv := func(f func(c *CreateInvitation)) CreateInvitation {
		c := CreateInvitation{
			Invitation: Invitation{ID: lkInv2, Email: "x@example.com", OrgID: orgA, LinkHash: lh(2), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)},
			Email:      mail("x@example.com", EmailInvitation), At: t0,
		}
		f(&c)
		return c
	}
	cases := []struct {
		name  string
		cmd   CreateInvitation
		want  error
		field string
	}{
		{"an id in use", inv(func(c *CreateInvitation) { c.Invitation.ID = lkInv }), ErrConflict, "id"},
		{"a hash in use", inv(func(c *CreateInvitation) { c.Invitation.LinkHash = lh(1) }), ErrConflict, "hash"},
		{"an unknown organization", inv(func(c *CreateInvitation) { c.Invitation.OrgID = "nope" }), ErrNotFound, "organization_id"},
		{"no hash", inv(func(c *CreateInvitation) { c.Invitation.LinkHash = "" }), ErrInvalid, ""},
		{"a short hash", inv(func(c *CreateInvitation) { c.Invitation.LinkHash = lh(2)[:31] }), ErrInvalid, ""},
		{"no address", inv(func(c *CreateInvitation) { c.Invitation.Email = "" }), ErrInvalid, ""},
		{"dead at birth", inv(func(c *CreateInvitation) { c.Invitation.ExpiresAt = t0 }), ErrInvalid, ""},
		{"no message", inv(func(c *CreateInvitation) { c.Email = OutgoingEmail{} }), ErrInvalid, ""},
		{"a message of no kind", inv(func(c *CreateInvitation) { c.Email.Kind = "" }), ErrInvalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			unchanged(t, h, c.name, func() { wantErr(t, h.apply(TypeCreateInvitation, c.cmd).Err, c.want, c.field) })
		})
	}
	t.Run("a deleted organization", func(t *testing.T) {
		h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgA, At: t0})
		unchanged(t, h, "an invitation to a deleted organization", func() {
			wantErr(t, h.apply(TypeCreateInvitation, inv(func(*CreateInvitation) {})).Err, ErrNotFound, "organization_id")
		})
	})
}

// TestDeleteInvitation: a withdrawn invitation's link stops working at
// once; an accepted one can be deleted too.
func TestDeleteInvitation(t *testing.T) {
	h := newHarness(t)
	seed(h)
	invite(h, lkInv, "new@example.com", orgB, 1)
	invite(h, lkInv2, "bob@example.com", orgB, 2)
	h.mustApply(TypeUseLink, UseLink{Hash: lh(2), Purpose: LinkInvitation, At: t0, UserID: userB, Membership: lkMem})
	cases := []struct {
		name string
		id   string
		want error
		gone int // the link that must be gone after
	}{
		{"pending", lkInv, nil, 1},
		{"again", lkInv, ErrNotFound, 1},
		{"accepted", lkInv2, nil, 2},
		{"unknown", lkInv3, ErrNotFound, 0},
		{"no id", "", ErrInvalid, 0},
	}
	for _, c := range cases {
		r := h.apply(TypeDeleteInvitation, DeleteInvitation{ID: c.id})
		if !errors.Is(r.Err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, r.Err, c.want)
		}
		if c.gone != 0 && hasLink(t, h, c.gone) {
			t.Errorf("%s: the link is still there", c.name)
		}
		if c.want == nil {
			if _, err := h.f.State().Invitation(c.id); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: the invitation is still there: %v", c.name, err)
			}
		}
	}
	if r := h.apply(TypeUseLink, UseLink{Hash: lh(1), Purpose: LinkInvitation, At: t0, NewUser: &User{ID: lkUser, Email: "new@example.com", PasswordHash: "p"},
		Membership: lkMem}); !errors.Is(r.Err, ErrNotFound) {
		t.Errorf("a withdrawn invitation's link: got %v, want ErrNotFound", r.Err)
	}
}

// TestDeleteUserRemovesTheirLinks: erasing a person deletes every link of
// theirs and its index entries; another person's stay.
func TestDeleteUserRemovesTheirLinks(t *testing.T) {
	h := newHarness(t)
	seed(h)
	issueLink(h, resetLink(1, userA, t0))
	issueLink(h, verifyLink(2, userA, "ann@example.net", t0))
	issueLink(h, resetLink(3, userB, t0))
	issueLink(h, verifyLink(4, userB, "bob@example.net", t0))
	h.mustApply(TypeDeleteUser, DeleteUser{ID: userA, At: t0})
	for n, want := range map[int]bool{1: false, 2: false, 3: true, 4: true} {
		if hasLink(t, h, n) != want {
			t.Errorf("link %d: there %v, want %v", n, !want, want)
		}
	}
	want := []string{userB + "/password_reset/" + lh(3), userB + "/verify_email/" + lh(4)}
	if got := linkIndex(t, h); !reflect.DeepEqual(got, want) {
		t.Errorf("links_by_user: %v, want %v", got, want)
	}
}

// TestUpdateOrg: the fields set change; a registration replaces the one
// before whole; domains are kept as Allows compares them (lower case,
// letters, digits and hyphens, no trailing dot) and anything else is
// refused with nothing changed.
func TestUpdateOrg(t *testing.T) {
	name := func(s string) *string { return &s }
	reg := func(on bool, d ...string) *Registration { return &Registration{Enabled: on, EmailDomains: d} }
	cases := []struct {
		name     string
		prepare  func(h *harness)
		cmd      UpdateOrg
		want     error
		wantName string
		wantReg  *Registration
	}{
		{name: "the name", cmd: UpdateOrg{ID: orgA, Name: name("Alpha Two")}, wantName: "Alpha Two"},
		{name: "nothing", cmd: UpdateOrg{ID: orgA}, wantName: "Alpha"},
		{name: "a registration", cmd: UpdateOrg{ID: orgA, Registration: reg(true, "example.org", "xn--bcher-kva.example", "a-b.c0.example")},
			wantName: "Alpha", wantReg: reg(true, "example.org", "xn--bcher-kva.example", "a-b.c0.example")},
		{name: "a registration replaced", prepare: func(h *harness) {
			h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgA, Registration: reg(true, "example.org", "example.com")})
		}, cmd: UpdateOrg{ID: orgA, Registration: reg(false, "example.net")}, wantName: "Alpha", wantReg: reg(false, "example.net")},
		{name: "the name kept with a registration", prepare: func(h *harness) {
			h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgA, Registration: reg(true, "example.org")})
		}, cmd: UpdateOrg{ID: orgA, Name: name("A")}, wantName: "A", wantReg: reg(true, "example.org")},
		{name: "open to no domain", cmd: UpdateOrg{ID: orgA, Registration: reg(true)}, wantName: "Alpha", wantReg: reg(true)},
		{name: "a deleted organization", prepare: func(h *harness) { h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgA, At: t0}) },
			cmd: UpdateOrg{ID: orgA, Name: name("x")}, want: ErrNotFound},
		{name: "an unknown organization", cmd: UpdateOrg{ID: "nope", Name: name("x")}, want: ErrNotFound},
		{name: "no id", cmd: UpdateOrg{Name: name("x")}, want: ErrInvalid},
	}
	for _, d := range []string{
		"Example.org", "example.org.", "ann@example.org", "", ".example.org", "example..org", "exa mple.org", "-example.org",
		"example-.org", "example.org/x", "ex_ample.org", "exämple.org", "example.org\n", strings.Repeat("a", 64) + ".org",
		strings.Repeat("abcdefghi.", 25) + "abcd", // 254 bytes
	} {
		cases = append(cases, struct {
			name     string
			prepare  func(h *harness)
			cmd      UpdateOrg
			want     error
			wantName string
			wantReg  *Registration
		}{name: fmt.Sprintf("the domain %q", d), cmd: UpdateOrg{ID: orgA, Registration: reg(true, "example.com", d)}, want: ErrInvalid})
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("d%d.example", i)
	}
	cases = append(cases, struct {
		name     string
		prepare  func(h *harness)
		cmd      UpdateOrg
		want     error
		wantName string
		wantReg  *Registration
	}{name: "101 domains", cmd: UpdateOrg{ID: orgA, Registration: reg(true, many...)}, want: ErrInvalid})
	if d := strings.Repeat("abcdefghi.", 25) + "abc"; !validDomain(d) || len(d) != 253 {
		t.Errorf("a domain of 253 bytes is refused")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			seed(h)
			if c.prepare != nil {
				c.prepare(h)
			}
			before := mustDigest(t, h)
			r := h.apply(TypeUpdateOrg, c.cmd)
			if !errors.Is(r.Err, c.want) {
				t.Fatalf("got %v, want %v", r.Err, c.want)
			}
			if c.want != nil {
				if mustDigest(t, h) != before {
					t.Error("a refused update changed the state")
				}
				return
			}
			o, _ := h.f.State().Org(c.cmd.ID)
			same := (o.Registration == nil) == (c.wantReg == nil) &&
				(o.Registration == nil || o.Registration.Enabled == c.wantReg.Enabled && slices.Equal(o.Registration.EmailDomains, c.wantReg.EmailDomains))
			if o.Name != c.wantName || !same || normTimes(r.Value.(Org)) != normTimes(o) {
				t.Errorf("stored %+v (registration %+v), value %+v; want %q, %+v", o, o.Registration, r.Value, c.wantName, c.wantReg)
			}
		})
	}
}

// TestRegistrationAllows: the domain after the last '@' must be one of
// EmailDomains exactly. Allows compares bytes and reads one address: the
// proposer lower-cases it and refuses what is not one address (such as
// "a@b@example.com", which Allows reads as of example.com) before asking.
func TestRegistrationAllows(t *testing.T) {
	open := &Registration{Enabled: true, EmailDomains: []string{"example.com", "sub.example.net"}}
	cases := []struct {
		name  string
		r     *Registration
		email string
		want  bool
	}{
		{"a listed domain", open, "ann@example.com", true},
		{"a listed subdomain", open, "ann@sub.example.net", true},
		{"no registration", nil, "ann@example.com", false},
		{"turned off", &Registration{EmailDomains: []string{"example.com"}}, "ann@example.com", false},
		{"no domains", &Registration{Enabled: true}, "ann@example.com", false},
		{"a subdomain of a listed domain", open, "ann@mail.example.com", false},
		{"the parent of a listed subdomain", open, "ann@example.net", false},
		{"a domain ending like a listed one", open, "ann@badexample.com", false},
		{"a listed domain as a prefix", open, "ann@example.com.evil.test", false},
		{"two '@': the last counts (the proposer refuses such an address first)", open, "a@b@example.com", true},
		{"two '@', the listed domain first", open, "a@example.com@evil.test", false},
		{"an empty local part", open, "@example.com", false},
		{"no '@'", open, "example.com", false},
		{"an empty domain", open, "ann@", false},
		{"not lower-cased (the proposer does it)", open, "ann@EXAMPLE.com", false},
		{"a trailing dot", open, "ann@example.com.", false},
	}
	for _, c := range cases {
		if got := c.r.Allows(c.email); got != c.want {
			t.Errorf("%s: Allows(%q) = %v, want %v", c.name, c.email, got, c.want)
		}
	}
}

// linkWorld builds, on a seeded store, an outbox and links of every
// purpose: what a snapshot must carry.
func linkWorld(h *harness) {
	h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgB, Registration: &Registration{Enabled: true, EmailDomains: []string{"example.org"}}})
	ids := enqueue(h, t0, mail("a@example.com", EmailChanged), mail("b@example.com", EmailChanged))
	h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{{ID: ids[0], State: EmailSent, At: t0}, {ID: ids[1], State: EmailPending, NextAttemptAt: t0.Add(time.Minute), Error: "451"}}})
	issueLink(h, resetLink(1, userA, t0), mail("Ann@Example.com", EmailPasswordReset))
	issueLink(h, verifyLink(2, userB, "bob@example.net", t0), mail("bob@example.net", EmailVerify))
	issueLink(h, registrationLink(3, orgB, "zed@example.org", t0), mail("zed@example.org", EmailRegistration))
	invite(h, lkInv, "new@example.com", orgB, 4)
	invite(h, lkInv2, "bob@example.com", orgA, 5)
	h.mustApply(TypeUseLink, UseLink{Hash: lh(5), Purpose: LinkInvitation, At: t0, UserID: userB, Membership: lkMem})
}

// outbox is what State shows of the outbox, the links and the
// invitations.
func outbox(t *testing.T, h *harness) map[string]any {
	t.Helper()
	st := h.f.State()
	all := Page{Page: 1, PageSize: 100}
	emails, _, err1 := st.Emails(all)
	invs, _, err2 := st.Invitations(all)
	stats, err3 := st.EmailStats()
	org, err4 := st.Org(orgB)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	links := map[int]string{}
	for n := 1; n <= 9; n++ {
		if l, err := st.Link(lh(n)); err == nil {
			links[n] = normTimes(l)
		}
	}
	return map[string]any{"emails": normTimes(emails), "invitations": normTimes(invs), "links": links, "index": linkIndex(t, h),
		"stats": normTimes(stats), "registration": normTimes(org.Registration)}
}

// TestOutboxSurvivesSnapshotRestore: messages, links (with their index
// by person), invitations and registrations travel in a snapshot, and the
// restored store goes on exactly as the original.
func TestOutboxSurvivesSnapshotRestore(t *testing.T) {
	src := newHarness(t)
	seed(src)
	linkWorld(src)
	dst := newHarness(t)
	restoreFrom(t, src.f, dst.f)
	dst.index = src.index
	want := outbox(t, src)
	if got := outbox(t, dst); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored outbox differs:\ngot  %v\nwant %v", got, want)
	}
	if len(want["links"].(map[int]string)) != 4 || len(want["index"].([]string)) != 2 {
		t.Fatalf("the world is not what the test means: %v", want)
	}
	if mustDigest(t, dst) != mustDigest(t, src) {
		t.Fatal("the restored store differs")
	}
	for _, h := range []*harness{src, dst} {
		if got := issueLink(h, resetLink(6, userA, t0.Add(time.Minute))); got.Voided != 1 {
			t.Errorf("a newer reset link voided %d, want the restored one", got.Voided)
		}
		h.mustApply(TypeUseLink, UseLink{Hash: lh(4), Purpose: LinkInvitation, At: t0.Add(time.Minute), NewUser: &User{ID: lkUser, Email: "new@example.com", PasswordHash: "p"},
			Membership: "00000000-0000-4000-8000-0000000000fa"})
		h.mustApply(TypeUseLink, UseLink{Hash: lh(3), Purpose: LinkRegistration, At: t0.Add(time.Minute), NewUser: &User{ID: lkUser2, Email: "zed@example.org", PasswordHash: "p"},
			Membership: "00000000-0000-4000-8000-0000000000fb"})
	}
	if got, want := outbox(t, dst), outbox(t, src); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the same commands:\ngot  %v\nwant %v", got, want)
	}
	if mustDigest(t, dst) != mustDigest(t, src) {
		t.Fatal("the restored store went on differently")
	}
}

// TestLinkAndInvitationReap: a link is reaped at its ExpiresAt, with its
// entry in links_by_user; an invitation once accepted or expired. Reaps
// at several times, full and one record a bucket at a time.
func TestLinkAndInvitationReap(t *testing.T) {
	build := func(t *testing.T) *harness {
		h := newHarness(t)
		seed(h)
		linkWorld(h) // reset 1 (30 min), verify 2 (24 h), registration 3 (1 h), invitations 4 (7 days) and 5 (accepted at t0)
		h.mustApply(TypeCreateInvitation, CreateInvitation{
			Invitation: Invitation{ID: lkInv3, Email: "short@example.com", OrgID: orgA, LinkHash: lh(7), CreatedAt: t0, ExpiresAt: t0.Add(2 * time.Hour)},
			Email:      mail("short@example.com", EmailInvitation), At: t0})
		return h
	}
	cases := []struct {
		before      time.Duration // after t0
		links       []int
		invitations []string
		index       []string
	}{
		{-time.Minute, []int{1, 2, 3, 4, 7}, []string{lkInv, lkInv2, lkInv3},
			[]string{userA + "/password_reset/" + lh(1), userB + "/verify_email/" + lh(2)}},
		{0, []int{1, 2, 3, 4, 7}, []string{lkInv, lkInv3}, // accepted at t0
			[]string{userA + "/password_reset/" + lh(1), userB + "/verify_email/" + lh(2)}},
		{30 * time.Minute, []int{2, 3, 4, 7}, []string{lkInv, lkInv3}, []string{userB + "/verify_email/" + lh(2)}},
		{2 * time.Hour, []int{2, 4}, []string{lkInv}, []string{userB + "/verify_email/" + lh(2)}},
		{8 * 24 * time.Hour, nil, nil, nil},
	}
	for _, limit := range []int{0, 1} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("limit=%d/before=t0%+v", limit, c.before), func(t *testing.T) {
				h := build(t)
				// Each bucket's sweep wraps around on its own: 20 limited
				// reaps see every record of these small buckets.
				for round := 0; round < 20; round++ {
					if st := h.mustApply(TypeReap, Reap{Before: t0.Add(c.before), Limit: limit}).Value.(ReapStats); !st.More {
						break
					}
				}
				var links []int
				for n := 1; n <= 9; n++ {
					if hasLink(t, h, n) {
						links = append(links, n)
					}
				}
				invs, _, _ := h.f.State().Invitations(Page{Page: 1, PageSize: 10})
				var ids []string
				for _, in := range invs {
					ids = append(ids, in.ID)
				}
				if !reflect.DeepEqual(links, c.links) || !reflect.DeepEqual(ids, c.invitations) || !reflect.DeepEqual(linkIndex(t, h), c.index) {
					t.Errorf("left links %v, invitations %v, index %v\nwant %v, %v, %v", links, ids, linkIndex(t, h), c.links, c.invitations, c.index)
				}
			})
		}
	}
}

// TestVoidLinksDropsDanglingEntries: an index entry whose link is gone
// (as a reap before the index was cleaned left them) is dropped by the
// next void and not counted.
func TestVoidLinksDropsDanglingEntries(t *testing.T) {
	h := newHarness(t)
	seed(h)
	if err := h.f.db.Update(func(tx *bolt.Tx) error {
		putIndex(tx, bucketLinkByU, userA+"/password_reset/"+lh(1), "")
		putIndex(tx, bucketLinkByU, userA+"/verify_email/"+lh(2), "")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := issueLink(h, resetLink(3, userA, t0)); got.Voided != 0 {
		t.Errorf("voided %d, want 0", got.Voided)
	}
	want := []string{userA + "/password_reset/" + lh(3), userA + "/verify_email/" + lh(2)}
	if got := linkIndex(t, h); !reflect.DeepEqual(got, want) {
		t.Errorf("links_by_user: %v, want %v", got, want)
	}
	h.mustApply(TypeDeleteUser, DeleteUser{ID: userA, At: t0})
	if got := linkIndex(t, h); len(got) != 0 {
		t.Errorf("links_by_user after erasure: %v", got)
	}
}
