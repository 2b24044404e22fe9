package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/cluster"
)

// Catching up the audit trail (fsm/DESIGN.md, "The audit trail", from
// format 3). A node that installed a snapshot lacks the events its
// sender had already moved into its own trail (fsm.FSM.TrailGap); this
// loop fetches them from a peer (cluster.FetchTrail) into the state
// machine (fsm.FSM.ImportTrail, which verifies the chain). It looks
// after every restore (onApply wakes it) and every trailCheckEvery, and
// retries a failed fetch with backoff. Meanwhile /readyz?verbose says
// what is missing, without making the node unready: sign-ins need the
// state, not the older events of the trail.

const (
	// trailCheckEvery is how often the loop looks for a gap unwoken.
	trailCheckEvery = 5 * time.Second
	// trailRetryMin and trailRetryMax bound the wait after a failed
	// fetch, doubled each time.
	trailRetryMin = 500 * time.Millisecond
	trailRetryMax = time.Minute
	// trailWarnEvery: a failing gap logs a warning at most this often.
	trailWarnEvery = time.Minute
)

// trailCatchUp is the loop's state.
type trailCatchUp struct {
	wake     chan struct{}
	done     chan struct{}
	restores atomic.Uint64 // fsm.Restores() when onApply last looked

	mu      sync.Mutex
	lastErr string // the last fetch's error, "" when it succeeded
}

// initTrail makes the loop's state and registers its gauge.
func (n *Node) initTrail() {
	n.trail = &trailCatchUp{wake: make(chan struct{}, 1), done: make(chan struct{})}
	n.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "oidcd_audit_trail_missing_events",
		Help: "Audit events this node's trail lacks after a snapshot was installed, being fetched from a peer (0: complete).",
	}, func() float64 {
		from, to, ok := n.fsm.TrailGap()
		if !ok {
			return 0
		}
		return float64(to - from + 1)
	}))
}

// trailApplied runs in onApply: a restore wakes the loop.
func (n *Node) trailApplied() {
	if n.trail == nil {
		return
	}
	if r := n.fsm.Restores(); n.trail.restores.Swap(r) != r {
		select {
		case n.trail.wake <- struct{}{}:
		default:
		}
	}
}

func (t *trailCatchUp) setErr(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastErr = ""
	if err != nil {
		t.lastErr = err.Error()
	}
}

// trailReadiness is the line /readyz?verbose shows of the trail.
func (n *Node) trailReadiness() string {
	st := n.fsm.TrailStatus()
	if !st.Gap {
		return "audit trail: complete"
	}
	s := fmt.Sprintf("audit trail: catching up, missing seq %d to %d", st.GapFrom, st.GapTo)
	if n.trail != nil {
		n.trail.mu.Lock()
		if e := n.trail.lastErr; e != "" {
			s += "; the last fetch failed: " + e
		}
		n.trail.mu.Unlock()
	}
	return s
}

// trailLoop runs from Start until Close.
func (n *Node) trailLoop() {
	t := n.trail
	defer close(t.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.closing:
		case <-t.done:
		}
		cancel()
	}()
	tick := time.NewTicker(trailCheckEvery)
	defer tick.Stop()
	var (
		curFrom, curTo uint64
		started        time.Time
		failures       int
		lastWarn       time.Time
		retry          time.Duration
	)
	for {
		wait := (<-chan time.Time)(tick.C)
		if from, to, ok := n.fsm.TrailGap(); !ok {
			curFrom, curTo, retry = 0, 0, 0
		} else {
			if from != curFrom || to != curTo {
				curFrom, curTo, started, failures, lastWarn = from, to, time.Now(), 0, time.Time{}
				n.log.Info("audit trail: fetching the events this node lacks from a peer", "from", from, "to", to)
			}
			if g := n.cfg.trailGate; g != nil {
				select {
				case <-g:
				case <-n.closing:
					return
				}
			}
			err := n.cluster.FetchTrail(ctx, from, to, n.fsm.ImportTrail)
			if ctx.Err() != nil {
				return
			}
			t.setErr(err)
			if err == nil {
				took := time.Since(started)
				n.log.Info("audit trail: caught up", "from", from, "to", to, "events", to-from+1,
					"took", took.Round(time.Millisecond), "failures", failures)
				curFrom, curTo, retry = 0, 0, 0
				continue // look again at once: a restore meanwhile
			}
			failures++
			if errors.Is(err, cluster.ErrNoTrailPeer) {
				retry = trailCheckEvery // a single node: no peer to ask yet
			} else {
				retry = min(max(2*retry, trailRetryMin), trailRetryMax)
			}
			if time.Since(lastWarn) >= trailWarnEvery {
				lastWarn = time.Now()
				n.log.Warn("audit trail: fetching the missing events failed; retrying", "from", from, "to", to,
					"failures", failures, "retry_in", retry, "error", err)
			}
			timer := time.NewTimer(retry)
			wait = timer.C
			select {
			case <-n.closing:
				timer.Stop()
				return
			case <-wait:
			}
			continue
		}
		select {
		case <-n.closing:
			return
		case <-t.wake:
		case <-wait:
		}
	}
}
