package oidc

import (
	"net/url"
	"testing"

	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/testkit/promtest"
	"github.com/prometheus/client_golang/prometheus"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(c *Config) { c.Registerer = reg; c.RateLimit = "100/60s" })
	tok := bcTokens(t, h, hConfidential, hSecret)                   // issued
	bcExchange(t, h, hConfidential, hSecret, authn.NewID())         // invalid_grant
	bcExchange(t, h, hConfidential, "wrong", authn.NewID())         // invalid_client
	bcUserinfoStatus(t, h, tok.AccessToken)                         // valid
	bcUserinfoStatus(t, h, "garbage")                               // invalid
	bcIntrospect(t, h, hConfidential, hSecret, tok.AccessToken)     // active
	bcIntrospect(t, h, hOtherOrgApp, hOtherSecret, tok.AccessToken) // inactive
	bcDo(t, h, bcReq{method: "POST", path: PathRevoke, user: hConfidential, pass: hSecret, form: url.Values{"token": {tok.AccessToken}}})
	h.p.limiter, _ = newRateLimiter("1/60s", nil, h.clock.Now)
	bcExchange(t, h, hConfidential, hSecret, authn.NewID())
	bcExchange(t, h, hConfidential, hSecret, authn.NewID()) // limited

	got := bcGather(t, reg)
	for name, want := range map[string]float64{
		"oidcd_tokens_issued_total":                                   1,
		`oidcd_token_errors_total{error="invalid_grant"}`:             2,
		`oidcd_token_errors_total{error="invalid_client"}`:            1,
		`oidcd_bearer_checks_total{outcome="valid"}`:                  1,
		`oidcd_bearer_checks_total{outcome="invalid"}`:                1,
		`oidcd_introspections_total{active="true"}`:                   1,
		`oidcd_introspections_total{active="false"}`:                  1,
		"oidcd_revocations_total":                                     1,
		`oidcd_rate_limited_total{endpoint="token"}`:                  1,
		`oidcd_request_duration_seconds_count{endpoint="token"}`:      5,
		`oidcd_request_duration_seconds_count{endpoint="userinfo"}`:   2,
		`oidcd_request_duration_seconds_count{endpoint="introspect"}`: 2,
		`oidcd_request_duration_seconds_count{endpoint="revoke"}`:     1,
	} {
		if got[name] != want {
			t.Errorf("%s: got %v, want %v", name, got[name], want)
		}
	}
}

func TestNewMetricsRegistration(t *testing.T) {
	newMetrics(nil).tokensIssued.Inc() // unregistered metrics still count
	reg := prometheus.NewRegistry()
	a, b := newMetrics(reg), newMetrics(reg) // a second provider shares the collectors
	a.tokensIssued.Inc()
	b.tokensIssued.Inc()
	if got := bcGather(t, reg)["oidcd_tokens_issued_total"]; got != 2 {
		t.Errorf("oidcd_tokens_issued_total: got %v, want 2", got)
	}
}

// bcGather flattens reg into name{labels} -> value (histograms as _count).
func bcGather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	return promtest.Gather(t, reg)
}
