package oidc

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/internal/promreg"
)

// metrics are the protocol metrics of one provider, all named oidcd_*
// (the sign-in's are package signin's).
type metrics struct {
	tokensIssued   prometheus.Counter       // successful code exchanges
	tokenErrors    *prometheus.CounterVec   // token endpoint errors, by OAuth error code
	bearerChecks   *prometheus.CounterVec   // userinfo, memberships, introspection: valid, invalid, error
	introspections *prometheus.CounterVec   // by active ("true", "false")
	revocations    prometheus.Counter       // tokens actually revoked
	rateLimited    *prometheus.CounterVec   // 429 answers, by endpoint
	latency        *prometheus.HistogramVec // handler time, by endpoint
}

// Bearer check outcomes.
const (
	bearerValid   = "valid"
	bearerInvalid = "invalid"
	bearerError   = "error" // the store could not be read
)

// newMetrics builds the metrics and registers them on reg; with a nil reg
// they count but are not exported. A collector that reg already holds (a
// second provider on the same registry) is shared rather than a panic.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		tokensIssued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_tokens_issued_total", Help: "Authorization codes exchanged for tokens.",
		}),
		tokenErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_token_errors_total", Help: "Token endpoint errors by OAuth error code.",
		}, []string{"error"}),
		bearerChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_bearer_checks_total", Help: "Access-token checks by outcome (valid, invalid, error).",
		}, []string{"outcome"}),
		introspections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_introspections_total", Help: "Introspection answers by active.",
		}, []string{"active"}),
		revocations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_revocations_total", Help: "Access tokens revoked at the revocation endpoint.",
		}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_rate_limited_total", Help: "Requests refused by the rate limit, by endpoint.",
		}, []string{"endpoint"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oidcd_request_duration_seconds",
			Help:    "Time to answer a protocol request, by endpoint.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"endpoint"}),
	}
	if reg != nil {
		m.tokensIssued = promreg.MustRegister(reg, m.tokensIssued)
		m.tokenErrors = promreg.MustRegister(reg, m.tokenErrors)
		m.bearerChecks = promreg.MustRegister(reg, m.bearerChecks)
		m.introspections = promreg.MustRegister(reg, m.introspections)
		m.revocations = promreg.MustRegister(reg, m.revocations)
		m.rateLimited = promreg.MustRegister(reg, m.rateLimited)
		m.latency = promreg.MustRegister(reg, m.latency)
	}
	return m
}

// observe wraps h to record its latency under endpoint.
func (m *metrics) observe(endpoint string, h http.Handler) http.Handler {
	obs := m.latency.WithLabelValues(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		obs.Observe(time.Since(start).Seconds())
	})
}
