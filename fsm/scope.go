package fsm

import bolt "go.etcd.io/bbolt"

// Reads of one organization's share of the state, for an administrator
// whose grant is limited to it: the lists of the admin API show such a
// reader only what is in their organization.

// MembershipsInOrg lists the memberships of one organization, in
// membership id order, and counts them.
func (s *State) MembershipsInOrg(orgID string, p Page) ([]Membership, int, error) {
	var out []Membership
	total := 0
	err := s.f.view(func(tx *bolt.Tx) error {
		ids := prefixKeys(tx, bucketMemberByO, orgID)
		total = len(ids)
		for _, id := range pageOf(ids, p) {
			var m Membership
			if get(tx, bucketMembers, id, &m) {
				out = append(out, m)
			}
		}
		return nil
	})
	return out, total, err
}

// MembersOfOrg lists the people who hold a membership in one
// organization (a person holds at most one per organization), in
// membership id order, and counts them.
func (s *State) MembersOfOrg(orgID string, p Page) ([]User, int, error) {
	var out []User
	total := 0
	err := s.f.view(func(tx *bolt.Tx) error {
		ids := prefixKeys(tx, bucketMemberByO, orgID)
		total = len(ids)
		for _, id := range pageOf(ids, p) {
			var m Membership
			var u User
			if get(tx, bucketMembers, id, &m) && get(tx, bucketUsers, m.UserID, &u) {
				out = append(out, u)
			}
		}
		return nil
	})
	return out, total, err
}

// ClientsWhere lists the registrations keep accepts, in client_id order,
// and counts them.
func (s *State) ClientsWhere(keep func(Client) bool, p Page) ([]Client, int, error) {
	var out []Client
	total := 0
	err := s.f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketClients).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			var cl Client
			if !get(tx, bucketClients, string(k), &cl) || !keep(cl) {
				continue
			}
			if total >= p.offset() && len(out) < p.PageSize {
				out = append(out, cl)
			}
			total++
		}
		return nil
	})
	return out, total, err
}

// pageOf is the part of ids on page p.
func pageOf(ids []string, p Page) []string {
	start := min(max(p.offset(), 0), len(ids))
	return ids[start:min(start+p.PageSize, len(ids))]
}
