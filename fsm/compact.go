package fsm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// compactTxBytes bounds what one write transaction of a compacted copy
// holds before it commits and the next begins (bbolt keeps a write
// transaction's dirty pages in memory).
const compactTxBytes = 8 << 20

// compactSuffix names the temporary files of compacted copies, beside the
// state file: a crash can leave one behind, and Open removes it.
const compactSuffix = ".compact-"

// writeCompact streams to w a bbolt file holding exactly the buckets,
// keys, values and sequences that tx sees, and nothing else. tx.WriteTo
// copies the file page by page, free pages included: a state file that
// has churned for a while holds far more free space than data, and every
// snapshot, catch-up and backup would carry it. The copy is built in a
// temporary file beside the state file (bbolt needs a file), with its
// pages filled (keys go in in order), then streamed and removed.
//
// tx is rolled back as soon as the copy is built, before the stream: a
// read transaction held open pins the pages it sees, which the state file
// would otherwise reuse, and the stream may be slow (a snapshot sent to a
// far replica).
func (f *FSM) writeCompact(tx *bolt.Tx, w io.Writer) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+compactSuffix+"*")
	if err != nil {
		_ = tx.Rollback()
		return 0, fmt.Errorf("fsm: compact copy: %w", err)
	}
	path := tmp.Name()
	defer os.Remove(path)
	if err := tmp.Close(); err != nil {
		_ = tx.Rollback()
		return 0, err
	}
	err = compactInto(tx, path)
	_ = tx.Rollback()
	if err != nil {
		return 0, fmt.Errorf("fsm: compact copy: %w", err)
	}
	src, err := os.Open(path) // #nosec G304 -- our own temporary file
	if err != nil {
		return 0, fmt.Errorf("fsm: compact copy: %w", err)
	}
	defer src.Close()
	return io.Copy(w, src)
}

// compactInto copies what tx sees into a new bbolt file at path (which
// exists and is empty). The file is temporary: it is not synced.
func compactInto(tx *bolt.Tx, path string) error {
	dst, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: true, NoFreelistSync: true})
	if err != nil {
		return err
	}
	c := &compactor{dst: dst}
	err = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		return c.bucket([][]byte{name}, b)
	})
	if err == nil {
		err = c.commit()
	} else if c.tx != nil {
		_ = c.tx.Rollback()
	}
	return errors.Join(err, dst.Close())
}

// compactor writes buckets into dst, committing every compactTxBytes.
type compactor struct {
	dst  *bolt.DB
	tx   *bolt.Tx
	size int
}

// bucket copies src, found at path (outermost first), and its nested
// buckets.
func (c *compactor) bucket(path [][]byte, src *bolt.Bucket) error {
	dst, err := c.open(path)
	if err != nil {
		return err
	}
	cur := src.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if v == nil { // a nested bucket
			if err := c.bucket(append(path[:len(path):len(path)], k), src.Bucket(k)); err != nil {
				return err
			}
			// The nested copy may have committed: find ours again.
			if dst, err = c.open(path); err != nil {
				return err
			}
			continue
		}
		if c.size+len(k)+len(v) > compactTxBytes && c.size > 0 {
			if err := c.commit(); err != nil {
				return err
			}
			if dst, err = c.open(path); err != nil {
				return err
			}
		}
		if err := dst.Put(k, v); err != nil {
			return err
		}
		c.size += len(k) + len(v)
	}
	return dst.SetSequence(src.Sequence())
}

// open returns the bucket at path in the current write transaction,
// beginning one and creating the buckets when needed.
func (c *compactor) open(path [][]byte) (*bolt.Bucket, error) {
	if c.tx == nil {
		tx, err := c.dst.Begin(true)
		if err != nil {
			return nil, err
		}
		c.tx, c.size = tx, 0
	}
	b, err := c.tx.CreateBucketIfNotExists(path[0])
	for _, name := range path[1:] {
		if err != nil {
			break
		}
		b, err = b.CreateBucketIfNotExists(name)
	}
	if err != nil {
		return nil, err
	}
	b.FillPercent = 1 // keys arrive in order: fill each page
	return b, nil
}

// commit ends the current write transaction, if any.
func (c *compactor) commit() error {
	if c.tx == nil {
		return nil
	}
	err := c.tx.Commit()
	c.tx = nil
	return err
}

// removeCompactLeftovers removes temporary copies a crash left beside the
// state file at path.
func removeCompactLeftovers(path string) {
	left, _ := filepath.Glob(path + compactSuffix + "*")
	for _, p := range left {
		_ = os.Remove(p)
	}
}
