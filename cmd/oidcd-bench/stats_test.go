package main

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBucketsCoverEveryValueOnce(t *testing.T) {
	// Every value falls in a bucket whose range holds it, and buckets are
	// contiguous: the bucket after i starts right after bucketHigh(i).
	for _, v := range []uint64{0, 1, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<20 + 12345, 1<<63 - 1, 1 << 63, ^uint64(0)} {
		i := bucketOf(v)
		if i < 0 || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d, outside [0, %d)", v, i, numBuckets)
		}
		if high := bucketHigh(i); high < v {
			t.Errorf("bucketHigh(bucketOf(%d)) = %d, below the value", v, high)
		}
		if i > 0 && bucketHigh(i-1) >= v {
			t.Errorf("value %d also fits bucket %d (high %d)", v, i-1, bucketHigh(i-1))
		}
	}
	for i := 1; i < numBuckets; i++ {
		if got, want := bucketOf(bucketHigh(i-1)+1), i; got != want {
			t.Fatalf("bucketOf(bucketHigh(%d)+1) = %d, want %d", i-1, got, want)
		}
	}
}

func TestPercentileExactBelow256us(t *testing.T) {
	us := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Microsecond)
		}
		return out
	}
	cases := []struct {
		name   string
		values []time.Duration
		q      float64
		want   uint64
	}{
		{"empty", nil, 0.5, 0},
		{"one value", us(42), 0.5, 42},
		{"one value p99", us(42), 0.99, 42},
		{"p50 of 1..10 is the 5th", us(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.5, 5},
		{"p90 of 1..10 is the 9th", us(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 0.9, 9},
		{"p99 of 1..10 is the max", us(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10},
		{"p100 is the max", us(3, 200, 7), 1, 200},
		{"nearest rank rounds up", us(1, 2, 3), 0.5, 2},
		{"duplicates", us(5, 5, 5, 5, 100), 0.8, 5},
		{"sub-microsecond counts as 0", []time.Duration{100, 200, 900}, 0.5, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h histogram
			for _, v := range c.values {
				h.record(v)
			}
			if got := h.percentile(c.q); got != c.want {
				t.Errorf("percentile(%v) = %d µs, want %d", c.q, got, c.want)
			}
		})
	}
}

func TestPercentileWithinOnePercentOfExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h, a, b histogram
	var values []uint64
	for i := 0; i < 20000; i++ {
		// Log-uniform from 1 µs to ~17 s, like real latencies spread.
		v := uint64(1) << rng.IntN(24)
		v += rng.Uint64N(v)
		values = append(values, v)
		h.record(time.Duration(v) * time.Microsecond)
		if i%2 == 0 { // two workers' halves, merged
			a.record(time.Duration(v) * time.Microsecond)
		} else {
			b.record(time.Duration(v) * time.Microsecond)
		}
	}
	a.merge(&b)
	slices.Sort(values)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		want := exactPercentile(values, q)
		for name, hh := range map[string]*histogram{"single": &h, "merged": &a} {
			got := hh.percentile(q)
			if got < want || float64(got) > float64(want)*(1+1.0/subCount) {
				t.Errorf("%s: percentile(%v) = %d, want %d (at most %.1f %% above)", name, q, got, want, 100.0/subCount)
			}
		}
	}
	if h.max != values[len(values)-1] || a.max != h.max {
		t.Errorf("max = %d (merged %d), want %d", h.max, a.max, values[len(values)-1])
	}
	if a.n != h.n || a.sum != h.sum {
		t.Errorf("merged n, sum = %d, %d; want %d, %d", a.n, a.sum, h.n, h.sum)
	}
}

func TestRecorderStats(t *testing.T) {
	r := newRecorder()
	for i := 1; i <= 100; i++ {
		r.ok(time.Duration(i) * time.Millisecond)
	}
	r.fail("400 invalid_grant", "first")
	r.fail("400 invalid_grant", "second")
	r.fail("timeout", "slow")
	s := r.stats(2 * time.Second)
	if s.Ops != 100 || s.OpsPerS != 50 {
		t.Errorf("ops, ops/s = %d, %v; want 100, 50", s.Ops, s.OpsPerS)
	}
	within := func(got, want float64) bool { return got >= want && got <= want*1.01 }
	if !within(s.Latency.P50, 50) || !within(s.Latency.P90, 90) || !within(s.Latency.P99, 99) || s.Latency.Max != 100 {
		t.Errorf("latency = %+v, want p50 50, p90 90, p99 99, max 100 (ms, +1 %%)", s.Latency)
	}
	if s.Latency.Mean != 50.5 {
		t.Errorf("mean = %v, want 50.5", s.Latency.Mean)
	}
	if s.Errors["400 invalid_grant"] != 2 || s.Errors["timeout"] != 1 || len(s.Errors) != 2 {
		t.Errorf("errors = %v", s.Errors)
	}
	samples := r.sampleErrors()
	if len(samples) != 2 || samples[0] != [2]string{"400 invalid_grant", "first"} {
		t.Errorf("samples = %v, want the first message of each kind, sorted", samples)
	}
}

func TestReportTable(t *testing.T) {
	r := newRecorder()
	r.ok(3 * time.Millisecond)
	r.fail("503 temporarily_unavailable", "busy")
	rep := &report{Scenario: "userinfo", Targets: []string{"http://127.0.0.1:1"}, Concurrency: 2, DurationS: 1,
		stats: r.stats(time.Second), samples: r.sampleErrors()}
	var b strings.Builder
	if err := rep.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"operation", "userinfo", "3.000", "503 temporarily_unavailable", "busy"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
