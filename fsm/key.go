package fsm

import (
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Key is a signing key. Its state (next, active, retired) is derived from
// the times of all keys and the clock by package keys, so every node agrees
// without a command per transition.
type Key struct {
	Kid         string    `json:"kid" cbor:"1,keyasint"`
	Private     []byte    `json:"private" cbor:"2,keyasint"` // PKCS#8 DER
	CreatedAt   time.Time `json:"created_at" cbor:"3,keyasint"`
	ActivatesAt time.Time `json:"activates_at" cbor:"4,keyasint"`
}

// AddKey publishes a new key. With SupersedePending, keys scheduled to
// activate after this one are dropped (an emergency rotation must not be
// overtaken by a key that was waiting).
type AddKey struct {
	Key              Key  `json:"key"`
	SupersedePending bool `json:"supersede_pending"`
}

// RemoveKey drops a key from the set (after its retention ended).
type RemoveKey struct {
	Kid string `json:"kid"`
}

func init() {
	register(TypeAddKey, applyAddKey)
	register(TypeRemoveKey, applyRemoveKey)
}

func applyAddKey(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[AddKey](p)
	if !validKey(c.Key.Kid) {
		return invalid
	}
	if exists(tx, bucketKeys, c.Key.Kid) {
		return Result{Err: &ConflictError{Field: "kid"}}
	}
	if c.SupersedePending {
		for _, k := range allKeys(tx) {
			if k.ActivatesAt.After(c.Key.ActivatesAt) {
				del(tx, bucketKeys, k.Kid)
			}
		}
	}
	put(tx, bucketKeys, c.Key.Kid, c.Key)
	markKeys(tx, index)
	return Result{Value: c.Key}
}

func applyRemoveKey(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[RemoveKey](p)
	if !validKey(c.Kid) {
		return invalid
	}
	if !exists(tx, bucketKeys, c.Kid) {
		return Result{Err: ErrNotFound}
	}
	del(tx, bucketKeys, c.Kid)
	markKeys(tx, index)
	return Result{}
}

func markKeys(tx *bolt.Tx, index uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], index)
	if err := tx.Bucket(bucketMeta).Put(keyKeysIndex, b[:]); err != nil {
		panic(err)
	}
}

func allKeys(tx *bolt.Tx) []Key {
	var out []Key
	c := tx.Bucket(bucketKeys).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		var key Key
		get(tx, bucketKeys, string(k), &key)
		out = append(out, key)
	}
	return out
}

// Keys returns every stored key, in kid order, and the raft index of the
// last change to the set (a cheap version number for caches).
func (s *State) Keys() ([]Key, uint64, error) {
	var out []Key
	var version uint64
	err := s.f.view(func(tx *bolt.Tx) error {
		out = allKeys(tx)
		if v := tx.Bucket(bucketMeta).Get(keyKeysIndex); len(v) == 8 {
			version = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return out, version, err
}
