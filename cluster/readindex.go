package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// ReadIndex returns once this node's state reflects every write that
// completed, anywhere in the cluster, before ReadIndex was called: a read
// of fsm.State made afterwards is linearizable. It asks the leader for its
// read index (below) and waits until this node has applied up to it. With
// no reachable leader it fails (wrapping ErrNoLeader) when ctx ends, or
// after ApplyTimeout when ctx has no deadline.
func (c *Cluster) ReadIndex(ctx context.Context) (err error) {
	start := time.Now()
	defer func() {
		if err != nil {
			c.metrics.readIndexFails.Inc()
		} else {
			c.metrics.readIndex.Observe(time.Since(start).Seconds())
		}
	}()
	ctx, cancel := c.bound(ctx)
	defer cancel()
	var index uint64
	if c.raft.State() == raft.Leader {
		// The leader's rounds coalesce its own callers and its peers'.
		index, err = c.askReadIndex(ctx)
	} else {
		index, err = c.followerReadIndex(ctx)
	}
	if err != nil {
		return err
	}
	if err := c.fsm.WaitApplied(ctx, index); err != nil {
		return fmt.Errorf("%w: applying up to read index %d: %v", ErrNoLeader, index, err)
	}
	return nil
}

// askReadIndex asks the leader (this node, or a peer over the forwarding
// connection) for its read index.
func (c *Cluster) askReadIndex(ctx context.Context) (uint64, error) {
	reply, err := c.leaderDo(ctx, opReadIndex, nil)
	if err != nil {
		return 0, err
	}
	if len(reply) != 8 {
		return 0, fmt.Errorf("cluster: read index reply of %d bytes", len(reply))
	}
	return binary.BigEndian.Uint64(reply), nil
}

// followerReadIndex is askReadIndex for a node that does not lead, with
// its concurrent callers sharing one request to the leader: without it,
// every userinfo or introspection a follower serves costs a forwarded
// round trip, the leader's handling of it and its share of a heartbeat
// round. A caller joins the next request to be sent, never one already
// on its way (the rule of the leader's rounds), so the index it gets was
// read by the leader after the caller arrived. The request runs under
// its own bound, not a caller's context: a caller that gives up leaves
// the others their answer.
func (c *Cluster) followerReadIndex(ctx context.Context) (uint64, error) {
	index, err := c.fwd.followerReads.await(ctx, func() (uint64, error) {
		rctx, cancel := context.WithTimeout(c.fwd.base, c.cfg.ApplyTimeout)
		defer cancel()
		c.metrics.forwardedReads.Inc()
		return c.askReadIndex(rctx)
	})
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return 0, fmt.Errorf("%w: %v", ErrNoLeader, err)
	}
	return index, err
}

// leaderReadIndex is the read index of the Raft thesis (section 6.4), on
// the leader. Concurrent requests share one round: a request joins the
// next round to start, never one already under way, because a round's
// commit index must be read after the request arrived.
func (c *Cluster) leaderReadIndex(ctx context.Context) (uint64, error) {
	if c.raft.State() != raft.Leader {
		return 0, ErrNotLeader
	}
	if c.soleVoter() {
		// A round costs nothing to coalesce here: no heartbeat to share.
		return c.verifiedReadIndex(true)
	}
	return c.fwd.reads.await(ctx, func() (uint64, error) { return c.verifiedReadIndex(false) })
}

// verifiedReadIndex runs one round:
//
//  1. read the term T, then the commit index; the entry at the commit index
//     must be of term T: a new leader knows which entries are committed
//     only once it has committed one of its own term (raft appends a no-op
//     at once; until it commits, a barrier waits for it);
//  2. VerifyLeader: a quorum answers a heartbeat sent after step 1, so no
//     other leader had been elected when the commit index was read (a sole
//     voter is its own quorum: raft's VerifyLeader answers at once there,
//     so it is skipped, with its trip through raft's main loop);
//  3. the term is still T, so the verification was of the same leadership.
//
// Every write acknowledged before the round started is then at or below
// the commit index. The answer is not the commit index itself but the last
// entry at or below it that the FSM sees (fsm.FSM counts only commands and
// configurations; raft's no-ops and barriers never reach it), so that a
// node waiting for fsm.Applied to reach it does not wait forever.
func (c *Cluster) verifiedReadIndex(sole bool) (uint64, error) {
	for attempt := 0; ; attempt++ {
		term := c.raft.CurrentTerm()
		commit := c.raft.CommitIndex()
		commitTerm, fsmIndex, err := c.fwd.reads.scan(c.logs, commit, c.fsm.Applied)
		if err != nil {
			return 0, err
		}
		if commitTerm != term {
			if attempt == 2 {
				return 0, fmt.Errorf("%w: no entry of term %d committed", ErrNotLeader, term)
			}
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ApplyTimeout)
			err := c.await(ctx, c.raft.Barrier(c.cfg.ApplyTimeout))
			cancel()
			if err != nil {
				return 0, readErr(err)
			}
			continue
		}
		if err := c.verifyLeader(sole); err != nil {
			return 0, readErr(err)
		}
		if now := c.raft.CurrentTerm(); now != term {
			return 0, fmt.Errorf("%w: term changed from %d to %d", ErrNotLeader, term, now)
		}
		return fsmIndex, nil
	}
}

// readErr maps raft's answer to a read: whatever went wrong, nothing was
// written, so the caller may ask the (new) leader again.
func readErr(err error) error {
	if errors.Is(err, raft.ErrRaftShutdown) {
		return fmt.Errorf("%w: %v", ErrShutdown, err)
	}
	return fmt.Errorf("%w: %v", ErrNotLeader, err)
}

// readIndexer coalesces concurrent read-index requests into rounds.
type readIndexer struct {
	mu      sync.Mutex
	next    *readRound // the round new requests join; nil when none waits
	running bool
	stopped bool
	wg      sync.WaitGroup

	scanMu                        sync.Mutex
	scanCommit, scanTerm, scanFSM uint64 // last scan: commit index, its term, FSM index
}

type readRound struct {
	done  chan struct{}
	index uint64
	err   error
}

// join returns the round that will next read the commit index, starting
// the round runner if it is idle.
func (ri *readIndexer) join(verify func() (uint64, error)) (*readRound, error) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if ri.stopped {
		return nil, ErrShutdown
	}
	if ri.next == nil {
		ri.next = &readRound{done: make(chan struct{})}
	}
	r := ri.next
	if !ri.running {
		ri.running = true
		ri.wg.Add(1)
		go ri.run(verify)
	}
	return r, nil
}

// await joins the next round and waits for its answer, or for ctx to
// end (ctx's error).
func (ri *readIndexer) await(ctx context.Context, verify func() (uint64, error)) (uint64, error) {
	r, err := ri.join(verify)
	if err != nil {
		return 0, err
	}
	select {
	case <-r.done:
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run completes rounds until no request waits.
func (ri *readIndexer) run(verify func() (uint64, error)) {
	defer ri.wg.Done()
	for {
		ri.mu.Lock()
		r := ri.next
		ri.next = nil
		if r == nil {
			ri.running = false
			ri.mu.Unlock()
			return
		}
		ri.mu.Unlock()
		r.index, r.err = verify()
		close(r.done)
	}
}

// stop waits for the runner; raft must already be shut down, so that a
// round in progress ends.
func (ri *readIndexer) stop() {
	ri.mu.Lock()
	ri.stopped = true
	ri.mu.Unlock()
	ri.wg.Wait()
}

// scan returns the term of the entry at commit and the index of the last
// entry at or below commit that reaches the FSM. Committed entries never
// change, so the previous answer bounds the walk back: usually one or two
// log reads. applied is the fallback when the walk reaches compacted
// entries, which the FSM has applied already.
func (ri *readIndexer) scan(logs raft.LogStore, commit uint64, applied func() uint64) (term, fsmIndex uint64, err error) {
	ri.scanMu.Lock()
	defer ri.scanMu.Unlock()
	if commit == ri.scanCommit {
		return ri.scanTerm, ri.scanFSM, nil
	}
	floor, floorFSM := uint64(0), uint64(0)
	if commit > ri.scanCommit {
		floor, floorFSM = ri.scanCommit, ri.scanFSM
	}
	fsmIndex = floorFSM
	for i := commit; i > floor; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			if !errors.Is(err, raft.ErrLogNotFound) {
				return 0, 0, fmt.Errorf("cluster: read log %d: %w", i, err)
			}
			if i == commit {
				return 0, 0, fmt.Errorf("%w: commit index %d not in the log", ErrNotLeader, commit)
			}
			fsmIndex = max(floorFSM, min(applied(), commit))
			break
		}
		if i == commit {
			term = l.Term
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			fsmIndex = i
			break
		}
	}
	ri.scanCommit, ri.scanTerm, ri.scanFSM = commit, term, fsmIndex
	return term, fsmIndex, nil
}

// verifyLeader waits for raft's VerifyLeader for at most ApplyTimeout, and
// not at all once the node stops. raft v1.7.3's verify future has no
// shutdown channel: a round started around shutdown can stay in raft's
// buffer unanswered, and waiting for it hung Shutdown. A sole voter (sole:
// soleVoter held as the read began) only checks that it still leads.
func (c *Cluster) verifyLeader(sole bool) error {
	if sole {
		if c.raft.State() != raft.Leader {
			return raft.ErrNotLeader
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- c.raft.VerifyLeader().Error() }()
	t := time.NewTimer(c.cfg.ApplyTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-c.stopped:
		return raft.ErrRaftShutdown
	case <-t.C:
		return fmt.Errorf("%w: leadership not confirmed within %s", ErrNoLeader, c.cfg.ApplyTimeout)
	}
}
