package cluster

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

func newGuardedStore(t *testing.T) *guardedStore {
	t.Helper()
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(t.TempDir(), "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	g := &guardedStore{s: bolt, closing: make(chan struct{})}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestStableWritesWaitForDiskSpace: saving the term on a full disk (ENOSPC)
// waits instead of failing (raft would panic), and goes through once the
// space returns; a store closed meanwhile gives the wait up.
func TestStableWritesWaitForDiskSpace(t *testing.T) {
	g := newGuardedStore(t)
	full := error(syscall.ENOSPC)
	g.failStable.Store(&full)
	done := make(chan error, 1)
	go func() { done <- g.SetUint64([]byte("CurrentTerm"), 7) }()
	select {
	case err := <-done:
		t.Fatalf("the save returned %v on a full disk; want it to wait", err)
	case <-time.After(300 * time.Millisecond):
	}
	g.failStable.Store(nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the save did not go through once the space returned")
	}
	if v, err := g.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("saved term: %d %v", v, err)
	}

	// Another error fails at once; a close ends a wait.
	eio := error(syscall.EIO)
	g.failStable.Store(&eio)
	if err := g.SetUint64([]byte("CurrentTerm"), 8); !errors.Is(err, syscall.EIO) {
		t.Fatalf("EIO: got %v", err)
	}
	g.failStable.Store(&full)
	go func() { done <- g.Set([]byte("k"), []byte("v")) }()
	time.Sleep(100 * time.Millisecond)
	g.Close()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("after close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end the wait")
	}
}
