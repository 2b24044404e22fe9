package fsm

import (
	"bytes"
	"context"

	bolt "go.etcd.io/bbolt"
)

// State is the read-only view that request handlers use. Reads run against
// the local bbolt file; callers that need linearizable answers first wait
// for a read index (package cluster).
type State struct{ f *FSM }

// State returns the read view of f.
func (f *FSM) State() *State { return &State{f: f} }

// Applied is the last applied raft index.
func (s *State) Applied() uint64 { return s.f.Applied() }

// WaitApplied returns once index is applied here, or with ctx's error.
func (s *State) WaitApplied(ctx context.Context, index uint64) error {
	return s.f.WaitApplied(ctx, index)
}

// Page selects a slice of a list. Page is 1-based.
type Page struct {
	Page     int
	PageSize int
}

// offset returns how many items to skip.
func (p Page) offset() int { return (p.Page - 1) * p.PageSize }

// listBucket walks the records of bucket in key order, decoding the ones on
// the requested page, and counts all of them.
func listBucket[T any](s *State, bucket []byte, p Page) ([]T, int, error) {
	var out []T
	total := 0
	err := s.f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if total >= p.offset() && len(out) < p.PageSize {
				var v T
				get(tx, bucket, string(k), &v)
				out = append(out, v)
			}
			total++
		}
		return nil
	})
	return out, total, err
}

// prefixKeys returns the suffixes of the keys of bucket that start with
// prefix+"/".
func prefixKeys(tx *bolt.Tx, bucket []byte, prefix string) []string {
	var out []string
	p := []byte(prefix + "/")
	c := tx.Bucket(bucket).Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		out = append(out, string(k[len(p):]))
	}
	return out
}
