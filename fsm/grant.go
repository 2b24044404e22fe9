package fsm

import (
	"cmp"
	"errors"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Administrators' credentials besides the break-glass token (meta.go):
// grants, which make a person an administrator, and API keys, for
// automation. Both carry a role and, for RoleOrgAdmin, the one
// organization it is scoped to. Package admin resolves a bearer credential
// to one of them on every request, so a grant or key deleted here is
// refused by the next request on any node that has applied the delete.

// Roles of a grant or an API key (package admin names the same values).
const (
	RoleAdmin    = "admin"
	RoleOrgAdmin = "org_admin"
	RoleAuditor  = "auditor"
)

// AdminGrant makes a person an administrator in a role. A person holds at
// most one grant per role, and RoleOrgAdmin for one organization only, so
// the credential a person's token resolves to is never ambiguous.
type AdminGrant struct {
	ID        string    `json:"id" cbor:"1,keyasint"`
	UserID    string    `json:"user_id" cbor:"2,keyasint"`
	Role      string    `json:"role" cbor:"3,keyasint"`
	OrgID     string    `json:"organization_id,omitempty" cbor:"4,keyasint,omitempty"` // RoleOrgAdmin only
	CreatedAt time.Time `json:"created_at" cbor:"5,keyasint"`
}

// APIKey is a credential for automation. Only Hash (password.HashSecret
// of the key's secret part) is stored; the key is shown once, to the
// administrator who created it.
type APIKey struct {
	ID        string    `json:"id" cbor:"1,keyasint"`
	Name      string    `json:"name" cbor:"2,keyasint"`
	Role      string    `json:"role" cbor:"3,keyasint"`
	OrgID     string    `json:"organization_id,omitempty" cbor:"4,keyasint,omitempty"` // RoleOrgAdmin only
	Hash      string    `json:"hash" cbor:"5,keyasint"`
	CreatedAt time.Time `json:"created_at" cbor:"6,keyasint"`
	ExpiresAt time.Time `json:"expires_at" cbor:"7,keyasint"`
	// MakerKind and MakerID name the credential that made the key
	// (FormatGate): MakerPerson and the person's user id, MakerAPIKey and
	// the key's id, or MakerToken (both empty) for the break-glass token
	// and for every key made before makers were recorded.
	MakerKind string `json:"maker_kind,omitempty" cbor:"8,keyasint,omitempty"`
	MakerID   string `json:"maker_id,omitempty" cbor:"9,keyasint,omitempty"`
}

// Who made an API key. A key belongs to the credential that made it: it
// never outlives the maker's authority, and never acts beyond it.
//
//   - A key is made only while its maker holds the authority for it
//     (applyCreateAPIKey refuses it otherwise, ErrMakerLapsed), and a key
//     made by a key expires no later than that key.
//   - The write that takes the authority away ends the key, on every node
//     at once (endLapsedKeys): removing a grant ends the keys its holder
//     made that their remaining grants do not cover, erasing a person
//     every key they made, deleting a key (or an organization's keys)
//     every key it made; and every key made by an ended key in turn.
//   - Package admin checks the same at every use (APIKeyLineage.InForce),
//     so a key never acts beyond what its maker holds at that moment,
//     whatever path changed the maker.
//
// The break-glass token is recorded as no maker at all (MakerToken, the
// zero value), as every key of oidcd 0.3.0 and before is: such a key is of
// the base format, so a cluster mid-upgrade still takes one, and old keys
// count as the token's. Replacing the token ends none of them: the token
// is one authority, the site's own, whose secret changes hands.
const (
	MakerToken  = ""
	MakerPerson = "person"
	MakerAPIKey = "api_key"
)

// MaxAPIKeyChain bounds a line of keys made by keys: a key made by a person
// or the token is the first, a key it makes the second. A key deeper than
// this is never made and never acts, so the check at use reads at most
// this many keys.
const MaxAPIKeyChain = 4

// ErrMakerLapsed refuses a new key whose maker does not hold the authority
// for it now: the person holds no grant that covers the key's role, or the
// maker key is gone, expired, of another role or organization, its own
// maker's authority lapsed, or it is MaxAPIKeyChain keys deep already.
var ErrMakerLapsed = errors.New("fsm: the maker does not hold the authority for this key")

// RoleCovers reports whether the authority of role (for RoleOrgAdmin, of
// organization org) covers a key of keyRole (keyOrg): an admin's covers
// every key; any other role only a key of the same role and organization.
func RoleCovers(role, org, keyRole, keyOrg string) bool {
	return role == RoleAdmin || role == keyRole && org == keyOrg
}

// GrantsCover reports whether one of a person's grants covers a key of
// role (org).
func GrantsCover(gs []AdminGrant, role, org string) bool {
	for _, g := range gs {
		if RoleCovers(g.Role, g.OrgID, role, org) {
			return true
		}
	}
	return false
}

// APIKeyLineage is a key and what made it, read at once
// (State.APIKeyLineage).
type APIKeyLineage struct {
	// Keys[0] is the key; each next one made the one before
	// (MakerAPIKey), at most MaxAPIKeyChain in all.
	Keys []APIKey
	// Grants are the grants of the person who made the last of Keys
	// (MakerPerson), as the state holds them now.
	Grants []AdminGrant
	// Broken: a maker key is gone, a maker is of an unknown kind, or the
	// line is longer than MaxAPIKeyChain.
	Broken bool
}

// InForce reports whether the key may act at time at: no key of the line
// has expired, each key's role is covered by the key that made it, and
// the first maker, a person, holds a grant that covers the last key (the
// token's authority is whole).
func (l APIKeyLineage) InForce(at time.Time) bool {
	if l.Broken || len(l.Keys) == 0 {
		return false
	}
	for i, k := range l.Keys {
		if !at.Before(k.ExpiresAt) {
			return false
		}
		if i > 0 && !RoleCovers(k.Role, k.OrgID, l.Keys[i-1].Role, l.Keys[i-1].OrgID) {
			return false
		}
	}
	switch root := l.Keys[len(l.Keys)-1]; root.MakerKind {
	case MakerToken:
		return true
	case MakerPerson:
		return GrantsCover(l.Grants, root.Role, root.OrgID)
	}
	return false
}

// lineageOf reads key id and the keys that made it; ok is false when there
// is no key id.
func lineageOf(tx *bolt.Tx, id string) (l APIKeyLineage, ok bool) {
	for {
		var k APIKey
		if !get(tx, bucketAPIKeys, id, &k) {
			l.Broken = len(l.Keys) > 0
			return l, len(l.Keys) > 0
		}
		if len(l.Keys) == MaxAPIKeyChain {
			l.Broken = true
			return l, true
		}
		l.Keys = append(l.Keys, k)
		switch k.MakerKind {
		case MakerAPIKey:
			id = k.MakerID
			continue
		case MakerPerson:
			l.Grants = grantsOf(tx, k.MakerID)
		case MakerToken:
		default:
			l.Broken = true
		}
		return l, true
	}
}

// validMaker: the token with no id, or a person or key with one (never
// the key itself).
func validMaker(k APIKey) bool {
	switch k.MakerKind {
	case MakerToken:
		return k.MakerID == ""
	case MakerPerson, MakerAPIKey:
		return validID(k.MakerID) && k.MakerID != k.ID
	}
	return false
}

// makerHolds reports whether the maker of k, a new key, holds the
// authority for it as the state stands (at k.CreatedAt, the proposer's
// stamp): invalid is a key made by a key that would outlive it, which the
// proposer bounds.
func makerHolds(tx *bolt.Tx, k APIKey) (ok, invalid bool) {
	switch k.MakerKind {
	case MakerPerson:
		return GrantsCover(grantsOf(tx, k.MakerID), k.Role, k.OrgID), false
	case MakerAPIKey:
		l, found := lineageOf(tx, k.MakerID)
		if !found || len(l.Keys) >= MaxAPIKeyChain || !l.InForce(k.CreatedAt) ||
			!RoleCovers(l.Keys[0].Role, l.Keys[0].OrgID, k.Role, k.OrgID) {
			return false, false
		}
		return true, k.ExpiresAt.After(l.Keys[0].ExpiresAt)
	}
	return true, false
}

// endLapsedKeys ends the keys whose maker's authority this write took
// away: those made by each person of people that their grants (as the
// write leaves them) no longer cover, every key made by a key of gone
// (deleted by this write), and, transitively, every key made by a key it
// ends. The keys bucket is walked once, as deleteOrgCredentials walks it:
// it holds a few records per administrator. It returns the ids it ended,
// in a deterministic order.
func endLapsedKeys(tx *bolt.Tx, people, gone []string) []string {
	made := map[string][]APIKey{} // maker kind/id -> the keys it made, in id order
	_ = tx.Bucket(bucketAPIKeys).ForEach(func(_, v []byte) error {
		var k APIKey
		mustUnmarshal(v, &k)
		if k.MakerKind != MakerToken {
			m := k.MakerKind + "/" + k.MakerID
			made[m] = append(made[m], k)
		}
		return nil
	})
	if len(made) == 0 {
		return nil
	}
	var ended []string
	var end func(k APIKey)
	end = func(k APIKey) {
		if !exists(tx, bucketAPIKeys, k.ID) {
			return // ended already, through another line
		}
		del(tx, bucketAPIKeys, k.ID)
		ended = append(ended, k.ID)
		for _, c := range made[MakerAPIKey+"/"+k.ID] {
			end(c)
		}
	}
	for _, p := range people {
		gs := grantsOf(tx, p)
		for _, k := range made[MakerPerson+"/"+p] {
			if !GrantsCover(gs, k.Role, k.OrgID) {
				end(k)
			}
		}
	}
	for _, id := range gone {
		for _, k := range made[MakerAPIKey+"/"+id] {
			end(k)
		}
	}
	return ended
}

// MaxAPIKeyLifetime bounds ExpiresAt - CreatedAt of an API key.
const MaxAPIKeyLifetime = 365 * 24 * time.Hour

// CreateAdminGrant gives a person a role. NotFoundError{user_id}: no such
// person; NotFoundError{organization_id}: no such live organization;
// ConflictError{id}: the id is taken; ConflictError{role}: the person
// holds this role (for this organization) already;
// ConflictError{organization_id}: the person is org_admin of another
// organization. Value: the AdminGrant.
type CreateAdminGrant struct {
	Grant AdminGrant `json:"grant"`
}

// DeleteAdminGrant takes a grant back, and ends the keys its holder made
// that their remaining grants do not cover (ErrNotFound: no such grant).
type DeleteAdminGrant struct {
	ID string `json:"id"`
}

// CreateAPIKey stores a new API key. NotFoundError{organization_id}: no
// such live organization; ConflictError{id}: the id is taken;
// ErrMakerLapsed: the maker (MakerKind, MakerID) does not hold the
// authority for the key. Value: the APIKey.
type CreateAPIKey struct {
	Key APIKey `json:"key"`
}

// DeleteAPIKey removes a key, and every key it made, transitively
// (ErrNotFound: no such key).
type DeleteAPIKey struct {
	ID string `json:"id"`
}

func init() {
	register(TypeCreateAdminGrant, applyCreateAdminGrant)
	register(TypeDeleteAdminGrant, applyDeleteAdminGrant)
	register(TypeCreateAPIKey, applyCreateAPIKey)
	register(TypeDeleteAPIKey, applyDeleteAPIKey)
	// An expired key is refused by its reader at once; the reap only
	// clears it away.
	reaps(expiring(bucketAPIKeys, func(st *ReapStats) *int { return &st.APIKeys }, func(k *APIKey, before time.Time) bool {
		return !k.ExpiresAt.After(before)
	}))
}

// validRole reports whether role is known and org is set exactly when the
// role is scoped to an organization.
func validRole(role, org string) bool {
	switch role {
	case RoleAdmin, RoleAuditor:
		return org == ""
	case RoleOrgAdmin:
		return validID(org)
	}
	return false
}

// liveOrg reports whether id names an organization that is not deleted.
func liveOrg(tx *bolt.Tx, id string) bool {
	var o Org
	return get(tx, bucketOrgs, id, &o) && o.Status != OrgDeleted
}

func grantByUserKey(userID, id string) string { return userID + "/" + id }

func applyCreateAdminGrant(tx *bolt.Tx, _ uint64, p []byte) Result {
	g := decode[CreateAdminGrant](p).Grant
	if !validID(g.ID, g.UserID) || !validRole(g.Role, g.OrgID) {
		return invalid
	}
	if exists(tx, bucketGrants, g.ID) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	if !exists(tx, bucketUsers, g.UserID) {
		return Result{Err: &NotFoundError{Field: "user_id"}}
	}
	if g.OrgID != "" && !liveOrg(tx, g.OrgID) {
		return Result{Err: &NotFoundError{Field: "organization_id"}}
	}
	for _, have := range grantsOf(tx, g.UserID) {
		switch {
		case have.Role == g.Role && have.OrgID == g.OrgID:
			return Result{Err: &ConflictError{Field: "role"}}
		case have.Role == RoleOrgAdmin && g.Role == RoleOrgAdmin:
			return Result{Err: &ConflictError{Field: "organization_id"}}
		}
	}
	put(tx, bucketGrants, g.ID, g)
	putIndex(tx, bucketGrantByU, grantByUserKey(g.UserID, g.ID), "")
	return Result{Value: g}
}

// applyDeleteAdminGrant takes the grant back and, in the same write, ends
// the keys its holder made that their remaining grants do not cover.
func applyDeleteAdminGrant(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[DeleteAdminGrant](p)
	if !validID(c.ID) {
		return invalid
	}
	var g AdminGrant
	if !get(tx, bucketGrants, c.ID, &g) {
		return Result{Err: ErrNotFound}
	}
	deleteGrant(tx, c.ID)
	endLapsedKeys(tx, []string{g.UserID}, nil)
	return Result{}
}

func deleteGrant(tx *bolt.Tx, id string) bool {
	var g AdminGrant
	if !get(tx, bucketGrants, id, &g) {
		return false
	}
	del(tx, bucketGrants, id)
	del(tx, bucketGrantByU, grantByUserKey(g.UserID, g.ID))
	return true
}

// grantsOf returns a person's grants, oldest first (then by id).
func grantsOf(tx *bolt.Tx, userID string) []AdminGrant {
	var out []AdminGrant
	for _, id := range prefixKeys(tx, bucketGrantByU, userID) {
		var g AdminGrant
		if get(tx, bucketGrants, id, &g) {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b AdminGrant) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// deleteGrantsOf removes a person's grants (the person is being erased).
func deleteGrantsOf(tx *bolt.Tx, userID string) {
	for _, id := range prefixKeys(tx, bucketGrantByU, userID) {
		deleteGrant(tx, id)
	}
}

// deleteOrgCredentials removes the grants and API keys scoped to an
// organization that is being deleted, and the keys that lapse with them
// (endLapsedKeys). Both buckets are walked: they hold a few records per
// administrator, and an organization is deleted rarely.
func deleteOrgCredentials(tx *bolt.Tx, orgID string) {
	var grants, holders, keys []string
	_ = tx.Bucket(bucketGrants).ForEach(func(k, v []byte) error {
		var g AdminGrant
		mustUnmarshal(v, &g)
		if g.OrgID == orgID {
			grants = append(grants, string(k))
			holders = append(holders, g.UserID)
		}
		return nil
	})
	_ = tx.Bucket(bucketAPIKeys).ForEach(func(k, v []byte) error {
		var ak APIKey
		mustUnmarshal(v, &ak)
		if ak.OrgID == orgID {
			keys = append(keys, string(k))
		}
		return nil
	})
	for _, id := range grants {
		deleteGrant(tx, id)
	}
	for _, id := range keys {
		del(tx, bucketAPIKeys, id)
	}
	endLapsedKeys(tx, holders, keys)
}

func applyCreateAPIKey(tx *bolt.Tx, _ uint64, p []byte) Result {
	k := decode[CreateAPIKey](p).Key
	if !validID(k.ID) || !validRole(k.Role, k.OrgID) || !validKey(k.Name, k.Hash) || !validMaker(k) ||
		!k.ExpiresAt.After(k.CreatedAt) || k.ExpiresAt.Sub(k.CreatedAt) > MaxAPIKeyLifetime {
		return invalid
	}
	if exists(tx, bucketAPIKeys, k.ID) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	if k.OrgID != "" && !liveOrg(tx, k.OrgID) {
		return Result{Err: &NotFoundError{Field: "organization_id"}}
	}
	switch ok, bad := makerHolds(tx, k); {
	case bad:
		return invalid
	case !ok:
		return Result{Err: ErrMakerLapsed}
	}
	put(tx, bucketAPIKeys, k.ID, k)
	return Result{Value: k}
}

func applyDeleteAPIKey(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[DeleteAPIKey](p)
	if !validID(c.ID) {
		return invalid
	}
	if !exists(tx, bucketAPIKeys, c.ID) {
		return Result{Err: ErrNotFound}
	}
	del(tx, bucketAPIKeys, c.ID)
	endLapsedKeys(tx, nil, []string{c.ID})
	return Result{}
}

// AdminGrant returns one grant.
func (s *State) AdminGrant(id string) (AdminGrant, error) {
	var g AdminGrant
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketGrants, id, &g); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return g, err
}

// AdminGrantsOfUser returns a person's grants, oldest first (none: an
// empty slice and no error).
func (s *State) AdminGrantsOfUser(userID string) ([]AdminGrant, error) {
	var out []AdminGrant
	err := s.f.view(func(tx *bolt.Tx) error { out = grantsOf(tx, userID); return nil })
	return out, err
}

// AdminGrants lists grants in id order.
func (s *State) AdminGrants(p Page) ([]AdminGrant, int, error) {
	return listBucket[AdminGrant](s, bucketGrants, p)
}

// APIKey returns one API key, expired or not: the reader compares
// ExpiresAt with its clock.
func (s *State) APIKey(id string) (APIKey, error) {
	var k APIKey
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketAPIKeys, id, &k); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return k, err
}

// APIKeyLineage reads key id and what made it in one read (ErrNotFound:
// no such key), for the check at every use: the caller compares the
// key's hash and asks InForce.
func (s *State) APIKeyLineage(id string) (APIKeyLineage, error) {
	var l APIKeyLineage
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { l, ok = lineageOf(tx, id); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return l, err
}

// APIKeys lists API keys in id order.
func (s *State) APIKeys(p Page) ([]APIKey, int, error) {
	return listBucket[APIKey](s, bucketAPIKeys, p)
}
