package trail_test

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm/trail"
)

// TestBlockRoundTrip: a block gives back events whose hashes are theirs,
// equal to the events written (times compared as instants and offsets).
func TestBlockRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, n := range []int{1, 2, 17, 256} {
		var events []trail.Event
		for i := 0; i < n; i++ {
			events = append(events, randomEvent(r, 0, ""))
		}
		for _, prev := range []string{"", strings.Repeat("0f", 32), "ABCD"} {
			evs := chain(append([]trail.Event(nil), events...), 1000, prev)
			p, err := trail.EncodeBlock(nil, evs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := trail.DecodeBlock(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				h, err := trail.EventHash(got[i])
				if err != nil || h != evs[i].Hash || got[i].PrevHash != evs[i].PrevHash {
					t.Fatalf("n=%d prev=%q event %d: hash %s, %v; want %s", n, prev, i, h, err, evs[i].Hash)
				}
				if !got[i].Time.Equal(evs[i].Time) {
					t.Fatalf("time %v, want %v", got[i].Time, evs[i].Time)
				}
				a, b := got[i], evs[i]
				a.Time = b.Time
				if len(a.Detail) == 0 && len(b.Detail) == 0 {
					a.Detail, b.Detail = nil, nil
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("event %d: %+v, want %+v", i, a, b)
				}
			}
		}
	}
}

// TestBlockUTC: fsm's times are UTC and come back UTC, so a decoded event
// equals the written one with ==.
func TestBlockUTC(t *testing.T) {
	evs := makeTrail(3, 50, 10, 1)
	p, err := trail.EncodeBlock(nil, evs)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := trail.DecodeBlock(p)
	for i := range got {
		if got[i].Time != evs[i].Time {
			t.Fatalf("time %#v, want %#v", got[i].Time, evs[i].Time)
		}
	}
}

// TestBlockCorrupt: no change of a payload's bytes panics.
func TestBlockCorrupt(t *testing.T) {
	evs := makeTrail(4, 20, 40, 1)
	p, err := trail.EncodeBlock(nil, evs)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(p); i += 1 + i/64 {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			q := append([]byte(nil), p...)
			q[i] ^= x
			trail.DecodeBlock(q)
		}
		trail.DecodeBlock(p[:i])
	}
}

func TestBlockSize(t *testing.T) {
	evs := makeTrail(5, 2000, 256*40, 1)
	total := 0
	for i := 0; i < len(evs); i += 256 {
		p, err := trail.EncodeBlock(nil, evs[i:i+256])
		if err != nil {
			t.Fatal(err)
		}
		total += len(p)
	}
	t.Logf("%.1f bytes an event", float64(total)/float64(len(evs)))
}
