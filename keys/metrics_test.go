package keys

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/internal/testkit/promtest"
)

// TestCollectorsReadTheKeySet: the gauges follow the key set at each
// scrape: no key at first, then one active key whose age grows with the
// clock, then a next key beside it after a manual rotation, with the
// rotation period in force.
func TestCollectorsReadTheKeySet(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	m := newManager(t, a, c, func(cfg *Config) { cfg.RotateEvery = 48 * time.Hour })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collectors()...)
	for _, step := range []struct {
		name             string
		do               func() error
		age, active, nxt float64
	}{
		{"empty", func() error { return nil }, 0, 0, 0},
		{"one key, 90 minutes on", func() error {
			err := m.Tick(context.Background())
			c.Advance(90 * time.Minute)
			return err
		}, 5400, 1, 0},
		{"rotated", func() error { _, err := m.Rotate(context.Background(), false); return err }, 5400, 1, 1},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := promtest.Gather(t, reg)
		want := map[string]float64{
			"oidcd_signing_key_active_age_seconds":      step.age,
			"oidcd_signing_key_rotation_period_seconds": 48 * 3600,
			`oidcd_signing_keys{state="active"}`:        step.active,
			`oidcd_signing_keys{state="next"}`:          step.nxt,
			`oidcd_signing_keys{state="retired"}`:       0,
		}
		if len(got) != len(want) {
			t.Errorf("%s: gauges %v, want %v", step.name, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", step.name, k, got[k], v)
			}
		}
	}
}
