package cluster

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// failLogWrites makes every raft log write of n fail with err (nil heals).
func (n *mnode) failLogWrites(err error) {
	if err == nil {
		n.c.store.failWrites.Store(nil)
		return
	}
	n.c.store.failWrites.Store(&err)
}

// TestLeaderWhoseLogWritesFailStepsDown: the leader's disk refuses log
// writes (an fsync that fails, EIO). The write it was given is never
// acknowledged: its caller gets an error, and the write does not appear
// anywhere later; the leader steps down, another node leads, writes go on
// there, and the old leader, healed, catches up with them. (raft stores
// a write on the leader before it replicates it, so the refused write is
// nowhere.)
func TestLeaderWhoseLogWritesFailStepsDown(t *testing.T) {
	mc := newMCluster(t, 3, fwdKey)
	leader, fs := mc.roles()
	mustApply(t, fs[0], org("before", "before"))
	leader.failLogWrites(syscall.EIO)

	_, err := leader.c.Apply(withTimeout(t, 5*time.Second), org("lost", "lost"))
	if err == nil {
		t.Fatal("a write whose log write failed was acknowledged")
	}
	t.Logf("the write on the failing leader: %v", err)
	// raft answers the write, then steps down.
	for deadline := time.Now().Add(2 * time.Second); leader.c.IsLeader(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the failing leader kept leading after its log write failed")
		}
	}
	// Writes go on through the others (mustApply retries for 20 s). The
	// failing node cannot commit anything (its own log writes fail), so a
	// committed write proves that another node led. It may still win an
	// election now and then and step down at once: the retries ride that
	// out.
	mustApply(t, fs[0], org("after", "after"))
	leader.failLogWrites(nil)
	for _, n := range append(fs, leader) {
		retry(t, "catch up", func(ctx context.Context) error { return n.c.ReadIndex(ctx) })
		for _, id := range []string{"before", "after"} {
			if _, err := n.f.State().Org(id); err != nil {
				t.Fatalf("%s: %s: %v", n.id, id, err)
			}
		}
		if _, err := n.f.State().Org("lost"); !errors.Is(err, fsm.ErrNotFound) {
			t.Fatalf("%s: the unacknowledged write is there (%v)", n.id, err)
		}
	}
}
