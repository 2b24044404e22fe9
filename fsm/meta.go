package fsm

import (
	bolt "go.etcd.io/bbolt"
)

// SetAdminToken stores the hash of the admin API token. Unless Replace is
// set, a token that already exists wins (the first bootstrap generates it
// once for the whole cluster). With Replace (POST /admin-token) the hash
// is overwritten, and the old token stops matching as soon as a node has
// applied it; a replacement must carry a hash (ErrInvalid otherwise).
// Entries without Replace apply as they always have.
type SetAdminToken struct {
	Hash    string `json:"hash"`
	Replace bool   `json:"replace"`
}

// SetSecret stores a cluster-wide secret generated once by a leader (for
// example the key that seals browser state). An existing secret wins, so a
// race between two leaders settles on one value.
type SetSecret struct {
	Name  string `json:"name"`
	Value []byte `json:"value"`
}

// Secret names.
const SecretBrowserKey = "browser_key"

func init() {
	register(TypeSetSecret, applySetSecret)
	register(TypeSetAdminToken, applySetAdminToken)
	register(TypeNoop, func(*bolt.Tx, uint64, []byte) Result { return Result{} })
}

func applySetAdminToken(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[SetAdminToken](p)
	if c.Replace && !validKey(c.Hash) {
		return invalid
	}
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

func secretKey(name string) []byte { return []byte("secret/" + name) }

func applySetSecret(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[SetSecret](p)
	if !validID(c.Name) {
		return invalid
	}
	meta := tx.Bucket(bucketMeta)
	if meta.Get(secretKey(c.Name)) != nil {
		return Result{Err: &ConflictError{Field: c.Name}}
	}
	if err := meta.Put(secretKey(c.Name), c.Value); err != nil {
		panic(err)
	}
	return Result{}
}

// Secret returns a cluster-wide secret, or ErrNotFound.
func (s *State) Secret(name string) ([]byte, error) {
	var out []byte
	err := s.f.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(secretKey(name)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err == nil && out == nil {
		err = ErrNotFound
	}
	return out, err
}
