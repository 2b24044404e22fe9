package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
)

// Announcements over the node-to-node RPC (DESIGN.md, "Versions and the
// state format"). Gossip is where a member says what it runs; a member of
// the raft configuration that gossip does not see (a cluster formed from
// static peers has no gossip at all) is asked instead, with opAnnounce,
// by every node in the background. The answers are kept here, and the
// format checks (counted) and Status (shown) read them; nothing on the
// write path waits for an ask.

const (
	// askEvery is how often a node asks each member that gossip does not
	// see what it runs.
	askEvery = 2 * time.Second
	// askTimeout bounds one ask, dial and TLS included: a dead or frozen
	// member costs the loop no more.
	askTimeout = time.Second
	// askFresh is how old an answer may be and still count for the
	// format checks: a few rounds, in case the loop was held up. Status
	// shows the last answer whatever its age, as it shows what a member
	// gossip sees down last announced.
	askFresh = 3 * askEvery
)

// unknownOpPrefix starts the message of a server that does not know the
// op it was sent (unknownOp): serveOp's last line, in this build and in
// 0.3.0, answered with reply class classOther on a connection left open.
const unknownOpPrefix = "cluster: unknown operation"

// unknownOp is serveOp's answer to an op it does not know.
func unknownOp(op byte) error { return fmt.Errorf("%s %d", unknownOpPrefix, op) }

// announceReply is opAnnounce's answer: the node's id (an answer from
// another node at that address counts as none), version and the newest
// state format it applies, as it announces them in gossip.
type announceReply struct {
	ID      string `json:"id"`
	Version string `json:"version,omitempty"`
	Format  int    `json:"format"`
}

// serveAnnounce answers opAnnounce: what this node announces.
func (c *Cluster) serveAnnounce(ctx context.Context) ([]byte, error) {
	if h := c.cfg.onAnnounce; h != nil {
		if err := h(ctx); err != nil {
			return nil, err
		}
	}
	v, f := c.selfAnnounced()
	return json.Marshal(announceReply{ID: c.cfg.NodeID, Version: v, Format: int(f)})
}

// asked is what the asks of one member found.
type asked struct {
	// answered: the last ask was answered, by this node's code or by a
	// release that does not know opAnnounce (which counts as "" and
	// fsm.FormatBase, as a member that announces no format in gossip).
	answered bool
	// ever: some ask was answered; version and format are the last
	// answer's, at.
	ever    bool
	version string
	format  fsm.Format
	at      time.Time
}

// askTable holds the answers, by member id.
type askTable struct {
	mu sync.Mutex
	m  map[string]asked
}

func (t *askTable) get(id string) (asked, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.m[id]
	return a, ok
}

// record keeps what the ask of id found (ok: it was answered), and
// reports whether that changes what the member counts as.
func (t *askTable) record(id string, ok bool, version string, f fsm.Format, at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]asked{}
	}
	old, had := t.m[id]
	a := old
	a.answered = ok
	if ok {
		a.ever, a.version, a.format, a.at = true, version, f, at
	}
	t.m[id] = a
	return !had || old.answered != a.answered || old.version != a.version || old.format != a.format
}

// keep forgets every member but those in ids.
func (t *askTable) keep(ids map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.m {
		if !ids[id] {
			delete(t.m, id)
		}
	}
}

// askedNow is what member id counts as from its answers: version and
// format, or why it counts as fsm.FormatBase ("down" when it answered
// once and not lately, "not seen" when it never has).
func (c *Cluster) askedNow(id string) (version string, f fsm.Format, state string) {
	a, ok := c.asked.get(id)
	switch {
	case !ok || !a.ever:
		return "", fsm.FormatBase, "not seen"
	case !a.answered || time.Since(a.at) > askFresh:
		return a.version, fsm.FormatBase, "down"
	}
	return a.version, a.format, ""
}

// askLoop runs on every node from Start until Stop: every askEvery it
// asks the members gossip does not see, and pokes the raise when an
// answer changes what a member counts as.
func (c *Cluster) askLoop() {
	defer c.observer.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.stopped
		cancel()
	}()
	t := time.NewTicker(askEvery)
	defer t.Stop()
	for {
		if c.askUnseen(ctx) {
			select {
			case c.formatCh <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// askUnseen asks, at once and each within askTimeout, every other member
// of the raft configuration that gossip has no entry for, and reports
// whether any answer changed what its member counts as.
func (c *Cluster) askUnseen(ctx context.Context) bool {
	servers, err := c.Members()
	if err != nil {
		return false
	}
	gossip := c.gossip.snapshot()
	unseen := map[string]bool{}
	var wg sync.WaitGroup
	var changed atomic.Bool
	for _, s := range servers {
		id := string(s.ID)
		if _, seen := gossip[id]; seen || id == c.cfg.NodeID {
			continue
		}
		unseen[id] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, askTimeout)
			defer cancel()
			v, f, err := c.ask(actx, s)
			if ctx.Err() != nil {
				return // stopping: the failure says nothing of the member
			}
			if c.asked.record(id, err == nil, v, f, time.Now()) {
				if err != nil {
					c.log.Debug("a member does not answer what it runs", "id", id, "error", err)
				} else {
					c.log.Debug("a member answers what it runs", "id", id, "version", v, "format", int(f))
				}
				changed.Store(true)
			}
		}()
	}
	wg.Wait()
	c.asked.keep(unseen)
	return changed.Load()
}

// errWrongNode: the node that answered at a member's address has another
// id.
var errWrongNode = errors.New("cluster: another node answers at that address")

// ask sends opAnnounce to s and reads its answer: its version and
// format, or "" and fsm.FormatBase from a release that does not know the
// op. Any other failure (no connection, a timeout, a stopping node's
// refusal, another node at the address) is an error.
//
// The asks have their own connections (forwarder.asks): a call that sees
// nothing come back before its deadline drops its connection, which
// must never be one a forwarded write is waiting on.
func (c *Cluster) ask(ctx context.Context, s raft.Server) (string, fsm.Format, error) {
	cl, err := c.fwd.asks.get(ctx, string(s.Address))
	if err != nil {
		return "", 0, err
	}
	r, err := cl.call(ctx, opAnnounce, nil)
	switch {
	case err != nil:
		return "", 0, err
	case r.class == classOther && bytes.HasPrefix(r.body, []byte(unknownOpPrefix)):
		return "", fsm.FormatBase, nil
	case r.class != classOK:
		return "", 0, classError(r, string(s.ID))
	}
	var a announceReply
	if err := json.Unmarshal(r.body, &a); err != nil {
		return "", 0, fmt.Errorf("cluster: announce reply of %s: %w", s.ID, err)
	}
	if a.ID != string(s.ID) {
		return "", 0, fmt.Errorf("%w: %s, not %s", errWrongNode, a.ID, s.ID)
	}
	return a.Version, announcedFormat(a.Format), nil
}
