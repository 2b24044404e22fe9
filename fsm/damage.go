package fsm

// damage.go tells a damaged bbolt file (truncated, bytes flipped by a
// crash or a bad disk) from a healthy one before a node trusts it: the
// state file here, and package cluster's raft log.

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged: a file is not a sound bbolt database.
var ErrDamaged = errors.New("damaged file")

// OpenBolt opens path as bbolt does, then reads every key of every bucket:
// a file that does not open as a database, or whose pages do not read
// back as what they claim to be, is ErrDamaged, named with path. bbolt
// panics on a damaged page instead of failing; that panic is the same
// error here, and so is a fault: a damaged page pointer can lead bbolt
// past the end of its memory map, which would otherwise crash the process
// (debug.SetPanicOnFault, for this goroutine while it walks). The walk
// reads the live pages once, at open.
func OpenBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				db.Close()
			}
			db, err = nil, fmt.Errorf("%w: %s: %v", ErrDamaged, path, r)
		}
	}()
	if opts == nil {
		opts = &bolt.Options{Timeout: 5 * time.Second}
	}
	db, err = bolt.Open(path, 0o600, opts)
	if err != nil {
		if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrVersionMismatch) {
			return nil, fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
		}
		return nil, err
	}
	// Every key of every bucket, nested ones included, read on this
	// goroutine (bbolt's tx.Check runs on its own, where a damaged page's
	// panic could not be recovered).
	var walk func(b *bolt.Bucket) error
	walk = func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				if nb := b.Bucket(k); nb != nil {
					return walk(nb)
				}
			}
			return nil
		})
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b) })
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// CheckBoltFile reports whether the bbolt file at path, when there is one,
// is sound (OpenBolt), and closes it again.
func CheckBoltFile(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := OpenBolt(path, nil)
	if err != nil {
		return err
	}
	return db.Close()
}
