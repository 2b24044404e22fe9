package node

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The state file's disk is full: the state machine waits and retries the
// commit (fsm.FSM.ApplyBatch) instead of crashing, writes time out (503),
// and reads, discovery and the JWKS go on. These are the metric and the
// log line an operator sees meanwhile.

type diskFullState struct {
	blocked prometheus.Gauge
	since   atomic.Int64 // UnixNano of the first refused commit, 0 when none
	logged  atomic.Int64 // UnixNano of the last warning
}

func (n *Node) initDiskFull() {
	n.diskFull.blocked = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "oidcd_state_writes_blocked",
		Help: "1 while the state file cannot be written for want of disk space: writes wait (and time out with 503) until space returns.",
	})
	n.registry.MustRegister(n.diskFull.blocked)
}

// onDiskFull runs on the state machine's goroutine: it must not block.
func (n *Node) onDiskFull(full bool, err error) {
	d := &n.diskFull
	now := time.Now()
	if !full {
		since := time.Unix(0, d.since.Swap(0))
		d.blocked.Set(0)
		n.log.Warn("disk space is back: the state file is written again", "blocked_for", now.Sub(since).Round(time.Millisecond))
		return
	}
	d.since.CompareAndSwap(0, now.UnixNano())
	d.blocked.Set(1)
	if last := d.logged.Load(); now.UnixNano()-last > int64(30*time.Second) && d.logged.CompareAndSwap(last, now.UnixNano()) {
		n.log.Error("the data directory's disk is full: writes wait until space returns (reads, discovery and the JWKS go on)",
			"data_dir", n.cfg.DataDir, "err", err)
	}
}
