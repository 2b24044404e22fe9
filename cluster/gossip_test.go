package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
)

var (
	testClusterKey = bytes.Repeat([]byte{0x42}, 32)
	otherKey       = bytes.Repeat([]byte{0x17}, 32)
)

// gnode is one gossiping node of a test cluster.
type gnode struct {
	id, dir string
	c       *Cluster
	f       *fsm.FSM
	once    sync.Once
}

// startGossipNode starts a node with gossip on a free port of 127.0.0.1,
// fast raft and memberlist timings, BootstrapExpect 3 and the test key;
// mod adjusts the config. It does not wait for a leader.
func startGossipNode(t *testing.T, id, dir string, mod func(*Config)) *gnode {
	t.Helper()
	f, err := fsm.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		NodeID: id, DataDir: dir, RaftListener: ln, FSM: f, BootstrapExpect: 3,
		Logger:           testLogger(id),
		Registerer:       prometheus.NewRegistry(),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLease: 150 * time.Millisecond,
		Transport: TransportConfig{ClusterKey: testClusterKey},
		Gossip: GossipConfig{
			Addr: "127.0.0.1:0", HTTPAddr: "http." + id, Version: "test",
			ReapAfter: time.Hour, ReconcileInterval: 100 * time.Millisecond, Tune: FastGossip,
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		ln.Close()
		f.Close()
		t.Fatalf("start %s: %v", id, err)
	}
	if err := c.Start(); err != nil {
		c.Shutdown()
		f.Close()
		t.Fatalf("start %s: %v", id, err)
	}
	n := &gnode{id: id, dir: dir, c: c, f: f}
	t.Cleanup(n.stop)
	return n
}

func (n *gnode) stop() {
	n.once.Do(func() {
		n.c.Shutdown()
		n.f.Close()
	})
}

// crash stops the node without a gossip leave: peers see it fail.
func (n *gnode) crash() {
	n.once.Do(func() {
		g := n.c.gossip
		g.mu.Lock()
		g.shutdown = true
		g.mu.Unlock()
		g.cancel()
		g.ml.Shutdown()
		g.wg.Wait()
		n.c.Shutdown()
		n.f.Close()
	})
}

func testLogger(id string) *slog.Logger {
	if os.Getenv("CLUSTER_TEST_VERBOSE") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serverIDs is a node's raft configuration as sorted ids ("" on error).
func serverIDs(c *Cluster) []string {
	servers, err := c.Members()
	if err != nil {
		return nil
	}
	var ids []string
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, string(s.ID))
		}
	}
	slices.Sort(ids)
	return ids
}

func leaderOf(t *testing.T, nodes ...*gnode) *gnode {
	t.Helper()
	var leader *gnode
	waitFor(t, 10*time.Second, "a leader", func() bool {
		for _, n := range nodes {
			if n.c.IsLeader() {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

// applyOnLeader writes cmd through whichever node leads, retrying while
// leadership moves (elections are quick and frequent on a busy machine),
// and returns the leader that committed it.
func applyOnLeader(t *testing.T, cmd fsm.Command, nodes ...*gnode) *gnode {
	t.Helper()
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		leader := leaderOf(t, nodes...)
		if _, err = leader.c.Apply(t.Context(), cmd); err == nil {
			return leader
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("apply: %v", err)
	return nil
}

// formCluster starts n1 (no --join), then n2 and n3 joining n1, all with
// BootstrapExpect 3, and waits until each has the three voters.
func formCluster(t *testing.T, mod func(*Config)) []*gnode {
	t.Helper()
	n1 := startGossipNode(t, "n1", t.TempDir(), mod)
	nodes := []*gnode{n1}
	for _, id := range []string{"n2", "n3"} {
		nodes = append(nodes, startGossipNode(t, id, t.TempDir(), func(c *Config) {
			c.Gossip.Join = []string{n1.c.GossipAddr()}
			if mod != nil {
				mod(c)
			}
		}))
	}
	want := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.id+" to have the three voters", func() bool { return slices.Equal(serverIDs(n.c), want) })
	}
	return nodes
}

func TestGossipBootstrapExpectFormsOnce(t *testing.T) {
	start := time.Now()
	nodes := formCluster(t, nil)
	leaderOf(t, nodes...)
	t.Logf("formed in %v", time.Since(start))

	leaderTerms := map[string]string{}
	for _, n := range nodes {
		if n.c.IsLeader() {
			term := n.c.Stats()["term"]
			if other, ok := leaderTerms[term]; ok {
				t.Fatalf("%s and %s both lead term %s", other, n.id, term)
			}
			leaderTerms[term] = n.id
		}
		// Every node's log starts with the same bootstrap configuration:
		// the three nodes bootstrapped once, together.
		var first raft.Log
		if err := n.c.store.GetLog(1, &first); err != nil {
			t.Fatalf("%s: first log entry: %v", n.id, err)
		}
		if first.Type != raft.LogConfiguration {
			t.Fatalf("%s: first entry is %v, want the bootstrap configuration", n.id, first.Type)
		}
		cfg := raft.DecodeConfiguration(first.Data)
		var ids []string
		for _, s := range cfg.Servers {
			ids = append(ids, string(s.ID))
		}
		if !slices.Equal(ids, []string{"n1", "n2", "n3"}) {
			t.Fatalf("%s: bootstrapped with %v, want [n1 n2 n3]", n.id, ids)
		}
	}

	leader := applyOnLeader(t, org("o1", "one"), nodes...)
	for _, n := range nodes {
		if err := n.f.WaitApplied(t.Context(), leader.f.Applied()); err != nil {
			t.Fatalf("%s: %v", n.id, err)
		}
	}

	var st Status
	waitFor(t, 5*time.Second, "gossip metadata in the status", func() bool {
		var err error
		st, err = nodes[1].c.Status(t.Context())
		if err != nil || st.Leader == "" || len(st.Members) != 3 {
			return false
		}
		for _, m := range st.Members {
			if m.GossipAddr == "" || m.HTTPAddr != "http."+m.ID || !m.Voter || m.RaftAddr == "" {
				return false
			}
			want := "follower"
			if m.ID == st.Leader {
				want = "leader"
			}
			if m.State != want {
				return false
			}
		}
		return true
	})
	t.Logf("status: %+v", st)
}

func TestGossipLateJoinerBecomesVoterAndLeaves(t *testing.T) {
	nodes := formCluster(t, nil)
	leader := leaderOf(t, nodes...)
	start := time.Now()
	// Same flags as the first three: it sees a formed cluster and waits
	// to be added instead of bootstrapping.
	n4 := startGossipNode(t, "n4", t.TempDir(), func(c *Config) { c.Gossip.Join = []string{nodes[1].c.GossipAddr()} })
	want := []string{"n1", "n2", "n3", "n4"}
	waitFor(t, 10*time.Second, "n4 to become a voter", func() bool { return slices.Equal(serverIDs(leader.c), want) })
	t.Logf("n4 added in %v", time.Since(start))
	leader = applyOnLeader(t, org("o1", "one"), append(nodes, n4)...)
	if err := n4.f.WaitApplied(t.Context(), leader.f.Applied()); err != nil {
		t.Fatalf("n4 does not replicate: %v", err)
	}
	if err := n4.c.WaitLeader(t.Context()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := n4.c.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	n4.stop()
	if got := serverIDs(leader.c); !slices.Equal(got, want[:3]) {
		t.Fatalf("after leave: got %v, want %v", got, want[:3])
	}
}

func TestGossipRestartedNodeRejoinsWithoutJoin(t *testing.T) {
	nodes := formCluster(t, nil)
	n1 := nodes[0]
	if _, err := os.Stat(filepath.Join(n1.dir, "raft", peersFileName)); err != nil {
		waitFor(t, 5*time.Second, "n1 to save its gossip peers", func() bool {
			_, err := os.Stat(filepath.Join(n1.dir, "raft", peersFileName))
			return err == nil
		})
	}
	oldRaft := n1.c.RaftAddr()
	n1.stop()

	// A new raft address and a new gossip port, and no --join: only the
	// saved peers can bring it back, and only gossip can tell the leader
	// where it now is.
	start := time.Now()
	n1 = startGossipNode(t, "n1", n1.dir, nil)
	if n1.c.RaftAddr() == oldRaft {
		t.Fatalf("test wants a new raft address, got the old %s", oldRaft)
	}
	leader := leaderOf(t, n1, nodes[1], nodes[2])
	waitFor(t, 10*time.Second, "the leader to learn n1's new raft address", func() bool {
		servers, _ := leader.c.Members()
		return slices.ContainsFunc(servers, func(s raft.Server) bool {
			return s.ID == "n1" && string(s.Address) == n1.c.RaftAddr() && s.Suffrage == raft.Voter
		})
	})
	leader = applyOnLeader(t, org("o1", "one"), n1, nodes[1], nodes[2])
	if err := n1.f.WaitApplied(t.Context(), leader.f.Applied()); err != nil {
		t.Fatalf("restarted n1 does not replicate: %v", err)
	}
	t.Logf("rejoined in %v", time.Since(start))
	if got := n1.c.gossip.ml.NumMembers(); got != 3 {
		t.Fatalf("restarted n1 sees %d gossip members, want 3", got)
	}
	if got := serverIDs(leader.c); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("voters: got %v, want [n1 n2 n3]", got)
	}
}

func TestGossipRemoveNode(t *testing.T) {
	nodes := formCluster(t, nil)
	leader := leaderOf(t, nodes...)
	var followers []*gnode
	for _, n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	gone, other := followers[0], followers[1]
	gone.stop()
	waitFor(t, 5*time.Second, "the leader to see "+gone.id+" leave", func() bool {
		st, _ := leader.c.Status(t.Context())
		i := slices.IndexFunc(st.Members, func(m Member) bool { return m.ID == gone.id })
		return i >= 0 && st.Members[i].State == "left"
	})

	// Roles are looked up at each call: on a busy machine leadership can
	// move between the two live nodes.
	live := []*gnode{leader, other}
	roles := func() (l, f *gnode) {
		l = leaderOf(t, live...)
		if l == live[0] {
			return l, live[1]
		}
		return l, live[0]
	}
	ctx := t.Context()
	tests := []struct {
		name string
		call func(l, f *gnode) error
		want error
	}{
		{"on a follower", func(l, f *gnode) error { return f.c.RemoveNode(ctx, gone.id) }, ErrNotLeader},
		{"an alive node", func(l, f *gnode) error { return l.c.RemoveNode(ctx, f.id) }, ErrNodeAlive},
		{"the leader itself", func(l, f *gnode) error { return l.c.RemoveNode(ctx, l.id) }, ErrRemoveLeader},
		{"an unknown node", func(l, f *gnode) error { return l.c.RemoveNode(ctx, "nope") }, ErrUnknownNode},
		{"a stopped node", func(l, f *gnode) error { return l.c.RemoveNode(ctx, gone.id) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			for range 5 {
				if err = tt.call(roles()); tt.want == ErrNotLeader || !errors.Is(err, ErrNotLeader) {
					break
				}
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	want := []string{leader.id, other.id}
	slices.Sort(want)
	for _, n := range live {
		waitFor(t, 5*time.Second, n.id+" to drop "+gone.id, func() bool { return slices.Equal(serverIDs(n.c), want) })
	}
	st, err := other.c.Status(ctx)
	if err != nil || len(st.Members) != 2 {
		t.Fatalf("status after remove: %+v %v", st, err)
	}
	applyOnLeader(t, org("o1", "one"), live...)
}

func TestGossipReapsFailedNode(t *testing.T) {
	nodes := formCluster(t, func(c *Config) { c.Gossip.ReapAfter = time.Second })
	leader := leaderOf(t, nodes...)
	var dead *gnode
	var want []string
	for _, n := range nodes {
		if n != leader && dead == nil {
			dead = n
		} else {
			want = append(want, n.id)
		}
	}
	slices.Sort(want)
	start := time.Now()
	dead.crash()
	waitFor(t, 10*time.Second, dead.id+" to be reaped", func() bool { return slices.Equal(serverIDs(leader.c), want) })
	if d := time.Since(start); d < time.Second {
		t.Fatalf("reaped after %v, before ReapAfter", d)
	}
	t.Logf("reaped %v after the crash", time.Since(start))
	applyOnLeader(t, org("o1", "one"), slices.DeleteFunc(nodes, func(n *gnode) bool { return n == dead })...)
}

func TestGossipReplacementTakesDeadNodesAddress(t *testing.T) {
	nodes := formCluster(t, nil) // ReapAfter 1h: no reaping here
	leader := leaderOf(t, nodes...)
	var dead *gnode
	for _, n := range nodes {
		if n != leader {
			dead = n
			break
		}
	}
	addr := dead.c.RaftAddr()
	dead.crash()
	waitFor(t, 5*time.Second, "the leader to see "+dead.id+" fail", func() bool {
		st, _ := leader.c.Status(t.Context())
		i := slices.IndexFunc(st.Members, func(m Member) bool { return m.ID == dead.id })
		return i >= 0 && st.Members[i].State == "failed"
	})
	// A new node (new id, empty data dir) on the dead node's raft address.
	start := time.Now()
	repl := startGossipNode(t, "n9", t.TempDir(), func(c *Config) {
		c.RaftListener.Close()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("cannot rebind %s: %v", addr, err)
		}
		c.RaftListener = ln
		c.Gossip.Join = []string{leader.c.GossipAddr()}
	})
	var want []string
	for _, n := range nodes {
		if n != dead {
			want = append(want, n.id)
		}
	}
	want = append(want, repl.id)
	slices.Sort(want)
	waitFor(t, 10*time.Second, "the replacement to take the dead node's place", func() bool { return slices.Equal(serverIDs(leader.c), want) })
	t.Logf("replaced in %v", time.Since(start))
	var live []*gnode
	for _, n := range append(nodes, repl) {
		if n != dead {
			live = append(live, n)
		}
	}
	leader = applyOnLeader(t, org("o1", "one"), live...)
	if err := repl.f.WaitApplied(t.Context(), leader.f.Applied()); err != nil {
		t.Fatalf("replacement does not replicate: %v", err)
	}
}

func TestGossipWrongKeyCannotJoin(t *testing.T) {
	nodes := formCluster(t, nil)
	leader := leaderOf(t, nodes...)
	bad := startGossipNode(t, "intruder", t.TempDir(), func(c *Config) {
		c.BootstrapExpect = 1
		c.Gossip.Join = []string{nodes[0].c.GossipAddr(), nodes[1].c.GossipAddr()}
		c.Gossip.Key = otherKey
		c.Transport.ClusterKey = otherKey
	})
	time.Sleep(2 * time.Second) // several join attempts and reconcile passes
	if got := bad.c.gossip.ml.NumMembers(); got != 1 {
		t.Fatalf("intruder sees %d gossip members, want only itself", got)
	}
	for _, n := range nodes {
		if got := n.c.gossip.ml.NumMembers(); got != 3 {
			t.Fatalf("%s sees %d gossip members, want 3", n.id, got)
		}
	}
	if got := serverIDs(leader.c); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("voters: got %v, want [n1 n2 n3]", got)
	}
}

func TestGossipNeedsKey(t *testing.T) {
	_, err := newUnstarted(t, Config{NodeID: "n1", BootstrapExpect: 3,
		Gossip: GossipConfig{Addr: "127.0.0.1:0"}, Transport: writeOperatorPKI(t, "ca", 1)[0]})
	if !errors.Is(err, ErrNoGossipKey) {
		t.Fatalf("got %v, want ErrNoGossipKey", err)
	}
}

// newUnstarted is New on a fresh FSM, data dir and raft listener; the
// test's clean-up closes what it opened.
func newUnstarted(t *testing.T, cfg Config) (*Cluster, error) {
	t.Helper()
	f, err := fsm.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.RaftListener, cfg.FSM = t.TempDir(), ln, f
	c, err := New(cfg)
	t.Cleanup(func() {
		if c != nil {
			c.Shutdown()
		}
		ln.Close()
		f.Close()
	})
	return c, err
}

func TestStatusSingleNodeWithoutGossip(t *testing.T) {
	n := start(t, t.TempDir(), "127.0.0.1:0", func(c *Config) {
		c.Gossip = GossipConfig{Addr: "127.0.0.1:8301", HTTPAddr: "127.0.0.1:8080"}
	})
	if n.c.gossip != nil {
		t.Fatal("a single node started gossip")
	}
	// After a barrier (and the format's raise, which start waits for)
	// nothing else is applied, so the index status reports is the one the
	// state machine has.
	if err := n.c.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	st, err := n.c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := Status{Leader: "n1", Members: []Member{{ID: "n1", RaftAddr: n.c.RaftAddr(), GossipAddr: "127.0.0.1:8301", HTTPAddr: "127.0.0.1:8080", State: "leader", Voter: true,
		AppliedIndex: int64(n.c.fsm.Applied()), StateFormat: int(fsm.CurrentFormat)}}, // #nosec G115 -- a raft index
		StateFormat: int(fsm.CurrentFormat)}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("got %+v, want %+v", st, want)
	}
	if err := n.c.RemoveNode(t.Context(), "n1"); !errors.Is(err, ErrRemoveLeader) {
		t.Fatalf("remove self: got %v, want ErrRemoveLeader", err)
	}
}

// TestNonVoterDoesNotBootstrap: a non-voter joins a cluster; asked to form
// one, or given nothing to join, it refuses.
func TestNonVoterDoesNotBootstrap(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   Config
		start bool // the refusal comes from Start (New cannot know)
	}{
		{"bootstrap-expect", Config{BootstrapExpect: 3, Gossip: GossipConfig{Join: []string{"127.0.0.1:1"}}}, false},
		{"static peers", Config{BootstrapPeers: []raft.Server{{ID: "n1", Address: "127.0.0.1:1"}}}, false},
		{"nothing to join", Config{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.NodeID, cfg.NonVoter, cfg.Transport = "edge", true, TransportConfig{ClusterKey: testClusterKey}
			cl, err := newUnstarted(t, cfg)
			if !c.start {
				if !errors.Is(err, ErrNonVoterBootstrap) {
					t.Fatalf("New: got %v, want ErrNonVoterBootstrap", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.Start(); !errors.Is(err, ErrNonVoterBootstrap) {
				t.Fatalf("Start: got %v, want ErrNonVoterBootstrap", err)
			}
		})
	}
}
