package node_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/testcluster"
)

// grownPeople bounds the stores BenchmarkGrownCluster builds (10,000,
// 100,000, 1,000,000 people): a million takes about ten minutes to grow
// and a few GiB a node, so it is asked for with -grown.people 1000000
// (and one size picked with -bench 'GrownCluster/people=1000000$/').
var grownPeople = flag.Int("grown.people", 100_000, "the largest store BenchmarkGrownCluster grows")

// grownWriters is how many writes the load keeps in flight: raft batches
// them into its appends as it would a busy site's.
const grownWriters = 256

// growCluster writes fsmtest.Grown(n) through the leader's raft, each
// batch's commands concurrently, and returns the leader.
func growCluster(b *testing.B, c *testcluster.Cluster, n int) int {
	b.Helper()
	leader := c.WaitNewLeader()
	cl := c.Node(leader).Cluster()
	start := time.Now()
	writes, err := fsmtest.GrowThrough(n, time.Now(), grownWriters, cl.Apply)
	if err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	b.Logf("grew %d people in %v: %d writes, %.0f/s", n, took.Round(time.Second), writes, float64(writes)/took.Seconds())
	return leader
}

// treeSize is the bytes of the files under dir.
func treeSize(b *testing.B, dir string) int64 {
	b.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkGrownCluster: what grows with the state, on three nodes (one
// process, 127.0.0.1) grown to n signed-in people (fsmtest.Grown: people
// with two memberships, a live session and a live access token each),
// written through raft:
//
//   - snapshot: a raft snapshot on the leader (the compacted copy, written
//     to the snapshot store), with its size and the leader's data dir;
//   - catch-up: a follower's data dir wiped and the node started again,
//     until it has applied everything the leader has (the leader sends
//     its newest snapshot, the node restores it, then takes the log after);
//   - reap: one reap through raft that finds nothing to delete (every
//     session is live), the leader's regular sweep of ReapLimit records a
//     bucket, applied on every node.
func BenchmarkGrownCluster(b *testing.B) {
	for _, n := range fsmtest.GrownSizes(*grownPeople) {
		b.Run(fmt.Sprintf("people=%d", n), func(b *testing.B) {
			c := testcluster.New(b, testcluster.Options{Size: 3})
			leader := growCluster(b, c, n)
			ctx := context.Background()

			b.Run("snapshot", func(b *testing.B) {
				cl := c.Node(leader).Cluster()
				for b.Loop() {
					b.StopTimer()
					// Something new to snapshot, or raft refuses.
					if _, err := cl.Apply(ctx, fsm.MustCommand(fsm.TypeNoop, struct{}{})); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if err := cl.Snapshot(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(treeSize(b, filepath.Join(c.DataDir(leader), "raft", "snapshots")))/(1<<20), "snapshot-MiB")
				b.ReportMetric(float64(treeSize(b, c.DataDir(leader)))/(1<<20), "data-dir-MiB")
			})

			b.Run("catch-up", func(b *testing.B) {
				// The leader's log must no longer reach back to the start.
				if err := c.Node(leader).Cluster().Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
					b.Fatal(err)
				}
				for b.Loop() {
					b.StopTimer()
					victim := c.Followers()[0]
					dir := c.DataDir(victim)
					want := c.Node(c.Leader()).FSM().Applied()
					c.Kill(victim)
					snapWipe(b, dir)
					b.StartTimer()
					c.Launch(victim)
					deadline := time.Now().Add(10 * time.Minute)
					for c.Node(victim).FSM().Applied() < want {
						if time.Now().After(deadline) {
							b.Fatalf("wiped node at %d after 10 minutes, want %d", c.Node(victim).FSM().Applied(), want)
						}
						time.Sleep(10 * time.Millisecond)
					}
					b.StopTimer()
					if c.Node(victim).FSM().Restores() < 1 {
						b.Fatal("the wiped node caught up without a snapshot")
					}
					c.WaitLeader()
					b.StartTimer()
				}
			})

			b.Run("reap", func(b *testing.B) {
				cl := c.Node(c.WaitNewLeader()).Cluster()
				for b.Loop() {
					res, err := cl.Apply(ctx, fsm.MustCommand(fsm.TypeReap, fsm.Reap{Before: time.Now(), Limit: fsm.ReapLimit}))
					if err == nil {
						err = res.Err
					}
					if err != nil {
						b.Fatal(err)
					}
					if st := res.Value.(fsm.ReapStats); st.SSOSessions != 0 {
						b.Fatalf("reap deleted live sessions: %+v", st)
					}
				}
			})
		})
	}
}
