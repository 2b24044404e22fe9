package fsm_test

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

// grownAt is when a grown store's sessions and tokens were made: they are
// live for an hour after it.
var grownAt = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// grownStore opens a state file in dir grown to n signed-in people
// (fsmtest.Grown), each batch applied as raft delivers a batch.
func grownStore(tb testing.TB, dir string, n int) *fsm.FSM {
	tb.Helper()
	f, err := fsm.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		tb.Fatal(err)
	}
	index := uint64(0)
	err = fsmtest.Grown(n, grownAt, func(cmds []fsm.Command) error {
		logs := make([]*raft.Log, len(cmds))
		for i, c := range cmds {
			index++
			logs[i] = &raft.Log{Index: index, Type: raft.LogCommand, Data: c.Encode()}
		}
		for i, r := range f.ApplyBatch(logs) {
			if res := r.(fsm.Result); res.Err != nil {
				return fmt.Errorf("entry %d (%v): %w", logs[i].Index, cmds[i].Type, res.Err)
			}
		}
		return nil
	})
	if err != nil {
		f.Close()
		tb.Fatal(err)
	}
	return f
}

// grownPeople bounds the stores the grown-store benchmarks build (10,000,
// 100,000, 1,000,000 people): a million takes a few minutes and 3 GiB,
// so it is asked for with -grown.people 1000000.
var grownPeople = flag.Int("grown.people", 100_000, "the largest store BenchmarkSnapshot and BenchmarkRestore grow")

// BenchmarkSnapshot: a snapshot or backup of a grown store, as streamed
// (WriteTo: the compacted copy Persist sends too) against the page copy of
// tx.WriteTo it replaced, with the bytes each streams.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range fsmtest.GrownSizes(*grownPeople) {
		b.Run(fmt.Sprintf("people=%d", n), func(b *testing.B) {
			f := grownStore(b, b.TempDir(), n)
			defer f.Close()
			for _, way := range []struct {
				name string
				copy func(io.Writer) (int64, error)
			}{{"compacted", f.WriteTo}, {"tx.WriteTo", f.PageCopy}} {
				b.Run(way.name, func(b *testing.B) {
					var size int64
					for b.Loop() {
						var err error
						if size, err = way.copy(io.Discard); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(size)/(1<<20), "MiB")
				})
			}
		})
	}
}

// BenchmarkRestore: installing a grown store's snapshot (Restore: the
// stream written to a file, opened, checked, stamped and swapped in), what
// a wiped node does once the snapshot has arrived.
func BenchmarkRestore(b *testing.B) {
	for _, n := range fsmtest.GrownSizes(*grownPeople) {
		b.Run(fmt.Sprintf("people=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			src := grownStore(b, dir, n)
			snap := filepath.Join(dir, "snapshot.db")
			out, err := os.Create(snap) // #nosec G304 -- the benchmark's own file
			if err != nil {
				b.Fatal(err)
			}
			if _, err := src.WriteTo(out); err != nil {
				b.Fatal(err)
			}
			if err := out.Close(); err != nil {
				b.Fatal(err)
			}
			want := src.Applied()
			src.Close()
			dst, err := fsm.Open(filepath.Join(b.TempDir(), "state.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer dst.Close()
			for b.Loop() {
				in, err := os.Open(snap) // #nosec G304 -- the benchmark's own file
				if err != nil {
					b.Fatal(err)
				}
				dst.ExpectRestore(want)
				if err := dst.Restore(in); err != nil {
					b.Fatal(err)
				}
			}
			if got := dst.Applied(); got != want {
				b.Fatalf("restored applied index %d, want %d", got, want)
			}
		})
	}
}
