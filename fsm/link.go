package fsm

import (
	"encoding/json"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Links sent by email: an invitation, a password reset, an address to
// prove, a registration. The person gets a token of at least 128 random
// bits in the link; only its hash (hex SHA-256, computed by the proposer)
// is stored, as the key of the Link. A link is single use (UseLink deletes
// it in the apply that does what it is for), bound to its purpose and its
// person, and dies at ExpiresAt. A newer password reset or address link
// of a person voids the older ones, and any change of the person's
// password or address voids their reset links.

// Purposes of a link.
const (
	LinkInvitation    = "invitation"
	LinkPasswordReset = "password_reset"
	LinkVerifyEmail   = "verify_email"
	LinkRegistration  = "registration"
)

// Link is an emailed link's token, by the hash of the token.
type Link struct {
	Hash    string `json:"hash" cbor:"1,keyasint"`
	Purpose string `json:"purpose" cbor:"2,keyasint"`
	// UserID: the person a password_reset or verify_email link is for.
	UserID string `json:"user_id,omitempty" cbor:"3,keyasint,omitempty"`
	// Email: the address to prove (verify_email), or the address invited
	// or registering, which becomes the new person's.
	Email string `json:"email,omitempty" cbor:"4,keyasint,omitempty"`
	// OrgID: the organization an invitation or a registration joins.
	OrgID        string `json:"organization_id,omitempty" cbor:"5,keyasint,omitempty"`
	InvitationID string `json:"invitation_id,omitempty" cbor:"6,keyasint,omitempty"`
	// Continue: for a registration, the authorization request to go on
	// with once the person exists (opaque here: the proposer's sealed
	// pending request).
	Continue  string    `json:"continue,omitempty" cbor:"7,keyasint,omitempty"`
	CreatedAt time.Time `json:"created_at" cbor:"8,keyasint"`
	ExpiresAt time.Time `json:"expires_at" cbor:"9,keyasint"`
}

// Invitation asks an address to join an organization.
type Invitation struct {
	ID        string    `json:"id" cbor:"1,keyasint"`
	Email     string    `json:"email" cbor:"2,keyasint"`
	OrgID     string    `json:"organization_id" cbor:"3,keyasint"`
	LinkHash  string    `json:"-" cbor:"4,keyasint"`
	CreatedAt time.Time `json:"created_at" cbor:"5,keyasint"`
	ExpiresAt time.Time `json:"expires_at" cbor:"6,keyasint"`
	// AcceptedAt and AcceptedBy: when and by whom (the person's id) the
	// link was followed.
	AcceptedAt time.Time `json:"accepted_at,omitzero" cbor:"7,keyasint,omitzero"`
	AcceptedBy string    `json:"accepted_by,omitempty" cbor:"8,keyasint,omitempty"`
}

// Registration is an organization's self-registration: open to addresses
// in EmailDomains (lower case, ASCII or punycode, no trailing dot) when
// Enabled.
type Registration struct {
	Enabled      bool     `json:"enabled" cbor:"1,keyasint"`
	EmailDomains []string `json:"email_domains" cbor:"2,keyasint"`
}

// Allows reports whether an address may register: its domain, after the
// last '@', is one of EmailDomains exactly (a subdomain is not), and its
// local part is not empty. It compares bytes: the proposer lower-cases
// the address first, and refuses what does not parse as one address
// before asking ("a@b@example.com" would be read as of example.com).
func (r *Registration) Allows(email string) bool {
	if r == nil || !r.Enabled {
		return false
	}
	at := strings.LastIndexByte(email, '@')
	if at < 1 {
		return false
	}
	domain := email[at+1:]
	for _, d := range r.EmailDomains {
		if d == domain {
			return true
		}
	}
	return false
}

// UpdateOrg changes the fields that are set. Value: the Org.
type UpdateOrg struct {
	ID           string        `json:"id"`
	Name         *string       `json:"name,omitempty"`
	Registration *Registration `json:"registration,omitempty"`
	// Branding replaces the organization's own branding; a zero Branding
	// clears it (the site's default applies again).
	Branding *Branding `json:"branding,omitempty"`
}

// IssueLink stores a link and commits the message that carries it, in one
// apply. Either may be absent: a message without a link (a person of a
// directory told to use it), or, with neither, a request that only counts
// its Rules (an address nobody has: it costs the same write as one that
// is known). Rules are counted first, as ThrottleReserve does: when a key
// is locked nothing is stored or sent and the result is ErrLocked; once
// counted, the count stays whatever the answer (a deliberate write with a
// domain error, as a throttle's must be). A password_reset or
// verify_email link voids the person's older links of its purpose.
// NotFoundError{user_id}: the person is gone; NotFoundError{organization_id}:
// the organization is gone or deleted; ConflictError{hash}: a link has
// this hash; ErrMismatch: a password_reset link for a person of a
// directory (they get a message without a link). An invitation link is
// CreateInvitation's (ErrInvalid here). Value: the IssuedLink.
type IssueLink struct {
	Rules []ThrottleRule  `json:"rules,omitempty"`
	Link  *Link           `json:"link,omitempty"`
	Email []OutgoingEmail `json:"email,omitempty"`
	At    time.Time       `json:"at"`
}

// IssuedLink is the Value of IssueLink.
type IssuedLink struct {
	Link   *Link
	Emails []Email
	Voided int // older links of the person this one voided
}

// CreateInvitation stores an invitation, its link and the message that
// carries the link. NotFoundError{organization_id}: no such live
// organization; ConflictError{id}. Value: the Invitation.
//
// Rules, when set, are counted first as IssueLink counts them (ErrLocked:
// nothing stored or sent), so administrators cannot flood an address.
type CreateInvitation struct {
	Invitation Invitation     `json:"invitation"`
	Email      OutgoingEmail  `json:"email"`
	At         time.Time      `json:"at"`
	Rules      []ThrottleRule `json:"rules,omitempty"`
}

// MarshalJSON is the wire form of the command: the invitation's LinkHash,
// which an Invitation never shows as JSON (the admin API lists
// invitations), travels beside it as "link_hash".
func (c CreateInvitation) MarshalJSON() ([]byte, error) {
	type plain CreateInvitation
	return json.Marshal(struct {
		plain
		LinkHash string `json:"link_hash"`
	}{plain(c), c.Invitation.LinkHash})
}

// UnmarshalJSON reads the wire form MarshalJSON writes.
func (c *CreateInvitation) UnmarshalJSON(b []byte) error {
	type plain CreateInvitation
	var w struct {
		plain
		LinkHash string `json:"link_hash"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = CreateInvitation(w.plain)
	c.Invitation.LinkHash = w.LinkHash
	return nil
}

// DeleteInvitation withdraws an invitation: its link stops working
// (ErrNotFound: no such invitation).
type DeleteInvitation struct {
	ID string `json:"id"`
}

// UseLink follows a link: it deletes the link and, in the same apply, does
// what the link is for. ErrNotFound: no such link, one of another purpose,
// or one used, withdrawn or voided; ErrExpired: past its ExpiresAt.
//
//   - password_reset: PasswordHash becomes the person's password and
//     every session of theirs ends (EndSessions, each app session with
//     its back-channel logout); the person's other reset links die
//     (ErrMismatch: a person of a directory, which keeps their password).
//   - verify_email: the person's address becomes the link's, verified
//     (ConflictError{email}: another person has it by now); when it
//     changed, the person's reset links (sent to the old address) die.
//     Email lists messages to commit with it (email_changed to the old
//     address).
//   - invitation: NewUser is created (its address must be the link's;
//     ConflictError{email} when taken) with an active membership, or the
//     signed-in person UserID, whose address must be the link's
//     (ErrMismatch otherwise), gains one. A suspended membership stays
//     suspended: ConflictError{membership}.
//   - registration: NewUser is created, as for an invitation, when the
//     organization still allows the address (ErrMismatch otherwise).
//
// Membership is the id of a membership to create. Value: the LinkUsed.
type UseLink struct {
	Hash         string          `json:"hash"`
	Purpose      string          `json:"purpose"`
	At           time.Time       `json:"at"`
	PasswordHash string          `json:"password_hash,omitempty"`
	NewUser      *User           `json:"new_user,omitempty"`
	UserID       string          `json:"user_id,omitempty"`
	Membership   string          `json:"membership_id,omitempty"`
	Email        []OutgoingEmail `json:"email,omitempty"`
}

// LinkUsed is the Value of UseLink.
type LinkUsed struct {
	Link       Link
	User       User
	OldEmail   string      // verify_email: the address it replaced ("" when the same)
	Membership *Membership // invitation, registration: the membership created (nil: it was there)
	Ended      EndedApps   // password_reset: the sessions it ended
	Emails     []Email
}

func init() {
	register(TypeUpdateOrg, applyUpdateOrg)
	register(TypeIssueLink, applyIssueLink)
	register(TypeCreateInvitation, applyCreateInvitation)
	register(TypeDeleteInvitation, applyDeleteInvitation)
	register(TypeUseLink, applyUseLink)
	links := expiring(bucketLinks, func(st *ReapStats) *int { return &st.Links }, func(l *Link, before time.Time) bool {
		return !l.ExpiresAt.After(before)
	})
	links.cleanup = reapLinks
	reaps(links)
	// An invitation is listed until it is reaped: a grace after it was
	// accepted or expired.
	reaps(expiring(bucketInvitations, func(st *ReapStats) *int { return &st.Invitations }, func(in *Invitation, before time.Time) bool {
		if !in.AcceptedAt.IsZero() {
			return !in.AcceptedAt.After(before)
		}
		return !in.ExpiresAt.After(before)
	}))
}

// reapLinks deletes the links_by_user entries of reaped links.
func reapLinks(tx *bolt.Tx, dead [][]byte, _ *ReapStats) {
	for _, v := range dead {
		var l Link
		mustUnmarshal(v, &l)
		if l.UserID != "" {
			del(tx, bucketLinkByU, linkByUserKey(&l))
		}
	}
}

func validPurpose(p string) bool {
	switch p {
	case LinkInvitation, LinkPasswordReset, LinkVerifyEmail, LinkRegistration:
		return true
	}
	return false
}

func validLink(l *Link) bool {
	if l == nil {
		return true
	}
	if !validID(l.Hash) || len(l.Hash) < 32 || !validPurpose(l.Purpose) || !l.ExpiresAt.After(l.CreatedAt) || len(l.Continue) > 16<<10 {
		return false
	}
	switch l.Purpose {
	case LinkPasswordReset:
		return validID(l.UserID)
	case LinkVerifyEmail:
		return validID(l.UserID) && validKey(l.Email)
	case LinkInvitation:
		return validID(l.OrgID, l.InvitationID) && validKey(l.Email) && l.UserID == ""
	case LinkRegistration:
		return validID(l.OrgID) && validKey(l.Email) && l.UserID == ""
	}
	return false
}

func validRegistration(r *Registration) bool {
	if r == nil {
		return true
	}
	if len(r.EmailDomains) > 100 {
		return false
	}
	for _, d := range r.EmailDomains {
		if !validDomain(d) {
			return false
		}
	}
	return true
}

// validDomain reports whether d is a domain as Registration keeps them:
// lower-case letters, digits and hyphens (punycode for the others), in
// labels of 1 to 63 that neither start nor end with a hyphen, 253 at
// most, no trailing dot.
func validDomain(d string) bool {
	if d == "" || len(d) > 253 {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func applyUpdateOrg(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[UpdateOrg](p)
	if !validID(c.ID) || !validRegistration(c.Registration) || !validBranding(c.Branding) {
		return invalid
	}
	var o Org
	if !get(tx, bucketOrgs, c.ID, &o) || o.Status == OrgDeleted {
		return Result{Err: ErrNotFound}
	}
	if c.Name != nil {
		o.Name = *c.Name
	}
	if c.Registration != nil {
		r := *c.Registration
		r.EmailDomains = append([]string{}, r.EmailDomains...)
		o.Registration = &r
	}
	if c.Branding != nil {
		indexLogo(tx, o.ID, o.Branding, c.Branding)
		if c.Branding.IsZero() {
			o.Branding = nil
		} else {
			b := *c.Branding
			b.Logo = append([]byte{}, b.Logo...)
			o.Branding = &b
		}
	}
	put(tx, bucketOrgs, o.ID, o)
	return Result{Value: o}
}

// linkByUserKey indexes a person's links: user id/purpose/hash.
func linkByUserKey(l *Link) string { return l.UserID + "/" + l.Purpose + "/" + l.Hash }

func putLink(tx *bolt.Tx, l *Link) {
	put(tx, bucketLinks, l.Hash, *l)
	if l.UserID != "" {
		putIndex(tx, bucketLinkByU, linkByUserKey(l), "")
	}
}

func deleteLink(tx *bolt.Tx, hash string) (Link, bool) {
	var l Link
	if !get(tx, bucketLinks, hash, &l) {
		return l, false
	}
	del(tx, bucketLinks, hash)
	if l.UserID != "" {
		del(tx, bucketLinkByU, linkByUserKey(&l))
	}
	return l, true
}

// voidLinks deletes the person's links of purpose ("" for every purpose);
// it returns how many.
func voidLinks(tx *bolt.Tx, userID, purpose string) int {
	prefix := userID
	if purpose != "" {
		prefix += "/" + purpose
	}
	n := 0
	for _, k := range prefixKeys(tx, bucketLinkByU, prefix) {
		hash := k[strings.LastIndexByte(k, '/')+1:]
		if _, ok := deleteLink(tx, hash); ok {
			n++
		} else {
			del(tx, bucketLinkByU, prefix+"/"+k) // a dangling entry
		}
	}
	return n
}

func applyIssueLink(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[IssueLink](p)
	if (len(c.Rules) > 0 && !validRules(c.Rules)) || !validLink(c.Link) || !validOutgoing(c.Email) || (c.Link != nil && c.Link.Purpose == LinkInvitation) {
		return invalid
	}
	if len(c.Rules) > 0 {
		if reserveRules(tx, c.Rules, c.At) != nil {
			return Result{Err: ErrLocked}
		}
	}
	var out IssuedLink
	if l := c.Link; l != nil {
		var u User
		if l.UserID != "" && !get(tx, bucketUsers, l.UserID, &u) {
			return Result{Err: &NotFoundError{Field: "user_id"}}
		}
		if l.Purpose == LinkPasswordReset && u.DirectoryID != "" {
			return Result{Err: ErrMismatch} // told to use the directory: a message without a link
		}
		if l.OrgID != "" && !liveOrg(tx, l.OrgID) {
			return Result{Err: &NotFoundError{Field: "organization_id"}}
		}
		if exists(tx, bucketLinks, l.Hash) {
			return Result{Err: &ConflictError{Field: "hash"}}
		}
		if l.UserID != "" {
			out.Voided = voidLinks(tx, l.UserID, l.Purpose)
		}
		putLink(tx, l)
		out.Link = l
	}
	out.Emails = enqueueEmails(tx, index, 0, c.At, c.Email)
	return Result{Value: out}
}

func applyCreateInvitation(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[CreateInvitation](p)
	in := c.Invitation
	if !validID(in.ID, in.OrgID, in.LinkHash) || len(in.LinkHash) < 32 || !validKey(in.Email) || !in.ExpiresAt.After(in.CreatedAt) || !validOutgoing([]OutgoingEmail{c.Email}) {
		return invalid
	}
	if len(c.Rules) > 0 && !validRules(c.Rules) {
		return invalid
	}
	if exists(tx, bucketInvitations, in.ID) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	if !liveOrg(tx, in.OrgID) {
		return Result{Err: &NotFoundError{Field: "organization_id"}}
	}
	if exists(tx, bucketLinks, in.LinkHash) {
		return Result{Err: &ConflictError{Field: "hash"}}
	}
	if len(c.Rules) > 0 {
		if reserveRules(tx, c.Rules, c.At) != nil {
			return Result{Err: ErrLocked}
		}
	}
	in.AcceptedAt, in.AcceptedBy = time.Time{}, ""
	put(tx, bucketInvitations, in.ID, in)
	putLink(tx, &Link{
		Hash: in.LinkHash, Purpose: LinkInvitation, Email: in.Email, OrgID: in.OrgID, InvitationID: in.ID,
		CreatedAt: in.CreatedAt, ExpiresAt: in.ExpiresAt,
	})
	enqueueEmails(tx, index, 0, c.At, []OutgoingEmail{c.Email})
	return Result{Value: in}
}

func applyDeleteInvitation(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[DeleteInvitation](p)
	if !validID(c.ID) {
		return invalid
	}
	var in Invitation
	if !get(tx, bucketInvitations, c.ID, &in) {
		return Result{Err: ErrNotFound}
	}
	deleteLink(tx, in.LinkHash)
	del(tx, bucketInvitations, c.ID)
	return Result{Value: in}
}

func applyUseLink(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[UseLink](p)
	if !validID(c.Hash) || !validPurpose(c.Purpose) || !validOutgoing(c.Email) || (c.Membership != "" && !validID(c.Membership)) {
		return invalid
	}
	var l Link
	if !get(tx, bucketLinks, c.Hash, &l) || l.Purpose != c.Purpose {
		return Result{Err: ErrNotFound}
	}
	if !c.At.Before(l.ExpiresAt) {
		return Result{Err: ErrExpired}
	}
	var res Result
	switch l.Purpose {
	case LinkPasswordReset:
		res = useResetLink(tx, index, &l, &c)
	case LinkVerifyEmail:
		res = useVerifyLink(tx, &l, &c)
	case LinkInvitation, LinkRegistration:
		res = useJoinLink(tx, &l, &c)
	}
	if res.Err != nil {
		return res
	}
	deleteLink(tx, l.Hash)
	used := res.Value.(LinkUsed)
	used.Emails = enqueueEmails(tx, index, 0, c.At, c.Email)
	return Result{Value: used}
}

func useResetLink(tx *bolt.Tx, index uint64, l *Link, c *UseLink) Result {
	var u User
	if c.PasswordHash == "" || c.NewUser != nil {
		return invalid
	}
	if !get(tx, bucketUsers, l.UserID, &u) {
		return Result{Err: ErrNotFound}
	}
	if u.DirectoryID != "" {
		return Result{Err: ErrMismatch} // the directory keeps this person's password
	}
	u.PasswordHash, u.UpdatedAt = c.PasswordHash, c.At
	put(tx, bucketUsers, u.ID, u)
	voidLinks(tx, u.ID, LinkPasswordReset)
	ended := endSessionsOf(tx, index, u.ID, &EndSessions{At: c.At})
	return Result{Value: LinkUsed{Link: *l, User: u, Ended: ended}}
}

func useVerifyLink(tx *bolt.Tx, l *Link, c *UseLink) Result {
	var u User
	if c.PasswordHash != "" || c.NewUser != nil {
		return invalid
	}
	if !get(tx, bucketUsers, l.UserID, &u) {
		return Result{Err: ErrNotFound}
	}
	used := LinkUsed{Link: *l}
	if emailKey(l.Email) != emailKey(u.Email) {
		if exists(tx, bucketUserEmails, emailKey(l.Email)) {
			return Result{Err: &ConflictError{Field: "email"}}
		}
		del(tx, bucketUserEmails, emailKey(u.Email))
		used.OldEmail = u.Email
		putIndex(tx, bucketUserEmails, emailKey(l.Email), u.ID)
		// A reset link went to the old address, which may no longer be
		// the person's to read.
		voidLinks(tx, u.ID, LinkPasswordReset)
	}
	u.Email, u.EmailVerified, u.UpdatedAt = l.Email, true, c.At
	put(tx, bucketUsers, u.ID, u)
	voidLinks(tx, u.ID, LinkVerifyEmail)
	used.User = u
	return Result{Value: used}
}

// useJoinLink follows an invitation or a registration: a new person, or
// (an invitation only) a signed-in one, joins the link's organization.
func useJoinLink(tx *bolt.Tx, l *Link, c *UseLink) Result {
	if c.PasswordHash != "" || (c.NewUser == nil) == (c.UserID == "") || (c.UserID != "" && (l.Purpose != LinkInvitation || !validID(c.UserID))) ||
		!validID(c.Membership) {
		return invalid
	}
	var o Org
	if !get(tx, bucketOrgs, l.OrgID, &o) || o.Status == OrgDeleted {
		return Result{Err: ErrNotFound}
	}
	var in Invitation
	if l.Purpose == LinkInvitation && !get(tx, bucketInvitations, l.InvitationID, &in) {
		return Result{Err: ErrNotFound} // withdrawn
	}
	if l.Purpose == LinkRegistration && !o.Registration.Allows(emailKey(l.Email)) {
		return Result{Err: ErrMismatch} // registration closed, or the domain taken off, since
	}
	// Every check comes before the first write: a domain error writes
	// nothing (DESIGN.md).
	var u User
	used := LinkUsed{Link: *l}
	nu := c.NewUser
	if nu != nil {
		if !validID(nu.ID) || emailKey(nu.Email) != emailKey(l.Email) || nu.DirectoryID != "" || nu.PasswordHash == "" {
			return invalid
		}
		if exists(tx, bucketUsers, nu.ID) {
			return Result{Err: &ConflictError{Field: "id"}}
		}
		if exists(tx, bucketUserEmails, emailKey(nu.Email)) {
			return Result{Err: &ConflictError{Field: "email"}}
		}
		u = *nu
		u.Email, u.EmailVerified, u.Phone, u.DirectoryUID = l.Email, true, "", ""
		u.CreatedAt, u.UpdatedAt = c.At, c.At
	} else {
		if !get(tx, bucketUsers, c.UserID, &u) {
			return Result{Err: ErrNotFound}
		}
		if emailKey(u.Email) != emailKey(l.Email) {
			return Result{Err: ErrMismatch}
		}
	}
	var m *Membership
	if mid := tx.Bucket(bucketMemberPair).Get([]byte(pairKey(u.ID, l.OrgID))); mid != nil {
		var have Membership
		if get(tx, bucketMembers, string(mid), &have) && have.Status != MembershipActive {
			return Result{Err: &ConflictError{Field: "membership"}}
		}
	} else {
		if exists(tx, bucketMembers, c.Membership) {
			return Result{Err: &ConflictError{Field: "membership_id"}}
		}
		m = &Membership{ID: c.Membership, UserID: u.ID, OrgID: l.OrgID, Status: MembershipActive, CreatedAt: c.At, UpdatedAt: c.At}
	}
	if nu != nil {
		put(tx, bucketUsers, u.ID, u)
		putIndex(tx, bucketUserEmails, emailKey(u.Email), u.ID)
	}
	if m != nil {
		putMembership(tx, *m)
		used.Membership = m
	}
	if l.Purpose == LinkInvitation {
		in.AcceptedAt, in.AcceptedBy = c.At, u.ID
		put(tx, bucketInvitations, in.ID, in)
	}
	used.User = u
	return Result{Value: used}
}

// Link returns the link whose token hashes to hash (ErrNotFound: none,
// used or voided). It does not check the expiry.
func (s *State) Link(hash string) (Link, error) {
	var l Link
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketLinks, hash, &l); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return l, err
}

// Invitation returns one invitation.
func (s *State) Invitation(id string) (Invitation, error) {
	var in Invitation
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketInvitations, id, &in); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return in, err
}

// Invitations lists invitations in id order.
func (s *State) Invitations(p Page) ([]Invitation, int, error) {
	return listBucket[Invitation](s, bucketInvitations, p)
}

// reserveRules counts one event against every rule's key at at, as
// ThrottleReserve does: when a key is locked nothing is counted and the
// result is ErrLocked.
func reserveRules(tx *bolt.Tx, rules []ThrottleRule, at time.Time) error {
	for _, r := range rules {
		t := Throttle{Key: r.Key}
		if get(tx, bucketThrottle, r.Key, &t) && t.Locked(at) {
			return ErrLocked
		}
	}
	countThrottles(tx, rules, at)
	return nil
}
