package promtest

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestGather(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"b", "a"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "g"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("2", "1").Add(3)
	g.Set(7)
	h.Observe(0.1)
	h.Observe(0.2)
	want := map[string]float64{`c_total{a="1",b="2"}`: 3, "g": 7, "h_seconds_count": 2}
	if got := Gather(t, reg); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
