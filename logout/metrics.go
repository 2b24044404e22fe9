package logout

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/internal/promreg"

	"github.com/oidcd/oidcd/fsm"
)

// maxPendingCount caps the scan behind oidcd_backchannel_pending.
const maxPendingCount = 10000

// metrics are the back-channel metrics of one Service, all named
// oidcd_backchannel_*. Counters and the histogram move on the leader that
// recorded the outcome; the pending gauge is read from the replicated
// state, so every node reports the same backlog.
type metrics struct {
	sent      prometheus.Counter
	retries   prometheus.Counter
	abandoned prometheus.Counter
	latency   prometheus.Histogram
}

// newMetrics builds the metrics and registers them on reg; with a nil reg
// they count but are not exported. A collector that reg already holds (a
// second Service on the same registry) is shared.
func newMetrics(reg prometheus.Registerer, st *fsm.State) (*metrics, error) {
	m := &metrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_backchannel_sent_total", Help: "Back-channel logout tokens a receiver accepted (2xx).",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_backchannel_retries_total", Help: "Failed back-channel delivery attempts that were scheduled for a retry.",
		}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_backchannel_abandoned_total", Help: "Back-channel deliveries given up after the last attempt failed.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oidcd_backchannel_delivery_seconds",
			Help:    "Time from the logout that created a delivery to its acceptance by the receiver.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
	}
	if reg == nil {
		return m, nil
	}
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "oidcd_backchannel_pending",
		Help: "Back-channel deliveries still owed (capped at 10000).",
	}, func() float64 {
		ds, err := st.PendingDeliveries(maxPendingCount)
		if err != nil {
			return 0
		}
		return float64(len(ds))
	})
	var err error
	if m.sent, err = promreg.Register(reg, m.sent); err != nil {
		return nil, err
	}
	if m.retries, err = promreg.Register(reg, m.retries); err != nil {
		return nil, err
	}
	if m.abandoned, err = promreg.Register(reg, m.abandoned); err != nil {
		return nil, err
	}
	if m.latency, err = promreg.Register(reg, m.latency); err != nil {
		return nil, err
	}
	if _, err = promreg.Register(reg, pending); err != nil {
		return nil, err
	}
	return m, nil
}
