package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRegister: an equal collector registered twice is the first one
// (both count into it); a different metric under the same name is
// refused, and MustRegister panics on it.
func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "oidcd_test_total", Help: "A test counter."}
	first, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil || second != first {
		t.Fatalf("second registration: %v, same collector %v", err, second == first)
	}
	second.Inc()
	mfs, _ := reg.Gather()
	if len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Errorf("gathered %v, want one counter at 1", mfs)
	}
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "oidcd_test_total", Help: "Something else."})
	if _, err := Register(reg, other); err == nil {
		t.Error("a different metric under the same name: registered")
	}
	defer func() {
		if recover() == nil {
			t.Error("MustRegister of a different metric under the same name did not panic")
		}
	}()
	MustRegister(reg, other)
}
