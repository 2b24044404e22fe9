package trail_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/oidcd/oidcd/fsm/trail"
)

// TestSealFailureDoesNotFailTheAppend: once an Append's block is synced
// its events are durable, so a seal that fails after it does not fail the
// Append; the next Append seals, and a reopened store holds every event.
func TestSealFailureDoesNotFailTheAppend(t *testing.T) {
	dir := t.TempDir()
	opt := trail.Options{SegmentEvents: 10, BlockEvents: 4, Workers: 1}
	s := open(t, dir, opt)
	evs := makeTrail(1, 5, 25, 1)
	trail.SetSealFault(errors.New("disk says no"))
	if err := s.Append(evs[:12]); err != nil {
		t.Fatalf("an Append whose seal failed: %v", err)
	}
	if last, _ := s.Last(); last != 12 {
		t.Fatalf("last %d after the failed seal, want 12", last)
	}
	trail.SetSealFault(nil)
	if err := s.Append(evs[12:]); err != nil {
		t.Fatal(err)
	}
	check := func(s *trail.Store) {
		t.Helper()
		v, err := s.Verify(0)
		if err != nil || !v.OK || v.Count != 25 || v.LastSeq != 25 {
			t.Fatalf("verify: %+v %v", v, err)
		}
		got, err := s.Query(trail.Query{})
		if err != nil || len(got) != 25 {
			t.Fatalf("query: %d %v", len(got), err)
		}
		var a, b bytes.Buffer
		for i := range got {
			a.WriteString(got[i].Hash)
			b.WriteString(evs[i].Hash)
		}
		if a.String() != b.String() {
			t.Fatal("the events read back are not those appended")
		}
	}
	check(s)
	s.Close()
	check(open(t, dir, opt))
}

// TestExportWithAndScan: a stream of the store's events then events
// given after them imports whole into a fresh store; Scan gives a range
// in order, the floor hidden; an event out of order in more is refused.
func TestExportWithAndScan(t *testing.T) {
	evs := makeTrail(2, 20, 1000, 1)
	s := open(t, t.TempDir(), small)
	if err := s.Append(evs[:700]); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err := s.ExportWith(&buf, 101, 1000, func(next uint64, emit func([]trail.Event) error) error {
		if next != 701 {
			t.Errorf("next %d, want 701", next)
		}
		if err := emit(evs[700:850]); err != nil {
			return err
		}
		return emit(evs[850:])
	})
	if err != nil {
		t.Fatal(err)
	}
	d := open(t, t.TempDir(), small)
	if err := d.Reset(101); err != nil {
		t.Fatal(err)
	}
	if n, err := d.Import(&buf); err != nil || n != 900 {
		t.Fatalf("import: %d %v", n, err)
	}
	if v, err := d.Verify(0); err != nil || !v.OK || v.FirstSeq != 101 || v.LastSeq != 1000 || v.HeadHash != evs[999].Hash {
		t.Fatalf("verify: %+v %v", v, err)
	}
	if err := s.ExportWith(io.Discard, 1, 1000, func(_ uint64, emit func([]trail.Event) error) error {
		return emit(evs[701:])
	}); err == nil {
		t.Fatal("an event out of order was exported")
	}
	if err := s.DropBelow(50); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	if err := s.Scan(1, 420, func(es []trail.Event) error {
		for _, e := range es {
			got = append(got, e.Seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 371 || got[0] != 50 || got[len(got)-1] != 420 {
		t.Fatalf("scan: %d events, %v...", len(got), got[:3])
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Fatalf("scan: %d after %d", got[i], got[i-1])
		}
	}
}
