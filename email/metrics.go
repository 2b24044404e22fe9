package email

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/promreg"
)

// metrics are the outbox's metrics, all named oidcd_email_*. Counters and
// the histogram move on the leader that recorded the outcome; the queue's
// gauges are read from the replicated state at scrape time, so every node
// reports the same queue.
type metrics struct {
	sent     prometheus.Counter
	failed   prometheus.Counter
	attempts *prometheus.CounterVec
	latency  prometheus.Histogram
}

// newMetrics builds the metrics and registers them on reg; with a nil reg
// they count but are not exported. A collector that reg already holds is
// shared.
func newMetrics(reg prometheus.Registerer, st *fsm.State, now func() time.Time) (*metrics, error) {
	m := &metrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_email_sent_total", Help: "Messages every configured destination (relay, outbox file) accepted.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_email_failed_total", Help: "Messages given up: a permanent error, a body that does not open, or a day of temporary errors.",
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_email_attempts_total", Help: "Delivery attempts recorded, by result: sent, retry or failed.",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oidcd_email_delivery_seconds",
			Help:    "Time from the commit of a message to its acceptance by every destination.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600},
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.sent, err = promreg.Register(reg, m.sent); err != nil {
		return nil, err
	}
	if m.failed, err = promreg.Register(reg, m.failed); err != nil {
		return nil, err
	}
	if m.attempts, err = promreg.Register(reg, m.attempts); err != nil {
		return nil, err
	}
	if m.latency, err = promreg.Register(reg, m.latency); err != nil {
		return nil, err
	}
	if _, err = promreg.Register(reg, &queue{st: st, now: now}); err != nil {
		return nil, err
	}
	return m, nil
}

var (
	queuedDesc = prometheus.NewDesc("oidcd_email_queued",
		"Messages committed and not yet sent or failed (the replicated outbox's pending messages).", nil, nil)
	oldestDesc = prometheus.NewDesc("oidcd_email_oldest_queued_age_seconds",
		"Age of the oldest message still queued; 0 when none is.", nil, nil)
)

// queue reports the outbox's gauges from one read of the state a scrape
// (fsm.State.EmailStats).
type queue struct {
	st  *fsm.State
	now func() time.Time
}

func (q *queue) Describe(ch chan<- *prometheus.Desc) {
	ch <- queuedDesc
	ch <- oldestDesc
}

func (q *queue) Collect(ch chan<- prometheus.Metric) {
	st, err := q.st.EmailStats()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queuedDesc, err)
		return
	}
	age := 0.0
	if !st.OldestPending.IsZero() {
		age = max(q.now().Sub(st.OldestPending).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
}
