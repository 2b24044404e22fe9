package main

import (
	"math"
	"math/bits"
	"sort"
	"sync"
	"time"
)

// histogram counts latencies in microseconds in log-linear buckets, like
// HdrHistogram with two significant digits: values below 256 µs are exact,
// above that each power of two is split into 128 buckets, so a reported
// percentile is at most 1/128 (0.8 %) above the true one. Its size is
// fixed whatever the run length, which a soak of hours needs.
type histogram struct {
	counts [numBuckets]uint64
	n      uint64
	sum    uint64 // µs
	max    uint64 // µs, exact
}

const (
	subBits    = 7
	subCount   = 1 << subBits // buckets per power of two
	numBuckets = 2*subCount + (64-subBits-1)*subCount
)

// bucketOf returns the bucket of v.
func bucketOf(v uint64) int {
	if v < 2*subCount {
		return int(v)
	}
	s := bits.Len64(v) - subBits - 1 // v>>s is in [subCount, 2*subCount)
	return 2*subCount + (s-1)*subCount + int(v>>s) - subCount
}

// bucketHigh returns the highest value that falls in bucket i.
func bucketHigh(i int) uint64 {
	if i < 2*subCount {
		return uint64(i)
	}
	k := i - 2*subCount
	s := k/subCount + 1
	low := uint64(k%subCount+subCount) << s
	return low + (uint64(1) << s) - 1
}

func (h *histogram) record(d time.Duration) {
	v := uint64(max(d.Microseconds(), 0))
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += v
	h.max = max(h.max, v)
}

// merge adds o into h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// percentile returns the nearest-rank q-quantile (0 < q <= 1) in µs: the
// smallest recorded value v such that at least ceil(q*n) values are <= v,
// rounded up to its bucket's highest value and never above the maximum.
// An empty histogram answers 0.
func (h *histogram) percentile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketHigh(i), h.max)
		}
	}
	return h.max
}

// exactPercentile is the nearest-rank q-quantile of sorted values; the
// reference the histogram is tested against.
func exactPercentile(sorted []uint64, q float64) uint64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// recorder collects the outcome of operations from every worker.
type recorder struct {
	mu      sync.Mutex
	hist    histogram
	errors  map[string]uint64
	samples map[string]string // the first message of each kind, for stderr
}

func newRecorder() *recorder {
	return &recorder{errors: map[string]uint64{}, samples: map[string]string{}}
}

func (r *recorder) ok(d time.Duration) {
	r.mu.Lock()
	r.hist.record(d)
	r.mu.Unlock()
}

func (r *recorder) fail(kind, msg string) {
	r.mu.Lock()
	r.errors[kind]++
	if _, ok := r.samples[kind]; !ok {
		r.samples[kind] = msg
	}
	r.mu.Unlock()
}

// counts returns the successes and errors so far.
func (r *recorder) counts() (ops, errs uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.errors {
		errs += n
	}
	return r.hist.n, errs
}

// stats summarizes the recorder over elapsed.
func (r *recorder) stats(elapsed time.Duration) stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := func(us uint64) float64 { return math.Round(float64(us)) / 1000 }
	s := stats{Ops: r.hist.n, Errors: map[string]uint64{}}
	if secs := elapsed.Seconds(); secs > 0 {
		s.OpsPerS = math.Round(float64(r.hist.n)/secs*10) / 10
	}
	s.Latency = latency{
		P50: ms(r.hist.percentile(0.50)), P90: ms(r.hist.percentile(0.90)),
		P99: ms(r.hist.percentile(0.99)), Max: ms(r.hist.max),
	}
	if r.hist.n > 0 {
		s.Latency.Mean = math.Round(float64(r.hist.sum)/float64(r.hist.n)) / 1000
	}
	for k, n := range r.errors {
		s.Errors[k] = n
	}
	return s
}

// sampleErrors returns one message per error kind, sorted by kind.
func (r *recorder) sampleErrors() [][2]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][2]string
	for k, m := range r.samples {
		out = append(out, [2]string{k, m})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// stats are the figures of one scenario (or of the whole run).
type stats struct {
	Ops     uint64            `json:"ops"`
	OpsPerS float64           `json:"ops_per_s"`
	Latency latency           `json:"latency_ms"`
	Errors  map[string]uint64 `json:"errors"`
}

// latency is in milliseconds, of successful operations only.
type latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}
