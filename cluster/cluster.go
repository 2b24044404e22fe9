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
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/ratelimit"
	"github.com/oidcd/oidcd/internal/undo"
)

// Sentinel errors of Apply. Callers test with errors.Is.
var (
	// ErrNoLeader: no leader is known (election under way, or no quorum).
	ErrNoLeader = errors.New("cluster: no leader")
	// ErrNotLeader: this node is not the leader and cannot forward.
	ErrNotLeader = errors.New("cluster: not the leader")
	// ErrShutdown: the node is stopping.
	ErrShutdown = errors.New("cluster: shutting down")
	// ErrNonVoterBootstrap: a non-voter joins an existing cluster; it
	// cannot form one.
	ErrNonVoterBootstrap = errors.New("cluster: a non-voter joins an existing cluster (give it join addresses); it does not bootstrap one")
)

// logCacheSize is how many of the newest log entries stay in memory
// (raft.LogCache). An entry is at most a few MiB (a user import batch), so
// the cache stays bounded; usually it is a few KiB each.
const logCacheSize = 64

// Config configures one node's raft.
type Config struct {
	NodeID   string
	DataDir  string // raft files go under DataDir/raft
	RaftAddr string // listen and advertise address
	// RaftListener, when set, is used instead of listening on RaftAddr;
	// its address is advertised.
	RaftListener net.Listener
	// Dial, when set, replaces the plain TCP dialer for node-to-node
	// connections (tests cut links with it).
	Dial Dialer
	// Transport secures node-to-node traffic and forwards writes
	// (transport.go, forward.go).
	Transport TransportConfig
	// Gossip forms and maintains the cluster (gossip.go).
	Gossip GossipConfig
	// BootstrapPeers, when set on a node without raft state, bootstraps
	// these voters at once (static formation; gossip computes the same
	// list when BootstrapExpect servers see each other).
	BootstrapPeers  []raft.Server
	BootstrapExpect int
	// NonVoter makes this node an edge replica: the leader adds it as a
	// raft non-voter (reconcile.go), so it applies the whole log and
	// serves from its own state but never votes, stands for election or
	// counts towards a quorum. It joins an existing cluster (Gossip.Join)
	// and never bootstraps one. SetVoter changes its role later.
	NonVoter   bool
	FSM        *fsm.FSM
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now is the node's clock (default time.Now): what it tells peers in
	// gossip acks, to measure clock drift (clock.go).
	Now func() time.Time

	// RateLimiter decides the rate checks of every node while this node
	// leads (RateLimiter); nil: the cluster has no rate limit.
	RateLimiter ratelimit.Limiter

	// ApplyTimeout bounds one Apply (and ReadIndex, a RateLimiter call) when the
	// caller's context has no deadline. Default 10s.
	ApplyTimeout time.Duration
	// Timing, for tests. Zero values take raft's defaults.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	LeaderLease      time.Duration
	// SnapshotThreshold and SnapshotInterval govern compaction: a
	// snapshot when SnapshotThreshold entries (default 8192) have gathered,
	// checked every SnapshotInterval to twice that. Unset, the interval is
	// paced by the snapshots' own cost (snapshotInterval): 30 s while they
	// are cheap, longer as the state grows. TrailingLogs defaults to 10240.
	SnapshotThreshold uint64
	// RetainSnapshots is how many snapshots stay on disk; default 1.
	RetainSnapshots  int
	SnapshotInterval time.Duration
	TrailingLogs     uint64

	// announceFormat, set only by tests (export_test.go), is the state
	// format this node announces instead of fsm.CurrentFormat: a test
	// node plays an older release with it.
	announceFormat fsm.Format
	// onAnnounce, set only by tests, runs when this node is asked
	// opAnnounce; an error it returns is the answer (announce.go).
	onAnnounce func(ctx context.Context) error
	// onLeaderApply, set only by tests, runs in leaderApply once a
	// forwarded write is read and accepted, before raft sees it.
	onLeaderApply func(ctx context.Context)
	// exportTrail, set only by tests, serves the audit trail fetches
	// (trail.go) instead of FSM.ExportTrail.
	exportTrail func(w io.Writer, from, to uint64) error
}

// Cluster is one node's membership in the raft group.
type Cluster struct {
	cfg       Config
	log       *slog.Logger
	raft      *raft.Raft
	fsm       *fsm.FSM
	state     *fsm.State                // fsm's, for the format gate
	paced     atomic.Pointer[raft.Raft] // c.raft for paceSnapshots, which raft's goroutine calls
	store     *guardedStore
	logs      raft.LogStore // store behind a cache of the newest entries
	transport *raft.NetworkTransport
	metrics   *metrics
	clock     *clock // the peers' clocks (clock.go)

	mu          sync.Mutex
	loops       []func(ctx context.Context)
	cancel      context.CancelFunc
	loopContext context.Context
	loopsReady  bool // the current term's barrier passed and loops run
	loopsWG     sync.WaitGroup
	stopped     chan struct{} // closed by Stop
	stopOnce    sync.Once
	shutOnce    sync.Once
	observer    sync.WaitGroup
	stream      *streamLayer
	fwd         *forwarder // forward.go
	gossip      *gossiper  // gossip.go
	// formatMu: raising the state format and adding members exclude each
	// other (format.go); formatCh pokes the raise when gossip changes.
	formatMu sync.Mutex
	formatCh chan struct{}
	// asked: what the members gossip does not see answered opAnnounce
	// (announce.go).
	asked askTable
	// trail: the audit trail fetches this node serves (trail.go).
	trail trailServer
	// reannounced, set only by tests (export_test.go reannounce), is
	// the version and format this node announces after an upgrade in
	// place, which selfAnnounced answers from then on.
	reannounced atomic.Pointer[selfAnnouncement]

	// Set by New for Start.
	raftConfig *raft.Config
	snaps      raft.SnapshotStore
	existing   bool // raft state on disk: no bootstrap
	started    bool
}

// New opens the raft stores on cfg.DataDir and listens on the raft
// address, without starting raft: the node hands the Cluster (its Apply,
// ReadIndex and RateLimiter) to the packages that use it and hooks them
// to the FSM, and then calls Start. Shutdown undoes New alone too.
func New(cfg Config) (_ *Cluster, err error) {
	var cleanup undo.Stack
	defer cleanup.OnError(&err)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ApplyTimeout == 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	if cfg.NonVoter && (cfg.BootstrapExpect > 1 || len(cfg.BootstrapPeers) > 0) {
		return nil, ErrNonVoterBootstrap
	}
	if forming := cfg.BootstrapExpect > 1 && len(cfg.BootstrapPeers) == 0; (forming || len(cfg.Gossip.Join) > 0) &&
		len(cfg.Gossip.Key) != 32 && len(cfg.Transport.ClusterKey) != 32 {
		return nil, ErrNoGossipKey // startGossip would refuse it
	}
	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = newHCLog(cfg.Logger, "raft")
	// The FSM is a durable bbolt file that records its applied index, so
	// raft need not restore the last snapshot on start: it replays only the
	// log tail and the FSM skips entries it already holds.
	rc.NoSnapshotRestoreOnStart = true
	// A removed node stays up until its own Shutdown: raft shutting itself
	// down underneath us would let Shutdown close the stores while raft
	// still writes ("database not open").
	rc.ShutdownOnRemove = false
	// A follower learns that an entry committed from the leader's next
	// append, sent at the latest every CommitTimeout to 2*CommitTimeout. A
	// forwarded write (and a read index on a follower) waits for that, so
	// raft's 50ms default would add 75ms to each; an empty append every
	// 5-10ms per follower is cheap.
	rc.CommitTimeout = 5 * time.Millisecond
	rc.SnapshotThreshold = orDefault(cfg.SnapshotThreshold, 8192)
	rc.TrailingLogs = orDefault(cfg.TrailingLogs, 10240)
	rc.SnapshotInterval = cfg.SnapshotInterval
	if cfg.SnapshotInterval <= 0 {
		rc.SnapshotInterval = minSnapshotInterval // then paced: paceSnapshots
	}
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLease > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLease
	}

	// A damaged raft log is refused with its name before raft-boltdb
	// opens it (it would panic on a damaged page later).
	if err := fsm.CheckBoltFile(filepath.Join(dir, "raft.db")); err != nil {
		return nil, fmt.Errorf("cluster: log store: %w", err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("cluster: log store: %w", err)
	}
	store := &guardedStore{s: bolt, closing: make(chan struct{}), log: cfg.Logger.Warn}
	cleanup.Push(func() { store.Close() })
	removeTransferFiles(cfg.DataDir)
	snaps, err := openSnapshotStore(dir, orDefault(cfg.RetainSnapshots, defaultRetainSnapshots), cfg.FSM, cfg.Logger, newHCLog(cfg.Logger, "snapshot"))
	if err != nil {
		return nil, fmt.Errorf("cluster: snapshot store: %w", err)
	}
	stream, err := newStreamLayer(&cfg)
	if err != nil {
		return nil, err
	}
	transport := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  newHCLog(cfg.Logger, "transport"),
	})
	cleanup.Push(func() { transport.Close() }) // closes the stream layer too
	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return nil, err
	}
	if err := recoverFromPeersFile(dir, cfg.NodeID, cfg.FSM, store, snaps, existing, cfg.Logger); err != nil {
		return nil, err
	}
	// The newest entries stay in memory: the leader sends each to every
	// follower and non-voter, and the read index checks the commit's term,
	// and without the cache each of those is a bbolt read and a decode.
	logs, err := raft.NewLogCache(logCacheSize, store)
	if err != nil {
		return nil, err
	}
	return &Cluster{cfg: cfg, log: cfg.Logger, fsm: cfg.FSM, state: cfg.FSM.State(), store: store, logs: logs, transport: transport, stream: stream,
		stopped: make(chan struct{}), formatCh: make(chan struct{}, 1), raftConfig: rc, snaps: snaps, existing: existing}, nil
}

// Start starts raft (replaying the log tail into the FSM), the forwarding
// of writes, the bootstrap of a new cluster (with BootstrapExpect 1 and no
// raft state, a single voter) and gossip. It is called once; on an error
// the caller shuts the Cluster down.
func (c *Cluster) Start() error {
	if c.started {
		return errors.New("cluster: started twice")
	}
	if c.cfg.SnapshotInterval <= 0 {
		c.fsm.OnSnapshot = c.paceSnapshots
	}
	r, err := raft.NewRaft(c.raftConfig, c.fsm, c.logs, c.store, c.snaps, pipelineTransport{c.transport})
	if err != nil {
		return fmt.Errorf("cluster: raft: %w", err)
	}
	c.raft, c.started = r, true
	c.paced.Store(r)
	c.metrics = newMetrics(c, c.cfg.Registerer)
	now := c.cfg.Now
	if now == nil {
		now = time.Now
	}
	c.clock = newClock(now, c.cfg.Registerer, c.log)
	registerSnapshotMetrics(c.cfg.Registerer, c.fsm)
	if err := c.startForwarding(); err != nil {
		return err
	}
	switch {
	case c.existing:
	case c.cfg.NonVoter && len(c.cfg.Gossip.Join) == 0:
		err = ErrNonVoterBootstrap
	case c.cfg.NonVoter: // the leader adds it
	case len(c.cfg.BootstrapPeers) > 0:
		err = c.bootstrap(c.cfg.BootstrapPeers)
	case c.cfg.BootstrapExpect <= 1 && len(c.cfg.Gossip.Join) == 0:
		err = c.bootstrap([]raft.Server{{Suffrage: raft.Voter, ID: c.raftConfig.LocalID, Address: c.transport.LocalAddr()}})
	}
	if err == nil {
		err = c.startGossip(c.existing)
	}
	if err != nil {
		return err
	}
	c.OnLeader(c.formatLoop)
	c.observer.Add(2)
	go c.watchLeadership()
	go c.askLoop()
	c.electAloneNow()
	return nil
}

// soleVoter reports whether this node is the only voter of the latest
// configuration raft knows (nonvoters, edge replicas, aside): then its
// quorum is itself. raft decides quorums by that same configuration, and
// it takes one membership change at a time, so the committed one differs
// by at most one server and no other node can win an election. Reading
// the configuration is an atomic load in raft v1.7.
func (c *Cluster) soleVoter() bool {
	cf := c.raft.GetConfiguration()
	return cf.Error() == nil && onlyVoter(cf.Configuration(), raft.ServerID(c.cfg.NodeID))
}

// onlyVoter reports whether id is cf's one voter.
func onlyVoter(cf raft.Configuration, id raft.ServerID) bool {
	voters, self := 0, false
	for _, s := range cf.Servers {
		if s.Suffrage == raft.Voter {
			voters++
			self = self || s.ID == id
		}
	}
	return voters == 1 && self
}

// electAloneNow spares a node that is the only voter of its configuration
// the heartbeat timeout (1-2 s by default) that raft waits before its first
// election: nobody else can lead, so there is no one to wait for. Lowering
// the heartbeat timeout through ReloadConfig makes raft's follower loop
// check for a leader at once, and with no contact ever it stands; the
// timeout is put back right away, so later elections (after the cluster
// grows) keep the configured timing. A cluster of several voters waits as
// before: an instant election there would split the votes.
func (c *Cluster) electAloneNow() {
	if !c.soleVoter() {
		return
	}
	rc := c.raft.ReloadableConfig()
	orig := rc
	rc.HeartbeatTimeout = orig.HeartbeatTimeout - time.Millisecond
	if err := c.raft.ReloadConfig(rc); err != nil {
		c.log.Debug("cannot hurry the first election", "err", err)
		return
	}
	if err := c.raft.ReloadConfig(orig); err != nil {
		c.log.Warn("cannot restore raft's heartbeat timeout", "err", err)
	}
}

// bootstrap writes the initial configuration; every node of a forming
// cluster calls it with the same servers, which raft allows.
func (c *Cluster) bootstrap(servers []raft.Server) error {
	err := c.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	c.log.Info("bootstrapped cluster", "voters", len(servers))
	return nil
}

func orDefault[T uint64 | int](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

var _ fsm.Applier = (*Cluster)(nil)

// Apply replicates cmd and waits until this node's FSM has applied it. The
// Result carries the command's domain outcome. Without a deadline on ctx
// it waits at most ApplyTimeout: a cluster that cannot apply (no quorum, a
// state file whose disk is full) answers within a bound.
//
// A command that needs a newer state format than the cluster runs is
// refused before anything is proposed, with a *fsm.FormatError naming the
// members to upgrade first (format.go).
func (c *Cluster) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	if err := c.state.CheckFormat(cmd); err != nil {
		c.metrics.formatRefusals.Inc()
		return fsm.Result{}, c.nameBehind(err)
	}
	res, err := c.propose(ctx, cmd)
	if errors.Is(err, fsm.ErrFormat) { // refused by the leader (leaderApply)
		c.metrics.formatRefusals.Inc()
	}
	return res, err
}

// propose is Apply past the format gate.
func (c *Cluster) propose(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	// A context already ended proposes nothing: raft would append the
	// entry, and the wait given up at once would leave its fate open.
	if err := ctx.Err(); err != nil {
		return fsm.Result{}, err
	}
	timeout := c.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 { // the deadline passed, before ctx says so
			return fsm.Result{}, context.DeadlineExceeded
		}
	}
	start := time.Now()
	data := cmd.Encode()
	f := c.raft.Apply(data, timeout)
	err := c.awaitWrite(ctx, f)
	if err == nil {
		c.metrics.applyLatency.Observe(time.Since(start).Seconds())
		res, _ := f.Response().(fsm.Result)
		return res, nil
	}
	if errors.Is(err, raft.ErrLeadershipLost) {
		// Appended here, then this node stepped down: find out whether
		// the next leader committed it.
		switch committed, rerr := c.settleLost(ctx, f.Index(), data); {
		case rerr != nil:
			err = rerr
		case committed:
			if res, ok := c.fsm.ResultAt(f.Index()); ok {
				c.metrics.applyLatency.Observe(time.Since(start).Seconds())
				return res, nil
			}
			err = maybeApplied(fmt.Errorf("cluster: entry %d committed; its result is no longer held", f.Index()))
		default:
			err = raft.ErrNotLeader // overwritten: nothing was done, forward it
		}
	}
	// Forward only what raft refused before appending it: after
	// ErrLeadershipLost the entry may still commit, and forwarding it
	// would apply it twice.
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		// Not the leader: hand the write to it, then wait until this node
		// has applied it too, so the caller's answer is true here.
		c.metrics.forwarded.Inc()
		res, ferr := c.forwardApply(ctx, cmd)
		if ferr == nil {
			c.metrics.applyLatency.Observe(time.Since(start).Seconds())
			return res, nil
		}
		err = ferr
		if errors.Is(err, fsm.ErrFormat) {
			return fsm.Result{}, err // not a failure of the cluster
		}
	} else if unknownOutcome(err, f) {
		if !errors.Is(err, fsm.ErrMaybeApplied) { // settleLost and awaitWrite said so already
			err = maybeApplied(mapRaftError(err))
		}
	} else {
		err = mapRaftError(err)
	}
	c.metrics.applyErrors.Inc()
	return fsm.Result{}, err
}

// unknownOutcome reports whether err, raft's answer to entry f, leaves
// the write's fate open: it was appended and may commit, or committed
// and was not applied here. raft v1.7.3 answers an entry it appended
// with ErrLeadershipLost (which settleLost may settle), ErrAbortedByRestore
// or ErrRaftShutdown, and one it never appended with ErrNotLeader,
// ErrLeadershipTransferInProgress, ErrEnqueueTimeout, ErrRaftShutdown (at
// index 0) or the log store's error (the leader could not store it: the
// entry is nowhere, and the leader steps down). Given up on (errAbandoned),
// a write's fate is open too; awaitWrite marks that.
func unknownOutcome(err error, f raft.ApplyFuture) bool {
	return errors.Is(err, fsm.ErrMaybeApplied) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrAbortedByRestore) ||
		(errors.Is(err, raft.ErrRaftShutdown) && f.Index() != 0) // f answered: Index may be read
}

// maybeApplied marks err as the failure of a write whose outcome is
// unknown (fsm.ErrMaybeApplied), keeping what it wraps: the caller must
// not take it for "nothing done" and send it again as a new write.
func maybeApplied(err error) error {
	if errors.Is(err, fsm.ErrMaybeApplied) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, fsm.ErrMaybeApplied)
}

func mapRaftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %v", ErrShutdown, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %v", ErrNoLeader, err)
	}
	return err
}

// IsLeader reports whether this node leads.
func (c *Cluster) IsLeader() bool { return c.raft.State() == raft.Leader }

// Leader returns the leader's raft address and id ("" when none is known).
func (c *Cluster) Leader() (addr, id string) {
	a, i := c.raft.LeaderWithID()
	return string(a), string(i)
}

// Ready reports whether the node is in a cluster with a known leader.
func (c *Cluster) Ready() bool {
	addr, _ := c.raft.LeaderWithID()
	return addr != ""
}

// WaitLeader blocks until a leader is known or ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !c.Ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// ID is this node's raft server id.
func (c *Cluster) ID() string { return c.cfg.NodeID }

// RaftAddr is the transport's advertised address.
func (c *Cluster) RaftAddr() string { return string(c.transport.LocalAddr()) }

// Members lists the raft configuration.
func (c *Cluster) Members() ([]raft.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ApplyTimeout)
	defer cancel()
	f := c.raft.GetConfiguration()
	if err := c.await(ctx, f); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// Snapshot forces a raft snapshot and log compaction now.
func (c *Cluster) Snapshot() error { return c.raft.Snapshot().Error() }

// Stats returns raft's own counters (state, term, indexes).
func (c *Cluster) Stats() map[string]string { return c.raft.Stats() }

// Stop marks the node as stopping, at once and for good: every wait on
// raft is given up (the caller gets ErrShutdown, or for a write an
// unknown outcome), and peers' forwarded requests are refused so that
// they ask the next leader. Raft itself runs on until Shutdown. A node
// calls Stop before it drains its HTTP server, so that requests in
// flight answer 503 at once instead of holding the drain.
func (c *Cluster) Stop() { c.stopOnce.Do(func() { close(c.stopped) }) }

// Shutdown stops leader loops and raft and closes the stores. The FSM is
// the caller's to close. A second call does nothing.
func (c *Cluster) Shutdown() error {
	var err error
	c.shutOnce.Do(func() {
		c.Stop()
		if c.started {
			c.drainForwarding()
			c.stopGossip()
			// An apply waiting for disk space gives up, so raft's FSM
			// goroutine, and with it Shutdown, can end.
			c.fsm.StopWaiting()
			err = c.raft.Shutdown().Error()
			c.stopForwarding()
		}
		c.observer.Wait()
		c.stopLoops()
		c.transport.Close()
		if cerr := c.store.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// errAbandoned marks a wait on a raft future given up because the
// caller's context ended or the node is stopping (await).
var errAbandoned = errors.New("cluster: wait abandoned")

// await waits for raft future f as long as ctx lives and the node runs.
// raft v1.7.3 answers a future only from its own loops, so one handed to
// raft around a shutdown (an entry still queued for the leader loop, a
// barrier, a configuration change) can stay unanswered for good; a caller
// waiting on it held Node.Close forever (the chaos test's hang). The
// goroutine that keeps waiting ends with the future or with the process;
// the caller does not wait for it.
func (c *Cluster) await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errAbandoned, ctx.Err())
	case <-c.stopped:
		return fmt.Errorf("%w: %w", errAbandoned, ErrShutdown)
	}
}

// settleLost finds out what became of an entry this node appended at
// index as leader and then lost leadership over (raft.ErrLeadershipLost:
// "the outcome is unknown"). Raft's log matching gives the answer once
// this node has applied index from the next leader: the entry there is
// either the one proposed (the same bytes: committed) or another one
// (the proposal was overwritten and will never apply, so it may be sent
// again). A leadership transfer ends like this for whatever was in flight,
// and nearly always with the entry committed; without settling, each such
// write would be a 503 to a caller whose write in fact succeeded.
func (c *Cluster) settleLost(ctx context.Context, index uint64, data []byte) (committed bool, err error) {
	if index == 0 {
		return false, maybeApplied(fmt.Errorf("%w: write outcome unknown: %v", ErrNoLeader, raft.ErrLeadershipLost))
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := c.fsm.WaitApplied(ctx, index); err != nil {
		return false, maybeApplied(fmt.Errorf("%w: write outcome unknown: entry %d not applied here: %w", ErrNoLeader, index, err))
	}
	var l raft.Log
	if err := c.logs.GetLog(index, &l); err != nil {
		return false, maybeApplied(fmt.Errorf("%w: write outcome unknown: entry %d: %w", ErrNoLeader, index, err))
	}
	return l.Type == raft.LogCommand && bytes.Equal(l.Data, data), nil
}

// awaitWrite is await for an entry raft accepted: given up on, its
// outcome is unknown (it may still commit), which callers must not take
// for "nothing done" and send again elsewhere. (One that raft refused
// after ErrEnqueueTimeout just as ctx ended is taken for unknown too:
// the future cannot be asked which it was before it answers.)
func (c *Cluster) awaitWrite(ctx context.Context, f raft.Future) error {
	err := c.await(ctx, f)
	if errors.Is(err, errAbandoned) {
		return maybeApplied(fmt.Errorf("%w: write outcome unknown: %w", ErrNoLeader, err))
	}
	return err
}
