package fsm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
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

	// A store that only grew is copied page by page: as large as its file.
	dense, err := Open(filepath.Join(dir, "dense.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer dense.Close()
	if err := dense.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("grown"))
		for i := 0; err == nil && i < 2000; i++ {
			err = b.Put(fmt.Appendf(nil, "%06d", i), value)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	n, err := dense.WriteTo(&page)
	if err != nil {
		t.Fatal(err)
	}
	// (The page copy streams the pages in use up to the last, not the
	// room bbolt allocated beyond it.)
	if dinfo, err := os.Stat(filepath.Join(dir, "dense.db")); err != nil || n < dinfo.Size()*9/10 {
		t.Errorf("a dense store: %d bytes streamed, file of %d (%v): want the page copy", n, dinfo.Size(), err)
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

// BenchmarkSnapshot: the compacted copy (writeCompacted) of a store of n
// people with two memberships each, written through ImportUsers, against
// the page copy of tx.WriteTo of the same file, with the bytes each
// streams. (Persist picks the page copy for such a store, which has few
// free pages: worthCompacting.)
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		f, err := Open(filepath.Join(b.TempDir(), "state.db"))
		if err != nil {
			b.Fatal(err)
		}
		index := uint64(0)
		apply := func(typ Type, v any) {
			index++
			if r := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: MustCommand(typ, v).Encode()}).(Result); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		apply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "alpha", Name: "Alpha", CreatedAt: t0})
		apply(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "beta", Name: "Beta", CreatedAt: t0})
		const hash = "$2b$10$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS"
		for done := 0; done < n; {
			c := ImportUsers{At: t0}
			for ; done < n && len(c.Users) < MaxImportBatch; done++ {
				c.Users = append(c.Users, ImportedUser{User: User{ID: importID(done), Email: fmt.Sprintf("p%d@example.com", done), PasswordHash: hash},
					OrgIDs: []string{orgA, orgB}, MembershipIDs: []string{importID(10_000_000 + 2*done), importID(10_000_001 + 2*done)}})
			}
			apply(TypeImportUsers, c)
		}
		for _, compact := range []bool{true, false} {
			name := map[bool]string{true: "compacted", false: "tx.WriteTo"}[compact]
			b.Run(fmt.Sprintf("people=%d/%s", n, name), func(b *testing.B) {
				var bytes int64
				for b.Loop() {
					tx, err := f.db.Begin(false)
					if err != nil {
						b.Fatal(err)
					}
					if compact {
						bytes, err = f.writeCompacted(tx, io.Discard)
					} else {
						bytes, err = tx.WriteTo(io.Discard)
						_ = tx.Rollback()
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(bytes)/(1<<20), "MiB")
			})
		}
		f.Close()
	}
}
