package cluster

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// GossipConfig forms the cluster with memberlist. Gossip runs when
// BootstrapExpect is above 1 without BootstrapPeers, when Join is set, or
// when a restarted node finds the gossip peers it saw last time; otherwise
// the node stays gossip-free (single nodes, static BootstrapPeers).
type GossipConfig struct {
	// Addr is memberlist's bind and advertise address, "host:port" (TCP and
	// UDP). Port 0 picks a free port (tests); GossipAddr reports it.
	Addr string
	// Join lists gossip addresses of nodes to join. Joining retries in the
	// background until it succeeds or the node stops.
	Join []string
	// HTTPAddr and Version are advertised to peers (GET /admin/v1/cluster).
	HTTPAddr string
	Version  string
	// Key is the 32-byte cluster key; when nil, Transport.ClusterKey is
	// used. Gossip is encrypted and authenticated (AES-256-GCM) with a key
	// derived from it, never with the cluster key itself. Required.
	Key []byte
	// ReapAfter is how long a raft server may stay failed or left in
	// gossip before the leader removes it from the configuration, so that
	// a replacement can take its place. Default 24h.
	ReapAfter time.Duration
	// ReconcileInterval is how often the leader compares gossip with the
	// raft configuration besides reacting to gossip events. Default 1s.
	ReconcileInterval time.Duration
	// Tune, when set, adjusts memberlist's configuration after ours is
	// filled in; tests use FastGossip.
	Tune func(*memberlist.Config)
}

// FastGossip shortens memberlist's timings for clusters on one machine
// (tests): failures are noticed in about a second instead of several.
func FastGossip(mc *memberlist.Config) {
	mc.TCPTimeout = time.Second
	mc.GossipInterval = 50 * time.Millisecond
	mc.ProbeInterval = 200 * time.Millisecond
	mc.ProbeTimeout = 100 * time.Millisecond
	mc.SuspicionMult = 2
	mc.PushPullInterval = time.Second
	mc.GossipToTheDeadTime = 5 * time.Second
	mc.DeadNodeReclaimTime = time.Second
}

const (
	defaultReapAfter         = 24 * time.Hour
	defaultReconcileInterval = time.Second
	gossipLabel              = "oidcd" // memberlist label: keeps other pools out
	gossipKeyInfo            = "oidcd gossip key v1"
	peersFileName            = "gossip-peers.json"
	joinBackoffMin           = 100 * time.Millisecond
	joinBackoffMax           = 10 * time.Second
	leaveTimeout             = 2 * time.Second
	metaUpdateTimeout        = 2 * time.Second
	// progressEvery is how often a node advertises its applied index and
	// last contact with the leader (Member.AppliedLag, LastContactMs).
	progressEvery = 2 * time.Second
)

// ErrNoGossipKey: gossip is needed but no cluster key was configured.
var ErrNoGossipKey = errors.New("cluster: a 32-byte cluster key is required for a multi-node cluster")

// gossiper runs memberlist for this node and keeps a table of the members
// it has seen, with the time each last changed state. memberlist forgets
// dead members after a while; the table keeps them as long as reaping
// needs them.
type gossiper struct {
	c         *Cluster
	cfg       GossipConfig
	ml        *memberlist.Memberlist
	log       *slog.Logger
	peersFile string
	settle    time.Duration // how long a bootstrap-expect view must hold

	mu       sync.Mutex
	meta     nodeMeta
	members  map[string]*member // by node id (memberlist name)
	saved    []string           // peer addresses last written to peersFile
	shutdown bool

	// bootstrap-expect state, touched only by the maintain goroutine.
	pending  bool      // still waiting to bootstrap
	viewKey  string    // candidate set seen last
	viewAt   time.Time // since when
	warnedAt string    // last view we logged about, to log once
	// progressAt: when the maintain goroutine last advertised progress.
	progressAt time.Time

	// refused: members the leader would not add for their older format,
	// with what they announced (logged once each); under c.formatMu.
	refused map[string]string

	maintainCh  chan struct{} // pokes: membership changed
	reconcileCh chan struct{}
	cancel      context.CancelFunc
	wg          sync.WaitGroup
}

var (
	_ memberlist.Delegate         = (*gossiper)(nil)
	_ memberlist.EventDelegate    = (*gossiper)(nil)
	_ memberlist.AliveDelegate    = (*gossiper)(nil)
	_ memberlist.ConflictDelegate = (*gossiper)(nil)
)

// startGossip joins the gossip pool when the node is part of a multi-node
// cluster; existing says the node already has raft state.
func (c *Cluster) startGossip(existing bool) error {
	cfg := c.cfg.Gossip
	peersFile := filepath.Join(c.cfg.DataDir, "raft", peersFileName)
	saved := readPeersFile(peersFile)
	forming := c.cfg.BootstrapExpect > 1 && len(c.cfg.BootstrapPeers) == 0
	switch {
	case forming || len(cfg.Join) > 0:
	case existing && len(saved) > 0 && len(c.cfg.BootstrapPeers) == 0:
		// A node restarted on its data dir without flags: it was part of a
		// gossip pool, so it rejoins it.
	default:
		return nil // a single node or static peers: no gossip
	}
	key := cfg.Key
	if key == nil {
		key = c.cfg.Transport.ClusterKey
	}
	if len(key) != 32 {
		if !forming && len(cfg.Join) == 0 {
			c.log.Warn("no cluster key: not rejoining the gossip pool; raft continues on known addresses")
			return nil
		}
		return ErrNoGossipKey
	}
	gkey, err := hkdf.Key(sha256.New, key, nil, gossipKeyInfo, 32)
	if err != nil {
		return fmt.Errorf("cluster: gossip key: %w", err)
	}
	if cfg.ReapAfter <= 0 {
		cfg.ReapAfter = defaultReapAfter
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = defaultReconcileInterval
	}
	g := &gossiper{
		c: c, cfg: cfg, log: c.log.With("component", "gossip"), peersFile: peersFile,
		members:    map[string]*member{},
		refused:    map[string]string{},
		saved:      saved,
		pending:    forming && !existing,
		maintainCh: make(chan struct{}, 1), reconcileCh: make(chan struct{}, 1),
	}
	g.meta = nodeMeta{ID: c.cfg.NodeID, RaftAddr: c.RaftAddr(), HTTPAddr: cfg.HTTPAddr, Version: cfg.Version, Bootstrapped: existing,
		NonVoter: c.cfg.NonVoter, Format: int(c.announceFormat())}
	if g.pending {
		g.meta.Expect = c.cfg.BootstrapExpect
	}
	mc, err := g.memberlistConfig(gkey)
	if err != nil {
		return err
	}
	g.settle = max(mc.ProbeInterval, 5*mc.GossipInterval)
	if g.ml, err = memberlist.Create(mc); err != nil {
		return fmt.Errorf("cluster: gossip on %s: %w", cfg.Addr, err)
	}
	c.gossip = g
	g.log.Info("gossip started", "addr", g.selfAddr(), "join", cfg.Join, "known_peers", len(saved), "bootstrap_expect", g.meta.Expect)
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	g.wg.Add(2)
	go g.joinLoop(ctx)
	go g.maintainLoop(ctx)
	c.OnLeader(g.reconcileLoop)
	return nil
}

func (g *gossiper) memberlistConfig(key []byte) (*memberlist.Config, error) {
	host, portStr, err := net.SplitHostPort(g.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip address %q: %w", g.cfg.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip address %q: bad port", g.cfg.Addr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if net.ParseIP(host) == nil { // memberlist binds IPs only
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return nil, fmt.Errorf("cluster: gossip address %q: %v", g.cfg.Addr, err)
		}
		host = ips[0].String()
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = g.c.cfg.NodeID
	mc.BindAddr, mc.BindPort = host, port
	if ip := net.ParseIP(host); !ip.IsUnspecified() {
		mc.AdvertiseAddr, mc.AdvertisePort = host, port
	}
	mc.SecretKey = key
	mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	mc.Label = gossipLabel
	mc.DeadNodeReclaimTime = 30 * time.Second
	mc.Delegate, mc.Events, mc.Alive, mc.Conflict, mc.Ping = g, g, g, g, g
	mc.Logger = log.New(memberlistWriter{g.log}, "", 0)
	if g.cfg.Tune != nil {
		g.cfg.Tune(mc)
	}
	return mc, nil
}

// stopGossip announces that this node stops (metadata, then a gossip
// leave: peers mark it left at once instead of probing it dead), then
// stops memberlist. A left node is
// not removed from raft at once: a restart is not a departure (see Leave).
func (c *Cluster) stopGossip() {
	g := c.gossip
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.shutdown {
		g.mu.Unlock()
		return
	}
	g.shutdown = true
	g.mu.Unlock()
	g.cancel()
	g.mu.Lock()
	g.meta.Stopping = true
	g.mu.Unlock()
	if err := g.ml.UpdateNode(leaveTimeout); err != nil {
		g.log.Debug("gossip: announcing shutdown", "error", err)
	}
	if err := g.ml.Leave(leaveTimeout); err != nil {
		g.log.Debug("gossip leave", "error", err)
	}
	if err := g.ml.Shutdown(); err != nil {
		g.log.Debug("gossip shutdown", "error", err)
	}
	g.wg.Wait()
}

// GossipAddr is the gossip address this node advertises ("" without
// gossip).
func (c *Cluster) GossipAddr() string {
	if c.gossip == nil {
		return ""
	}
	return c.gossip.selfAddr()
}

// selfAddr is this node's advertised gossip address, as memberlist
// reported it to the event delegate (memberlist's LocalNode is not safe
// to read while it gossips).
func (g *gossiper) selfAddr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[g.c.cfg.NodeID]; ok {
		return m.addr
	}
	return g.cfg.Addr
}

// joinLoop joins the pool whenever this node is alone in it: at start (the
// seeds may not be up yet) and after everyone else went away. It tries the
// Join addresses, the peers saved by an earlier run and the members seen,
// backing off between failures.
func (g *gossiper) joinLoop(ctx context.Context) {
	defer g.wg.Done()
	backoff, failures := joinBackoffMin, 0
	for {
		wait := joinBackoffMax
		if g.ml.NumMembers() <= 1 {
			if addrs := g.joinCandidates(); len(addrs) > 0 {
				n, err := g.ml.Join(addrs)
				switch {
				case err == nil:
					g.log.Info("joined gossip pool", "contacted", n)
					backoff, failures = joinBackoffMin, 0
				case ctx.Err() != nil:
					return
				default:
					failures++
					level := slog.LevelDebug
					if failures == 1 || failures%10 == 0 {
						level = slog.LevelInfo
					}
					g.log.Log(ctx, level, "cannot join gossip pool yet; retrying", "addrs", addrs, "attempts", failures, "error", err)
					wait = backoff
					backoff = min(2*backoff, joinBackoffMax)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (g *gossiper) joinCandidates() []string {
	self := g.selfAddr()
	g.mu.Lock()
	addrs := slices.Concat(g.cfg.Join, g.saved)
	for _, m := range g.members {
		if m.name != g.c.cfg.NodeID {
			addrs = append(addrs, m.addr)
		}
	}
	g.mu.Unlock()
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	return slices.DeleteFunc(addrs, func(a string) bool { return a == "" || a == self || a == g.cfg.Addr })
}

// maintainLoop keeps this node's metadata, the saved peers and the
// bootstrap-expect decision up to date with gossip and raft.
func (g *gossiper) maintainLoop(ctx context.Context) {
	defer g.wg.Done()
	t := time.NewTicker(max(g.settle/2, 50*time.Millisecond))
	defer t.Stop()
	for {
		g.maintain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.maintainCh:
		}
	}
}

func (g *gossiper) maintain(ctx context.Context) {
	hasConfig := false
	if servers, err := g.c.Members(); err == nil && len(servers) > 0 {
		hasConfig = true
	}
	if g.pending {
		if hasConfig {
			g.pending = false
		} else {
			hasConfig = g.maybeBootstrap()
		}
	}
	if hasConfig {
		g.mu.Lock()
		changed := !g.meta.Bootstrapped || g.meta.Expect != 0
		g.meta.Bootstrapped, g.meta.Expect = true, 0
		if now := time.Now(); now.Sub(g.progressAt) >= progressEvery {
			g.progressAt = now
			applied, contact := g.c.progress()
			changed = changed || applied != g.meta.Applied || contact != g.meta.ContactMs
			g.meta.Applied, g.meta.ContactMs = applied, contact
		}
		g.mu.Unlock()
		if changed && ctx.Err() == nil {
			if err := g.ml.UpdateNode(metaUpdateTimeout); err != nil {
				g.log.Debug("advertising metadata", "error", err)
			}
		}
	}
	g.prune()
	g.savePeers()
}

// prune forgets members that have been gone for longer than ReapAfter and
// are no longer raft servers.
func (g *gossiper) prune() {
	servers, _ := g.c.Members()
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, m := range g.members {
		if m.state == memberlist.StateAlive || now.Sub(m.since) < g.cfg.ReapAfter {
			continue
		}
		if !slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == id }) {
			delete(g.members, id)
		}
	}
}

// savePeers writes the gossip addresses of the other members to
// DataDir/raft/gossip-peers.json, so that a restarted node rejoins without
// --join. An empty set never overwrites a saved one: a node that finds
// itself alone keeps the addresses that can bring it back.
func (g *gossiper) savePeers() {
	g.mu.Lock()
	var addrs []string
	for _, m := range g.members {
		if m.name != g.c.cfg.NodeID && m.addr != "" {
			addrs = append(addrs, m.addr)
		}
	}
	slices.Sort(addrs)
	if len(addrs) == 0 || slices.Equal(addrs, g.saved) {
		g.mu.Unlock()
		return
	}
	g.saved = addrs
	g.mu.Unlock()
	if err := writePeersFile(g.peersFile, addrs); err != nil {
		g.log.Warn("saving gossip peers", "error", err)
	}
}

func readPeersFile(path string) []string {
	// #nosec G304 -- path is <data-dir>/raft/gossip-peers.json
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var addrs []string
	if json.Unmarshal(b, &addrs) != nil {
		return nil
	}
	return addrs
}

func writePeersFile(path string, addrs []string) error {
	b, err := json.Marshal(addrs)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (g *gossiper) poke() {
	for _, ch := range []chan struct{}{g.maintainCh, g.reconcileCh, g.c.formatCh} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// memberlist delegates. memberlist calls the event delegates while holding
// its own lock: they only update the table and poke the loops.

// NodeMeta advertises this node's metadata.
func (g *gossiper) NodeMeta(limit int) []byte {
	g.mu.Lock()
	meta := g.meta
	g.mu.Unlock()
	b, _ := json.Marshal(meta)
	if len(b) > limit { // absurdly long addresses: keep what raft needs
		meta.HTTPAddr, meta.Version = "", ""
		b, _ = json.Marshal(meta)
		if len(b) > limit {
			return nil
		}
	}
	return b
}

func (g *gossiper) NotifyMsg([]byte)                    {}
func (g *gossiper) GetBroadcasts(int, int) [][]byte     { return nil }
func (g *gossiper) LocalState(bool) []byte              { return nil }
func (g *gossiper) MergeRemoteState(buf []byte, _ bool) {}

// NotifyAlive admits only nodes that advertise valid metadata under their
// own name.
func (g *gossiper) NotifyAlive(n *memberlist.Node) error {
	_, err := parseMeta(n)
	return err
}

func (g *gossiper) NotifyConflict(existing, other *memberlist.Node) {
	g.log.Warn("two nodes gossip under the same node id", "id", existing.Name, "addr", existing.Address(), "other_addr", other.Address())
}

// memberlist never fills in Node.State (its own nodeState shadows it), so
// the state comes from which event fired. NotifyLeave covers both a
// failure and a graceful leave; a node that stops announces it in its
// metadata first (stopGossip), which tells the two apart.

func (g *gossiper) NotifyJoin(n *memberlist.Node)   { g.observe(n, memberlist.StateAlive) }
func (g *gossiper) NotifyUpdate(n *memberlist.Node) { g.observe(n, memberlist.StateAlive) }
func (g *gossiper) NotifyLeave(n *memberlist.Node)  { g.observe(n, memberlist.StateDead) }

func (g *gossiper) observe(n *memberlist.Node, state memberlist.NodeStateType) {
	meta, err := parseMeta(n)
	if err != nil {
		return
	}
	if state == memberlist.StateDead && (meta.Stopping || meta.Leaving) {
		state = memberlist.StateLeft
	}
	g.mu.Lock()
	m, ok := g.members[n.Name]
	if !ok {
		m = &member{name: n.Name}
		g.members[n.Name] = m
	}
	if !ok || m.state != state {
		m.since = time.Now()
		g.log.Debug("member changed", "id", n.Name, "state", stateName(state))
	}
	m.state, m.addr, m.meta = state, n.Address(), meta
	g.mu.Unlock()
	g.poke()
}

// memberlistWriter routes memberlist's log lines to slog: errors as
// warnings (a peer with the wrong key shows up here), the rest at debug.
type memberlistWriter struct{ log *slog.Logger }

func (w memberlistWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelDebug
	if bytes.Contains(line, []byte("[ERR]")) {
		level = slog.LevelWarn
	}
	w.log.Log(context.Background(), level, string(line))
	return len(p), nil
}
