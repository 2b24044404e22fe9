package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/testcluster"
)

// TestDrainHandsLeadershipOver: a leader stopped on purpose (Drain, as
// SIGTERM does) hands leadership to another voter before it closes, so
// the next write need not wait out an election timeout; the old leader
// answers /readyz 503 from the start of the drain.
func TestDrainHandsLeadershipOver(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	old := c.WaitNewLeader()
	firstReady(t, c, old)
	done := make(chan struct{})
	go func() { c.Node(old).Drain(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return within 10 s")
	}
	if get(t, c, old, "/readyz") != 503 {
		t.Fatal("/readyz of a draining node: want 503")
	}
	if c.Node(old).Cluster().IsLeader() {
		t.Fatal("the drained node still leads")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		if l := c.Leader(); l >= 0 && l != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no other node leads 2 s after the hand-over")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Kill(old)
	mustCreateOrg(t, c)
}

// mustCreateOrg writes through the cluster's current leader.
func mustCreateOrg(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	l := c.WaitNewLeader()
	res, err := c.Node(l).Cluster().Apply(context.Background(), fsm.MustCommand(fsm.TypeCreateOrg, fsm.CreateOrg{ID: "11111111-2222-3333-4444-555555555555", Slug: "after", Name: "After"}))
	if err != nil || res.Err != nil {
		t.Fatalf("write after the hand-over: %v %v", err, res.Err)
	}
}
