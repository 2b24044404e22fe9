package cluster

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/oidcd/oidcd/fsm"
)

// errStoreClosed is returned by reads after Close.
var errStoreClosed = errors.New("cluster: raft store closed")

// guardedStore is the raft log and stable store with a safe Close.
//
// raft answers heartbeats on the transport's goroutines, which
// raft.Shutdown does not wait for; a heartbeat still being processed can
// save the current term after Shutdown returned, and raft panics when the
// bbolt file is already closed. Close here waits for calls in flight, and
// afterwards writes are dropped (the node is stopping: a term learned from
// a heartbeat is learned again on restart, and votes are only cast by the
// main loop, which has stopped) and reads fail.
type guardedStore struct {
	mu     sync.RWMutex
	closed bool
	s      *raftboltdb.BoltStore
	// failWrites, when set, fails every log write with its error: a disk
	// that refuses writes or fsyncs, injected by tests (failLogWrites).
	failWrites atomic.Pointer[error]
	// failStable, likewise for the stable store (the term and vote).
	failStable atomic.Pointer[error]
	// closing is closed by Close: a stable-store write waiting for disk
	// space gives up.
	closing   chan struct{}
	closeOnce sync.Once
	log       func(msg string, args ...any)
}

// logWriteErr is the injected failure of a log write, or nil.
func (g *guardedStore) logWriteErr() error {
	if e := g.failWrites.Load(); e != nil {
		return *e
	}
	return nil
}

var (
	_ raft.LogStore    = (*guardedStore)(nil)
	_ raft.StableStore = (*guardedStore)(nil)
)

func (g *guardedStore) Close() error {
	g.closeOnce.Do(func() {
		if g.closing != nil {
			close(g.closing)
		}
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.s.Close()
}

// read runs fn unless closed.
func (g *guardedStore) read(fn func() error) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return errStoreClosed
	}
	return fn()
}

// write runs fn unless closed, when it is dropped.
//
// A write refused for want of disk space is tried again, with a growing
// pause, until it succeeds or the store closes: raft cannot go on without
// its term and vote saved (it panics when a save fails), so the node waits
// for space (it neither votes nor leads meanwhile) instead of crashing,
// and carries on by itself when space returns.
func (g *guardedStore) write(fn func() error) error {
	pause := 100 * time.Millisecond
	for {
		err := g.writeOnce(fn)
		if !fsm.DiskFull(err) {
			return err
		}
		if g.log != nil {
			g.log("raft: cannot save the term or vote: the disk is full; waiting for space", "err", err)
		}
		select {
		case <-g.closing:
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

func (g *guardedStore) writeOnce(fn func() error) error {
	if e := g.failStable.Load(); e != nil {
		return *e
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil
	}
	return fn()
}

func (g *guardedStore) FirstIndex() (i uint64, err error) {
	err = g.read(func() (e error) { i, e = g.s.FirstIndex(); return })
	return
}

func (g *guardedStore) LastIndex() (i uint64, err error) {
	err = g.read(func() (e error) { i, e = g.s.LastIndex(); return })
	return
}

func (g *guardedStore) GetLog(idx uint64, l *raft.Log) error {
	return g.read(func() error { return g.s.GetLog(idx, l) })
}

func (g *guardedStore) StoreLog(l *raft.Log) error {
	if err := g.logWriteErr(); err != nil {
		return err
	}
	return g.read(func() error { return g.s.StoreLog(l) }) // a lost log write must not look stored
}

func (g *guardedStore) StoreLogs(ls []*raft.Log) error {
	if err := g.logWriteErr(); err != nil {
		return err
	}
	return g.read(func() error { return g.s.StoreLogs(ls) })
}

func (g *guardedStore) DeleteRange(min, max uint64) error {
	return g.read(func() error { return g.s.DeleteRange(min, max) })
}

func (g *guardedStore) Set(k, v []byte) error { return g.write(func() error { return g.s.Set(k, v) }) }

func (g *guardedStore) Get(k []byte) (v []byte, err error) {
	err = g.read(func() (e error) { v, e = g.s.Get(k); return })
	return
}

func (g *guardedStore) SetUint64(k []byte, v uint64) error {
	return g.write(func() error { return g.s.SetUint64(k, v) })
}

func (g *guardedStore) GetUint64(k []byte) (v uint64, err error) {
	err = g.read(func() (e error) { v, e = g.s.GetUint64(k); return })
	return
}
