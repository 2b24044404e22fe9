package cluster

import (
	"strconv"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	applyLatency  prometheus.Histogram
	applyErrors   prometheus.Counter
	leaderChanges prometheus.Counter
	forwarded     prometheus.Counter
	// forwardedReads: read-index requests this node sent while it
	// followed, each shared by the callers that joined it.
	forwardedReads prometheus.Counter
	readIndex      prometheus.Histogram
	readIndexFails prometheus.Counter
	// formatRefusals: writes the format gate refused (format.go).
	formatRefusals prometheus.Counter
}

func newMetrics(c *Cluster, reg prometheus.Registerer) *metrics {
	m := &metrics{
		applyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oidcd_raft_apply_duration_seconds",
			Help:    "Time from proposing a write to its being applied on this node.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		applyErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_raft_apply_errors_total",
			Help: "Writes that could not be committed (no leader, shutdown, timeout).",
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_raft_leadership_acquired_total",
			Help: "Times this node became leader.",
		}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_raft_forwarded_writes_total",
			Help: "Writes this node forwarded to the leader.",
		}),
		forwardedReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_raft_forwarded_read_indexes_total",
			Help: "Read-index requests this node sent to the leader while following; concurrent reads share one.",
		}),
		readIndex: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oidcd_raft_read_index_duration_seconds",
			Help:    "Time to obtain a read index and apply up to it (linearizable liveness checks).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		readIndexFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_raft_read_index_errors_total",
			Help: "Read indexes that failed (no leader reachable): answered 503.",
		}),
		formatRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_write_format_refusals_total",
			Help: "Writes refused because they need a newer state format than the cluster runs (a member still runs an older release).",
		}),
	}
	if reg == nil {
		return m
	}
	stat := func(key string) func() float64 {
		return func() float64 {
			v, _ := strconv.ParseFloat(c.raft.Stats()[key], 64)
			return v
		}
	}
	reg.MustRegister(m.applyLatency, m.applyErrors, m.leaderChanges, m.forwarded, m.forwardedReads, m.readIndex, m.readIndexFails, m.formatRefusals,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "oidcd_raft_state",
			Help: "Raft state of this node: 0 follower, 1 candidate, 2 leader, 3 shutdown.",
		}, func() float64 { return float64(c.raft.State()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "oidcd_raft_is_leader", Help: "1 while this node leads.",
		}, func() float64 {
			if c.raft.State() == raft.Leader {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oidcd_raft_term", Help: "Current raft term."}, stat("term")),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oidcd_raft_commit_index", Help: "Last committed raft index."},
			func() float64 { return float64(c.raft.CommitIndex()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oidcd_raft_applied_index", Help: "Last raft index applied to the state file."},
			func() float64 { return float64(c.fsm.Applied()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oidcd_raft_last_snapshot_index", Help: "Index of the last raft snapshot."}, stat("last_snapshot_index")),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "oidcd_raft_voter",
			Help: "1 while this node is a voter in the raft configuration, 0 as a non-voter (an edge replica) or outside it.",
		}, func() float64 {
			if c.isVoter() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "oidcd_raft_last_contact_seconds",
			Help: "Seconds since this node last heard from the leader: 0 on the leader, -1 when it never has.",
		}, func() float64 {
			_, ms := c.progress()
			if ms < 0 {
				return -1
			}
			return float64(ms) / 1000
		}),
		// Read on scrape: the configuration is an atomic load in raft
		// v1.7 and the gossip table a copy, so nothing runs between
		// scrapes.
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "oidcd_cluster_mixed_versions",
			Help: "1 while the members of the raft configuration announce different versions or state formats (a rolling upgrade under way), else 0.",
		}, func() float64 {
			if c.mixedNow() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "oidcd_state_format",
			Help: "The state format the cluster runs, as this node's state holds it.",
		}, func() float64 { return float64(c.state.StateFormat()) }),
	)
	return m
}
