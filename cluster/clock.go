package cluster

import (
	"encoding/binary"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// Clock drift between nodes, measured on gossip's own probes (like etcd's
// clock-drift warning): every ack a peer sends carries its clock
// (PingDelegate.AckPayload), and the prober estimates the offset as the
// peer's reading minus its own clock half a round trip before the ack
// arrived. The node's skew is its distance from the median of every
// node's clock (itself included): one node with a wrong clock is far from
// the median, the others are not, whichever of them leads.
//
// Decisions with an expiry (codes, sessions, tokens, lockouts, rate
// windows) are made with the time the proposing node stamps into its
// command, and checked against the clock of the node that serves the next
// request. A node whose clock is far off would refuse codes the others
// issued, or accept what has expired: past MaxClockSkew it reports not
// ready (/readyz), so the load balancer sends it nothing, and a leader
// that far off pauses its time-based loops (ClockSkewed).

// Bounds of the drift: a warning past WarnClockSkew, not ready past
// MaxClockSkew.
const (
	WarnClockSkew = time.Second
	MaxClockSkew  = 30 * time.Second
	// offsetTTL: an offset older than this (a peer gone quiet) no longer
	// counts.
	offsetTTL = time.Minute
)

// clock tracks the offsets of the peers' clocks.
type clock struct {
	now     func() time.Time
	log     *slog.Logger
	mu      sync.Mutex
	offsets map[string]offsetReading
	warned  time.Time
	gauge   *prometheus.GaugeVec
	skew    prometheus.Gauge
}

type offsetReading struct {
	offset time.Duration
	at     time.Time
}

func newClock(now func() time.Time, reg prometheus.Registerer, log *slog.Logger) *clock {
	c := &clock{now: now, log: log, offsets: map[string]offsetReading{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "oidcd_clock_offset_seconds", Help: "A peer's clock minus this node's, estimated from gossip probes.",
		}, []string{"peer"}),
		skew: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oidcd_clock_skew_seconds", Help: "This node's clock minus the median of the cluster's clocks (this node's included); not ready past 30 s.",
		}),
	}
	if reg != nil {
		reg.MustRegister(c.gauge, c.skew)
	}
	return c
}

var _ memberlist.PingDelegate = (*gossiper)(nil)

// AckPayload is this node's clock, sent with every ack.
func (g *gossiper) AckPayload() []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(g.c.clock.now().UnixNano())) // #nosec G115 -- a wall clock after 1970
}

// NotifyPingComplete records the offset a probe's ack shows.
func (g *gossiper) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	if len(payload) != 8 || other == nil {
		return
	}
	theirs := time.Unix(0, int64(binary.BigEndian.Uint64(payload))) // #nosec G115 -- round trip of AckPayload
	g.c.clock.observe(other.Name, theirs.Sub(g.c.clock.now().Add(-rtt/2)))
}

func (c *clock) observe(peer string, offset time.Duration) {
	c.mu.Lock()
	c.offsets[peer] = offsetReading{offset: offset, at: time.Now()}
	c.mu.Unlock()
	c.gauge.WithLabelValues(peer).Set(offset.Seconds())
	skew := c.Skew()
	c.skew.Set(skew.Seconds())
	if abs(skew) <= WarnClockSkew {
		return
	}
	c.mu.Lock()
	warn := time.Since(c.warned) > time.Minute
	if warn {
		c.warned = time.Now()
	}
	c.mu.Unlock()
	if warn {
		c.log.Warn("this node's clock differs from the cluster's", "skew", skew.Round(time.Millisecond),
			"not_ready_past", MaxClockSkew, "fix", "synchronise the clock (NTP)")
	}
}

// Skew is this node's clock minus the median of the cluster's (its own
// included), from the peers heard of in the last minute; 0 with fewer
// than two peers, where a median cannot tell which clock is wrong.
func (c *clock) Skew() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	clocks := []time.Duration{0}
	for peer, r := range c.offsets {
		if time.Since(r.at) > offsetTTL {
			delete(c.offsets, peer)
			continue
		}
		clocks = append(clocks, r.offset)
	}
	if len(clocks) < 3 {
		return 0
	}
	sort.Slice(clocks, func(i, j int) bool { return clocks[i] < clocks[j] })
	return -clocks[len(clocks)/2] // the peers' offsets are theirs minus ours
}

// ClockSkew is this node's clock minus the median of the cluster's clocks
// (see clock.go); 0 for a node without gossip or with fewer than two
// peers.
func (c *Cluster) ClockSkew() time.Duration {
	if c.clock == nil {
		return 0
	}
	return c.clock.Skew()
}

// ClockSkewed reports whether this node's clock is further than
// MaxClockSkew from the cluster's.
func (c *Cluster) ClockSkewed() bool { return abs(c.ClockSkew()) > MaxClockSkew }

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
