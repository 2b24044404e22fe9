package keys

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the signing keys' gauges for /metrics, read from the key
// set at each scrape: the published keys by state, the age of the key in
// use (what the rotation alert watches) and the rotation period in force.
func (m *Manager) Collectors() []prometheus.Collector {
	count := func(state string) func() float64 {
		return func() float64 {
			ks, err := m.List()
			if err != nil {
				return 0
			}
			c := 0
			for _, k := range ks {
				if k.State == state {
					c++
				}
			}
			return float64(c)
		}
	}
	var out []prometheus.Collector
	for _, s := range []string{"next", "active", "retired"} {
		out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "oidcd_signing_keys", Help: "Published signing keys by state (next, active, retired).",
			ConstLabels: prometheus.Labels{"state": s},
		}, count(s)))
	}
	return append(out,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oidcd_signing_key_active_age_seconds",
			Help: "Time since the signing key in use became active (0 when there is none)."}, m.activeAge),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oidcd_signing_key_rotation_period_seconds",
			Help: "The configured scheduled rotation period (--key-rotation)."},
			func() float64 { return m.cfg.RotateEvery.Seconds() }),
	)
}

// activeAge is the time since the key in use became active, in seconds
// (0 when there is none).
func (m *Manager) activeAge() float64 {
	ks, err := m.List()
	if err != nil {
		return 0
	}
	for _, k := range ks {
		if k.State == "active" {
			since := k.CreatedAt
			if k.ActivatesAt != nil {
				since = *k.ActivatesAt
			}
			return max(m.now().Sub(since).Seconds(), 0)
		}
	}
	return 0
}
