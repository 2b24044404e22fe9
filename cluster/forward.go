package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/ratelimit"
)

// leaderPoll is how often a caller looks again for a leader while none is
// known, or after the node it asked was not (or no longer) the leader.
const leaderPoll = 20 * time.Millisecond

// forwarder carries leader operations (writes, read indexes, rate checks)
// from any node to the leader, and answers them when this node leads; it
// also carries the asks of what each member runs (announce.go), which
// any node answers.
type forwarder struct {
	pool rpcPool
	// asks carries opAnnounce alone (announce.go), so that an ask that
	// times out never drops a connection a write is waiting on.
	asks   rpcPool
	server rpcServer
	reads  readIndexer // the leader's rounds (leaderReadIndex)
	// followerReads coalesces this node's own read indexes while it
	// follows (followerReadIndex); its rounds run under base.
	followerReads readIndexer
	base          context.Context
	stop          context.CancelFunc
}

// ErrNoRateLimiter: the leader has no Config.RateLimiter.
var ErrNoRateLimiter = errors.New("cluster: no rate limiter")

func (c *Cluster) startForwarding() error {
	base, stop := context.WithCancel(context.Background())
	c.fwd = &forwarder{base: base, stop: stop}
	c.fwd.pool.dial = func(ctx context.Context, addr string) (net.Conn, error) {
		return c.stream.dialNode(ctx, addr, protoForward)
	}
	c.fwd.asks.dial = c.fwd.pool.dial
	c.fwd.server = rpcServer{handle: c.serveOp, base: base}
	c.stream.trail = c.serveTrail
	c.stream.serve(c.fwd.server.serveConn)
	return nil
}

// drainForwarding runs first in Shutdown: peers' requests not yet read
// are refused with a goaway, so their senders try the next leader without
// doubt; requests already read are answered ErrNotLeader when they had not
// reached raft yet (serveOp checks c.stopped).
func (c *Cluster) drainForwarding() {
	if c.fwd != nil {
		c.fwd.server.drain()
	}
}

// Quiesce is the forwarding half of a graceful stop, run while raft still
// works: peers' requests not yet read are refused with a goaway (each peer
// sends them to the next leader, as they never ran here), and those
// already read are let finish until ctx ends. A write that this node took
// as leader just before handing leadership over is settled here (the next
// leader's log says whether it committed) and answered, instead of being
// cut off by the shutdown with an "outcome unknown" the peer must pass on
// as a 503. Shutdown without Quiesce refuses at once what is in flight.
func (c *Cluster) Quiesce(ctx context.Context) {
	if c.fwd == nil {
		return
	}
	c.fwd.server.drain() // every reader has stopped: no request is added after this
	done := make(chan struct{})
	go func() {
		c.fwd.server.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// stopForwarding runs after raft has shut down: it closes the listener and
// every node-to-node connection and waits for the goroutines serving them.
func (c *Cluster) stopForwarding() {
	if c.fwd == nil {
		return
	}
	c.fwd.stop()
	c.stream.Close()
	c.fwd.pool.close()
	c.fwd.asks.close()
	c.stream.wait() // every serveConn has returned: no more server.wg.Add
	c.fwd.server.wg.Wait()
	c.fwd.reads.stop()
	c.fwd.followerReads.stop() // base is cancelled: a round in progress ends
}

// serveOp runs one leader operation on this node: for a peer's request
// (rpc.go) or for a caller of this node while it leads.
func (c *Cluster) serveOp(ctx context.Context, op byte, body []byte) ([]byte, error) {
	select {
	case <-c.stopped:
		// Nothing done: the caller may ask the next leader.
		return nil, fmt.Errorf("%w: %s is stopping", ErrNotLeader, c.cfg.NodeID)
	default:
	}
	switch op {
	case opApply:
		return c.leaderApply(ctx, body)
	case opReadIndex:
		idx, err := c.leaderReadIndex(ctx)
		if err != nil {
			return nil, err
		}
		return u64(idx), nil
	case opRate:
		return c.leaderRate(ctx, string(body))
	case opSuffrage:
		return c.leaderSuffrage(ctx, body)
	case opAnnounce:
		return c.serveAnnounce(ctx)
	}
	return nil, unknownOp(op)
}

// leaderApply proposes a command and answers its raft index once it is
// committed and applied here. The error says whether anything happened:
// ErrNotLeader only when the entry was never appended (raft refused it,
// did not take it in time, or its log could not store it), so that the
// caller may send it again elsewhere without applying it twice; an entry
// whose fate is open wraps fsm.ErrMaybeApplied (and ErrNoLeader or
// ErrShutdown, whose reply classes tell a peer the same).
func (c *Cluster) leaderApply(ctx context.Context, data []byte) ([]byte, error) {
	cmd, err := fsm.Decode(data)
	if err != nil {
		return nil, err // the FSM would panic on it: the log would be corrupt
	}
	if c.raft.State() != raft.Leader {
		// A leader that has handed over and is stopping still reads its
		// peers' requests for a moment: refused before raft sees them,
		// they go to the next leader rather than race the shutdown.
		return nil, fmt.Errorf("%w: %s no longer leads", ErrNotLeader, c.cfg.NodeID)
	}
	if err := c.state.CheckFormat(cmd); err != nil {
		// The proposer's gate let it through (a proposer that checks
		// nothing, or whose state was ahead of this new leader's for the
		// moment before this one applies the last term's entries).
		// Judged by its type alone: decoding loses what fields it sets.
		return nil, c.nameBehind(err)
	}
	if h := c.cfg.onLeaderApply; h != nil {
		h(ctx)
	}
	if err := ctx.Err(); err != nil {
		// The caller's deadline passed on the way: nothing proposed, and
		// the caller, whose deadline it is, gives up.
		return nil, fmt.Errorf("%w: %s: %v before it was proposed", ErrNotLeader, c.cfg.NodeID, err)
	}
	f := c.raft.Apply(data, timeLeft(ctx, c.cfg.ApplyTimeout))
	if err := c.awaitWrite(ctx, f); err != nil {
		if errors.Is(err, raft.ErrLeadershipLost) {
			switch committed, rerr := c.settleLost(ctx, f.Index(), data); {
			case rerr != nil:
				return nil, rerr
			case committed:
				return u64(f.Index()), nil
			default:
				return nil, fmt.Errorf("%w: entry %d was overwritten", ErrNotLeader, f.Index())
			}
		}
		switch {
		case errors.Is(err, errAbandoned):
			return nil, err // the outcome is unknown: not ErrNotLeader
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
		case errors.Is(err, raft.ErrRaftShutdown) && f.Index() == 0:
			// Refused on the way in (raft's Apply found it shut down):
			// never appended, so the next leader may take it.
			return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
		case errors.Is(err, raft.ErrEnqueueTimeout):
			// Not taken off raft's queue before the deadline: never
			// appended. The caller's deadline has passed too; answered
			// "not leader", it gives up without calling it unknown.
			return nil, fmt.Errorf("%w: %s: %v (nothing appended)", ErrNotLeader, c.cfg.NodeID, err)
		case errors.Is(err, raft.ErrRaftShutdown):
			// Appended, perhaps committed, and not applied here.
			return nil, maybeApplied(fmt.Errorf("%w: %v", ErrShutdown, err))
		case !unknownOutcome(err, f):
			// The log store refused the entry: it is nowhere, and this
			// node steps down, so the caller may ask the next leader.
			return nil, fmt.Errorf("%w: %s could not store the write (nothing appended): %v", ErrNotLeader, c.cfg.NodeID, err)
		}
		// ErrAbortedByRestore: the entry may have committed.
		return nil, maybeApplied(fmt.Errorf("%w: write outcome unknown: %v", ErrNoLeader, err))
	}
	return u64(f.Index()), nil
}

// forwardApply sends cmd to the leader and waits until this node has
// applied it. Its result is read from this node's own apply of that index
// (fsm.ResultAt): apply is deterministic, so it is the leader's result too.
func (c *Cluster) forwardApply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	reply, err := c.leaderDo(ctx, opApply, cmd.Encode())
	if err != nil {
		return fsm.Result{}, err
	}
	index := binary.BigEndian.Uint64(reply)
	// Committed from here on: the write is done, its result unknown here.
	if err := c.fsm.WaitApplied(ctx, index); err != nil {
		return fsm.Result{}, maybeApplied(fmt.Errorf("cluster: write committed at %d but not yet applied here: %w", index, err))
	}
	res, ok := c.fsm.ResultAt(index)
	if !ok {
		return fsm.Result{}, maybeApplied(fmt.Errorf("cluster: entry %d committed; its result is no longer held", index))
	}
	return res, nil
}

// RateLimiter is the cluster's request-rate limiter: every call is decided
// by the leader's Config.RateLimiter (here, or over the leader's
// forwarding connection), so a limit holds for the cluster as a whole.
// Its state is not replicated: a new leader starts afresh. Errors:
// ErrNoLeader (wrapped) when no leader answers before ctx ends; any other
// error means the limiter could not answer.
func (c *Cluster) RateLimiter() ratelimit.Limiter { return leaderLimiter{c} }

type leaderLimiter struct{ c *Cluster }

var _ ratelimit.Limiter = leaderLimiter{}

func (l leaderLimiter) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	ctx, cancel := l.c.bound(ctx)
	defer cancel()
	reply, err := l.c.leaderDo(ctx, opRate, []byte(key))
	if err != nil {
		return false, 0, err
	}
	if len(reply) != 9 {
		return false, 0, fmt.Errorf("cluster: rate reply of %d bytes", len(reply))
	}
	// #nosec G115 -- the wait comes from the authenticated leader and only feeds Retry-After
	return reply[0] == 1, time.Duration(binary.BigEndian.Uint64(reply[1:])), nil
}

func (c *Cluster) leaderRate(ctx context.Context, key string) ([]byte, error) {
	if c.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	if c.cfg.RateLimiter == nil {
		return nil, ErrNoRateLimiter
	}
	ok, wait, err := c.cfg.RateLimiter.Allow(ctx, key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 9)
	if ok {
		out[0] = 1
	}
	binary.BigEndian.PutUint64(out[1:], uint64(max(wait, 0)))
	return out, nil
}

// leaderDo runs op on the leader: here when this node leads, otherwise
// over the leader's forwarding connection. It tries again, until ctx ends,
// while no leader is known, while the request could not be sent, and when
// the node asked answered that it is not the leader: in all three cases
// nothing was done, so a write is never applied twice. A read (a read
// index, a rate decision) changes nothing, so it is also tried again when
// the leader asked is stopping or lost its leadership midway. Any other
// failure is returned at once; for a write whose fate is unknown it wraps
// fsm.ErrMaybeApplied (callNode, leaderApply), and one that does not was
// not applied.
func (c *Cluster) leaderDo(ctx context.Context, op byte, body []byte) ([]byte, error) {
	var last error
	for {
		addr, id := c.raft.LeaderWithID()
		var reply []byte
		var err error
		switch {
		case addr == "":
			err = fmt.Errorf("%w: none known", ErrNoLeader)
		case string(id) == c.cfg.NodeID:
			reply, err = c.serveOp(ctx, op, body)
		default:
			reply, err = c.callNode(ctx, string(addr), string(id), op, body)
		}
		if err == nil {
			return reply, nil
		}
		if errors.Is(err, ErrShutdown) || errors.Is(err, fsm.ErrMaybeApplied) { // this node is stopping, or the write may be done
			return nil, err
		}
		if addr != "" && !errors.Is(err, errNotSent) && !errors.Is(err, ErrNotLeader) &&
			(!readOnly(op) || !errors.Is(err, ErrNoLeader)) {
			return nil, err
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v (%v)", ErrNoLeader, ctx.Err(), last)
		case <-c.stopped:
			return nil, ErrShutdown
		case <-time.After(leaderPoll):
		}
	}
}

// readOnly reports whether op leaves the leader's state as it was, so
// that asking again after an unclear failure does no harm (a rate decision
// may count a request twice, which errs on the side of the limit).
func readOnly(op byte) bool { return op == opReadIndex || op == opRate }

// callNode sends one request to the node at addr and maps its reply.
func (c *Cluster) callNode(ctx context.Context, addr, id string, op byte, body []byte) ([]byte, error) {
	cl, err := c.fwd.pool.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	r, err := cl.call(ctx, op, body)
	if err != nil {
		// Not sent: the caller may try again. Otherwise the leader may have
		// acted on it; for the caller, the leader went away.
		if errors.Is(err, errNotSent) {
			return nil, fmt.Errorf("cluster: call to leader %s: %w", id, err)
		}
		err = fmt.Errorf("%w: call to leader %s: %w", ErrNoLeader, id, err)
		if op == opApply { // sent, and no answer: the leader may have appended it
			err = maybeApplied(err)
		}
		return nil, err
	}
	if r.class != classOK {
		return nil, replyError(op, r, id)
	}
	return r.body, nil
}

// bound gives ctx the ApplyTimeout deadline when it has none.
func (c *Cluster) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.ApplyTimeout)
}

// timeLeft is the time until ctx's deadline, or d when it has none.
func timeLeft(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return d
}
