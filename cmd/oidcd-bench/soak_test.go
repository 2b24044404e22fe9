package main

import (
	"testing"
	"time"
)

// TestFiguresMedians: the growth of a soak figure is taken between the
// medians of the samples around the mark and before the end, so that one
// sample caught on an argon2id block does not decide it; without the
// medians it is the single samples'.
func TestFiguresMedians(t *testing.T) {
	s := func(sec int, v int64) timed { return timed{time.Duration(sec) * time.Second, v} }
	cases := []struct {
		name       string
		samples    []timed
		mark, end  time.Duration
		markMedian int64
		endMedian  int64
		growth     float64
	}{
		{name: "flat, one spike at the end",
			samples: []timed{s(100, 100), s(110, 102), s(120, 98), s(130, 100), s(140, 101), s(580, 100), s(590, 99), s(600, 160)},
			mark:    120 * time.Second, end: 600 * time.Second, markMedian: 100, endMedian: 100, growth: 0},
		{name: "a real climb",
			samples: []timed{s(110, 100), s(120, 100), s(130, 100), s(580, 150), s(590, 150), s(600, 150)},
			mark:    120 * time.Second, end: 600 * time.Second, markMedian: 100, endMedian: 150, growth: 0.5},
		{name: "no mark: single samples",
			samples: []timed{s(1, 100), s(2, 150)},
			end:     2 * time.Second, endMedian: 150, growth: 0.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &figures{Start: 100, End: c.samples[len(c.samples)-1].v, samples: c.samples}
			if c.mark > 0 {
				f.Mark = 100
			}
			f.medians(c.mark, c.end)
			if f.MarkMedian != c.markMedian || f.EndMedian != c.endMedian {
				t.Fatalf("medians %d and %d, want %d and %d", f.MarkMedian, f.EndMedian, c.markMedian, c.endMedian)
			}
			if g := f.growth(); g != c.growth {
				t.Fatalf("growth %v, want %v", g, c.growth)
			}
		})
	}
}
