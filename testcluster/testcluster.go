package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/testkit/freeport"
	"github.com/oidcd/oidcd/node"
)

// AdminToken is the admin API token every test node accepts.
const AdminToken = "testcluster-admin-token-0123456789abcdef"

// Options shape the cluster.
type Options struct {
	Size int // number of nodes (default 1)
	// Now is the clock of every node (default time.Now).
	Now func() time.Time
	// Demo seeds the demo organization, person and client.
	Demo bool
	// GeneratedAdminToken leaves --admin-token unset so the node generates
	// one (read it with AdminTokenFromFile).
	GeneratedAdminToken bool
	// Configure, when set, adjusts each node's config before it starts.
	Configure func(i int, cfg *node.Config)
	// Verbose sends node logs to the test log.
	Verbose bool
	// Hostname names the issuer's host instead of 127.0.0.1 (listeners
	// stay on 127.0.0.1). "localhost" gives the issuer a domain name,
	// which WebAuthn needs for passkeys.
	Hostname string
	// NonVoters makes the last NonVoters of the Size nodes edge replicas
	// (--non-voter): the voters form the cluster, every node runs gossip,
	// and the leader adds the edges as raft non-voters. New returns once
	// every edge is in the raft configuration.
	NonVoters int
	// LinkLatency, when set, is the one-way delay of the node-to-node link
	// from one node to another (raft and forwarding; gossip and clients
	// are not delayed): for example 40 ms between a core and a remote site.
	LinkLatency func(from, to int) time.Duration
	// Gossip runs memberlist on every node as a production cluster does
	// (it is always on with NonVoters); the voters still form the cluster
	// from static peers. Clock drift is measured on gossip's probes.
	Gossip bool
}

// Cluster is a set of running nodes.
type Cluster struct {
	t     testing.TB
	opts  Options
	net   *network
	lb    *balancer
	mu    sync.Mutex
	nodes []*member
	rings []*logRing // each node's last log lines, printed when the test fails
}

type member struct {
	cfg      node.Config
	node     *node.Node
	httpAddr string
	raftAddr string
}

// New starts opts.Size nodes and waits until they have a leader.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Size == 0 {
		opts.Size = 1
	}
	if opts.NonVoters < 0 || opts.NonVoters >= opts.Size {
		t.Fatalf("testcluster: %d non-voters of %d nodes: at least one voter is needed", opts.NonVoters, opts.Size)
	}
	voters := opts.Size - opts.NonVoters
	c := &Cluster{t: t, opts: opts, net: newNetwork()}
	c.net.latency = opts.LinkLatency
	key := make([]byte, 32)
	rand.Read(key)
	httpLns, raftLns := make([]net.Listener, opts.Size), make([]net.Listener, opts.Size)
	var peers []node.Peer
	issuer := ""
	if opts.Size > 1 {
		lbLn := listen(t)
		issuer = c.issuerURL(lbLn.Addr())
		c.startBalancer(lbLn)
	}
	var gossipAddrs []string
	for i := range opts.Size {
		httpLns[i], raftLns[i] = listen(t), listen(t)
		peers = append(peers, node.Peer{ID: fmt.Sprintf("node-%d", i), RaftAddr: raftLns[i].Addr().String()})
		c.net.addrs[raftLns[i].Addr().String()] = i
		if opts.NonVoters > 0 || opts.Gossip {
			gossipAddrs = append(gossipAddrs, fmt.Sprintf("127.0.0.1:%d", freeport.TCPAndUDP(t)))
		}
	}
	for i := 0; i < opts.Size; i++ {
		dir := t.TempDir()
		httpLn, raftLn := httpLns[i], raftLns[i]
		m := &member{httpAddr: httpLn.Addr().String(), raftAddr: raftLn.Addr().String()}
		m.cfg = node.Config{
			Issuer:           c.issuerURL(httpLns[i].Addr()),
			HTTPAddr:         m.httpAddr,
			DataDir:          dir,
			RaftAddr:         m.raftAddr,
			BootstrapExpect:  opts.Size,
			Demo:             opts.Demo,
			Now:              opts.Now,
			Logger:           c.logger(i),
			PasswordParams:   password.Params{Memory: 64, Time: 1, Threads: 1},
			HeartbeatTimeout: 300 * time.Millisecond,
			ElectionTimeout:  300 * time.Millisecond,
			LeaderLease:      150 * time.Millisecond,
			NodeID:           peers[i].ID,
			Dial:             c.net.dialer(i),
		}
		if opts.Size > 1 {
			// One issuer for the whole cluster: the load balancer in front.
			m.cfg.Issuer = issuer
			m.cfg.StaticPeers = peers[:voters]
			m.cfg.BootstrapExpect = voters
			m.cfg.ClusterKey = base64.StdEncoding.EncodeToString(key)
		}
		if opts.NonVoters > 0 || opts.Gossip {
			// Gossip everywhere, so that the leader sees the edges and adds
			// them; the voters still form the cluster from static peers.
			m.cfg.GossipAddr = gossipAddrs[i]
			for j := range voters {
				if j != i {
					m.cfg.Join = append(m.cfg.Join, gossipAddrs[j])
				}
			}
			if i >= voters {
				m.cfg.NonVoter, m.cfg.StaticPeers, m.cfg.BootstrapExpect = true, nil, 1
			}
		}
		if !opts.GeneratedAdminToken {
			m.cfg.AdminToken = AdminToken
		}
		if opts.Configure != nil {
			opts.Configure(i, &m.cfg)
		}
		c.nodes = append(c.nodes, m)
		c.start(i, httpLn, raftLn)
	}
	t.Cleanup(c.Close)
	c.WaitLeader()
	if opts.NonVoters > 0 {
		c.waitMembers()
	}
	return c
}

// waitMembers waits up to 15 s until the leader's raft configuration holds
// every node, and every edge replica knows the leader and holds the keys.
func (c *Cluster) waitMembers() {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if l := c.Leader(); l >= 0 {
			if servers, err := c.Node(l).Cluster().Members(); err == nil && len(servers) == len(c.nodes) {
				c.WaitLeader()
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("testcluster: the edge replicas were not added within 15 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// issuerURL is the issuer for a listener: http://127.0.0.1:port, or the
// same port under Options.Hostname.
func (c *Cluster) issuerURL(a net.Addr) string {
	if c.opts.Hostname == "" {
		return "http://" + a.String()
	}
	_, port, _ := net.SplitHostPort(a.String())
	return "http://" + net.JoinHostPort(c.opts.Hostname, port)
}

// logger is node i's: to stderr in a verbose run, else into a ring of its
// last lines that Close prints should the test have failed.
func (c *Cluster) logger(i int) *slog.Logger {
	if c.verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("n", i)
	}
	for len(c.rings) <= i {
		c.rings = append(c.rings, &logRing{})
	}
	return slog.New(slog.NewTextHandler(c.rings[i], &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func (c *Cluster) verbose() bool {
	return c.opts.Verbose || os.Getenv("TESTCLUSTER_VERBOSE") != ""
}

// printLogs shows each node's last log lines in a failed test.
func (c *Cluster) printLogs() {
	if !c.t.Failed() || c.verbose() {
		return
	}
	for i, r := range c.rings {
		if s := r.String(); s != "" {
			c.t.Logf("node %d's last %d log lines:\n%s", i, ringLines, s)
		}
	}
	c.rings = nil // printed once, should Close run again
}

// listen opens a listener of the cluster on a port outside the kernel's
// ephemeral range (freeport): Restart binds a node's ports again after
// Kill, and in between a port-0 listener of a test running beside this
// one could otherwise be given the same port.
func listen(t testing.TB) net.Listener {
	t.Helper()
	var err error
	for range 20 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", freeport.TCP(t))); err == nil {
			return ln
		}
		// Taken between freeport's check and this bind: another one.
	}
	t.Fatal(err)
	return nil
}

func (c *Cluster) start(i int, httpLn, raftLn net.Listener) {
	c.t.Helper()
	m := c.nodes[i]
	cfg := m.cfg
	cfg.HTTPListener, cfg.RaftListener = httpLn, raftLn
	n, err := node.New(cfg)
	if err != nil {
		httpLn.Close()
		raftLn.Close()
		c.t.Fatalf("testcluster: node %d: %v", i, err)
	}
	if err := n.Start(); err != nil {
		n.Close()
		c.t.Fatalf("testcluster: node %d: %v", i, err)
	}
	c.mu.Lock()
	m.node = n
	c.mu.Unlock()
}

// WaitLeader waits up to 15 s until every running node knows a leader,
// holds the signing key and the browser key, and applies this build's
// state format (the leader raises it once every member announces it; until
// then the format gate refuses newer writes with a 409), so tests start on
// a usable provider.
func (c *Cluster) WaitLeader() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for i := range c.nodes {
		n := c.Node(i)
		if n == nil {
			continue
		}
		if err := n.Cluster().WaitLeader(ctx); err != nil {
			c.t.Fatalf("testcluster: no leader: %v", err)
		}
		for {
			_, err := n.Keys().JWKS()
			if err == nil {
				_, err = n.FSM().State().Secret(fsm.SecretBrowserKey)
			}
			if f := n.FSM().State().StateFormat(); err == nil && f < fsm.CurrentFormat {
				err = fmt.Errorf("state format %d, not yet %d", f, fsm.CurrentFormat)
			}
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				c.t.Fatalf("testcluster: not usable: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// Node returns node i (nil while it is stopped).
func (c *Cluster) Node(i int) *node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].node
}

// URL is node i's base URL.
func (c *Cluster) URL(i int) string { return "http://" + c.nodes[i].httpAddr }

// Issuer is the issuer every node shares: the node's own URL for a single
// node, the load balancer in front of the nodes for a cluster.
func (c *Cluster) Issuer() string { return c.nodes[0].cfg.Issuer }

// Client is an HTTP client that does not follow redirects, so tests see
// every 302 of the protocol.
func (c *Cluster) Client() *http.Client {
	return &http.Client{
		Transport:     LoopbackTransport(),
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// LoopbackTransport dials 127.0.0.1 for "localhost", so a cluster with
// Options.Hostname "localhost" is reached on 127.0.0.1 only, never ::1.
func LoopbackTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && host == "localhost" {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return d.DialContext(ctx, "tcp4", addr)
	}
	return tr
}

// Kill stops node i as a crash would look to its peers (the process is gone;
// files stay). It fails the test when the node does not close within
// closeDeadline. Call it from the test's goroutine only (it may call
// t.Fatal); from any other goroutine use KillErr.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	switch err := c.KillErr(i); {
	case errors.Is(err, ErrCloseFailed):
		c.t.Logf("%v", err) // the node stopped; its Close said something
	case err != nil:
		c.t.Fatal(err)
	}
}

// ErrCloseFailed: the node stopped, but Close returned an error.
var ErrCloseFailed = errors.New("testcluster: close returned an error")

// KillErr is Kill that reports instead of failing the test: it never
// touches the test, so a goroutine that outlives it may call it. The
// error carries every goroutine's stack when the node did not close in
// time (node.Close is bounded, so this is a bug).
func (c *Cluster) KillErr(i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.nodes) {
		c.mu.Unlock()
		return fmt.Errorf("testcluster: no node %d (Leader is -1 while there is none: WaitNewLeader waits for one)", i)
	}
	n := c.nodes[i].node
	c.nodes[i].node = nil
	c.mu.Unlock()
	if n == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if errors.Is(err, node.ErrCloseTimedOut) {
			// What it still waits on is the part worth reading.
			return fmt.Errorf("%w: node %d: %w; goroutines:\n%s", ErrCloseFailed, i, err, stacks())
		}
		if err != nil {
			return fmt.Errorf("%w: node %d: %w", ErrCloseFailed, i, err)
		}
		return nil
	case <-time.After(closeDeadline):
		// A node that cannot stop is a bug worth a stack dump, not a
		// test binary hanging until go test's own timeout.
		return fmt.Errorf("testcluster: node %d did not close within %v; goroutines:\n%s", i, closeDeadline, stacks())
	}
}

// stacks is every goroutine's stack.
func stacks() []byte {
	buf := make([]byte, 1<<22)
	return buf[:runtime.Stack(buf, true)]
}

// closeDeadline bounds KillErr: node.CloseBound and a margin.
const closeDeadline = node.CloseBound + 5*time.Second

// DataDir is node i's data directory (for offline tools such as
// node.Recover, run while the node is stopped).
func (c *Cluster) DataDir(i int) string { return c.nodes[i].cfg.DataDir }

// Restart starts node i again on its data directory and addresses.
func (c *Cluster) Restart(i int) { c.t.Helper(); c.RestartTogether(i) }

// RestartTogether starts the nodes is again, all before it waits for a
// leader: nodes that need each other for a quorum.
func (c *Cluster) RestartTogether(is ...int) {
	c.t.Helper()
	for _, i := range is {
		c.relaunch(i)
	}
	c.WaitLeader()
}

// Launch starts node i again (stopping it first if it runs) and returns at
// once: the caller waits for what it needs, such as a wiped node of a
// large store catching up, which can outlast WaitLeader's 15 s.
func (c *Cluster) Launch(i int) { c.t.Helper(); c.relaunch(i) }

func (c *Cluster) relaunch(i int) {
	c.t.Helper()
	if c.Node(i) != nil {
		c.Kill(i)
	}
	m := c.nodes[i]
	var httpLn, raftLn net.Listener
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for {
		httpLn, err = net.Listen("tcp", m.httpAddr)
		if err == nil {
			if raftLn, err = net.Listen("tcp", m.raftAddr); err == nil {
				break
			}
			httpLn.Close()
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("testcluster: restart node %d: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.start(i, httpLn, raftLn)
}

// AdminTokenFromFile reads the token node i generated.
func (c *Cluster) AdminTokenFromFile(i int) string {
	c.t.Helper()
	b, err := os.ReadFile(c.Node(i).AdminTokenFile())
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b[:len(b)-1])
}

// Leader returns the index of the running node that leads (-1 when none
// does right now).
func (c *Cluster) Leader() int {
	for i := range c.nodes {
		if n := c.Node(i); n != nil && n.Cluster().IsLeader() {
			return i
		}
	}
	return -1
}

// Followers returns the running nodes that do not lead.
func (c *Cluster) Followers() []int {
	var out []int
	for i := range c.nodes {
		if n := c.Node(i); n != nil && !n.Cluster().IsLeader() {
			out = append(out, i)
		}
	}
	return out
}

// WaitNewLeader waits up to 15 s for a leader among the running nodes and
// returns it.
func (c *Cluster) WaitNewLeader() int {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if l := c.Leader(); l >= 0 {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("testcluster: no leader elected")
	return -1
}

// Partition cuts the nodes of group off from the others (both ways);
// connections across the cut are closed. Heal undoes it.
func (c *Cluster) Partition(group ...int) { c.net.partition(len(c.nodes), group) }

// CutLink cuts only the link between nodes a and b, both ways (Heal
// restores it): each still reaches the others.
func (c *Cluster) CutLink(a, b int) { c.net.cutLink(a, b) }

// Heal restores every link.
func (c *Cluster) Heal() { c.net.heal() }

// Size is the number of nodes, running or not.
func (c *Cluster) Size() int { return len(c.nodes) }

// Close stops every node and the balancer.
func (c *Cluster) Close() {
	if c.lb != nil {
		c.lb.srv.Close()
	}
	for i := range c.nodes {
		c.Kill(i)
	}
	c.printLogs()
}

// String describes the cluster for failure messages.
func (c *Cluster) String() string {
	return fmt.Sprintf("testcluster(%d nodes)", len(c.nodes))
}
