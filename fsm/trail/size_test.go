package trail_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm/trail"
)

// sealedBytesPerEvent is the size of the sealed segments of dir, index
// and trailer included, over the events they hold.
func sealedBytesPerEvent(t testing.TB, dir string, events int) float64 {
	t.Helper()
	var total int64
	for _, f := range files(t, dir, "seg-") {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	return float64(total) / float64(events)
}

// TestBytesPerEvent: sealed segments of a realistic mix take at most 200
// bytes an event (the bbolt buckets took some 640).
func TestBytesPerEvent(t *testing.T) {
	const n = 4 * 8192
	dir := t.TempDir()
	s := open(t, dir, trail.Options{SegmentEvents: 8192})
	all := makeTrail(30, 20000, n, 1)
	for i := 0; i < n; i += 64 {
		if err := s.Append(all[i : i+64]); err != nil {
			t.Fatal(err)
		}
	}
	if len(files(t, dir, "active-")) != 0 {
		t.Fatal("an active segment is left")
	}
	bpe := sealedBytesPerEvent(t, dir, n)
	t.Logf("%.1f bytes an event sealed", bpe)
	if bpe > 200 {
		t.Fatalf("%.1f bytes an event sealed, more than 200", bpe)
	}
}

// bigTrail is a store of n events over 100,000 people, built once per run.
var big struct {
	sync.Once
	dir    string
	events []trail.Event
}

func bigStore(b *testing.B, n int) (string, []trail.Event) {
	big.Do(func() {
		dir, err := os.MkdirTemp("", "trail-bench-")
		if err != nil {
			b.Fatal(err)
		}
		big.dir = dir
		big.events = makeTrail(40, 100000, n, 1)
		s, err := trail.Open(dir, trail.Options{})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < n; i += 4096 {
			if err := s.Append(big.events[i:min(n, i+4096)]); err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
	})
	return big.dir, big.events
}

const bigN = 1 << 20

func BenchmarkBytesPerEvent(b *testing.B) {
	dir, events := bigStore(b, bigN)
	sealed := len(events) / 65536 * 65536
	b.ReportMetric(sealedBytesPerEvent(b, dir, sealed), "bytes/event")
}

func benchAppend(b *testing.B, batch int) {
	events := makeTrail(41, 10000, b.N*batch, 1)
	s := open(b, b.TempDir(), trail.Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Append(events[i*batch : (i+1)*batch]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkAppend1(b *testing.B)   { benchAppend(b, 1) }
func BenchmarkAppend256(b *testing.B) { benchAppend(b, 256) }

// BenchmarkQueryNewestSubject: a person's last 20 events over a million.
func BenchmarkQueryNewestSubject(b *testing.B) {
	dir, events := bigStore(b, bigN)
	s := open(b, dir, trail.Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub := events[(i*7919)%len(events)].Subject
		got, err := s.Query(trail.Query{Subject: sub, Newest: true, Limit: 20})
		if err != nil || len(got) == 0 {
			b.Fatal(err, len(got))
		}
	}
}

// BenchmarkExportImport: a catch-up of a million events, export and
// import, in events a second.
func BenchmarkExportImport(b *testing.B) {
	dir, events := bigStore(b, bigN)
	src := open(b, dir, trail.Options{})
	var buf bytes.Buffer
	size := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		start := time.Now()
		if err := src.Export(&buf, 0, ^uint64(0)); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
		exported := time.Now()
		d := filepath.Join(b.TempDir(), "dst")
		dst, err := trail.Open(d, trail.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if n, err := dst.Import(&buf); err != nil || n != len(events) {
			b.Fatal(n, err)
		}
		dst.Close()
		b.Logf("export %v, import %v", exported.Sub(start), time.Since(exported))
	}
	b.ReportMetric(float64(b.N*len(events))/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(size)/float64(len(events)), "stream-bytes/event")
}
