package signin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/internal/promreg"
)

// metrics are the sign-in metrics, all named oidcd_* (the names they had
// when the sign-in was part of package oidc: dashboards keep working).
type metrics struct {
	lockouts prometheus.Counter     // throttle keys locked by a failure
	guesses  *prometheus.CounterVec // passwords and codes evaluated, by kind
	signIns  *prometheus.CounterVec // completed authentications, by method (amr value)
	rehashes *prometheus.CounterVec // stored hashes replaced after a sign-in, by the scheme replaced
}

// newMetrics builds the metrics and registers them on reg; with a nil reg
// they count but are not exported. A collector that reg already holds (a
// second Signin on the same registry) is shared rather than a panic.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		lockouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oidcd_lockouts_total", Help: "Accounts, IP addresses or phone numbers locked after too many failures.",
		}),
		guesses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_credential_checks_total", Help: "Passwords and codes evaluated (after the throttle let them through), by kind (password, code).",
		}, []string{"kind"}),
		signIns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_authentications_total", Help: "Successful authentications by method (pwd, sms, otp, hwk, rcv).",
		}, []string{"method"}),
		rehashes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_password_rehashes_total", Help: "Password hashes replaced by the node's argon2id at a sign-in, by the scheme replaced (bcrypt, pbkdf2-sha256, pbkdf2-sha512, argon2id of lower cost).",
		}, []string{"scheme"}),
	}
	if reg != nil {
		m.rehashes = promreg.MustRegister(reg, m.rehashes)
		m.lockouts = promreg.MustRegister(reg, m.lockouts)
		m.guesses = promreg.MustRegister(reg, m.guesses)
		m.signIns = promreg.MustRegister(reg, m.signIns)
	}
	return m
}
