package fsm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// TestRestoreTakesTheSnapshotIndex: a file whose stored applied index (500)
// is above the raft index of the snapshot being restored (7) must not make
// the FSM skip entries 8 to 500.
func TestRestoreTakesTheSnapshotIndex(t *testing.T) {
	src := newHarness(t)
	src.index = 499
	src.mustApply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "alpha", Name: "Alpha", CreatedAt: t0})
	if got := src.f.Applied(); got != 500 {
		t.Fatalf("source applied: got %d, want 500", got)
	}

	dst := newHarness(t)
	dst.f.ExpectRestore(7)
	restoreFrom(t, src.f, dst.f)
	if got := dst.f.Applied(); got != 7 {
		t.Fatalf("applied after restore: got %d, want 7", got)
	}
	if got := dst.f.Restores(); got != 1 {
		t.Fatalf("restores: got %d, want 1", got)
	}
	dst.index = 7
	r := dst.apply(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "beta", Name: "Beta", CreatedAt: t0})
	if r.Err != nil {
		t.Fatalf("entry 8: %v", r.Err)
	}
	if _, err := dst.f.State().Org(orgB); err != nil {
		t.Fatalf("entry 8 was skipped: org %s: %v", orgB, err)
	}
	if _, err := dst.f.State().Org(orgA); err != nil {
		t.Fatalf("restored org %s: %v", orgA, err)
	}
	if got := dst.f.Applied(); got != 8 {
		t.Fatalf("applied after entry 8: got %d, want 8", got)
	}

	// The index is in the file, not only in memory.
	path := dst.f.path
	dst.f.Close()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Applied(); got != 8 {
		t.Fatalf("applied after reopen: got %d, want 8", got)
	}
}

// TestRestoreTakesALowerFileIndexUp: the stamped index also replaces a
// stored index below the snapshot's (an old backup restored at the end of
// a longer log).
func TestRestoreTakesALowerFileIndexUp(t *testing.T) {
	src := newHarness(t)
	seed(src)
	dst := newHarness(t)
	dst.f.ExpectRestore(1000)
	restoreFrom(t, src.f, dst.f)
	if got := dst.f.Applied(); got != 1000 {
		t.Fatalf("applied: got %d, want 1000", got)
	}
	// Entries at or below the snapshot's index are in it.
	r := dst.f.Apply(&raft.Log{Index: 999, Type: raft.LogCommand, Data: MustCommand(TypeDeleteOrg, DeleteOrg{ID: orgA, At: t0}).Encode()}).(Result)
	if r.Err != nil {
		t.Fatalf("entry 999: got %v, want skipped", r.Err)
	}
	if got, want := dump(t, dst.f), dump(t, src.f); !reflect.DeepEqual(got, want) {
		t.Fatal("an entry at or below the snapshot index was applied")
	}
}

// TestExpectRestoreIsUsedOnce: the index belongs to one restore; a later
// restore without ExpectRestore keeps the file's own index.
func TestExpectRestoreIsUsedOnce(t *testing.T) {
	src := newHarness(t)
	seed(src)
	dst := newHarness(t)
	dst.f.ExpectRestore(3)
	restoreFrom(t, src.f, dst.f)
	restoreFrom(t, src.f, dst.f)
	if got, want := dst.f.Applied(), src.f.Applied(); got != want {
		t.Fatalf("applied after the second restore: got %d, want %d", got, want)
	}
	if got := dst.f.Restores(); got != 2 {
		t.Fatalf("restores: got %d, want 2", got)
	}
}

func TestRestoreRejectsEmptyStreamAndKeepsState(t *testing.T) {
	h := newHarness(t)
	seed(h)
	want := dump(t, h.f)
	h.f.ExpectRestore(99)
	if err := h.f.Restore(io.NopCloser(bytes.NewReader(nil))); err == nil {
		t.Fatal("restore of an empty stream: got nil error")
	}
	if got := dump(t, h.f); !reflect.DeepEqual(got, want) {
		t.Fatal("state changed after a failed restore")
	}
	if got := h.f.Applied(); got != h.index {
		t.Fatalf("applied: got %d, want %d", got, h.index)
	}
	if got := h.f.Restores(); got != 0 {
		t.Fatalf("restores: got %d, want 0", got)
	}
}

func TestCheckFile(t *testing.T) {
	h := newHarness(t)
	seed(h)
	var good bytes.Buffer
	if _, err := h.f.WriteTo(&good); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	boltFile := func(name string, fn func(tx *bolt.Tx) error) string {
		p := filepath.Join(dir, name)
		db, err := bolt.Open(p, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
		db.Close()
		return p
	}
	tests := []struct {
		name   string
		path   string
		ok     bool
		schema bool // the error wraps ErrSchema
	}{
		{"state file", write("good.db", good.Bytes()), true, false},
		{"schema 1 state file (migrated when opened)", schema1Copy(t, dir), true, false},
		{"garbage", write("garbage.db", bytes.Repeat([]byte("not a bbolt file "), 1000)), false, false},
		{"empty", write("empty.db", nil), false, false},
		{"truncated", write("truncated.db", good.Bytes()[:good.Len()/2]), false, false},
		{"other bbolt file", boltFile("other.db", func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket([]byte("stuff"))
			return err
		}), false, true},
		{"newer schema", boltFile("newer.db", func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			return b.Put(keySchema, []byte(strconv.Itoa(SchemaVersion+1)))
		}), false, true},
		{"missing", filepath.Join(dir, "nothing.db"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckFile(tt.path)
			if (err == nil) != tt.ok {
				t.Fatalf("got %v, want ok=%v", err, tt.ok)
			}
			if got := errors.Is(err, ErrSchema); got != tt.schema {
				t.Fatalf("errors.Is(%v, ErrSchema): got %v, want %v", err, got, tt.schema)
			}
		})
	}
}

// TestRestoreDoesNotWaitForAnOpenSnapshot: raft can be taking a snapshot
// (a read transaction, released only after raft's main loop answered it)
// while the main loop waits for a restore. Restore must not wait for that
// transaction; the snapshot, overtaken by the restore, must then fail
// rather than be recorded by raft as newer than the restored one.
func TestRestoreDoesNotWaitForAnOpenSnapshot(t *testing.T) {
	src := newHarness(t)
	src.mustApply(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "beta", Name: "Beta", CreatedAt: t0})
	h := newHarness(t)
	seed(h)
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		var s sink
		snapSrc, err := src.f.Snapshot()
		if err != nil {
			done <- err
			return
		}
		defer snapSrc.Release()
		if err := snapSrc.Persist(&s); err != nil {
			done <- err
			return
		}
		h.f.ExpectRestore(42)
		done <- h.f.Restore(io.NopCloser(&s))
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		snap.Release() // let it finish, so that the cleanup does not hang too
		<-done
		t.Fatal("Restore waited for a snapshot's read transaction")
	}
	if got := h.f.Applied(); got != 42 {
		t.Fatalf("applied: got %d, want 42", got)
	}
	if _, err := h.f.State().Org(orgA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("org of the old state after restore: got %v, want ErrNotFound", err)
	}

	var s sink
	if err := snap.Persist(&s); !errors.Is(err, errRestoredSince) || !s.cancelled {
		t.Fatalf("persist of a snapshot begun before the restore: got %v (cancelled %v), want errRestoredSince", err, s.cancelled)
	}
	snap.Release()

	// A snapshot begun after the restore persists the restored state.
	restored := dump(t, h.f)
	snap, err = h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	s = sink{}
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	again := newHarness(t)
	if err := again.f.Restore(io.NopCloser(&s)); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, again.f); !reflect.DeepEqual(got, restored) {
		t.Fatal("a snapshot taken after the restore does not hold the restored state")
	}
}
