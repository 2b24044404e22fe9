package fsm

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Membership statuses.
const (
	MembershipActive    = "active"
	MembershipSuspended = "suspended"
)

// Membership ties a person to an organization. A person has at most one
// membership per organization.
type Membership struct {
	ID        string    `json:"id" cbor:"1,keyasint"`
	UserID    string    `json:"user_id" cbor:"2,keyasint"`
	OrgID     string    `json:"org_id" cbor:"3,keyasint"`
	Status    string    `json:"status" cbor:"4,keyasint"`
	CreatedAt time.Time `json:"created_at" cbor:"5,keyasint"`
	UpdatedAt time.Time `json:"updated_at" cbor:"6,keyasint"`
	// DirectoryID: granted by that directory's group mapping, and taken
	// back by it ("" for one an operator created).
	DirectoryID string `json:"directory_id,omitempty" cbor:"7,keyasint,omitempty"`
	// ProviderID: granted by that identity provider's memberships
	// (federation.go), suspended by it when the group that gave it goes.
	ProviderID string `json:"provider_id,omitempty" cbor:"8,keyasint,omitempty"`
}

// CreateMembership adds a person to an organization.
type CreateMembership struct {
	Membership Membership `json:"membership"`
}

// UpdateMembership changes a membership's status.
type UpdateMembership struct {
	ID     string    `json:"id"`
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

// DeleteMembership removes a membership.
type DeleteMembership struct {
	ID string `json:"id"`
}

func init() {
	register(TypeCreateMembership, applyCreateMembership)
	register(TypeUpdateMembership, applyUpdateMembership)
	register(TypeDeleteMembership, applyDeleteMembership)
}

func pairKey(userID, orgID string) string { return userID + "/" + orgID }

func applyCreateMembership(tx *bolt.Tx, _ uint64, p []byte) Result {
	m := decode[CreateMembership](p).Membership
	if !validID(m.ID, m.UserID, m.OrgID) {
		return invalid
	}
	if !exists(tx, bucketUsers, m.UserID) {
		return Result{Err: &NotFoundError{Field: "user_id"}}
	}
	var o Org
	if !get(tx, bucketOrgs, m.OrgID, &o) || o.Status == OrgDeleted {
		return Result{Err: &NotFoundError{Field: "org_id"}}
	}
	if exists(tx, bucketMembers, m.ID) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	if exists(tx, bucketMemberPair, pairKey(m.UserID, m.OrgID)) {
		return Result{Err: &ConflictError{Field: "org_id"}}
	}
	putMembership(tx, m)
	return Result{Value: m}
}

func applyUpdateMembership(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[UpdateMembership](p)
	if !validID(c.ID) {
		return invalid
	}
	var m Membership
	if !get(tx, bucketMembers, c.ID, &m) {
		return Result{Err: ErrNotFound}
	}
	m.Status, m.UpdatedAt = c.Status, c.At
	put(tx, bucketMembers, m.ID, m)
	return Result{Value: m}
}

func applyDeleteMembership(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[DeleteMembership](p)
	if !validID(c.ID) {
		return invalid
	}
	if !exists(tx, bucketMembers, c.ID) {
		return Result{Err: ErrNotFound}
	}
	deleteMembership(tx, c.ID)
	return Result{}
}

// putMembership writes a new membership with its indexes; deleteMembership
// undoes it.
func putMembership(tx *bolt.Tx, m Membership) {
	put(tx, bucketMembers, m.ID, m)
	putIndex(tx, bucketMemberByU, m.UserID+"/"+m.ID, "")
	putIndex(tx, bucketMemberByO, m.OrgID+"/"+m.ID, "")
	putIndex(tx, bucketMemberPair, pairKey(m.UserID, m.OrgID), m.ID)
}

func deleteMembership(tx *bolt.Tx, id string) {
	var m Membership
	if !get(tx, bucketMembers, id, &m) {
		return
	}
	del(tx, bucketMembers, id)
	del(tx, bucketMemberByU, m.UserID+"/"+m.ID)
	del(tx, bucketMemberByO, m.OrgID+"/"+m.ID)
	del(tx, bucketMemberPair, pairKey(m.UserID, m.OrgID))
}

// Membership returns one membership.
func (s *State) Membership(id string) (Membership, error) {
	var m Membership
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketMembers, id, &m); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return m, err
}

// MembershipOf returns the membership of a person in an organization.
func (s *State) MembershipOf(userID, orgID string) (Membership, error) {
	var m Membership
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error {
		if id := tx.Bucket(bucketMemberPair).Get([]byte(pairKey(userID, orgID))); id != nil {
			ok = get(tx, bucketMembers, string(id), &m)
		}
		return nil
	})
	if err == nil && !ok {
		err = ErrNotFound
	}
	return m, err
}

// MembershipWithOrg is a membership joined with its organization.
type MembershipWithOrg struct {
	Membership
	Org Org
}

// MembershipsOfUser lists a person's memberships with their organizations,
// in membership id order.
func (s *State) MembershipsOfUser(userID string) ([]MembershipWithOrg, error) {
	var out []MembershipWithOrg
	err := s.f.view(func(tx *bolt.Tx) error {
		for _, mid := range prefixKeys(tx, bucketMemberByU, userID) {
			var m MembershipWithOrg
			if get(tx, bucketMembers, mid, &m.Membership) {
				get(tx, bucketOrgs, m.OrgID, &m.Org)
				out = append(out, m)
			}
		}
		return nil
	})
	return out, err
}

// Memberships lists all memberships in id order.
func (s *State) Memberships(p Page) ([]Membership, int, error) {
	return listBucket[Membership](s, bucketMembers, p)
}
