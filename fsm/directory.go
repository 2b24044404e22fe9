package fsm

import (
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Directories (docs/operators/directories.md): LDAP or Active Directory servers
// people sign in against, replicated like any configuration, and the
// people they bring. A directory person is a User with DirectoryID and
// DirectoryUID set; the memberships their groups grant carry DirectoryID,
// so a sync or sign-in can take back what the directory gave and never
// touches what an operator granted by hand.

// Directory is one registered directory. BindPassword is sealed under the
// KEK by the proposer (aad DirectoryAAD(ID)); the state never holds it in
// the clear when a KEK is configured.
type Directory struct {
	ID             string         `json:"id" cbor:"1,keyasint"`
	Name           string         `json:"name" cbor:"2,keyasint"`
	URL            string         `json:"url" cbor:"3,keyasint"`
	StartTLS       bool           `json:"start_tls,omitempty" cbor:"4,keyasint,omitempty"`
	CAPEM          string         `json:"ca_pem,omitempty" cbor:"5,keyasint,omitempty"`
	Insecure       bool           `json:"insecure,omitempty" cbor:"6,keyasint,omitempty"`
	BindDN         string         `json:"bind_dn" cbor:"7,keyasint"`
	BindPassword   []byte         `json:"bind_password,omitempty" cbor:"8,keyasint,omitempty"`
	UserBase       string         `json:"user_base" cbor:"9,keyasint"`
	UserFilter     string         `json:"user_filter" cbor:"10,keyasint"`
	IDAttribute    string         `json:"id_attribute" cbor:"11,keyasint"`
	EmailAttribute string         `json:"email_attribute,omitempty" cbor:"12,keyasint,omitempty"`
	PhoneAttribute string         `json:"phone_attribute,omitempty" cbor:"13,keyasint,omitempty"`
	GroupBase      string         `json:"group_base,omitempty" cbor:"14,keyasint,omitempty"`
	GroupFilter    string         `json:"group_filter,omitempty" cbor:"15,keyasint,omitempty"`
	Organizations  []DirectoryOrg `json:"organizations,omitempty" cbor:"16,keyasint,omitempty"`
	SyncInterval   time.Duration  `json:"sync_interval" cbor:"17,keyasint"`
	CreatedAt      time.Time      `json:"created_at" cbor:"18,keyasint"`
	UpdatedAt      time.Time      `json:"updated_at" cbor:"19,keyasint"`
	LastSync       *DirectorySync `json:"last_sync,omitempty" cbor:"20,keyasint,omitempty"`
}

// DirectoryOrg maps a group to an organization: the group's members are
// active members of it.
type DirectoryOrg struct {
	GroupDN string `json:"group_dn" cbor:"1,keyasint"`
	OrgID   string `json:"organization_id" cbor:"2,keyasint"`
}

// DirectorySync is the outcome of the leader's last sync of a directory.
type DirectorySync struct {
	At      time.Time `json:"at" cbor:"1,keyasint"`
	OK      bool      `json:"ok" cbor:"2,keyasint"`
	Error   string    `json:"error,omitempty" cbor:"3,keyasint,omitempty"`
	People  int       `json:"people" cbor:"4,keyasint"`  // directory people known here
	Changed int       `json:"changed" cbor:"5,keyasint"` // people whose record or memberships changed
	Ended   int       `json:"ended" cbor:"6,keyasint"`   // people disabled or removed, sessions ended
	Node    string    `json:"node,omitempty" cbor:"7,keyasint,omitempty"`
}

// DirectoryAAD is the additional data sealing a directory's bind password.
func DirectoryAAD(id string) string { return "directory/" + id }

// EndDirectory: the person was disabled in, or removed from, their
// directory; CauseDirectory is the back-channel logout's cause.
const (
	EndDirectory   = "directory_disabled"
	CauseDirectory = "directory_disabled"
)

// PutDirectory creates (Create) or replaces a directory. On replace an
// empty BindPassword keeps the stored one, and LastSync is kept.
type PutDirectory struct {
	Directory Directory `json:"directory"`
	Create    bool      `json:"create,omitempty"`
}

// DeleteDirectory removes a directory. Its people stay, as they are, and
// can no longer sign in until a directory with the same id comes back.
type DeleteDirectory struct {
	ID string `json:"id"`
}

// DirectoryPerson is what the directory says of one person, in a
// sign-in or a sync: the proposer has mapped groups to OrgIDs and given a
// fresh membership id per organization (used only for new memberships).
type DirectoryPerson struct {
	UID           string   `json:"uid"`
	Email         string   `json:"email"`
	Phone         string   `json:"phone,omitempty"`
	OrgIDs        []string `json:"org_ids,omitempty"`
	MembershipIDs []string `json:"membership_ids,omitempty"`
	// Gone: disabled or removed in the directory (sync only). Their
	// sessions end with logout tokens carrying sid, and the memberships
	// the directory granted are taken back.
	Gone bool `json:"gone,omitempty"`
}

// DirectorySignIn records a successful bind: the first one creates the
// person with UserID (derived by the proposer from the directory id and
// UID, so it is the same on every try); every one brings the address,
// phone and group memberships up to date. ConflictError{email}: the
// address belongs to another person of this provider (a local person
// keeps it). Value: the User.
type DirectorySignIn struct {
	DirectoryID string          `json:"directory_id"`
	UserID      string          `json:"user_id"`
	Person      DirectoryPerson `json:"person"`
	At          time.Time       `json:"at"`
}

// DirectorySyncBatch applies the differences a leader's sync found for
// some of a directory's people (at most MaxImportBatch), and, on the last
// batch of a sync, its Status. Value: EndedApps of the people Gone.
type DirectorySyncBatch struct {
	DirectoryID string            `json:"directory_id"`
	People      []DirectoryPerson `json:"people,omitempty"`
	Status      *DirectorySync    `json:"status,omitempty"`
	At          time.Time         `json:"at"`
}

func init() {
	register(TypePutDirectory, applyPutDirectory)
	register(TypeDeleteDirectory, applyDeleteDirectory)
	register(TypeDirectorySignIn, applyDirectorySignIn)
	register(TypeDirectorySyncBatch, applyDirectorySyncBatch)
}

func dirUserKey(dirID, uid string) string { return dirID + "/" + uid }

func applyPutDirectory(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[PutDirectory](p)
	d := c.Directory
	if !validID(d.ID) || d.URL == "" || len(d.Organizations) > 1000 {
		return invalid
	}
	var cur Directory
	found := get(tx, bucketDirectories, d.ID, &cur)
	switch {
	case c.Create && found:
		return Result{Err: &ConflictError{Field: "id"}}
	case !c.Create && !found:
		return Result{Err: ErrNotFound}
	}
	for _, o := range d.Organizations {
		var org Org
		if !get(tx, bucketOrgs, o.OrgID, &org) || org.Status == OrgDeleted {
			return Result{Err: &NotFoundError{Field: "organizations"}}
		}
	}
	if found {
		d.CreatedAt, d.LastSync = cur.CreatedAt, cur.LastSync
		if len(d.BindPassword) == 0 {
			d.BindPassword = cur.BindPassword
		}
	}
	put(tx, bucketDirectories, d.ID, d)
	return Result{Value: d}
}

func applyDeleteDirectory(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[DeleteDirectory](p)
	if !validID(c.ID) {
		return invalid
	}
	if !exists(tx, bucketDirectories, c.ID) {
		return Result{Err: ErrNotFound}
	}
	del(tx, bucketDirectories, c.ID)
	return Result{}
}

func validPerson(p DirectoryPerson) bool {
	return validKey(p.UID) && len(p.UID) <= 256 && len(p.Email) <= 320 && len(p.Phone) <= 64 &&
		len(p.OrgIDs) == len(p.MembershipIDs) && len(p.OrgIDs) <= 1000 && validID(p.OrgIDs...) && validID(p.MembershipIDs...)
}

func applyDirectorySignIn(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[DirectorySignIn](p)
	if !validID(c.DirectoryID, c.UserID) || !validPerson(c.Person) || !validKey(c.Person.Email) {
		return invalid
	}
	if !exists(tx, bucketDirectories, c.DirectoryID) {
		return Result{Err: &NotFoundError{Field: "directory_id"}}
	}
	var u User
	id, known := getIndex(tx, bucketDirUsers, dirUserKey(c.DirectoryID, c.Person.UID))
	if known && get(tx, bucketUsers, id, &u) {
		if err := updateDirectoryUser(tx, &u, c.Person, c.At); err != nil {
			return Result{Err: err}
		}
	} else {
		if exists(tx, bucketUserEmails, emailKey(c.Person.Email)) {
			return Result{Err: &ConflictError{Field: "email"}}
		}
		if exists(tx, bucketUsers, c.UserID) {
			return Result{Err: &ConflictError{Field: "id"}}
		}
		u = User{ID: c.UserID, Email: c.Person.Email, EmailVerified: true, CreatedAt: c.At, UpdatedAt: c.At,
			DirectoryID: c.DirectoryID, DirectoryUID: c.Person.UID}
		if c.Person.Phone != "" && !exists(tx, bucketUserPhones, c.Person.Phone) {
			u.Phone = c.Person.Phone
			putIndex(tx, bucketUserPhones, u.Phone, u.ID)
		}
		put(tx, bucketUsers, u.ID, u)
		putIndex(tx, bucketUserEmails, emailKey(u.Email), u.ID)
		putIndex(tx, bucketDirUsers, dirUserKey(c.DirectoryID, c.Person.UID), u.ID)
	}
	reconcileDirectoryMemberships(tx, u.ID, c.DirectoryID, c.Person, c.At)
	return Result{Value: u}
}

// updateDirectoryUser brings a known directory person's address and phone
// up to date. An address or phone another person holds is left as it was
// (ConflictError for the address: the sign-in is refused rather than
// silently keep a stale address).
func updateDirectoryUser(tx *bolt.Tx, u *User, p DirectoryPerson, at time.Time) error {
	changed := false
	if p.Email != "" && emailKey(p.Email) != emailKey(u.Email) {
		if exists(tx, bucketUserEmails, emailKey(p.Email)) {
			return &ConflictError{Field: "email"}
		}
		del(tx, bucketUserEmails, emailKey(u.Email))
		u.Email = p.Email
		putIndex(tx, bucketUserEmails, emailKey(u.Email), u.ID)
		changed = true
	} else if p.Email != "" && p.Email != u.Email {
		u.Email, changed = p.Email, true
	}
	if p.Phone != u.Phone && (p.Phone == "" || !exists(tx, bucketUserPhones, p.Phone)) {
		if u.Phone != "" {
			del(tx, bucketUserPhones, u.Phone)
		}
		u.Phone = p.Phone
		if u.Phone != "" {
			putIndex(tx, bucketUserPhones, u.Phone, u.ID)
		}
		changed = true
	}
	if changed {
		u.UpdatedAt = at
		put(tx, bucketUsers, u.ID, *u)
	}
	return nil
}

// reconcileDirectoryMemberships makes the memberships directory dirID
// granted to userID exactly p's organizations: new ones are created
// active, ones no group grants any more are removed. A membership an
// operator created (no DirectoryID) is never touched, and a person who
// already has one in an organization keeps it as it is. It reports
// whether anything changed.
func reconcileDirectoryMemberships(tx *bolt.Tx, userID, dirID string, p DirectoryPerson, at time.Time) bool {
	changed := false
	for _, mid := range prefixKeys(tx, bucketMemberByU, userID) {
		var m Membership
		if get(tx, bucketMembers, mid, &m) && m.DirectoryID == dirID && (p.Gone || !slices.Contains(p.OrgIDs, m.OrgID)) {
			deleteMembership(tx, mid)
			changed = true
		}
	}
	if p.Gone {
		return changed
	}
	for i, orgID := range p.OrgIDs {
		var o Org
		if exists(tx, bucketMemberPair, pairKey(userID, orgID)) || !get(tx, bucketOrgs, orgID, &o) || o.Status == OrgDeleted ||
			exists(tx, bucketMembers, p.MembershipIDs[i]) {
			continue
		}
		putMembership(tx, Membership{ID: p.MembershipIDs[i], UserID: userID, OrgID: orgID, Status: MembershipActive,
			CreatedAt: at, UpdatedAt: at, DirectoryID: dirID})
		changed = true
	}
	return changed
}

func applyDirectorySyncBatch(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[DirectorySyncBatch](p)
	if !validID(c.DirectoryID) || len(c.People) > MaxImportBatch {
		return invalid
	}
	for _, person := range c.People {
		if !validPerson(person) {
			return invalid
		}
	}
	var d Directory
	if !get(tx, bucketDirectories, c.DirectoryID, &d) {
		return Result{Err: ErrNotFound}
	}
	ended := EndedApps{Index: index}
	for _, person := range c.People {
		var u User
		id, ok := getIndex(tx, bucketDirUsers, dirUserKey(c.DirectoryID, person.UID))
		if !ok || !get(tx, bucketUsers, id, &u) {
			continue // never signed in here, or erased meanwhile
		}
		if person.Gone {
			var apps []AppSession
			for _, ssoID := range prefixKeys(tx, bucketSSOByUser, u.ID) {
				apps = append(apps, endSSO(tx, ssoID, c.At, EndDirectory)...)
			}
			ended.Apps = append(ended.Apps, apps...)
			ended.Deliveries = append(ended.Deliveries, enqueueLogouts(tx, index, c.At, CauseDirectory, withSID(apps))...)
		} else if err := updateDirectoryUser(tx, &u, person, c.At); err != nil {
			continue // the new address is another person's: kept as it was
		}
		reconcileDirectoryMemberships(tx, u.ID, c.DirectoryID, person, c.At)
	}
	if c.Status != nil {
		d.LastSync = c.Status
		put(tx, bucketDirectories, d.ID, d)
	}
	return Result{Value: ended}
}

// Directory returns one directory.
func (s *State) Directory(id string) (Directory, error) {
	var d Directory
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketDirectories, id, &d); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return d, err
}

// Directories returns every directory, in id order.
func (s *State) Directories() ([]Directory, error) {
	var out []Directory
	err := s.f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDirectories).ForEach(func(k, v []byte) error {
			var d Directory
			if err := decodeRecord(v, &d); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	return out, err
}

// DirectoryUsers returns the people of a directory known here: UID to
// User.
func (s *State) DirectoryUsers(dirID string) (map[string]User, error) {
	out := map[string]User{}
	err := s.f.view(func(tx *bolt.Tx) error {
		for _, uid := range prefixKeys(tx, bucketDirUsers, dirID) {
			var u User
			if id, ok := getIndex(tx, bucketDirUsers, dirUserKey(dirID, uid)); ok && get(tx, bucketUsers, id, &u) {
				out[uid] = u
			}
		}
		return nil
	})
	return out, err
}

// HasDirectories reports whether a directory is registered (the sign-in
// asks directories only then). One cursor step, not a count: it runs for
// every attempt with an unknown address.
func (s *State) HasDirectories() (bool, error) {
	var any bool
	err := s.f.view(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketDirectories).Cursor().First()
		any = k != nil
		return nil
	})
	return any, err
}
