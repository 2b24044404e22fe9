package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/ratelimit"
)

var (
	fwdKey   = bytes.Repeat([]byte{0x5a}, 32)
	wrongKey = bytes.Repeat([]byte{0xa5}, 32)
)

// mnode is one node of a statically formed test cluster.
type mnode struct {
	id, addr string
	c        *Cluster
	f        *fsm.FSM
	once     sync.Once
	// current: the node announces fsm.CurrentFormat, and answers so when
	// asked (no test hook plays an older release on it or holds its
	// answers).
	current bool
}

func (n *mnode) stop() {
	n.once.Do(func() {
		n.c.Shutdown()
		n.f.Close()
	})
}

// mcluster is N nodes in this process, formed with BootstrapPeers, whose
// node-to-node links all go through net.
type mcluster struct {
	tb    testing.TB
	nodes []*mnode
	net   *testNet
	mods  []func(*Config)
}

// Raft timings of the test clusters. The race detector on a loaded
// two-CPU machine stalls goroutines for hundreds of milliseconds, and with
// 300ms timeouts leadership then flaps; tests of failover pay a second.
var (
	steadyTiming = func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLease = time.Second, time.Second, 500*time.Millisecond
	}
	fastTiming = func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLease = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
	}
)

// newMCluster starts size nodes with key (nil: a test key; there is no
// plaintext mode) and waits until every node knows the leader and, when
// every node announces fsm.CurrentFormat, until the leader has raised the
// state format to it (announce.go): that entry then stays out of what the
// tests count. mods adjust every node's config.
func newMCluster(tb testing.TB, size int, key []byte, mods ...func(*Config)) *mcluster {
	tb.Helper()
	if key == nil {
		key = fwdKey
	}
	mc := &mcluster{tb: tb, net: newTestNet(), mods: append([]func(*Config){steadyTiming}, mods...)}
	var lns []net.Listener
	var peers []raft.Server
	for i := range size {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		lns = append(lns, ln)
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: raft.ServerAddress(ln.Addr().String())})
	}
	for i, ln := range lns {
		mc.nodes = append(mc.nodes, mc.startNode(string(peers[i].ID), ln, peers, key))
	}
	mc.waitLeader()
	if !slices.ContainsFunc(mc.nodes, func(n *mnode) bool { return !n.current }) {
		mc.waitFormat(fsm.CurrentFormat, 15*time.Second)
	}
	return mc
}

// waitFormat waits until every node's state holds format f.
func (mc *mcluster) waitFormat(f fsm.Format, d time.Duration) {
	mc.tb.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if !slices.ContainsFunc(mc.nodes, func(n *mnode) bool { return n.f.State().StateFormat() != f }) {
			return
		}
		if time.Now().After(deadline) {
			mc.tb.Fatalf("the nodes' state formats are not %d after %v", f, d)
		}
	}
}

func (mc *mcluster) startNode(id string, ln net.Listener, peers []raft.Server, key []byte) *mnode {
	mc.tb.Helper()
	dir := mc.tb.TempDir()
	f, err := fsm.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		mc.tb.Fatal(err)
	}
	addr := ln.Addr().String()
	cfg := Config{
		NodeID: id, DataDir: dir, RaftListener: ln, FSM: f, BootstrapPeers: peers,
		Dial:       mc.net.dialer(addr),
		Transport:  TransportConfig{ClusterKey: key},
		Registerer: prometheus.NewRegistry(),
	}
	for _, mod := range mc.mods {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		ln.Close()
		f.Close()
		mc.tb.Fatalf("start %s: %v", id, err)
	}
	if err := c.Start(); err != nil {
		c.Shutdown()
		f.Close()
		mc.tb.Fatalf("start %s: %v", id, err)
	}
	current := (cfg.announceFormat == 0 || cfg.announceFormat == fsm.CurrentFormat) && cfg.onAnnounce == nil
	n := &mnode{id: id, addr: addr, c: c, f: f, current: current}
	mc.tb.Cleanup(n.stop)
	return n
}

// waitLeader waits until one live node leads and every live node knows it.
func (mc *mcluster) waitLeader(except ...*mnode) *mnode {
	mc.tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if l := mc.agreedLeader(except); l != nil {
			return l
		}
		time.Sleep(10 * time.Millisecond)
	}
	mc.tb.Fatal("no leader agreed on within 10s")
	return nil
}

func (mc *mcluster) agreedLeader(except []*mnode) *mnode {
	var leader *mnode
	for _, n := range mc.live(except) {
		if n.c.IsLeader() {
			leader = n
		}
	}
	if leader == nil {
		return nil
	}
	for _, n := range mc.live(except) {
		if _, id := n.c.Leader(); id != leader.id {
			return nil
		}
	}
	return leader
}

func (mc *mcluster) live(except []*mnode) []*mnode {
	var out []*mnode
outer:
	for _, n := range mc.nodes {
		for _, e := range except {
			if n == e {
				continue outer
			}
		}
		out = append(out, n)
	}
	return out
}

// roles returns the leader and the followers.
func (mc *mcluster) roles(except ...*mnode) (*mnode, []*mnode) {
	l := mc.waitLeader(except...)
	var fs []*mnode
	for _, n := range mc.live(except) {
		if n != l {
			fs = append(fs, n)
		}
	}
	return l, fs
}

// testNet lets tests cut a node off: its links fail to dial, and the
// connections it had are closed on both ends.
type testNet struct {
	mu    sync.Mutex
	cut   map[string]bool
	conns map[net.Conn][2]string
}

func newTestNet() *testNet {
	return &testNet{cut: map[string]bool{}, conns: map[net.Conn][2]string{}}
}

func (tn *testNet) dialer(from string) Dialer {
	return func(ctx context.Context, to string) (net.Conn, error) {
		if tn.isCut(from, to) {
			return nil, fmt.Errorf("test: link %s -> %s cut", from, to)
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", to)
		if err != nil {
			return nil, err
		}
		tn.mu.Lock()
		defer tn.mu.Unlock()
		if tn.cut[from] || tn.cut[to] {
			conn.Close()
			return nil, fmt.Errorf("test: link %s -> %s cut", from, to)
		}
		tn.conns[conn] = [2]string{from, to}
		return conn, nil
	}
}

func (tn *testNet) isCut(from, to string) bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.cut[from] || tn.cut[to]
}

// isolate cuts every link of the node at addr.
func (tn *testNet) isolate(addr string) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.cut[addr] = true
	for c, p := range tn.conns {
		if p[0] == addr || p[1] == addr {
			c.Close()
			delete(tn.conns, c)
		}
	}
}

// breakAll closes every connection without cutting links: the next calls
// must dial again.
func (tn *testNet) breakAll() {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	for c := range tn.conns {
		c.Close()
		delete(tn.conns, c)
	}
}

func (tn *testNet) heal() {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	clear(tn.cut)
}

func withTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// retry runs op until it succeeds or 20s pass. An error from Apply or
// ReadIndex is a legitimate answer while leadership moves (a loaded test
// machine causes elections); what the tests check is what holds when they
// succeed.
func retry(t testing.TB, what string, op func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := op(withTimeout(t, 5*time.Second))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %v; trying again", what, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// mustApply applies cmd on n until it is committed. After a failed attempt
// the write may have happened: a conflict on a retry is then taken as the
// earlier attempt's success.
func mustApply(t testing.TB, n *mnode, cmd fsm.Command) fsm.Result {
	t.Helper()
	var res fsm.Result
	tries := 0
	retry(t, "apply "+cmd.Type.String()+" on "+n.id, func(ctx context.Context) error {
		tries++
		var err error
		res, err = n.c.Apply(ctx, cmd)
		return err
	})
	if tries > 1 && errors.Is(res.Err, fsm.ErrConflict) {
		return fsm.Result{}
	}
	if res.Err != nil {
		t.Fatalf("apply %s on %s: %v", cmd.Type, n.id, res.Err)
	}
	return res
}

func readIndex(t testing.TB, n *mnode) {
	t.Helper()
	retry(t, "read index on "+n.id, n.c.ReadIndex)
}

// bothModes runs fn on a plaintext and on a TLS cluster.
func bothModes(t *testing.T, fn func(t *testing.T, key []byte)) {
	t.Run("plaintext", func(t *testing.T) { fn(t, nil) })
	t.Run("tls", func(t *testing.T) { fn(t, fwdKey) })
}

func TestForwardedWriteReturnsResultAndIsVisible(t *testing.T) {
	bothModes(t, func(t *testing.T, key []byte) {
		mc := newMCluster(t, 3, key)
		_, fs := mc.roles()
		for i, f := range fs {
			id, slug := fmt.Sprintf("o%d", i), fmt.Sprintf("slug%d", i)
			retry(t, "write on "+f.id, func(ctx context.Context) error {
				res, err := f.c.Apply(ctx, org(id, slug))
				if err != nil {
					return err
				}
				// Returned: the result is the FSM's, and this node's state
				// already shows the write.
				if o, ok := res.Value.(fsm.Org); res.Err == nil && (!ok || o.ID != id) {
					t.Fatalf("result value: got %#v, want the org", res.Value)
				}
				if res.Err != nil && !errors.Is(res.Err, fsm.ErrConflict) { // conflict: an earlier try went through
					t.Fatalf("forwarded write on %s: %v", f.id, res.Err)
				}
				if _, err := f.f.State().Org(id); err != nil {
					t.Fatalf("%s does not see its own write on return: %v", f.id, err)
				}
				return nil
			})
		}
		// The same slug through the other follower: the domain error comes
		// back as a result, not as a transport error.
		retry(t, "duplicate slug", func(ctx context.Context) error {
			res, err := fs[1].c.Apply(ctx, org("dup", "slug0"))
			if err == nil && !errors.Is(res.Err, fsm.ErrConflict) {
				t.Fatalf("duplicate slug via follower: got %v, want ErrConflict", res.Err)
			}
			return err
		})
		for _, n := range mc.nodes {
			readIndex(t, n)
			if _, err := n.f.State().Org("dup"); !errors.Is(err, fsm.ErrNotFound) {
				t.Fatalf("%s after a refused write: got %v, want not found", n.id, err)
			}
		}
	})
}

func TestForwardingSurvivesBrokenConnections(t *testing.T) {
	mc := newMCluster(t, 3, fwdKey)
	_, fs := mc.roles()
	for i := range 5 {
		mustApply(t, fs[0], org(fmt.Sprint(i), fmt.Sprint("s", i)))
		mc.net.breakAll() // raft and forwarding connections alike
	}
	readIndex(t, fs[1])
	if _, err := fs[1].f.State().Org("4"); err != nil {
		t.Fatalf("last write after read index: %v", err)
	}
}

func TestReadIndexSeesWritesFromOtherNodes(t *testing.T) {
	bothModes(t, func(t *testing.T, key []byte) {
		mc := newMCluster(t, 3, key)
		leader, fs := mc.roles()
		readers := []*mnode{fs[1], leader}
		for i := range 30 {
			id := fmt.Sprint("o", i)
			mustApply(t, fs[0], org(id, id))
			r := readers[i%2]
			readIndex(t, r)
			if _, err := r.f.State().Org(id); err != nil {
				t.Fatalf("%s after read index: got %v, want the write of %s", r.id, err, fs[0].id)
			}
		}
	})
}

func TestReadIndexConcurrentCallers(t *testing.T) {
	mc := newMCluster(t, 3, fwdKey)
	_, fs := mc.roles()
	mustApply(t, fs[0], org("o", "o"))
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for _, n := range mc.nodes {
				readIndex(t, n)
				if _, err := n.f.State().Org("o"); err != nil {
					t.Errorf("%s after read index: %v", n.id, err)
				}
			}
		})
	}
	wg.Wait()
}

// seedSignIn writes, through n, everything a code needs, and issues codes
// c0..c(count-1) for client "app".
func seedSignIn(t *testing.T, n *mnode, count int) time.Time {
	t.Helper()
	t0 := time.Now().UTC().Truncate(time.Second)
	const orgID, userID = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-0000000000a1"
	cmds := []fsm.Command{
		fsm.MustCommand(fsm.TypeCreateOrg, fsm.CreateOrg{ID: orgID, Slug: "alpha", Name: "Alpha", CreatedAt: t0}),
		fsm.MustCommand(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: userID, Email: "ann@example.com", CreatedAt: t0}}),
		fsm.MustCommand(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{ID: "m1", UserID: userID, OrgID: orgID, Status: fsm.MembershipActive}}),
		fsm.MustCommand(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{ID: "app", Name: "App", Type: fsm.ClientPublic, OrganizationID: orgID, RedirectURIs: []string{"https://app/cb"}, UpdatedAt: t0}}),
		fsm.MustCommand(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: "tok1", Session: fsm.SSOSession{
			ID: "sso1", UserID: userID, AuthTime: t0, AMR: []string{"pwd"}, ACR: "pwd",
			CreatedAt: t0, LastSeen: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(8 * time.Hour),
		}}),
	}
	for i := range count {
		cmds = append(cmds, fsm.MustCommand(fsm.TypeIssueCode, fsm.IssueCode{NewSID: "sid-1", IdleExpiresAt: t0.Add(time.Hour), Code: fsm.Code{
			Hash: fmt.Sprint("c", i), ClientID: "app", UserID: userID, OrgID: orgID, SSOSessionID: "sso1",
			IssuedAt: t0, ExpiresAt: t0.Add(10 * time.Minute),
		}}))
	}
	for _, cmd := range cmds {
		mustApply(t, n, cmd)
	}
	return t0
}

func TestCodeRedeemedOnceAcrossFollowers(t *testing.T) {
	mc := newMCluster(t, 3, fwdKey)
	leader, fs := mc.roles()
	const codes = 20
	t0 := seedSignIn(t, leader, codes)
	for i := range codes {
		hash := fmt.Sprint("c", i)
		results := make([]fsm.Result, len(fs))
		errs := make([]error, len(fs))
		jtis := make([]string, len(fs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j, f := range fs {
			jtis[j] = fmt.Sprint("jti-", i, "-", j)
			wg.Go(func() {
				<-start
				results[j], errs[j] = f.c.Apply(withTimeout(t, 5*time.Second), fsm.MustCommand(fsm.TypeRedeemCode, fsm.RedeemCode{
					Hash: hash, ClientID: "app", At: t0.Add(time.Second), AccessJTI: jtis[j], AccessExpires: t0.Add(10 * time.Minute),
				}))
			})
		}
		close(start)
		wg.Wait()
		won, answered := -1, 0
		for j := range fs {
			if errs[j] != nil {
				t.Logf("%s: redeem on %s: %v (outcome unknown)", hash, fs[j].id, errs[j])
				continue
			}
			answered++
			switch {
			case results[j].Err == nil:
				if won >= 0 {
					t.Fatalf("%s: redeemed on both %s and %s", hash, fs[won].id, fs[j].id)
				}
				won = j
			case !errors.Is(results[j].Err, fsm.ErrAlreadyUsed):
				t.Fatalf("%s: loser on %s: got %v, want ErrAlreadyUsed", hash, fs[j].id, results[j].Err)
			}
		}
		if answered == len(fs) && won < 0 {
			t.Fatalf("%s: both attempts lost", hash)
		}
		if won >= 0 {
			code, err := fs[won].f.State().Code(hash)
			if err != nil || code.AccessJTI != jtis[won] {
				t.Fatalf("%s: stored redemption %q %v, want the winner's %q", hash, code.AccessJTI, err, jtis[won])
			}
		}
	}
}

// countingHandler counts log records whose message is msg.
type countingHandler struct {
	msg string
	n   *atomic.Int32
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

func TestNodeWithoutTheKeyIsShutOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
	}{{"wrong key", wrongKey}} { // a node with no key cannot start (TestNoPlaintextMode)
		t.Run(tc.name, func(t *testing.T) {
			var refused atomic.Int32
			mc := newMCluster(t, 3, fwdKey, func(c *Config) {
				c.Logger = slog.New(countingHandler{msg: "refused node connection", n: &refused})
			})
			leader, _ := mc.roles()
			mustApply(t, leader, org("good", "good"))

			// The intruder knows every address and claims a seat.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var peers []raft.Server
			for _, n := range mc.nodes {
				peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(n.id), Address: raft.ServerAddress(n.addr)})
			}
			peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: "intruder", Address: raft.ServerAddress(ln.Addr().String())})
			mc.mods = append(mc.mods, func(c *Config) { c.Logger = nil })
			bad := mc.startNode("intruder", ln, peers, tc.key)

			// Its node-to-node connections are refused: raft and forwarding.
			if conn, err := bad.c.stream.Dial(raft.ServerAddress(leader.addr), time.Second); err == nil {
				conn.Write(bytes.Repeat([]byte{0}, 64)) // what raft would send next
				conn.SetReadDeadline(time.Now().Add(2 * time.Second))
				_, err := io.ReadAll(conn)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal("raft connection from the intruder stayed open")
				}
				conn.Close()
			}
			if _, err := bad.c.callNode(withTimeout(t, 2*time.Second), leader.addr, leader.id, opReadIndex, nil); err == nil {
				t.Fatal("forwarded read from the intruder was answered")
			}
			start := time.Now()
			if _, err := bad.c.Apply(withTimeout(t, time.Second), org("evil", "evil")); err == nil {
				t.Fatal("intruder's write succeeded")
			}
			if err := bad.c.ReadIndex(withTimeout(t, time.Second)); err == nil {
				t.Fatal("intruder's read index succeeded")
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("intruder's calls took %v, want about the deadlines", d)
			}
			if refused.Load() == 0 {
				t.Fatal("no connection refused by the cluster")
			}

			// The cluster is untouched: no entry from the intruder, no
			// seat for it, and it still writes.
			mustApply(t, leader, org("after", "after"))
			for _, n := range mc.nodes[:3] {
				readIndex(t, n)
				if _, err := n.f.State().Org("evil"); !errors.Is(err, fsm.ErrNotFound) {
					t.Fatalf("%s has the intruder's write: %v", n.id, err)
				}
				servers, err := n.c.Members()
				if err != nil || len(servers) != 3 {
					t.Fatalf("%s members: %v %v, want the three", n.id, servers, err)
				}
			}
			if _, err := bad.f.State().Org("good"); !errors.Is(err, fsm.ErrNotFound) {
				t.Fatalf("intruder replicated the cluster's state: %v", err)
			}
		})
	}
}

func TestWritesContinueAfterLeaderDies(t *testing.T) {
	bothModes(t, func(t *testing.T, key []byte) {
		mc := newMCluster(t, 3, key)
		leader, fs := mc.roles()
		mustApply(t, fs[0], org("before", "before"))
		leader.stop()
		start := time.Now()
		// Right away: the first writes wait for the election, within their
		// deadline, and are not refused.
		for i, f := range fs {
			id := fmt.Sprint("after", i)
			res, err := f.c.Apply(withTimeout(t, 10*time.Second), org(id, id))
			if err != nil || res.Err != nil {
				t.Fatalf("write on %s after the leader died: %v %v", f.id, err, res.Err)
			}
		}
		t.Logf("writes resumed %v after the leader died", time.Since(start).Round(time.Millisecond))
		for _, f := range fs {
			readIndex(t, f)
			for _, id := range []string{"before", "after0", "after1"} {
				if _, err := f.f.State().Org(id); err != nil {
					t.Fatalf("%s: %s: %v", f.id, id, err)
				}
			}
		}
	})
}

// A node that cannot reach a quorum answers within the caller's deadline,
// with an error (the HTTP layer's 503).
func TestMinorityFailsWithinDeadline(t *testing.T) {
	const deadline = 1500 * time.Millisecond
	check := func(t *testing.T, n *mnode) {
		t.Helper()
		ops := []struct {
			name string
			op   func(context.Context) error
		}{
			{"apply", func(ctx context.Context) error {
				_, err := n.c.Apply(ctx, org("lost", "lost"))
				return err
			}},
			{"read index", n.c.ReadIndex},
			{"rate", func(ctx context.Context) error {
				_, _, err := n.c.RateLimiter().Allow(ctx, "k")
				return err
			}},
		}
		for _, o := range ops {
			start := time.Now()
			err := o.op(withTimeout(t, deadline))
			took := time.Since(start)
			if err == nil {
				t.Fatalf("%s on cut-off %s succeeded", o.name, n.id)
			}
			if took > deadline+500*time.Millisecond {
				t.Fatalf("%s on cut-off %s took %v, deadline %v", o.name, n.id, took, deadline)
			}
			t.Logf("%s: %v after %v", o.name, err, took.Round(time.Millisecond))
		}
	}
	t.Run("follower cut off", func(t *testing.T) {
		mc := newMCluster(t, 3, fwdKey, withRateLimit)
		_, fs := mc.roles()
		mc.net.isolate(fs[0].addr)
		check(t, fs[0])
		// The majority carries on, and the node catches up once healed.
		mustApply(t, fs[1], org("majority", "majority"))
		mc.net.heal()
		readIndex(t, fs[0])
		if _, err := fs[0].f.State().Org("majority"); err != nil {
			t.Fatalf("healed node: %v", err)
		}
		if _, err := fs[0].f.State().Org("lost"); !errors.Is(err, fsm.ErrNotFound) {
			t.Fatalf("write refused on the minority was applied: %v", err)
		}
	})
	t.Run("leader cut off", func(t *testing.T) {
		mc := newMCluster(t, 3, fwdKey, withRateLimit)
		leader, _ := mc.roles()
		mc.net.isolate(leader.addr)
		check(t, leader)
	})
	t.Run("last node standing", func(t *testing.T) {
		mc := newMCluster(t, 3, fwdKey)
		leader, fs := mc.roles()
		leader.stop()
		fs[0].stop()
		check(t, fs[1])
	})
}

// testLimiter is a node's Config.RateLimiter: 5 requests a minute per
// key, or an error while broken.
type testLimiter struct {
	w      *ratelimit.Window
	broken atomic.Bool
}

func (l *testLimiter) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	if l.broken.Load() {
		return false, 0, errors.New("limiter store unavailable")
	}
	return l.w.Allow(ctx, key)
}

func withRateLimit(c *Config) {
	c.RateLimiter = &testLimiter{w: ratelimit.NewWindow(5, time.Minute, 1000, time.Now)}
}

func TestRateLimitHoldsClusterWide(t *testing.T) {
	mc := newMCluster(t, 3, fwdKey, withRateLimit)
	// The limiter's state lives on the leader: if leadership moves during
	// an attempt (a loaded machine), the count restarts and the attempt is
	// repeated with a new key.
	for attempt := 0; ; attempt++ {
		leader, fs := mc.roles()
		term := leader.c.raft.CurrentTerm()
		key := fmt.Sprint("client-", attempt)
		var got []string
		order := []*mnode{fs[0], fs[1], leader, fs[0], fs[1], fs[0], fs[1], leader}
		for _, n := range order {
			ok, retry, err := n.c.RateLimiter().Allow(withTimeout(t, 5*time.Second), key)
			switch {
			case err != nil:
				got = append(got, "error: "+err.Error())
			case ok:
				got = append(got, "allowed")
			case retry <= 0 || retry > time.Minute:
				got = append(got, fmt.Sprint("refused, retry after ", retry))
			default:
				got = append(got, "refused")
			}
		}
		want := []string{"allowed", "allowed", "allowed", "allowed", "allowed", "refused", "refused", "refused"}
		if slices.Equal(got, want) {
			break
		}
		if leader.c.IsLeader() && leader.c.raft.CurrentTerm() == term || attempt == 4 {
			var on []string
			for _, n := range order {
				on = append(on, n.id)
			}
			t.Fatalf("requests on %v: got %q, want %q", on, got, want)
		}
		t.Logf("leadership moved during attempt %d; again", attempt)
	}

	leader, fs := mc.roles()
	leader.c.cfg.RateLimiter.(*testLimiter).broken.Store(true)
	_, _, err := fs[0].c.RateLimiter().Allow(withTimeout(t, 5*time.Second), "client-x")
	if err == nil || errors.Is(err, ErrNoLeader) {
		t.Fatalf("broken limiter: got %v, want a limiter error", err)
	}
}

func benchFollower(b *testing.B, key []byte) *mnode {
	mc := newMCluster(b, 3, key, fastTiming)
	_, fs := mc.roles()
	return fs[0]
}

var benchModes = []struct {
	name string
	key  []byte
}{{"plaintext", nil}, {"tls", fwdKey}}

// BenchmarkForwardedApplySerial is the latency of one forwarded write.
func BenchmarkForwardedApplySerial(b *testing.B) {
	f := benchFollower(b, fwdKey)
	cmd := fsm.MustCommand(fsm.TypeNoop, struct{}{})
	for b.Loop() {
		if _, err := f.c.Apply(context.Background(), cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadIndexSerial is the latency of one read index on a follower.
func BenchmarkReadIndexSerial(b *testing.B) {
	f := benchFollower(b, fwdKey)
	for b.Loop() {
		if err := f.c.ReadIndex(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForwardedApply: 16 writers per CPU on a follower; every write
// crosses to the leader and back.
func BenchmarkForwardedApply(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			f := benchFollower(b, mode.key)
			cmd := fsm.MustCommand(fsm.TypeNoop, struct{}{})
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := f.c.Apply(context.Background(), cmd); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkReadIndex: 16 readers per CPU on a follower.
func BenchmarkReadIndex(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			f := benchFollower(b, mode.key)
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := f.c.ReadIndex(context.Background()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestWritesInFlightSurviveLeadershipTransfers: writes keep arriving at
// every node while the leadership is handed over again and again (what a
// rolling restart does). Each must succeed exactly once: entries the old
// leader had appended when it stepped down end in raft.ErrLeadershipLost
// ("outcome unknown"), which the cluster settles by reading what the next
// leader committed at that index instead of answering 503.
func TestWritesInFlightSurviveLeadershipTransfers(t *testing.T) {
	mc := newMCluster(t, 3, fwdKey, steadyTiming)
	const writers, transfers = 8, 4
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok []string
	var failed []error
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := mc.nodes[w%len(mc.nodes)]
			for i := 0; i < 400; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				res, err := n.c.Apply(withTimeout(t, 10*time.Second), org(id, id))
				mu.Lock()
				if err != nil || res.Err != nil {
					failed = append(failed, fmt.Errorf("%s on %s: %v %v", id, n.id, err, res.Err))
				} else {
					ok = append(ok, id)
				}
				mu.Unlock()
			}
		}()
	}
	for range transfers {
		time.Sleep(300 * time.Millisecond)
		leader := mc.waitLeader()
		if err := leader.c.HandOver(withTimeout(t, 10*time.Second)); err != nil {
			t.Logf("hand-over from %s: %v", leader.id, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d writes failed across %d hand-overs, first: %v", len(failed), len(failed)+len(ok), transfers, failed[0])
	}
	n := mc.waitLeader()
	readIndex(t, n)
	for _, id := range ok {
		if _, err := n.f.State().Org(id); err != nil {
			t.Fatalf("acknowledged write %s missing: %v", id, err)
		}
	}
	t.Logf("%d writes across %d hand-overs, none failed", len(ok), transfers)
}

// TestWriteOnALeaderThatLostLeadershipIsSettled: a write proposed on a
// leader that is then cut off ends in raft.ErrLeadershipLost ("outcome
// unknown") once its lease runs out. The cluster does not pass that on
// as a 503: once the link heals it reads what the new leader committed at
// that index (here another entry: the proposal never left the node) and
// then forwards the write, which succeeds exactly once.
func TestWriteOnALeaderThatLostLeadershipIsSettled(t *testing.T) {
	mc := newMCluster(t, 3, fwdKey, steadyTiming)
	leader, fs := mc.roles()
	mc.net.isolate(leader.addr)
	type outcome struct {
		res fsm.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := leader.c.Apply(withTimeout(t, 15*time.Second), org("cut", "cut"))
		done <- outcome{res, err}
	}()
	// The majority elects a new leader and writes on.
	mustApply(t, fs[0], org("majority", "majority"))
	time.Sleep(500 * time.Millisecond)
	mc.net.heal()
	o := <-done
	if o.err != nil || o.res.Err != nil {
		t.Fatalf("write proposed on the leader that was cut off: %v %v", o.err, o.res.Err)
	}
	for _, n := range mc.nodes {
		readIndex(t, n)
		if _, err := n.f.State().Org("cut"); err != nil {
			t.Fatalf("%s: the settled write is missing: %v", n.id, err)
		}
	}
}

// TestFollowerReadIndexesShareRequests: a follower's concurrent read
// indexes share requests to the leader (far fewer requests than reads),
// and each still sees every write acknowledged before it began: writers
// on the other follower record each write once Apply returns, and a
// reader that starts after that must find it.
func TestFollowerReadIndexesShareRequests(t *testing.T) {
	mc := newMCluster(t, 3, fwdKey)
	_, fs := mc.roles()
	writer, reader := fs[0], fs[1]
	before := counterValue(t, reader.c.metrics.forwardedReads)

	const writes, readers, reads = 40, 32, 25
	var acked atomic.Int64 // writes 0..acked-1 were acknowledged
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range writes {
			mustApply(t, writer, org(fmt.Sprint("w", i), fmt.Sprint("w", i)))
			acked.Store(int64(i + 1))
		}
	})
	var done atomic.Int64
	for range readers {
		wg.Go(func() {
			for range reads {
				seen := acked.Load()
				readIndex(t, reader)
				if seen > 0 {
					id := fmt.Sprint("w", seen-1)
					if _, err := reader.f.State().Org(id); err != nil {
						t.Errorf("%s after read index: %s was acknowledged before it began, got %v", reader.id, id, err)
					}
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	sent := counterValue(t, reader.c.metrics.forwardedReads) - before
	if n := done.Load(); sent <= 0 || sent > float64(n)/2 {
		t.Fatalf("%d read indexes on a follower sent %.0f requests to the leader: want at least one and at most half", n, sent)
	}
	t.Logf("%d read indexes, %.0f requests to the leader", done.Load(), sent)
}

// counterValue is c's current value.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
