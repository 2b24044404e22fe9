package trail_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oidcd/oidcd/fsm/trail"
)

// small makes many segments and blocks out of few events.
var small = trail.Options{SegmentEvents: 300, BlockEvents: 16, Workers: 2}

func open(t testing.TB, dir string, opt trail.Options) *trail.Store {
	t.Helper()
	s, err := trail.Open(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// appendBatches appends evs in batches of random sizes up to max.
func appendBatches(t testing.TB, s *trail.Store, evs []trail.Event, r *rand.Rand, max int) {
	t.Helper()
	for len(evs) > 0 {
		n := min(len(evs), 1+r.Intn(max))
		if err := s.Append(evs[:n]); err != nil {
			t.Fatal(err)
		}
		evs = evs[n:]
	}
}

func files(t testing.TB, dir, prefix string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, prefix+"*"))
	slices.Sort(m)
	return m
}

func mustVerify(t testing.TB, s *trail.Store, count uint64) trail.Verification {
	t.Helper()
	v, err := s.Verify(0)
	if err != nil || !v.OK || v.Count != count {
		t.Fatalf("verify: %+v, %v; want ok with %d events", v, err, count)
	}
	return v
}

func TestAppendRefusals(t *testing.T) {
	evs := makeTrail(1, 20, 10, 1)
	wrong := append([]trail.Event(nil), evs[5:7]...)
	wrong[1].Detail = trail.EventDetail{"method": "changed"}
	badPrev := append([]trail.Event(nil), evs[5:7]...)
	badPrev[0].PrevHash = evs[3].Hash
	cases := []struct {
		name   string
		events []trail.Event
		want   string
	}{
		{"gap", evs[6:8], "does not follow"},
		{"repeat", evs[4:6], "does not follow"},
		{"broken chain", badPrev, "prev_hash"},
		{"wrong hash", wrong, "hash of its fields"},
		{"gap inside the batch", []trail.Event{evs[5], evs[7]}, "does not follow"},
	}
	s := open(t, t.TempDir(), small)
	if err := s.Append(evs[:5]); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.Append(c.events)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Append: %v, want %q", err, c.want)
			}
			if seq, h := s.Last(); seq != 5 || h != evs[4].Hash {
				t.Fatalf("Last %d %s after a refusal", seq, h)
			}
		})
	}
	if err := s.Append(evs[5:]); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s, 10)

	empty := open(t, t.TempDir(), small)
	if err := empty.Append(evs[3:5]); err != nil { // any first seq, its prev_hash as it stands
		t.Fatal(err)
	}
	if empty.First() != 4 || empty.Len() != 2 {
		t.Fatalf("First %d Len %d", empty.First(), empty.Len())
	}
	zero := chain([]trail.Event{{Type: "x"}}, 0, "")
	if err := open(t, t.TempDir(), small).Append(zero); err == nil {
		t.Fatal("seq 0 appended")
	}
}

// naive is the reference: a slice, filtered.
func naive(all []trail.Event, floor uint64, q trail.Query) []trail.Event {
	limit := q.Limit
	if limit <= 0 || limit > trail.MaxPage {
		limit = trail.MaxPage
	}
	var out []trail.Event
	ok := func(e trail.Event) bool {
		return e.Seq >= floor && (q.Type == "" || e.Type == q.Type) && (q.Subject == "" || e.Subject == q.Subject) &&
			(q.ClientID == "" || e.ClientID == q.ClientID) && (q.OrgID == "" || e.OrgID == q.OrgID)
	}
	if !q.Newest {
		for _, e := range all {
			if e.Seq > q.After && ok(e) && len(out) < limit {
				out = append(out, e)
			}
		}
		return out
	}
	for i := len(all) - 1; i >= 0; i-- {
		if e := all[i]; (q.After == 0 || e.Seq < q.After) && ok(e) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out
}

func sameEvents(t testing.TB, what string, got, want []trail.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s: event %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// randomQuery draws a query from the values of the trail (and some that
// are not in it).
func randomQuery(r *rand.Rand, all []trail.Event) trail.Query {
	pick := func(f func(e trail.Event) string) string {
		switch r.Intn(4) {
		case 0, 1:
			return ""
		case 2:
			return f(all[r.Intn(len(all))])
		}
		return []string{"nope", f(all[r.Intn(len(all))])}[r.Intn(2)]
	}
	q := trail.Query{
		Type:     pick(func(e trail.Event) string { return e.Type }),
		Subject:  pick(func(e trail.Event) string { return e.Subject }),
		ClientID: pick(func(e trail.Event) string { return e.ClientID }),
		OrgID:    pick(func(e trail.Event) string { return e.OrgID }),
		Newest:   r.Intn(2) == 0,
		Limit:    []int{0, 1, 5, 20, 1000, 5000, -1}[r.Intn(7)],
	}
	if r.Intn(3) > 0 {
		q.After = uint64(r.Intn(len(all) + 20))
	}
	return q
}

// TestQueryMatchesNaive: every shape of query, over many segments and
// blocks, answers what a filter over a slice answers; before and after a
// reopen, and with a floor.
func TestQueryMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	all := makeTrail(8, 60, 4000, 1)
	dir := t.TempDir()
	s := open(t, dir, small)
	appendBatches(t, s, all[:2500], r, 40)
	check := func(what string, held []trail.Event, floor uint64) {
		for i := 0; i < 200; i++ {
			q := randomQuery(r, all)
			got, err := s.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			sameEvents(t, fmt.Sprintf("%s: %+v", what, q), got, naive(held, floor, q))
		}
	}
	check("partial", all[:2500], 0)
	if n := len(files(t, dir, "seg-")); n < 5 {
		t.Fatalf("%d sealed segments", n)
	}
	s.Close()
	s = open(t, dir, small)
	appendBatches(t, s, all[2500:], r, 300)
	check("reopened", all, 0)
	if err := s.DropBelow(1234); err != nil {
		t.Fatal(err)
	}
	check("floor", all, 1234)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestNewest: the console's newest page, then the page before it; a
// person's last sign-ins.
func TestNewest(t *testing.T) {
	all := makeTrail(9, 30, 1000, 1)
	s := open(t, t.TempDir(), small)
	appendBatches(t, s, all, rand.New(rand.NewSource(1)), 64)
	page, _ := s.Query(trail.Query{Newest: true, Limit: 20})
	if len(page) != 20 || page[0].Seq != 1000 || page[19].Seq != 981 {
		t.Fatalf("newest page: %d events from %d", len(page), page[0].Seq)
	}
	page, _ = s.Query(trail.Query{Newest: true, Limit: 20, After: 981})
	if len(page) != 20 || page[0].Seq != 980 {
		t.Fatalf("page before 981 begins at %d", page[0].Seq)
	}
	sub := all[500].Subject
	page, _ = s.Query(trail.Query{Newest: true, Subject: sub, Type: "signin", Limit: 3})
	sameEvents(t, "subject", page, naive(all, 0, trail.Query{Newest: true, Subject: sub, Type: "signin", Limit: 3}))
	if page, _ = s.Query(trail.Query{Newest: true, After: 1}); len(page) != 0 {
		t.Fatalf("events before seq 1: %d", len(page))
	}
}

func TestDropBelow(t *testing.T) {
	all := makeTrail(10, 30, 1500, 1)
	dir := t.TempDir()
	s := open(t, dir, small)
	appendBatches(t, s, all, rand.New(rand.NewSource(2)), 50)
	before := len(files(t, dir, "seg-"))
	if err := s.DropBelow(700); err != nil {
		t.Fatal(err)
	}
	if got := len(files(t, dir, "seg-")); got != before-2 { // 1-300, 301-600 go; 601-900 stays
		t.Fatalf("%d sealed segments, had %d", got, before)
	}
	if s.First() != 700 || s.Len() != 801 {
		t.Fatalf("First %d Len %d", s.First(), s.Len())
	}
	got, _ := s.Query(trail.Query{Limit: 5})
	if got[0].Seq != 700 {
		t.Fatalf("oldest read %d", got[0].Seq)
	}
	v := mustVerify(t, s, 801)
	if v.FirstSeq != 700 {
		t.Fatalf("verified from %d", v.FirstSeq)
	}
	s.Close()
	s = open(t, dir, small)
	if s.First() != 700 {
		t.Fatalf("the floor did not last: First %d", s.First())
	}
	if err := s.DropBelow(2000); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 || s.First() != 0 || len(files(t, dir, "seg-"))+len(files(t, dir, "active-")) != 0 {
		t.Fatalf("Len %d after dropping everything", s.Len())
	}
	if err := s.Append(all[:1]); err == nil {
		t.Fatal("appended below the floor")
	}
	next := makeTrail(11, 5, 3, 2000)
	if err := s.Append(next); err != nil {
		t.Fatal(err)
	}
}

func TestTruncate(t *testing.T) {
	all := makeTrail(12, 30, 1000, 1)
	for _, after := range []uint64{999, 901, 900, 650, 600, 17, 0} {
		t.Run(itoa(after), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, small)
			appendBatches(t, s, all, rand.New(rand.NewSource(3)), 30)
			if err := s.Truncate(after); err != nil {
				t.Fatal(err)
			}
			check := func() {
				t.Helper()
				if seq, _ := s.Last(); seq != after {
					t.Fatalf("Last %d after Truncate(%d)", seq, after)
				}
				got, err := s.Query(trail.Query{Newest: true})
				if err != nil {
					t.Fatal(err)
				}
				sameEvents(t, "kept", got, naive(all[:after], 0, trail.Query{Newest: true}))
				mustVerify(t, s, after)
			}
			check()
			s.Close()
			s = open(t, dir, small)
			check()
			if err := s.Append(all[after:]); err != nil {
				t.Fatal(err)
			}
			mustVerify(t, s, 1000)
			got, _ := s.Query(trail.Query{Subject: all[after].Subject, Newest: true})
			sameEvents(t, "after", got, naive(all, 0, trail.Query{Subject: all[after].Subject, Newest: true}))
		})
	}
}

func TestReset(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, small)
	appendBatches(t, s, makeTrail(13, 10, 700, 1), rand.New(rand.NewSource(4)), 100)
	if err := s.Reset(5000); err != nil {
		t.Fatal(err)
	}
	if seq, _ := s.Last(); seq != 0 || s.Len() != 0 {
		t.Fatalf("Last %d Len %d after Reset", seq, s.Len())
	}
	other := makeTrail(14, 10, 10, 5000)
	if err := s.Append(other); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir, small)
	mustVerify(t, s, 10)
}

// TestConcurrentReaders: queries, verifies and exports run while a writer
// appends and seals (run with -race).
func TestConcurrentReaders(t *testing.T) {
	all := makeTrail(15, 40, 3000, 1)
	s := open(t, t.TempDir(), small)
	if err := s.Append(all[:100]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(i)))
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.Query(randomQuery(r, all[:100])); err != nil {
					t.Error(err)
					return
				}
				if v, err := s.Verify(0); err != nil || !v.OK {
					t.Errorf("verify: %+v %v", v, err)
					return
				}
				if err := s.Export(&bytes.Buffer{}, 0, ^uint64(0)); err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	appendBatches(t, s, all[100:], rand.New(rand.NewSource(5)), 20)
	close(done)
	wg.Wait()
	mustVerify(t, s, 3000)
}

func TestLeftoverTemp(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, small)
	appendBatches(t, s, makeTrail(16, 10, 400, 1), rand.New(rand.NewSource(6)), 50)
	s.Close()
	os.WriteFile(filepath.Join(dir, "seg-123.tmp"), []byte("half a segment"), 0o600)
	s = open(t, dir, small)
	if len(files(t, dir, "seg-123")) != 0 {
		t.Fatal("the temporary file stayed")
	}
	mustVerify(t, s, 400)
}
