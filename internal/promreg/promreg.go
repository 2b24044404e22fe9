// Package promreg registers Prometheus collectors that several parts of
// one process may each create: a second registration of an equal
// collector (the same name, labels and help) hands back the one already
// registered, so both parts count into it, while two different metrics
// under one name stay an error.
//
// It is a leaf helper: it imports nothing of ours.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg, or returns the equal collector reg
// already holds. Any other refusal is returned with c.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
		return c, nil
	case errors.As(err, &are):
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// MustRegister is Register for collectors whose names are constants of
// the program: a refusal is a programming error, and panics.
func MustRegister[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	c, err := Register(reg, c)
	if err != nil {
		panic(err)
	}
	return c
}
