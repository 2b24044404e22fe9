package fsm

import (
	"encoding/base64"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Federation (docs/operators/federation.md): the site's other OpenID
// providers, registered like clients, and the links that tie a person of
// an upstream (provider, upstream subject) to a person here. A person is
// found by the link, never by address alone; the apply, not the proposer,
// decides whether a first sign-in may create a person or link to one by
// address, so two nodes racing the same first sign-in cannot make two
// people or a link the rules forbid.

// Provisioning modes of an identity provider: what a first sign-in with
// an unknown upstream subject does.
const (
	ProvisionCreate       = "create"
	ProvisionLink         = "link"
	ProvisionCreateOrLink = "create_or_link"
	ProvisionOff          = "off"
)

// IdentityProvider is one registered upstream OpenID provider.
// ClientSecret is sealed under the KEK by the proposer (aad
// IdentityProviderAAD(ID)); the state never holds it in the clear when a
// KEK is configured.
type IdentityProvider struct {
	ID           string   `json:"id" cbor:"1,keyasint"`
	Slug         string   `json:"slug" cbor:"2,keyasint"`
	DisplayName  string   `json:"display_name" cbor:"3,keyasint"`
	Issuer       string   `json:"issuer" cbor:"4,keyasint"`
	ClientID     string   `json:"client_id" cbor:"5,keyasint"`
	ClientSecret []byte   `json:"client_secret,omitempty" cbor:"6,keyasint,omitempty"`
	Scopes       []string `json:"scopes" cbor:"7,keyasint"`
	// OrgID: an organization's own provider, which its org_admins
	// manage; "" for the site's.
	OrgID string `json:"organization_id,omitempty" cbor:"8,keyasint,omitempty"`
	// EmailDomains are the domains this provider is authoritative for:
	// only for these may a sign-in link to an existing person by address
	// or carry email_verified.
	EmailDomains       []string            `json:"email_domains,omitempty" cbor:"9,keyasint,omitempty"`
	Provisioning       string              `json:"provisioning" cbor:"10,keyasint"`
	Memberships        ProviderMemberships `json:"memberships" cbor:"11,keyasint"`
	TrustMFA           bool                `json:"trust_mfa,omitempty" cbor:"12,keyasint,omitempty"`
	BackchannelLogout  bool                `json:"backchannel_logout,omitempty" cbor:"13,keyasint,omitempty"`
	EndUpstreamSession bool                `json:"end_upstream_session,omitempty" cbor:"14,keyasint,omitempty"`
	Enabled            bool                `json:"enabled,omitempty" cbor:"15,keyasint,omitempty"`
	CreatedAt          time.Time           `json:"created_at" cbor:"16,keyasint"`
	UpdatedAt          time.Time           `json:"updated_at" cbor:"17,keyasint"`
}

// ProviderMemberships says which organizations a sign-in through a
// provider makes the person an active member of: OrgID (the provider's
// own organization when empty), and the organization of each group of
// GroupsClaim that GroupOrgs maps.
type ProviderMemberships struct {
	OrgID       string            `json:"organization_id,omitempty" cbor:"1,keyasint,omitempty"`
	GroupsClaim string            `json:"groups_claim,omitempty" cbor:"2,keyasint,omitempty"`
	GroupOrgs   map[string]string `json:"group_organizations,omitempty" cbor:"3,keyasint,omitempty"`
}

// IdentityProviderAAD is the additional data sealing a provider's client
// secret.
func IdentityProviderAAD(id string) string { return "identity-provider/" + id }

// InEmailDomains reports whether address's domain is one of the
// provider's email domains (case-insensitive, exact: a subdomain is not
// its parent).
func (p IdentityProvider) InEmailDomains(address string) bool {
	at := strings.LastIndexByte(address, '@')
	if at < 0 {
		return false
	}
	domain := strings.ToLower(address[at+1:])
	for _, d := range p.EmailDomains {
		if strings.ToLower(d) == domain {
			return true
		}
	}
	return false
}

// Identity links a person here to their subject at an upstream provider.
// A person has at most one link per provider, and a (provider, subject)
// at most one person.
type Identity struct {
	ID         string    `json:"id" cbor:"1,keyasint"`
	UserID     string    `json:"user_id" cbor:"2,keyasint"`
	ProviderID string    `json:"provider_id" cbor:"3,keyasint"`
	Subject    string    `json:"subject" cbor:"4,keyasint"`
	Email      string    `json:"email,omitempty" cbor:"5,keyasint,omitempty"`
	LinkedAt   time.Time `json:"linked_at" cbor:"6,keyasint"`
	LastUsedAt time.Time `json:"last_used_at" cbor:"7,keyasint"`
}

// Reasons and back-channel causes of sessions federation ends.
const (
	EndUpstreamLogout   = "upstream_logout"
	EndIdentityUnlinked = "identity_unlinked"
	EndProviderDeleted  = "identity_provider_deleted"
)

// Why a federated sign-in was refused (FederationRefusedError.Reason).
const (
	// RefusedProvisioningOff: no link, and the provider creates and links
	// no one.
	RefusedProvisioningOff = "provisioning_off"
	// RefusedNoAccount: provisioning link, and no person has the address.
	RefusedNoAccount = "no_account"
	// RefusedAddressTaken: the address is another person's, and the rules
	// do not let this sign-in link to them.
	RefusedAddressTaken = "address_taken"
	// RefusedNoAddress: the upstream gave no address to create a person
	// with.
	RefusedNoAddress = "no_address"
	// RefusedLinkedElsewhere: the upstream subject is linked to another
	// person, or the person already has a link at this provider.
	RefusedLinkedElsewhere = "linked_elsewhere"
	// RefusedDisabled: the provider is disabled.
	RefusedDisabled = "provider_disabled"
	// RefusedLastWayIn: unlinking would leave the person no way to sign
	// in.
	RefusedLastWayIn = "last_way_in"
)

// FederationRefusedError is a federated sign-in, link or unlink the rules
// refuse; the sign-in shows a page saying why, and nothing was written.
type FederationRefusedError struct{ Reason string }

func (e *FederationRefusedError) Error() string { return "fsm: federation refused: " + e.Reason }

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *FederationRefusedError) Unwrap() error { return ErrConflict }

// PutIdentityProvider creates (Create) or replaces a provider. On replace
// an empty ClientSecret keeps the stored one, and CreatedAt is kept.
type PutIdentityProvider struct {
	Provider IdentityProvider `json:"provider"`
	Create   bool             `json:"create,omitempty"`
	// ExpectUpdatedAt, on an update, is the updated_at the proposer read
	// and merged its patch into: a change in between (another
	// administrator's, which may also have moved the provider out of an
	// org_admin's organization) makes the apply refuse with a conflict
	// on updated_at rather than be lost or decided on a stale record.
	ExpectUpdatedAt time.Time `json:"expect_updated_at,omitzero"`
}

// DeleteIdentityProvider removes a provider and every link to it; every
// SSO session opened through it ends, with logout tokens carrying sid.
// Value: EndedApps.
type DeleteIdentityProvider struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// FederatedSignIn records a person's successful sign-in at an upstream:
// the person is found by the link (ProviderID, Subject); without one the
// provider's provisioning decides, in this apply, whether a person is
// created (UserID, a fresh id) or linked by address, and the link gets
// IdentityID (fresh). The memberships the sign-in grants (OrgIDs, each
// with a fresh id in MembershipIDs for a new one) are made active, and
// the provider's memberships of other organizations suspended. With
// Session, the SSO session opens in the same apply for the person found
// (its UserID, IdentityID and ProviderID are set by the apply).
//
// AccountUserID links from /account: the signed-in person gets the link
// (no session opens, no one is created).
//
// Value: FederatedSignInResult. A refusal is a FederationRefusedError and
// writes nothing.
type FederatedSignIn struct {
	ProviderID    string           `json:"provider_id"`
	Subject       string           `json:"subject"`
	Email         string           `json:"email,omitempty"`
	EmailVerified bool             `json:"email_verified,omitempty"`
	IdentityID    string           `json:"identity_id"`
	UserID        string           `json:"user_id"`
	AccountUserID string           `json:"account_user_id,omitempty"`
	OrgIDs        []string         `json:"org_ids,omitempty"`
	MembershipIDs []string         `json:"membership_ids,omitempty"`
	Session       *StartSSOSession `json:"session,omitempty"`
	// EndSessions, with AccountUserID, ends the person's other sessions
	// in the same write, as every other change of a way in does.
	EndSessions *EndSessions `json:"end_sessions,omitempty"`
	At          time.Time    `json:"at"`
}

// FederatedSignInResult is the Value of FederatedSignIn.
type FederatedSignInResult struct {
	User     User     `json:"user"`
	Identity Identity `json:"identity"`
	// Created: the person was created by this sign-in; Linked: the link
	// is new (a created person's too).
	Created bool `json:"created,omitempty"`
	Linked  bool `json:"linked,omitempty"`
	// Ended: the browser's earlier session this one superseded.
	Ended EndedApps `json:"ended"`
}

// UnlinkIdentity removes a link; every SSO session opened through it
// ends, with logout tokens carrying sid. KeepWayIn (a person unlinking on
// /account) refuses when the person would be left with no way in: no
// password, passkey, directory or other link. Value: EndedApps.
type UnlinkIdentity struct {
	UserID     string `json:"user_id"`
	IdentityID string `json:"identity_id"`
	KeepWayIn  bool   `json:"keep_way_in,omitempty"`
	// EndSessions ends the person's other sessions too (an unlink on
	// /account, as every other change of a way in does).
	EndSessions *EndSessions `json:"end_sessions,omitempty"`
	At          time.Time    `json:"at"`
}

// UpstreamLogout is a valid logout token from an upstream (OpenID
// Back-Channel Logout 1.0): its JTI is recorded until ExpiresAt so the
// same token is refused again (ConflictError{jti}), and the SSO sessions
// opened through upstream session SID (or, with SID empty, through the
// link of Subject) end, each app session with its logout token carrying
// sid. Value: EndedApps.
type UpstreamLogout struct {
	ProviderID string    `json:"provider_id"`
	JTI        string    `json:"jti"`
	ExpiresAt  time.Time `json:"expires_at"`
	SID        string    `json:"sid,omitempty"`
	Subject    string    `json:"subject,omitempty"`
	At         time.Time `json:"at"`
}

func init() {
	register(TypePutIdentityProvider, applyPutIdentityProvider)
	register(TypeDeleteIdentityProvider, applyDeleteIdentityProvider)
	register(TypeFederatedSignIn, applyFederatedSignIn)
	register(TypeUnlinkIdentity, applyUnlinkIdentity)
	register(TypeUpstreamLogout, applyUpstreamLogout)
	auditDerive[TypeFederatedSignIn] = deriveFederatedSignIn
	auditDerive[TypeUnlinkIdentity] = deriveUnlinkIdentity
	// A logout token's jti is kept until the token expires (its value is
	// that expiry, RFC 3339), as a revocation is.
	reaps(reaped{bucket: bucketUpstreamJTIs, dead: expiryPassed})
}

// Index keys. An upstream's subject and sid are its own strings, which
// may hold '/': they are keyed base64url, which cannot.
func subjectKey(providerID, subject string) string {
	return providerID + "/" + base64.RawURLEncoding.EncodeToString([]byte(subject))
}

func upstreamSIDKey(providerID, sid string) string {
	return providerID + "/" + base64.RawURLEncoding.EncodeToString([]byte(sid))
}

func jtiKey(providerID, jti string) string {
	return providerID + "/" + base64.RawURLEncoding.EncodeToString([]byte(jti))
}

// MaxProviderEntries bounds a provider's lists (scopes, domains, groups)
// so one record stays small.
const MaxProviderEntries = 1000

func validProvider(p IdentityProvider) bool {
	if !validID(p.ID) || !validKey(p.Slug, p.Issuer, p.ClientID) || strings.ContainsRune(p.Slug, '/') ||
		len(p.Scopes) > 100 || len(p.EmailDomains) > MaxProviderEntries || len(p.Memberships.GroupOrgs) > MaxProviderEntries {
		return false
	}
	switch p.Provisioning {
	case ProvisionCreate, ProvisionLink, ProvisionCreateOrLink, ProvisionOff:
	default:
		return false
	}
	return (p.OrgID == "" || validID(p.OrgID)) && (p.Memberships.OrgID == "" || validID(p.Memberships.OrgID))
}

func applyPutIdentityProvider(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[PutIdentityProvider](p)
	ip := c.Provider
	if !validProvider(ip) {
		return invalid
	}
	var cur IdentityProvider
	found := get(tx, bucketIdPs, ip.ID, &cur)
	switch {
	case c.Create && found:
		return Result{Err: &ConflictError{Field: "id"}}
	case !c.Create && !found:
		return Result{Err: ErrNotFound}
	case !c.Create && !c.ExpectUpdatedAt.IsZero() && !cur.UpdatedAt.Equal(c.ExpectUpdatedAt):
		return Result{Err: &ConflictError{Field: "updated_at"}}
	}
	if owner, ok := getIndex(tx, bucketIdPSlugs, ip.Slug); ok && owner != ip.ID {
		return Result{Err: &ConflictError{Field: "slug"}}
	}
	orgs := []string{ip.OrgID, ip.Memberships.OrgID}
	for _, o := range ip.Memberships.GroupOrgs {
		orgs = append(orgs, o)
	}
	for i, id := range orgs {
		if id == "" {
			continue
		}
		var org Org
		if !validID(id) || !get(tx, bucketOrgs, id, &org) || org.Status == OrgDeleted {
			field := "memberships"
			if i == 0 {
				field = "organization_id"
			}
			return Result{Err: &NotFoundError{Field: field}}
		}
	}
	if found {
		ip.CreatedAt = cur.CreatedAt
		if len(ip.ClientSecret) == 0 {
			ip.ClientSecret = cur.ClientSecret
		}
		if cur.Slug != ip.Slug {
			del(tx, bucketIdPSlugs, cur.Slug)
		}
	}
	put(tx, bucketIdPs, ip.ID, ip)
	putIndex(tx, bucketIdPSlugs, ip.Slug, ip.ID)
	return Result{Value: ip}
}

func applyDeleteIdentityProvider(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[DeleteIdentityProvider](p)
	if !validID(c.ID) {
		return invalid
	}
	var ip IdentityProvider
	if !get(tx, bucketIdPs, c.ID, &ip) {
		return Result{Err: ErrNotFound}
	}
	ended := EndedApps{Index: index}
	ended.Apps = deleteProvider(tx, ip, c.At)
	ended.Deliveries = enqueueLogouts(tx, index, c.At, EndProviderDeleted, withSID(ended.Apps))
	return Result{Value: ended}
}

// deleteProvider removes a provider, its links and its slug, ending the
// sessions opened through it; it returns the app sessions it ended.
func deleteProvider(tx *bolt.Tx, ip IdentityProvider, at time.Time) []AppSession {
	var apps []AppSession
	for _, sk := range prefixKeys(tx, bucketIdentBySubj, ip.ID) {
		if id, ok := getIndex(tx, bucketIdentBySubj, ip.ID+"/"+sk); ok {
			apps = append(apps, removeIdentity(tx, id, at, EndProviderDeleted)...)
		}
	}
	del(tx, bucketIdPs, ip.ID)
	del(tx, bucketIdPSlugs, ip.Slug)
	return apps
}

// deleteOrgProviders removes the providers of an organization being
// deleted (deleteProvider); it returns the app sessions it ended.
func deleteOrgProviders(tx *bolt.Tx, orgID string, at time.Time) []AppSession {
	var doomed []IdentityProvider
	_ = tx.Bucket(bucketIdPs).ForEach(func(_, v []byte) error {
		var ip IdentityProvider
		mustUnmarshal(v, &ip)
		if ip.OrgID == orgID {
			doomed = append(doomed, ip)
		}
		return nil
	})
	var apps []AppSession
	for _, ip := range doomed {
		apps = append(apps, deleteProvider(tx, ip, at)...)
	}
	return apps
}

// removeIdentity deletes a link with its indexes and ends the SSO
// sessions opened through it; it returns the app sessions it ended.
func removeIdentity(tx *bolt.Tx, id string, at time.Time, reason string) []AppSession {
	var idn Identity
	if !get(tx, bucketIdentities, id, &idn) {
		return nil
	}
	var apps []AppSession
	for _, ssoID := range prefixKeys(tx, bucketSSOByIdent, id) {
		apps = append(apps, endSSO(tx, ssoID, at, reason)...)
	}
	del(tx, bucketIdentities, id)
	del(tx, bucketIdentBySubj, subjectKey(idn.ProviderID, idn.Subject))
	del(tx, bucketIdentByUser, idn.UserID+"/"+id)
	return apps
}

// deleteIdentitiesOf removes the links of a person being erased (their
// sessions are ended by the erasure itself).
func deleteIdentitiesOf(tx *bolt.Tx, userID string, at time.Time) {
	for _, id := range prefixKeys(tx, bucketIdentByUser, userID) {
		removeIdentity(tx, id, at, EndErased)
	}
}

// identityAt is the person's link at provider, if any.
func identityAt(tx *bolt.Tx, userID, providerID string) (Identity, bool) {
	for _, id := range prefixKeys(tx, bucketIdentByUser, userID) {
		var idn Identity
		if get(tx, bucketIdentities, id, &idn) && idn.ProviderID == providerID {
			return idn, true
		}
	}
	return Identity{}, false
}

// mayLinkByAddress is the contract's rule for linking a first sign-in to
// the existing person u by address: the address is in the provider's
// email domains, the upstream says it is verified, and for an
// organization's provider every membership u has is in that organization
// and u administers nothing beyond it. An upstream that claims someone
// else's address is thereby never handed their account.
func mayLinkByAddress(tx *bolt.Tx, ip IdentityProvider, u User, email string, verified bool) bool {
	if !verified || !ip.InEmailDomains(email) || emailKey(email) != emailKey(u.Email) {
		return false
	}
	if ip.OrgID == "" {
		return true
	}
	for _, mid := range prefixKeys(tx, bucketMemberByU, u.ID) {
		var m Membership
		if get(tx, bucketMembers, mid, &m) && m.OrgID != ip.OrgID {
			return false
		}
	}
	for _, gid := range prefixKeys(tx, bucketGrantByU, u.ID) {
		var g AdminGrant
		if get(tx, bucketGrants, gid, &g) && (g.Role != RoleOrgAdmin || g.OrgID != ip.OrgID) {
			return false
		}
	}
	return true
}

func validFederatedSignIn(c FederatedSignIn) bool {
	if !validID(c.ProviderID, c.IdentityID, c.UserID) || !validKey(c.Subject) || len(c.Subject) > 255 || len(c.Email) > 320 ||
		len(c.OrgIDs) != len(c.MembershipIDs) || len(c.OrgIDs) > MaxProviderEntries ||
		(len(c.OrgIDs) > 0 && !validID(c.OrgIDs...)) || (len(c.MembershipIDs) > 0 && !validID(c.MembershipIDs...)) ||
		(c.AccountUserID != "" && !validID(c.AccountUserID)) || !validEndSessions(c.EndSessions) ||
		(c.EndSessions != nil && c.AccountUserID == "") {
		return false
	}
	if s := c.Session; s != nil {
		if c.AccountUserID != "" || !validID(s.Session.ID) || !validKey(s.TokenHash) || (s.Supersedes != "" && !validID(s.Supersedes)) || !validClear(s.Settle) {
			return false
		}
	}
	return true
}

func applyFederatedSignIn(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[FederatedSignIn](p)
	if !validFederatedSignIn(c) {
		return invalid
	}
	var ip IdentityProvider
	if !get(tx, bucketIdPs, c.ProviderID, &ip) {
		return Result{Err: &NotFoundError{Field: "provider_id"}}
	}
	if !ip.Enabled {
		return Result{Err: &FederationRefusedError{Reason: RefusedDisabled}}
	}
	if c.Session != nil && (exists(tx, bucketSSO, c.Session.Session.ID) || exists(tx, bucketSSOToken, c.Session.TokenHash)) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	res := FederatedSignInResult{Ended: EndedApps{Index: index}}
	var idn Identity
	var u User
	if id, ok := getIndex(tx, bucketIdentBySubj, subjectKey(ip.ID, c.Subject)); ok && get(tx, bucketIdentities, id, &idn) {
		if c.AccountUserID != "" && idn.UserID != c.AccountUserID {
			return Result{Err: &FederationRefusedError{Reason: RefusedLinkedElsewhere}}
		}
		if !get(tx, bucketUsers, idn.UserID, &u) {
			return Result{Err: &NotFoundError{Field: "user_id"}} // cannot be: an erasure removes the links
		}
	} else {
		var err error
		if u, res.Created, err = federatedPerson(tx, ip, c); err != nil {
			return Result{Err: err}
		}
		if _, has := identityAt(tx, u.ID, ip.ID); has {
			return Result{Err: &FederationRefusedError{Reason: RefusedLinkedElsewhere}}
		}
		if exists(tx, bucketIdentities, c.IdentityID) {
			return Result{Err: &ConflictError{Field: "id"}}
		}
		if res.Created {
			put(tx, bucketUsers, u.ID, u)
			putIndex(tx, bucketUserEmails, emailKey(u.Email), u.ID)
		}
		idn = Identity{ID: c.IdentityID, UserID: u.ID, ProviderID: ip.ID, Subject: c.Subject, LinkedAt: c.At}
		putIndex(tx, bucketIdentBySubj, subjectKey(ip.ID, c.Subject), idn.ID)
		putIndex(tx, bucketIdentByUser, u.ID+"/"+idn.ID, "")
		res.Linked = true
	}
	if c.Email != "" {
		idn.Email = c.Email
	}
	idn.LastUsedAt = c.At
	put(tx, bucketIdentities, idn.ID, idn)
	reconcileProviderMemberships(tx, u.ID, ip.ID, c.OrgIDs, c.MembershipIDs, c.At)
	if s := c.Session; s != nil {
		s.Session.UserID, s.Session.IdentityID, s.Session.ProviderID = u.ID, idn.ID, ip.ID
		res.Ended = startSSO(tx, index, *s)
	}
	if c.EndSessions != nil {
		res.Ended = endSessionsOf(tx, index, u.ID, c.EndSessions)
	}
	res.User, res.Identity = u, idn
	return Result{Value: res}
}

// federatedPerson is who a first sign-in through ip (no link yet) is:
// the signed-in person of an /account link, a person linked by address
// under mayLinkByAddress, or a new person (not yet written; created
// reports it), as ip's provisioning allows.
func federatedPerson(tx *bolt.Tx, ip IdentityProvider, c FederatedSignIn) (u User, created bool, err error) {
	if c.AccountUserID != "" {
		if !get(tx, bucketUsers, c.AccountUserID, &u) {
			return u, false, &NotFoundError{Field: "user_id"}
		}
		return u, false, nil
	}
	if ip.Provisioning == ProvisionOff {
		return u, false, &FederationRefusedError{Reason: RefusedProvisioningOff}
	}
	if !validKey(c.Email) || !strings.ContainsRune(c.Email, '@') {
		return u, false, &FederationRefusedError{Reason: RefusedNoAddress}
	}
	var have User
	taken := false
	if id, ok := getIndex(tx, bucketUserEmails, emailKey(c.Email)); ok {
		taken = get(tx, bucketUsers, id, &have)
	}
	switch {
	case taken && (ip.Provisioning == ProvisionLink || ip.Provisioning == ProvisionCreateOrLink):
		if !mayLinkByAddress(tx, ip, have, c.Email, c.EmailVerified) {
			return u, false, &FederationRefusedError{Reason: RefusedAddressTaken}
		}
		return have, false, nil
	case taken:
		return u, false, &FederationRefusedError{Reason: RefusedAddressTaken}
	case ip.Provisioning == ProvisionLink:
		return u, false, &FederationRefusedError{Reason: RefusedNoAccount}
	}
	if exists(tx, bucketUsers, c.UserID) {
		return u, false, &ConflictError{Field: "id"}
	}
	u = User{ID: c.UserID, Email: c.Email, EmailVerified: c.EmailVerified && ip.InEmailDomains(c.Email), CreatedAt: c.At, UpdatedAt: c.At}
	return u, true, nil
}

// reconcileProviderMemberships makes userID an active member of every
// organization of orgIDs (a new membership carries ProviderID and the
// fresh id beside its organization), and suspends the memberships the
// provider granted in any other organization, as a directory sync takes
// back what a gone group gave. A membership an operator made is never
// touched; one the provider granted is the provider's, and a suspension
// of it lifts when its group comes back.
func reconcileProviderMemberships(tx *bolt.Tx, userID, providerID string, orgIDs, membershipIDs []string, at time.Time) {
	for _, mid := range prefixKeys(tx, bucketMemberByU, userID) {
		var m Membership
		if !get(tx, bucketMembers, mid, &m) || m.ProviderID != providerID {
			continue
		}
		want := slices.Contains(orgIDs, m.OrgID)
		switch {
		case want && m.Status == MembershipSuspended:
			m.Status, m.UpdatedAt = MembershipActive, at
			put(tx, bucketMembers, m.ID, m)
		case !want && m.Status == MembershipActive:
			m.Status, m.UpdatedAt = MembershipSuspended, at
			put(tx, bucketMembers, m.ID, m)
		}
	}
	for i, orgID := range orgIDs {
		var o Org
		if exists(tx, bucketMemberPair, pairKey(userID, orgID)) || !get(tx, bucketOrgs, orgID, &o) || o.Status == OrgDeleted ||
			exists(tx, bucketMembers, membershipIDs[i]) {
			continue
		}
		putMembership(tx, Membership{ID: membershipIDs[i], UserID: userID, OrgID: orgID, Status: MembershipActive,
			CreatedAt: at, UpdatedAt: at, ProviderID: providerID})
	}
}

// hasOtherWayIn reports whether userID can sign in without link except:
// a password, a passkey, a directory or another link.
func hasOtherWayIn(tx *bolt.Tx, u User, except string) bool {
	if u.PasswordHash != "" || u.DirectoryID != "" {
		return true
	}
	var f Factors
	if get(tx, bucketFactors, u.ID, &f) && len(f.Passkeys) > 0 {
		return true
	}
	for _, id := range prefixKeys(tx, bucketIdentByUser, u.ID) {
		if id != except {
			return true
		}
	}
	return false
}

func applyUnlinkIdentity(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[UnlinkIdentity](p)
	if !validID(c.UserID, c.IdentityID) || !validEndSessions(c.EndSessions) {
		return invalid
	}
	var idn Identity
	if !get(tx, bucketIdentities, c.IdentityID, &idn) || idn.UserID != c.UserID {
		return Result{Err: ErrNotFound}
	}
	var u User
	if !get(tx, bucketUsers, c.UserID, &u) {
		return Result{Err: ErrNotFound}
	}
	if c.KeepWayIn && !hasOtherWayIn(tx, u, idn.ID) {
		return Result{Err: &FederationRefusedError{Reason: RefusedLastWayIn}}
	}
	ended := EndedApps{Index: index, Apps: removeIdentity(tx, idn.ID, c.At, EndIdentityUnlinked)}
	ended.Deliveries = enqueueLogouts(tx, index, c.At, EndIdentityUnlinked, withSID(ended.Apps))
	others := endSessionsOf(tx, index, u.ID, c.EndSessions)
	ended.Apps = append(ended.Apps, others.Apps...)
	ended.Deliveries = append(ended.Deliveries, others.Deliveries...)
	return Result{Value: ended}
}

func applyUpstreamLogout(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[UpstreamLogout](p)
	if !validID(c.ProviderID) || !validKey(c.JTI) || len(c.JTI) > 512 || len(c.SID) > 512 || len(c.Subject) > 255 || (c.SID == "" && c.Subject == "") {
		return invalid
	}
	if !exists(tx, bucketIdPs, c.ProviderID) {
		return Result{Err: ErrNotFound}
	}
	if exists(tx, bucketUpstreamJTIs, jtiKey(c.ProviderID, c.JTI)) {
		return Result{Err: &ConflictError{Field: "jti"}}
	}
	if err := tx.Bucket(bucketUpstreamJTIs).Put([]byte(jtiKey(c.ProviderID, c.JTI)), []byte(c.ExpiresAt.UTC().Format(time.RFC3339))); err != nil {
		panic(err)
	}
	var identityID string
	if c.Subject != "" {
		identityID, _ = getIndex(tx, bucketIdentBySubj, subjectKey(c.ProviderID, c.Subject))
	}
	var sessions []string
	if c.SID != "" {
		for _, ssoID := range prefixKeys(tx, bucketSSOByUpstream, upstreamSIDKey(c.ProviderID, c.SID)) {
			var s SSOSession
			// With both sid and sub, a session of another subject under
			// the same sid is not this token's.
			if get(tx, bucketSSO, ssoID, &s) && (c.Subject == "" || s.IdentityID == identityID) {
				sessions = append(sessions, ssoID)
			}
		}
	} else if identityID != "" {
		sessions = prefixKeys(tx, bucketSSOByIdent, identityID)
	}
	ended := EndedApps{Index: index}
	for _, ssoID := range sessions {
		ended.Apps = append(ended.Apps, endSSO(tx, ssoID, c.At, EndUpstreamLogout)...)
	}
	ended.Deliveries = enqueueLogouts(tx, index, c.At, EndUpstreamLogout, withSID(ended.Apps))
	return Result{Value: ended}
}

// indexFederatedSession records which link and upstream session opened s,
// for an unlink, a provider's deletion and the upstream's logout to find
// it.
func indexFederatedSession(tx *bolt.Tx, s SSOSession) {
	if s.IdentityID == "" {
		return
	}
	putIndex(tx, bucketSSOByIdent, s.IdentityID+"/"+s.ID, "")
	if s.UpstreamSID != "" && s.ProviderID != "" {
		putIndex(tx, bucketSSOByUpstream, upstreamSIDKey(s.ProviderID, s.UpstreamSID)+"/"+s.ID, "")
	}
}

// unindexFederatedSession removes what indexFederatedSession wrote, when
// the session is reaped.
func unindexFederatedSession(tx *bolt.Tx, s SSOSession) {
	if s.IdentityID == "" {
		return
	}
	del(tx, bucketSSOByIdent, s.IdentityID+"/"+s.ID)
	if s.UpstreamSID != "" && s.ProviderID != "" {
		del(tx, bucketSSOByUpstream, upstreamSIDKey(s.ProviderID, s.UpstreamSID)+"/"+s.ID)
	}
}

// IdentityProvider returns one provider.
func (s *State) IdentityProvider(id string) (IdentityProvider, error) {
	var ip IdentityProvider
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketIdPs, id, &ip); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return ip, err
}

// IdentityProviderBySlug returns the provider of a slug.
func (s *State) IdentityProviderBySlug(slug string) (IdentityProvider, error) {
	var ip IdentityProvider
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error {
		if id, found := getIndex(tx, bucketIdPSlugs, slug); found {
			ok = get(tx, bucketIdPs, id, &ip)
		}
		return nil
	})
	if err == nil && !ok {
		err = ErrNotFound
	}
	return ip, err
}

// IdentityProviders returns every provider, in id order.
func (s *State) IdentityProviders() ([]IdentityProvider, error) {
	var out []IdentityProvider
	err := s.f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketIdPs).ForEach(func(_, v []byte) error {
			var ip IdentityProvider
			if err := decodeRecord(v, &ip); err != nil {
				return err
			}
			out = append(out, ip)
			return nil
		})
	})
	return out, err
}

// HasIdentityProviders reports whether any provider is registered (the
// sign-in page looks for buttons only then): one cursor step.
func (s *State) HasIdentityProviders() (bool, error) {
	var any bool
	err := s.f.view(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketIdPs).Cursor().First()
		any = k != nil
		return nil
	})
	return any, err
}

// Identities returns a person's links, in id order.
func (s *State) Identities(userID string) ([]Identity, error) {
	var out []Identity
	err := s.f.view(func(tx *bolt.Tx) error {
		for _, id := range prefixKeys(tx, bucketIdentByUser, userID) {
			var idn Identity
			if get(tx, bucketIdentities, id, &idn) {
				out = append(out, idn)
			}
		}
		return nil
	})
	return out, err
}

// IdentityBySubject returns the link of an upstream subject.
func (s *State) IdentityBySubject(providerID, subject string) (Identity, error) {
	var idn Identity
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error {
		if id, found := getIndex(tx, bucketIdentBySubj, subjectKey(providerID, subject)); found {
			ok = get(tx, bucketIdentities, id, &idn)
		}
		return nil
	})
	if err == nil && !ok {
		err = ErrNotFound
	}
	return idn, err
}

// deriveUnlinkIdentity adds to the stamp's event (an administrator's, or
// the person's on /account) an identity event for the link removed, so
// that links made and removed are one type of event to query.
func deriveUnlinkIdentity(_ *bolt.Tx, p []byte, res Result, _ *Audit, se *Event) []Event {
	if se == nil {
		return nil
	}
	events := []Event{*se}
	if res.Err == nil {
		c := decode[UnlinkIdentity](p)
		e := *se
		e.Type, e.Subject = EventIdentity, c.UserID
		e.Detail = map[string]string{"action": "unlinked", "identity_id": c.IdentityID}
		if prov := se.Detail["provider"]; prov != "" {
			e.Detail["provider"] = prov
		}
		events = append(events, e)
	}
	return events
}

// deriveFederatedSignIn completes the sign-in event with the person the
// apply found (the proposer cannot know whom a first sign-in links to),
// adds an identity event when the link is new, and a logout event for
// each app session of the browser's superseded session.
func deriveFederatedSignIn(_ *bolt.Tx, p []byte, res Result, stamp *Audit, se *Event) []Event {
	if se == nil {
		return nil
	}
	r, ok := res.Value.(FederatedSignInResult)
	if !ok {
		return []Event{*se}
	}
	se.Subject = r.User.ID
	events := []Event{*se}
	if r.Linked {
		e := *se
		e.Type, e.Detail = EventIdentity, map[string]string{"action": "linked", "provider": se.Detail["provider"], "identity_id": r.Identity.ID}
		if r.Created {
			e.Detail["created"] = "true"
		}
		events = append(events, e)
	}
	return append(events, logoutEvents(stamp, r.Ended.Apps)...)
}
