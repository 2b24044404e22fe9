package signin

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkForgotKnownUnknown: the forgotten-password page's answer time
// for a known address (a link and a message committed) and an unknown one
// (the limits counted, a message composed, sealed and dropped), posted
// alternately through the real pages in one run; the ratio of their
// medians is what an attacker timing the page would see. "floor=off" is
// the work alone, "floor=on" the page as it answers in production (every
// answer waits for answerFloor).
//
//	go test -run '^$' -bench ForgotKnownUnknown -benchtime 40x ./signin/
func BenchmarkForgotKnownUnknown(b *testing.B) {
	for _, floor := range []bool{false, true} {
		name := "floor=off"
		if floor {
			name = "floor=on"
		}
		b.Run(name, func(b *testing.B) {
			h := newMailHarness(b)
			if floor {
				h.p.floor = answerFloor
			}
			br := h.browser()
			post := func(address string) time.Duration {
				f := onlyPostForm(b, br.get(PathForgot))
				start := time.Now()
				p := br.fill(f, map[string]string{"email": address})
				d := time.Since(start)
				if p.status != http.StatusOK {
					b.Fatalf("%s: %d", address, p.status)
				}
				return d
			}
			post(hEmail) // warm up
			post("nobody@example.com")
			var known, unknown []time.Duration
			b.ResetTimer()
			for range b.N {
				h.clock.Add(25 * time.Hour) // past every limit's window, a day's too
				known = append(known, post(hEmail))
				unknown = append(unknown, post("nobody@example.com"))
			}
			b.StopTimer()
			median := func(ds []time.Duration) time.Duration {
				slices.Sort(ds)
				return ds[len(ds)/2]
			}
			k, u := median(known), median(unknown)
			b.ReportMetric(float64(k.Microseconds())/1000, "known-ms")
			b.ReportMetric(float64(u.Microseconds())/1000, "unknown-ms")
			b.ReportMetric(float64(u)/float64(k), "unknown/known")
		})
	}
}
