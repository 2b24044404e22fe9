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
	// A revocation is reaped once the token it revokes expired (its
	// value is that expiry, RFC 3339; an unreadable one stays).
	reaps(reaped{bucket: bucketRevoked, count: func(st *ReapStats) *int { return &st.Revocations }, dead: expiryPassed})
}

// expiryPassed is the reap rule of a bucket whose values are an expiry,
// RFC 3339: dead once it passed (an unreadable one stays).
func expiryPassed(_ *bolt.Tx, v []byte, before time.Time) bool {
	exp, err := time.Parse(time.RFC3339, string(v))
	return err == nil && !exp.After(before)
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

// Revoked reports whether a jti is revoked.
func (s *State) Revoked(jti string) (bool, error) {
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = tx.Bucket(bucketRevoked).Get([]byte(jti)) != nil; return nil })
	return ok, err
}
