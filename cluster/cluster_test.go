package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
)

type testNode struct {
	c   *Cluster
	f   *fsm.FSM
	dir string
}

func start(t *testing.T, dir string, addr string, cfgFn func(*Config)) *testNode {
	t.Helper()
	f, err := fsm.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		NodeID: "n1", DataDir: dir, RaftListener: ln, BootstrapExpect: 1, FSM: f,
		Transport:        TransportConfig{ClusterKey: testClusterKey},
		Registerer:       prometheus.NewRegistry(),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLease: 100 * time.Millisecond,
	}
	if cfgFn != nil {
		cfgFn(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{c: c, f: f, dir: dir}
	t.Cleanup(n.stop)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// Alone, the node raises the state format as soon as it leads; waiting
	// for that entry keeps it out of what the tests count.
	waitFor(t, 10*time.Second, "the format raised", func() bool { return f.State().StateFormat() == fsm.CurrentFormat })
	return n
}

func (n *testNode) stop() {
	n.c.Shutdown()
	n.f.Close()
}

func org(id, slug string) fsm.Command {
	return fsm.MustCommand(fsm.TypeCreateOrg, fsm.CreateOrg{ID: id, Slug: slug, Name: slug})
}

func TestSingleNodeApplyIsVisibleOnReturn(t *testing.T) {
	n := start(t, t.TempDir(), "127.0.0.1:0", nil)
	res, err := n.c.Apply(t.Context(), org("o1", "one"))
	if err != nil || res.Err != nil {
		t.Fatalf("apply: %v %v", err, res.Err)
	}
	if _, err := n.f.State().Org("o1"); err != nil {
		t.Fatalf("read after apply: %v", err)
	}
	res, err = n.c.Apply(t.Context(), org("o2", "one"))
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.Err, fsm.ErrConflict) {
		t.Fatalf("duplicate slug: got %v, want ErrConflict", res.Err)
	}
}

func TestRestartKeepsStateAndLeadership(t *testing.T) {
	dir := t.TempDir()
	n := start(t, dir, "127.0.0.1:0", nil)
	addr := n.c.RaftAddr()
	for i, slug := range []string{"a", "b", "c"} {
		if _, err := n.c.Apply(t.Context(), org(string(rune('0'+i)), slug)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.c.Apply(t.Context(), org("3", "d")); err != nil { // one entry after the snapshot
		t.Fatal(err)
	}
	applied := n.f.Applied()
	n.stop()

	n2 := start(t, dir, addr, nil)
	if err := n2.f.WaitApplied(t.Context(), applied); err != nil {
		t.Fatal(err)
	}
	_, total, err := n2.f.State().Orgs(fsm.Page{Page: 1, PageSize: 10})
	if err != nil || total != 4 {
		t.Fatalf("orgs after restart: got %d %v, want 4", total, err)
	}
	if _, err := n2.c.Apply(t.Context(), org("4", "e")); err != nil {
		t.Fatalf("write after restart: %v", err)
	}
}

func TestLeaderLoopsRunWhileLeading(t *testing.T) {
	n := start(t, t.TempDir(), "127.0.0.1:0", nil)
	var running atomic.Int32
	stopped := make(chan struct{})
	n.c.OnLeader(func(ctx context.Context) {
		running.Add(1)
		<-ctx.Done()
		running.Add(-1)
		close(stopped)
	})
	deadline := time.Now().Add(5 * time.Second)
	for running.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("leader loop registered on a leader did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	n.c.Shutdown()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("leader loop not stopped on shutdown")
	}
}

func TestApplyAfterShutdownFails(t *testing.T) {
	n := start(t, t.TempDir(), "127.0.0.1:0", nil)
	n.c.Shutdown()
	if _, err := n.c.Apply(t.Context(), org("x", "x")); !errors.Is(err, ErrShutdown) {
		t.Fatalf("got %v, want ErrShutdown", err)
	}
}

func TestAutomaticSnapshotCompactsLog(t *testing.T) {
	n := start(t, t.TempDir(), "127.0.0.1:0", func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = 16, 4, 50*time.Millisecond
	})
	for i := 0; i < 64; i++ {
		if _, err := n.c.Apply(t.Context(), fsm.MustCommand(fsm.TypeNoop, struct{}{})); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		first, _ := n.c.store.FirstIndex()
		if first > 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log not compacted: first index %d", first)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchSingle starts a single-node cluster for a benchmark.
func benchSingle(b *testing.B) *Cluster {
	dir := b.TempDir()
	f, _ := fsm.Open(filepath.Join(dir, "state.db"))
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	c, err := New(Config{NodeID: "b", DataDir: dir, RaftListener: ln, BootstrapExpect: 1, FSM: f, Transport: TransportConfig{ClusterKey: testClusterKey},
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLease: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Shutdown(); f.Close() })
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	c.WaitLeader(context.Background())
	return c
}

func BenchmarkApply(b *testing.B) {
	c := benchSingle(b)
	cmd := fsm.MustCommand(fsm.TypeNoop, struct{}{})
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Apply(context.Background(), cmd); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestLoneVoterDoesNotWaitOutTheHeartbeatTimeout: the only voter of its
// configuration elects itself at once, fresh and on a restart, instead
// of first waiting a heartbeat timeout for a leader that cannot exist;
// and the configured timeout is back in place afterwards. With a 30 s
// timeout, start's 10 s wait for a leader fails without that.
func TestLoneVoterDoesNotWaitOutTheHeartbeatTimeout(t *testing.T) {
	slow := func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLease = 30*time.Second, 30*time.Second, 500*time.Millisecond
	}
	dir := t.TempDir()
	n := start(t, dir, "127.0.0.1:0", slow)
	if got := n.c.raft.ReloadableConfig().HeartbeatTimeout; got != 30*time.Second {
		t.Fatalf("heartbeat timeout after the first election: %v, want the configured 30s", got)
	}
	n.stop()
	start(t, dir, "127.0.0.1:0", slow) // a restart on the same state
}

func TestOnlyVoter(t *testing.T) {
	voter := func(id string) raft.Server { return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id)} }
	nonvoter := func(id string) raft.Server { return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id)} }
	for _, tc := range []struct {
		name    string
		servers []raft.Server
		want    bool
	}{
		{"alone", []raft.Server{voter("n1")}, true},
		{"with edge replicas", []raft.Server{voter("n1"), nonvoter("e1"), nonvoter("e2")}, true},
		{"another voter", []raft.Server{voter("n1"), voter("n2")}, false},
		{"one being added", []raft.Server{voter("n1"), {Suffrage: raft.Staging, ID: "n2"}}, true},
		{"someone else's", []raft.Server{voter("n2"), nonvoter("n1")}, false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := onlyVoter(raft.Configuration{Servers: tc.servers}, "n1"); got != tc.want {
				t.Fatalf("onlyVoter = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSoleVoterReadIndex: a lone voter serves read indexes without a
// heartbeat round, and a read after one sees every write acknowledged
// before it, with writers and readers at once.
func TestSoleVoterReadIndex(t *testing.T) {
	n := start(t, t.TempDir(), "127.0.0.1:0", nil)
	if !n.c.soleVoter() {
		t.Fatal("a single-node cluster is not its own only voter")
	}
	var acked atomic.Int64 // the highest org written, acknowledged
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			if res, err := n.c.Apply(t.Context(), org(fmt.Sprint("o", i), fmt.Sprint("s", i))); err != nil || res.Err != nil {
				t.Errorf("apply %d: %v %v", i, err, res.Err)
				return
			}
			acked.Store(int64(i))
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 300 {
				seen := acked.Load()
				if err := n.c.ReadIndex(t.Context()); err != nil {
					t.Errorf("read index: %v", err)
					return
				}
				if _, err := n.f.State().Org(fmt.Sprint("o", seen)); seen > 0 && err != nil {
					t.Errorf("org o%d acknowledged before the read index, then: %v", seen, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkReadIndexSoleVoter: 16 readers per CPU on a single node, the
// read path of every bearer request there.
func BenchmarkReadIndexSoleVoter(b *testing.B) {
	c := benchSingle(b)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.ReadIndex(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
