package trail_test

import (
	"bytes"
	"errors"
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
