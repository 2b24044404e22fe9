package fsm

import (
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// User is a person. ID is the `sub` claim.
type User struct {
	ID            string    `json:"id" cbor:"1,keyasint"`
	Email         string    `json:"email" cbor:"2,keyasint"`
	EmailVerified bool      `json:"email_verified" cbor:"3,keyasint"`
	PasswordHash  string    `json:"password_hash,omitempty" cbor:"4,keyasint,omitempty"` // argon2id PHC string
	Phone         string    `json:"phone,omitempty" cbor:"5,keyasint,omitempty"`         // E.164
	CreatedAt     time.Time `json:"created_at" cbor:"6,keyasint"`
	UpdatedAt     time.Time `json:"updated_at" cbor:"7,keyasint"`
	// DirectoryID and DirectoryUID: a person of a directory (signed in
	// there; their id attribute's value), "" for a local person.
	DirectoryID  string `json:"directory_id,omitempty" cbor:"8,keyasint,omitempty"`
	DirectoryUID string `json:"directory_uid,omitempty" cbor:"9,keyasint,omitempty"`
}

// CreateUser creates a person. Email and phone are unique.
type CreateUser struct {
	User User `json:"user"`
}

// UpdateUser changes the fields that are set.
type UpdateUser struct {
	ID            string    `json:"id"`
	Email         *string   `json:"email,omitempty"`
	EmailVerified *bool     `json:"email_verified,omitempty"`
	PasswordHash  *string   `json:"password_hash,omitempty"`
	Phone         *string   `json:"phone,omitempty"`
	At            time.Time `json:"at"`
	// EndSessions, set by the proposer when the password or phone
	// changes, ends the person's other sessions in the same apply.
	EndSessions *EndSessions `json:"end_sessions,omitempty"`
}

// DeleteUser erases a person, their memberships, their admin grants and
// every API key they made (and the keys those made, transitively).
type DeleteUser struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

func init() {
	register(TypeCreateUser, applyCreateUser)
	register(TypeUpdateUser, applyUpdateUser)
	register(TypeDeleteUser, applyDeleteUser)
}

// emailKey is the case-insensitive index key of an address.
func emailKey(email string) string { return strings.ToLower(email) }

func applyCreateUser(tx *bolt.Tx, _ uint64, p []byte) Result {
	u := decode[CreateUser](p).User
	if !validID(u.ID) || !validKey(u.Email) || len(u.Phone) > 64 {
		return invalid
	}
	if exists(tx, bucketUsers, u.ID) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	if exists(tx, bucketUserEmails, emailKey(u.Email)) {
		return Result{Err: &ConflictError{Field: "email"}}
	}
	if u.Phone != "" && exists(tx, bucketUserPhones, u.Phone) {
		return Result{Err: &ConflictError{Field: "phone"}}
	}
	put(tx, bucketUsers, u.ID, u)
	putIndex(tx, bucketUserEmails, emailKey(u.Email), u.ID)
	if u.Phone != "" {
		putIndex(tx, bucketUserPhones, u.Phone, u.ID)
	}
	return Result{Value: u}
}

func applyUpdateUser(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[UpdateUser](p)
	if !validID(c.ID) || (c.Email != nil && !validKey(*c.Email)) || (c.Phone != nil && len(*c.Phone) > 64) || !validEndSessions(c.EndSessions) {
		return invalid
	}
	var u User
	if !get(tx, bucketUsers, c.ID, &u) {
		return Result{Err: ErrNotFound}
	}
	if c.Email != nil && emailKey(*c.Email) != emailKey(u.Email) && exists(tx, bucketUserEmails, emailKey(*c.Email)) {
		return Result{Err: &ConflictError{Field: "email"}}
	}
	if c.Phone != nil && *c.Phone != "" && *c.Phone != u.Phone && exists(tx, bucketUserPhones, *c.Phone) {
		return Result{Err: &ConflictError{Field: "phone"}}
	}
	if c.Email != nil {
		if emailKey(*c.Email) != emailKey(u.Email) {
			voidLinks(tx, u.ID, LinkPasswordReset) // a reset link went to the old address
			voidLinks(tx, u.ID, LinkVerifyEmail)   // and an address link would put an address back
		}
		del(tx, bucketUserEmails, emailKey(u.Email))
		u.Email = *c.Email
		putIndex(tx, bucketUserEmails, emailKey(u.Email), u.ID)
	}
	if c.Phone != nil {
		if u.Phone != "" {
			del(tx, bucketUserPhones, u.Phone)
		}
		u.Phone = *c.Phone
		if u.Phone != "" {
			putIndex(tx, bucketUserPhones, u.Phone, u.ID)
		}
	}
	if c.EmailVerified != nil {
		u.EmailVerified = *c.EmailVerified
	}
	if c.PasswordHash != nil {
		u.PasswordHash = *c.PasswordHash
		voidLinks(tx, u.ID, LinkPasswordReset) // a reset link dies with the password it was for
	}
	u.UpdatedAt = c.At
	put(tx, bucketUsers, u.ID, u)
	endSessionsOf(tx, index, u.ID, c.EndSessions)
	return Result{Value: u}
}

func applyDeleteUser(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[DeleteUser](p)
	if !validID(c.ID) {
		return invalid
	}
	var u User
	if !get(tx, bucketUsers, c.ID, &u) {
		return Result{Err: ErrNotFound}
	}
	ended := EndedApps{Index: index}
	for _, ssoID := range prefixKeys(tx, bucketSSOByUser, u.ID) {
		ended.Apps = append(ended.Apps, endSSO(tx, ssoID, c.At, EndErased)...)
	}
	ended.Deliveries = enqueueLogouts(tx, index, c.At, CauseErased, subOnly(ended.Apps))
	for _, mid := range prefixKeys(tx, bucketMemberByU, u.ID) {
		deleteMembership(tx, mid)
	}
	deleteFactors(tx, u.ID)
	deleteGrantsOf(tx, u.ID)
	endLapsedKeys(tx, []string{u.ID}, nil) // holding no grant now, every key they made
	voidLinks(tx, u.ID, "")
	deleteIdentitiesOf(tx, u.ID, c.At)
	del(tx, bucketUsers, u.ID)
	if u.DirectoryID != "" {
		del(tx, bucketDirUsers, dirUserKey(u.DirectoryID, u.DirectoryUID))
	}
	del(tx, bucketUserEmails, emailKey(u.Email))
	if u.Phone != "" {
		del(tx, bucketUserPhones, u.Phone)
	}
	return Result{Value: ended}
}

func putIndex(tx *bolt.Tx, bucket []byte, key, id string) {
	if err := tx.Bucket(bucket).Put([]byte(key), []byte(id)); err != nil {
		panic(err)
	}
	accessWrite(tx, bucket)
}

// User returns one person.
func (s *State) User(id string) (User, error) {
	var u User
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketUsers, id, &u); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return u, err
}

// UserByEmail finds a person by address, ignoring case.
func (s *State) UserByEmail(email string) (User, error) {
	return s.userByIndex(bucketUserEmails, emailKey(email))
}

// UserByPhone finds a person by E.164 number.
func (s *State) UserByPhone(phone string) (User, error) {
	return s.userByIndex(bucketUserPhones, phone)
}

func (s *State) userByIndex(bucket []byte, key string) (User, error) {
	var u User
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucket).Get([]byte(key))
		if id != nil {
			ok = get(tx, bucketUsers, string(id), &u)
		}
		return nil
	})
	if err == nil && !ok {
		err = ErrNotFound
	}
	return u, err
}

// EmailIndex calls visit with every person's address, as the index keeps
// it (lower case), and id, in address order, until visit returns false. It
// reads the index alone: no person is decoded.
func (s *State) EmailIndex(visit func(email, id string) bool) error {
	return s.f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketUserEmails).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if !visit(string(k), string(v)) {
				break
			}
		}
		return nil
	})
}

// Users lists people in id order.
func (s *State) Users(p Page) ([]User, int, error) { return listBucket[User](s, bucketUsers, p) }
