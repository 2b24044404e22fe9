package fsmtest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
)

// Applier applies commands straight to an FSM with increasing indexes.
type Applier struct {
	FSM *fsm.FSM

	mu    sync.Mutex
	index uint64
	// Fail, when set, is returned by Apply instead of applying (to test the
	// "store unavailable" paths).
	Fail error
}

// New opens a fresh FSM in a temporary directory, closed at test end.
func New(t testing.TB) *Applier {
	t.Helper()
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &Applier{FSM: f, index: f.Applied()}
}

var _ fsm.Applier = (*Applier)(nil)

// Apply applies cmd at the next index.
func (a *Applier) Apply(_ context.Context, cmd fsm.Command) (fsm.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Fail != nil {
		return fsm.Result{}, a.Fail
	}
	// The gate of every real applier (cluster.Cluster): a command newer
	// than the state's format is never proposed.
	if err := a.FSM.State().CheckFormat(cmd); err != nil {
		return fsm.Result{}, err
	}
	a.index++
	return a.FSM.Apply(&raft.Log{Index: a.index, Type: raft.LogCommand, Data: cmd.Encode()}).(fsm.Result), nil
}

// SetFormat sets the state's format to f as a cluster's leader raises it
// once every member applies f: past the gate, behind which
// set_state_format itself stands. A test of one build's behaviour runs at
// fsm.CurrentFormat, as a cluster of one build does a moment after it
// starts; a fresh FSM, like a cluster mid-upgrade, runs fsm.FormatBase.
func (a *Applier) SetFormat(f fsm.Format) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.index++
	cmd := fsm.MustCommand(fsm.TypeSetStateFormat, fsm.SetStateFormat{Format: f, Version: fsm.FormatRelease(f)})
	return a.FSM.Apply(&raft.Log{Index: a.index, Type: raft.LogCommand, Data: cmd.Encode()}).(fsm.Result).Err
}

// State is the FSM's read view.
func (a *Applier) State() *fsm.State { return a.FSM.State() }
