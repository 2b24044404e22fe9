package fsm

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// RevokeToken records an access token's jti as revoked until it expires.
type RevokeToken struct {
	JTI       string    `json:"jti"`
	ExpiresAt time.Time `json:"expires_at"`
}

func init() {
	register(TypeRevokeToken, applyRevokeToken)
}

func applyRevokeToken(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[RevokeToken](p)
	if !validKey(c.JTI) {
		return invalid
	}
	revoke(tx, c.JTI, c.ExpiresAt)
	return Result{}
}

func revoke(tx *bolt.Tx, jti string, exp time.Time) {
	if err := tx.Bucket(bucketRevoked).Put([]byte(jti), []byte(exp.UTC().Format(time.RFC3339))); err != nil {
		panic(err)
	}
}

// Access is what a bearer check needs about a token, read in one
// transaction: the app session, its client and the person.
type Access struct {
	App    AppSession
	Client Client
	User   User
}

// CheckAccess reports whether an access token with this jti and sid is
// still honoured at now: not revoked, app and SSO session live, client not
// suspended, organization active, membership active. The error is
// ErrNotFound, ErrSessionEnded or ErrAccessChanged (revoked counts as
// ErrSessionEnded's sibling ErrAlreadyUsed).
func (s *State) CheckAccess(jti, sid string, now time.Time) (Access, error) {
	var out Access
	var res error
	err := s.f.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketRevoked).Get([]byte(jti)) != nil {
			res = ErrAlreadyUsed
			return nil
		}
		if !get(tx, bucketApp, sid, &out.App) {
			res = ErrNotFound
			return nil
		}
		if res = checkAccess(tx, sid, out.App.UserID, out.App.OrgID, out.App.ClientID, now); res != nil {
			return nil
		}
		get(tx, bucketClients, out.App.ClientID, &out.Client)
		if !get(tx, bucketUsers, out.App.UserID, &out.User) {
			res = ErrAccessChanged
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	return out, res
}

// Revoked reports whether a jti is revoked.
func (s *State) Revoked(jti string) (bool, error) {
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = tx.Bucket(bucketRevoked).Get([]byte(jti)) != nil; return nil })
	return ok, err
}
