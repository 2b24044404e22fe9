package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
)

// auditVerifyEvery is how often each node verifies its own copy of the
// audit trail (an altered state file shows up in
// oidcd_audit_verify_failures_total without anyone asking).
const auditVerifyEvery = time.Hour

// auditMetrics are the trail's metrics; docs/metrics.md lists them.
type auditMetrics struct {
	events         *prometheus.CounterVec
	verifyFailures prometheus.Counter
}

// initAudit registers the trail's metrics and counts the events each
// apply records. Called before raft starts, so a replayed log counts too.
func (n *Node) initAudit() {
	m := &auditMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_audit_events_total", Help: "Audit events this node's state machine recorded, by type.",
		}, []string{"type"}),
		verifyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_audit_verify_failures_total", Help: "Verifications of this node's audit trail that found it broken.",
		}),
	}
	stats := func(pick func(fsm.AuditStats) float64) func() float64 {
		return func() float64 {
			st, err := n.fsm.State().AuditStats()
			if err != nil {
				return 0
			}
			return pick(st)
		}
	}
	n.registry.MustRegister(m.events, m.verifyFailures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oidcd_audit_events", Help: "Audit events kept (after --audit-retention)."},
			stats(func(st fsm.AuditStats) float64 { return float64(st.Events) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oidcd_audit_bytes", Help: "Bytes of the state file's pages that hold the audit trail and its index."},
			stats(func(st fsm.AuditStats) float64 { return float64(st.Bytes) })),
	)
	n.audit = m
	n.fsm.OnAudit = func(types []string) {
		for _, t := range types {
			m.events.WithLabelValues(t).Inc()
		}
	}
}

// auditVerified counts a verification's verdict.
func (n *Node) auditVerified(ok bool) {
	if !ok {
		n.audit.verifyFailures.Inc()
	}
}

// auditVerifyLoop verifies this node's trail every auditVerifyEvery until
// the node closes.
func (n *Node) auditVerifyLoop() {
	t := time.NewTicker(auditVerifyEvery)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
		}
		v, err := n.fsm.State().VerifyAudit()
		if err != nil {
			n.log.Warn("audit: verify", "error", err)
			continue
		}
		if !v.OK {
			n.log.Error("audit: this node's trail does not verify", "broken_at", *v.BrokenAt, "reason", v.Reason)
		}
		n.auditVerified(v.OK)
	}
}
