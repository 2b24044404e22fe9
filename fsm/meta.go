package fsm

import (
	bolt "go.etcd.io/bbolt"
)

// SetAdminToken stores the hash of the admin API token. Unless Replace is
// set, a token that already exists wins (the first bootstrap generates it
// once for the whole cluster).
type SetAdminToken struct {
	Hash    string `json:"hash"`
	Replace bool   `json:"replace"`
}

func init() {
	register(TypeSetAdminToken, applySetAdminToken)
	register(TypeNoop, func(*bolt.Tx, uint64, []byte) Result { return Result{} })
}

func applySetAdminToken(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[SetAdminToken](p)
	meta := tx.Bucket(bucketMeta)
	if meta.Get(keyAdminToken) != nil && !c.Replace {
		return Result{Err: &ConflictError{Field: "admin_token"}}
	}
	if err := meta.Put(keyAdminToken, []byte(c.Hash)); err != nil {
		panic(err)
	}
	return Result{}
}

// AdminTokenHash returns the stored admin token hash, or "" when none is set.
func (s *State) AdminTokenHash() (string, error) {
	var h string
	err := s.f.view(func(tx *bolt.Tx) error {
		h = string(tx.Bucket(bucketMeta).Get(keyAdminToken))
		return nil
	})
	return h, err
}
