package fsm

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Organization statuses.
const (
	OrgActive  = "active"
	OrgDeleted = "deleted"
)

// Org is an organization.
type Org struct {
	ID        string    `json:"id" cbor:"1,keyasint"`
	Slug      string    `json:"slug" cbor:"2,keyasint"`
	Name      string    `json:"name" cbor:"3,keyasint"`
	Status    string    `json:"status" cbor:"4,keyasint"`
	CreatedAt time.Time `json:"created_at" cbor:"5,keyasint"`
	DeletedAt time.Time `json:"deleted_at,omitzero" cbor:"6,keyasint,omitzero"`
	// Registration: who may register themselves into the organization
	// (nil: nobody).
	Registration *Registration `json:"registration,omitempty" cbor:"7,keyasint,omitempty"`
	// Branding: the organization's own (nil: the site's default,
	// BrandingFor).
	Branding *Branding `json:"branding,omitempty" cbor:"8,keyasint,omitempty"`
}

// CreateOrg creates an organization; the slug is unique for ever (a deleted
// organization keeps its slug so old memberships stay unambiguous).
type CreateOrg struct {
	ID        string    `json:"id"`
	Slug      string    `json:"slug"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// DeleteOrg marks an organization deleted and removes the admin grants
// and API keys scoped to it.
type DeleteOrg struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

func init() {
	register(TypeCreateOrg, applyCreateOrg)
	register(TypeDeleteOrg, applyDeleteOrg)
}

func applyCreateOrg(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[CreateOrg](p)
	if !validID(c.ID) || !validKey(c.Slug) {
		return invalid
	}
	if exists(tx, bucketOrgs, c.ID) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	if exists(tx, bucketOrgSlugs, c.Slug) {
		return Result{Err: &ConflictError{Field: "slug"}}
	}
	o := Org{ID: c.ID, Slug: c.Slug, Name: c.Name, Status: OrgActive, CreatedAt: c.CreatedAt}
	put(tx, bucketOrgs, o.ID, o)
	if err := tx.Bucket(bucketOrgSlugs).Put([]byte(c.Slug), []byte(c.ID)); err != nil {
		panic(err)
	}
	return Result{Value: o}
}

func applyDeleteOrg(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[DeleteOrg](p)
	if !validID(c.ID) {
		return invalid
	}
	var o Org
	if !get(tx, bucketOrgs, c.ID, &o) {
		return Result{Err: ErrNotFound}
	}
	ended := EndedApps{Index: index}
	if o.Status != OrgDeleted {
		o.Status, o.DeletedAt = OrgDeleted, c.At
		put(tx, bucketOrgs, o.ID, o)
		var targets []logoutTarget
		for _, sid := range prefixKeys(tx, bucketAppByOrg, o.ID) {
			if a, ok := endApp(tx, sid, c.At, EndOrgDeleted); ok {
				ended.Apps = append(ended.Apps, a)
				// Back-channel logout: apps registered to the organization get
				// the sub-only shape; multi-organization apps one token with
				// sid per ended app session.
				var cl Client
				get(tx, bucketClients, a.ClientID, &cl)
				targets = append(targets, logoutTarget{app: a, subOnly: !cl.MultiOrganization})
			}
		}
		ended.Deliveries = enqueueLogouts(tx, index, c.At, CauseOrgDeleted, targets)
		deleteOrgCredentials(tx, o.ID)
		// The organization's own providers go with it, and every
		// session opened through them.
		if apps := deleteOrgProviders(tx, o.ID, c.At); len(apps) > 0 {
			ended.Apps = append(ended.Apps, apps...)
			ended.Deliveries = append(ended.Deliveries, enqueueLogouts(tx, index, c.At, EndProviderDeleted, withSID(apps))...)
		}
	}
	return Result{Value: ended}
}

// Org returns one organization.
func (s *State) Org(id string) (Org, error) {
	var o Org
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketOrgs, id, &o); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return o, err
}

// Orgs lists organizations in id order.
func (s *State) Orgs(p Page) ([]Org, int, error) { return listBucket[Org](s, bucketOrgs, p) }
