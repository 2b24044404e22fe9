package fsm

import (
	"cmp"
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

// DeleteAdminGrant takes a grant back (ErrNotFound: no such grant).
type DeleteAdminGrant struct {
	ID string `json:"id"`
}

// CreateAPIKey stores a new API key. NotFoundError{organization_id}: no
// such live organization; ConflictError{id}: the id is taken. Value: the
// APIKey.
type CreateAPIKey struct {
	Key APIKey `json:"key"`
}

// DeleteAPIKey removes a key (ErrNotFound: no such key).
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

func applyDeleteAdminGrant(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[DeleteAdminGrant](p)
	if !validID(c.ID) {
		return invalid
	}
	if !deleteGrant(tx, c.ID) {
		return Result{Err: ErrNotFound}
	}
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
// organization that is being deleted. Both buckets are walked: they hold
// a few records per administrator, and an organization is deleted rarely.
func deleteOrgCredentials(tx *bolt.Tx, orgID string) {
	var grants, keys []string
	_ = tx.Bucket(bucketGrants).ForEach(func(k, v []byte) error {
		var g AdminGrant
		mustUnmarshal(v, &g)
		if g.OrgID == orgID {
			grants = append(grants, string(k))
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
}

func applyCreateAPIKey(tx *bolt.Tx, _ uint64, p []byte) Result {
	k := decode[CreateAPIKey](p).Key
	if !validID(k.ID) || !validRole(k.Role, k.OrgID) || !validKey(k.Name, k.Hash) ||
		!k.ExpiresAt.After(k.CreatedAt) || k.ExpiresAt.Sub(k.CreatedAt) > MaxAPIKeyLifetime {
		return invalid
	}
	if exists(tx, bucketAPIKeys, k.ID) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	if k.OrgID != "" && !liveOrg(tx, k.OrgID) {
		return Result{Err: &NotFoundError{Field: "organization_id"}}
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

// APIKeys lists API keys in id order.
func (s *State) APIKeys(p Page) ([]APIKey, int, error) {
	return listBucket[APIKey](s, bucketAPIKeys, p)
}
