package node_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/testcluster"
)

// grownPeople bounds the stores BenchmarkGrownCluster builds (10,000,
// 100,000, 1,000,000 people): a million takes about ten minutes to grow
// and a few GiB a node, so it is asked for with -grown.people 1000000
// (and one size picked with -bench 'GrownCluster/people=1000000$/').
var grownPeople = flag.Int("grown.people", 100_000, "the largest store BenchmarkGrownCluster grows")

// grownEvents is the audit trail BenchmarkGrownCluster records on top of
// the people (fsmtest.GrownEvents), 10,000,000 for issue 46's figures.
var grownEvents = flag.Int("grown.events", 20_000, "the audit events BenchmarkGrownCluster records through raft")

// grownEventWriters is how many audit events the load keeps in flight:
// more than the people's writes, so that raft's appends carry full
// batches of these small entries.
const grownEventWriters = 2048

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

// growEvents records events audit events through the leader's raft
// (fsmtest.GrowEventsThrough), then waits until every node's mover has
// moved them all into its trail, and checks that every node's newest
// event has the same seq and hash.
func growEvents(b *testing.B, c *testcluster.Cluster, people, events int) {
	b.Helper()
	leader := c.WaitNewLeader()
	for i := range c.Size() {
		grownWait(b, fmt.Sprintf("node %d at format 3", i), time.Minute, func() (bool, string) {
			f := c.Node(i).FSM().State().StateFormat()
			return f >= fsm.FormatTrail, fmt.Sprintf("format %d", f)
		})
	}
	before, err := c.Node(leader).FSM().State().AuditStats()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	writes, err := fsmtest.GrowEventsThrough(events, people, time.Now().Add(-24*time.Hour), grownEventWriters, c.Node(leader).Cluster().Apply)
	if err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	b.Logf("recorded %d audit events through raft in %v: %.0f/s", writes, took.Round(time.Second), float64(writes)/took.Seconds())
	after, err := c.Node(leader).FSM().State().AuditStats()
	if err != nil {
		b.Fatal(err)
	}
	if after.HeadSeq < before.HeadSeq+uint64(events) {
		b.Fatalf("head %d after %d events from %d", after.HeadSeq, events, before.HeadSeq)
	}
	start = time.Now()
	for i := range c.Size() {
		grownWait(b, fmt.Sprintf("node %d's trail holds every event", i), 30*time.Minute, func() (bool, string) {
			st := c.Node(i).FSM().TrailStatus()
			return st.Last >= after.HeadSeq && !st.Gap, fmt.Sprintf("%+v, head %d", st, after.HeadSeq)
		})
	}
	b.Logf("every node's mover had moved them into its trail %v later", time.Since(start).Round(time.Second))
	for i := range c.Size() {
		seq, hash := grownNewest(b, c, i, after.HeadSeq)
		if i == leader {
			b.Logf("trail head on every node: seq %d, hash %s", seq, hash)
		}
	}
}

// grownNewest is node i's event at seq (its trail's newest when the
// cluster is still), checked against the leader's.
func grownNewest(b *testing.B, c *testcluster.Cluster, i int, seq uint64) (uint64, string) {
	b.Helper()
	at := func(j int) fsm.Event {
		es, err := c.Node(j).FSM().State().AuditEvents(fsm.AuditQuery{After: seq - 1, Limit: 1})
		if err != nil || len(es) != 1 || es[0].Seq != seq {
			b.Fatalf("node %d: event %d: %v %v", j, seq, es, err)
		}
		return es[0]
	}
	mine, theirs := at(i), at(c.Leader())
	if mine.Hash != theirs.Hash || mine.PrevHash != theirs.PrevHash {
		b.Fatalf("node %d's event %d is %s, the leader's %s", i, seq, mine.Hash, theirs.Hash)
	}
	return mine.Seq, mine.Hash
}

// grownWait polls cond every 10 ms until it holds, for at most d.
func grownWait(b *testing.B, what string, d time.Duration, cond func() (bool, string)) {
	b.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not after %v: %s", what, d, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fileSize is the bytes of one file (0 when it is not there).
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// BenchmarkGrownCluster: what grows with the state, on three nodes (one
// process, 127.0.0.1) grown to n signed-in people (fsmtest.Grown: people
// with two memberships, a live session and a live access token each),
// written through raft, and then an audit trail of -grown.events events
// (fsmtest.GrownEvents):
//
//   - sizes: per node, the state file, the trail's directory and the
//     whole data dir, the state's bytes a person and the data dir against
//     the state;
//   - snapshot: a raft snapshot on the leader (the compacted copy, written
//     to the snapshot store), with its size and the leader's data dir;
//   - catch-up: a follower's data dir wiped and the node started again,
//     until it has applied everything the leader has (the leader sends
//     its newest snapshot, the node restores it, then takes the log
//     after), and then until its trail lacks nothing (node/trail.go
//     fetches the events below the snapshot's staging from a peer:
//     fsm.TrailGap empty and oidcd_audit_trail_missing_events 0); its
//     trail is then verified (VerifyAudit) and its head is the leader's;
//   - reap: one reap through raft that finds nothing to delete (every
//     session is live), the leader's regular sweep of ReapLimit records a
//     bucket, applied on every node.
//
// The events go through raft like every other write: TypeAuditEvent
// commands (each records its stamp, nothing else), 2,048 in flight, so
// every replica computes each event's seq and hash in its own apply and
// its own mover moves them into its own trail. The fsm has no command
// carrying many events, and building the trails beside the nodes before
// they start (fsm/trail's Import) would need a state whose head, floor
// and chunk table match them, which only the apply writes: so raft it
// is, at what raft sustains (3,000 to 3,600 entries a second here).
func BenchmarkGrownCluster(b *testing.B) {
	for _, n := range fsmtest.GrownSizes(*grownPeople) {
		b.Run(fmt.Sprintf("people=%d", n), func(b *testing.B) {
			c := testcluster.New(b, testcluster.Options{Size: 3})
			growCluster(b, c, n)
			if *grownEvents > 0 {
				growEvents(b, c, n, *grownEvents)
			}
			leader := c.WaitNewLeader()
			ctx := context.Background()

			b.Run("sizes", func(b *testing.B) {
				for b.Loop() {
				}
				for i := range c.Size() {
					dir := c.DataDir(i)
					state := fileSize(filepath.Join(dir, "state.db"))
					tr := treeSize(b, filepath.Join(dir, "trail"))
					all := treeSize(b, dir)
					raftDir := treeSize(b, filepath.Join(dir, "raft"))
					role := "follower"
					if i == leader {
						role = "leader"
						b.ReportMetric(float64(state)/(1<<20), "state-MiB")
						b.ReportMetric(float64(state)/float64(n), "state-B/person")
						b.ReportMetric(float64(tr)/(1<<20), "trail-MiB")
						b.ReportMetric(float64(all)/(1<<20), "data-dir-MiB")
						b.ReportMetric(float64(all)/float64(state), "data-dir/state")
						b.ReportMetric(float64(all-tr)/float64(state), "data-dir-less-trail/state")
					}
					b.Logf("node %d (%s): state.db %.1f MiB (%.0f B a person), trail %.1f MiB (%.0f B an event), raft %.1f MiB, data dir %.1f MiB (%.2f × state.db; %.2f × without the trail)",
						i, role, float64(state)/(1<<20), float64(state)/float64(n), float64(tr)/(1<<20), float64(tr)/float64(max(*grownEvents, 1)),
						float64(raftDir)/(1<<20), float64(all)/(1<<20), float64(all)/float64(state), float64(all-tr)/float64(state))
				}
			})

			b.Run("snapshot", func(b *testing.B) {
				cl := c.Node(leader).Cluster()
				for b.Loop() {
					b.StopTimer()
					// Something new to snapshot, or raft refuses.
					if _, err := cl.Apply(ctx, fsm.MustCommand(fsm.TypeNoop, struct{}{})); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start := time.Now()
					if err := cl.Snapshot(); err != nil {
						b.Fatal(err)
					}
					b.Logf("raft snapshot on the leader: %v", time.Since(start).Round(time.Millisecond))
				}
				snaps := treeSize(b, filepath.Join(c.DataDir(leader), "raft", "snapshots"))
				b.ReportMetric(float64(snaps)/(1<<20), "snapshot-MiB")
				b.ReportMetric(float64(treeSize(b, c.DataDir(leader)))/(1<<20), "data-dir-MiB")
				b.Logf("the leader's snapshot store: %.1f MiB (the retained snapshots)", float64(snaps)/(1<<20))
			})

			b.Run("catch-up", func(b *testing.B) {
				// The leader's log must no longer reach back to the start.
				if err := c.Node(leader).Cluster().Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
					b.Fatal(err)
				}
				var applied, complete time.Duration
				var gap uint64
				for b.Loop() {
					b.StopTimer()
					victim := c.Followers()[0]
					dir := c.DataDir(victim)
					want := c.Node(c.Leader()).FSM().Applied()
					c.Kill(victim)
					snapWipe(b, dir)
					b.StartTimer()
					start := time.Now()
					c.Launch(victim)
					node := c.Node(victim)
					gap = 0
					deadline := start.Add(10 * time.Minute)
					for node.FSM().Applied() < want {
						if from, to, ok := node.FSM().TrailGap(); ok && gap == 0 {
							gap = to - from + 1
						}
						if time.Now().After(deadline) {
							b.Fatalf("wiped node at %d after 10 minutes, want %d", node.FSM().Applied(), want)
						}
						time.Sleep(10 * time.Millisecond)
					}
					applied = time.Since(start)
					for {
						from, to, ok := node.FSM().TrailGap()
						if !ok {
							break
						}
						if gap == 0 {
							gap = to - from + 1
						}
						if time.Now().After(deadline) {
							b.Fatalf("wiped node's trail lacks %d-%d after 10 minutes", from, to)
						}
						time.Sleep(10 * time.Millisecond)
					}
					complete = time.Since(start)
					b.StopTimer()
					if node.FSM().Restores() < 1 {
						b.Fatal("the wiped node caught up without a snapshot")
					}
					if m := trailMissingMetric(b, c, victim); m != 0 {
						b.Fatalf("oidcd_audit_trail_missing_events %d after the fetch", m)
					}
					vstart := time.Now()
					v, err := node.FSM().State().VerifyAudit()
					if err != nil || !v.OK {
						b.Fatalf("verify on the caught-up node: %+v %v", v, err)
					}
					vtook := time.Since(vstart)
					c.WaitLeader()
					if err := node.Cluster().ReadIndex(ctx); err != nil {
						b.Fatal(err)
					}
					seq, hash := grownNewest(b, c, victim, v.LastSeq)
					if hash != v.HeadHash {
						b.Fatalf("verify's head %s, the event %d's hash %s", v.HeadHash, seq, hash)
					}
					b.Logf("wiped node %d: snapshot installed and log applied in %v; trail complete (%d events fetched) %v after the start, %v after the snapshot: %.0f events/s",
						victim, applied.Round(time.Millisecond), gap, complete.Round(time.Millisecond), (complete - applied).Round(time.Millisecond),
						float64(gap)/max(complete-applied, time.Millisecond).Seconds())
					b.Logf("its trail verifies: %d events, seq %d to %d, head %s, as the leader's (verify took %v)",
						v.Count, v.FirstSeq, v.LastSeq, v.HeadHash, vtook.Round(time.Millisecond))
					b.StartTimer()
				}
				b.ReportMetric(applied.Seconds(), "applied-s")
				b.ReportMetric(complete.Seconds(), "trail-complete-s")
				b.ReportMetric(float64(gap), "trail-fetched-events")
				if complete > applied {
					b.ReportMetric(float64(gap)/(complete-applied).Seconds(), "fetch-events/s")
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

// grownBuckets logs what each bucket of the bbolt file at path holds, per
// person of n: where a state's bytes go. The file must be closed (bbolt
// locks it).
func grownBuckets(b *testing.B, path string, n int, what string) {
	b.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		b.Logf("%s: %v", what, err)
		return
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var inuse, alloc int
		var lines []string
		err := tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			st := bk.Stats()
			use := st.LeafInuse + st.BranchInuse + st.InlineBucketInuse
			al := st.LeafAlloc + st.BranchAlloc
			inuse += use
			alloc += al
			if al >= 1<<20 {
				lines = append(lines, fmt.Sprintf("%s %d keys, %.0f B/person in use, %.0f allocated (%.0f%% full)",
					name, st.KeyN, float64(use)/float64(n), float64(al)/float64(n), 100*float64(use)/float64(max(al, 1))))
			}
			return nil
		})
		fi := fileSize(path)
		b.Logf("%s: %.1f MiB file, %.0f B/person; pages of buckets %.0f B/person allocated, %.0f in use (%.0f%% full); free or freelist %.0f B/person",
			what, float64(fi)/(1<<20), float64(fi)/float64(n), float64(alloc)/float64(n), float64(inuse)/float64(n),
			100*float64(inuse)/float64(max(alloc, 1)), float64(fi-int64(alloc))/float64(n))
		for _, l := range lines {
			b.Logf("  %s", l)
		}
		return err
	})
	if err != nil {
		b.Logf("%s: %v", what, err)
	}
}

// fileSink is a raft.SnapshotSink writing one file.
type fileSink struct{ *os.File }

func (s fileSink) ID() string    { return "grown" }
func (s fileSink) Cancel() error { return s.Close() }

// BenchmarkGrownReplica: the store and trail of one replica at sizes a
// cluster cannot be grown to in a sitting here, and a second replica's
// catch-up from it, without raft or the network. A cluster records about
// 2,900 to 3,600 audit events a second through raft on this machine (one
// entry each: the fsm has no command carrying many events), so 10
// million take about 50 minutes a run. Instead replica A is grown
// straight through its own FSM.ApplyBatch (fsmtest.GrowDirect: the same
// commands in the same order as BenchmarkGrownCluster's, applied by the
// replicas' own apply, 8,192 a transaction), its mover moving the events
// into its trail as a node's does. Then:
//
//   - sizes: A's state file, trail and directory, as BenchmarkGrownCluster's;
//   - snapshot: A's raft snapshot (FSM.Snapshot and Persist, the copy a
//     node's snapshot store writes and sends) to a file;
//   - catch-up: replica B, fresh, restores that snapshot (what a wiped
//     node does with the one its leader sends), then lacks every event A
//     had moved (TrailGap); it takes them as a node takes them from a
//     peer, A's ExportTrail streamed into B's ImportTrail (through a pipe
//     here, where cluster.FetchTrail adds mutual TLS over a connection;
//     BenchmarkGrownCluster measures that path at smaller sizes). B's
//     trail is then verified (VerifyAudit) and its head is A's.
func BenchmarkGrownReplica(b *testing.B) {
	for _, n := range fsmtest.GrownSizes(*grownPeople) {
		b.Run(fmt.Sprintf("people=%d", n), func(b *testing.B) {
			events := *grownEvents
			dirA, dirB := b.TempDir(), b.TempDir()
			a, err := fsm.Open(filepath.Join(dirA, "state.db"))
			if err != nil {
				b.Fatal(err)
			}
			closed := false
			defer func() {
				if !closed {
					a.Close()
				}
			}()
			start := time.Now()
			if err := fsmtest.GrowDirect(a, n, events, time.Now().Add(-24*time.Hour)); err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			head, err := a.State().AuditStats()
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("grew replica A to %d people and %d audit events in %v (applied index %d, audit head %d)",
				n, events, took.Round(time.Second), a.Applied(), head.HeadSeq)
			start = time.Now()
			grownWait(b, "A's trail holds every event", 30*time.Minute, func() (bool, string) {
				st := a.TrailStatus()
				return st.Last >= head.HeadSeq && !st.Gap, fmt.Sprintf("%+v, head %d", st, head.HeadSeq)
			})
			// The staging is trimmed by later apply batches (8,192 a batch).
			noop := fsm.MustCommand(fsm.TypeNoop, struct{}{})
			for range 64 {
				a.ApplyBatch([]*raft.Log{{Index: a.Applied() + 1, Term: 1, Type: raft.LogCommand, Data: noop.Encode()}})
			}
			b.Logf("A's mover had moved them into its trail %v after the last apply", time.Since(start).Round(time.Second))
			es, err := a.State().AuditEvents(fsm.AuditQuery{After: head.HeadSeq - 1, Limit: 1})
			if err != nil || len(es) != 1 {
				b.Fatalf("A's newest event: %v %v", es, err)
			}
			newest := es[0]

			b.Run("sizes", func(b *testing.B) {
				for b.Loop() {
				}
				state := fileSize(filepath.Join(dirA, "state.db"))
				tr := treeSize(b, filepath.Join(dirA, "trail"))
				all := treeSize(b, dirA)
				b.ReportMetric(float64(state)/(1<<20), "state-MiB")
				b.ReportMetric(float64(state)/float64(n), "state-B/person")
				b.ReportMetric(float64(tr)/(1<<20), "trail-MiB")
				b.ReportMetric(float64(tr)/float64(max(events, 1)), "trail-B/event")
				b.ReportMetric(float64(all)/(1<<20), "dir-MiB")
				b.ReportMetric(float64(all)/float64(state), "dir/state")
				b.Logf("replica A: state.db %.1f MiB (%.0f B a person), trail %.1f MiB (%.0f B an event), its directory %.1f MiB (%.2f × state.db)",
					float64(state)/(1<<20), float64(state)/float64(n), float64(tr)/(1<<20), float64(tr)/float64(max(events, 1)),
					float64(all)/(1<<20), float64(all)/float64(state))
			})

			snapPath := filepath.Join(b.TempDir(), "snapshot")
			b.Run("snapshot", func(b *testing.B) {
				for b.Loop() {
					snap, err := a.Snapshot()
					if err != nil {
						b.Fatal(err)
					}
					f, err := os.Create(snapPath)
					if err != nil {
						b.Fatal(err)
					}
					if err := snap.Persist(fileSink{f}); err != nil {
						b.Fatal(err)
					}
					snap.Release()
				}
				size := fileSize(snapPath)
				b.ReportMetric(float64(size)/(1<<20), "snapshot-MiB")
				b.ReportMetric(float64(size)/float64(n), "snapshot-B/person")
				b.Logf("A's raft snapshot: %.1f MiB (%.0f B a person)", float64(size)/(1<<20), float64(size)/float64(n))
				grownBuckets(b, snapPath, n, "the snapshot (compacted)")
			})

			b.Run("catch-up", func(b *testing.B) {
				var restored, fetched time.Duration
				var gap uint64
				for b.Loop() {
					b.StopTimer()
					os.RemoveAll(dirB)
					os.MkdirAll(dirB, 0o700)
					rb, err := fsm.Open(filepath.Join(dirB, "state.db"))
					if err != nil {
						b.Fatal(err)
					}
					f, err := os.Open(snapPath)
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start := time.Now()
					if err := rb.Restore(f); err != nil {
						b.Fatal(err)
					}
					restored = time.Since(start)
					from, to, ok := rb.TrailGap()
					if ok {
						gap = to - from + 1
						pr, pw := io.Pipe()
						go func() { pw.CloseWithError(a.ExportTrail(pw, from, to)) }()
						if err := rb.ImportTrail(pr); err != nil {
							b.Fatal(err)
						}
						pr.Close()
					}
					fetched = time.Since(start) - restored
					b.StopTimer()
					if from, to, ok := rb.TrailGap(); ok {
						b.Fatalf("B lacks %d-%d after the import", from, to)
					}
					vstart := time.Now()
					v, err := rb.State().VerifyAudit()
					if err != nil || !v.OK {
						b.Fatalf("verify on B: %+v %v", v, err)
					}
					if v.LastSeq != newest.Seq || v.HeadHash != newest.Hash {
						b.Fatalf("B's head %d %s, A's %d %s", v.LastSeq, v.HeadHash, newest.Seq, newest.Hash)
					}
					b.Logf("replica B: snapshot restored in %v, then %d events taken from A's trail in %v (%.0f events/s): caught up in %v",
						restored.Round(time.Millisecond), gap, fetched.Round(time.Millisecond), float64(gap)/max(fetched, time.Millisecond).Seconds(),
						(restored + fetched).Round(time.Millisecond))
					b.Logf("B's trail verifies: %d events, seq %d to %d, head %s, as A's (verify took %v); B's state.db %.1f MiB (%.0f B a person), trail %.1f MiB, directory %.1f MiB",
						v.Count, v.FirstSeq, v.LastSeq, v.HeadHash, time.Since(vstart).Round(time.Millisecond),
						float64(fileSize(filepath.Join(dirB, "state.db")))/(1<<20), float64(fileSize(filepath.Join(dirB, "state.db")))/float64(n),
						float64(treeSize(b, filepath.Join(dirB, "trail")))/(1<<20), float64(treeSize(b, dirB))/(1<<20))
					rb.Close()
					b.StartTimer()
				}
				b.ReportMetric(restored.Seconds(), "restore-s")
				b.ReportMetric(fetched.Seconds(), "trail-fetch-s")
				b.ReportMetric((restored + fetched).Seconds(), "caught-up-s")
				b.ReportMetric(float64(gap), "trail-fetched-events")
				b.ReportMetric(float64(gap)/max(fetched, time.Millisecond).Seconds(), "fetch-events/s")
			})
			closed = true
			if err := a.Close(); err != nil {
				b.Fatal(err)
			}
			grownBuckets(b, filepath.Join(dirA, "state.db"), n, "A's state.db")
		})
	}
}
