package fsm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// boltContents lists every bucket path, key, value and bucket sequence in
// db, in order.
func boltContents(t *testing.T, db *bolt.DB) []string {
	t.Helper()
	var out []string
	var walk func(path string, b *bolt.Bucket)
	walk = func(path string, b *bolt.Bucket) {
		out = append(out, fmt.Sprintf("%s seq=%d", path, b.Sequence()))
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v == nil {
				walk(path+"/"+string(k), b.Bucket(k))
				continue
			}
			out = append(out, fmt.Sprintf("%s %x=%x", path, k, v))
		}
	}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			walk(string(name), b)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSnapshotIsCompacted checks that a snapshot carries exactly the live
// state, nested buckets and sequences included, and not the free pages
// of a file that has churned; that a copy larger than one of its write
// transactions comes out whole; and that Open removes a copy a crash left.
func TestSnapshotIsCompacted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	value := bytes.Repeat([]byte("v"), 1000)
	// 24 MiB written, then all but every tenth key deleted: the file keeps
	// its size, the live data is a tenth of it, and the copy needs more
	// than one write transaction (compactTxBytes).
	for batch := range 6 {
		if err := f.db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("churn"))
			if err != nil {
				return err
			}
			nested, err := b.CreateBucketIfNotExists([]byte("nested"))
			if err != nil {
				return err
			}
			if _, err := nested.NextSequence(); err != nil {
				return err
			}
			for i := range 4000 {
				k := fmt.Appendf(nil, "%02d-%06d", batch, i)
				if err := b.Put(k, value); err != nil {
					return err
				}
				if err := nested.Put(k, value[:100]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("churn"))
		for batch := range 6 {
			for i := range 4000 {
				if i%10 != 0 {
					if err := b.Delete(fmt.Appendf(nil, "%02d-%06d", batch, i)); err != nil {
						return err
					}
				}
			}
		}
		_, err := b.NextSequence()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	snap.Release() // after Persist ended the transaction: harmless
	t.Logf("state file %d bytes, snapshot %d bytes", info.Size(), s.Len())
	if s.Len() > int(info.Size())/2 {
		t.Errorf("snapshot of %d bytes for a state file of %d with a fifth of it live: free pages copied", s.Len(), info.Size())
	}
	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, s.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := bolt.Open(copyPath, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	got, want := boltContents(t, cp), boltContents(t, f.db)
	if len(got) != len(want) {
		t.Fatalf("copy holds %d entries, the state %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: copy %.80s, state %.80s", i, got[i], want[i])
		}
	}

	// The backup path is the same copy.
	var backup bytes.Buffer
	if _, err := f.WriteTo(&backup); err != nil {
		t.Fatal(err)
	}
	if backup.Len() > int(info.Size())/2 {
		t.Errorf("backup of %d bytes: free pages copied", backup.Len())
	}
	if left, _ := filepath.Glob(path + compactSuffix + "*"); len(left) != 0 {
		t.Errorf("temporary copies left behind: %v", left)
	}

	// A copy a crash left behind goes at the next Open.
	f.Close()
	leftover := path + compactSuffix + "123"
	if err := os.WriteFile(leftover, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	f2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("leftover copy after Open: %v", err)
	}
}
