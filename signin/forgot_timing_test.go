package signin

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// TestForgotTimingUnknownLikeKnown: the forgotten-password page answers
// an unknown address, a person without a password and a directory person
// in the time it answers a local person who gets a link. Each is one
// IssueLink write and a message composed and sealed, kept or dropped;
// but the write of a link and a message costs more than the counters
// alone (about twice as long on a test's bbolt file, which the first,
// logged measurement shows), so every answer waits for answerFloor, and
// the second measurement, with the floor, must find the medians within
// 10 % of each other and no answer sooner than the floor. Each round
// posts every case once, interleaved, through the real pages (the clock
// moves past the limits' windows, a day's included, between rounds); the
// medians compared are of the same run.
func TestForgotTimingUnknownLikeKnown(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	h := newMailHarness(t)
	now := h.clock.Now()
	const dirID = "3d000000-0000-4000-8000-000000000001"
	h.apply(fsm.TypePutDirectory, fsm.PutDirectory{Create: true, Directory: fsm.Directory{
		ID: dirID, Name: "Corp", URL: "ldaps://127.0.0.1:1", BindDN: "cn=x", UserBase: "ou=people", UserFilter: "(mail=%s)",
		IDAttribute: "entryUUID", EmailAttribute: "mail", SyncInterval: time.Hour, CreatedAt: now, UpdatedAt: now}})
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: "1c000000-0000-4000-8000-000000000003", Email: "nopass@example.com", CreatedAt: now}})
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: "1d000000-0000-4000-8000-000000000004", Email: "dee@corp.example",
		DirectoryID: dirID, DirectoryUID: "dee", CreatedAt: now}})

	const reference = hEmail // a local person with a password: a link
	cases := []struct{ name, address string }{
		{"unknown address", "nobody@example.com"},
		{"local person without a password", "nopass@example.com"},
		{"directory person", "dee@corp.example"},
	}
	addresses := []string{reference}
	for _, c := range cases {
		addresses = append(addresses, c.address)
	}
	b := h.browser()
	post := func(address string) time.Duration {
		t.Helper()
		f := onlyPostForm(t, b.get(PathForgot))
		start := time.Now()
		p := b.fill(f, map[string]string{"email": address})
		d := time.Since(start)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d", address, p.status)
		}
		return d
	}
	for _, a := range addresses {
		post(a) // warm up
	}
	median := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	// measure runs rounds of every case and returns the ratios out of
	// [low, high], logging every median.
	measure := func(rounds int, low, high float64) (out []string, fastest time.Duration) {
		times := make([][]time.Duration, len(addresses))
		fastest = time.Hour
		for range rounds {
			h.clock.Add(25 * time.Hour) // past every limit's window, a day's too
			for i, a := range addresses {
				d := post(a)
				times[i] = append(times[i], d)
				fastest = min(fastest, d)
			}
		}
		ref := median(times[0])
		t.Logf("  local person, a link: median %v", ref)
		for i, c := range cases {
			m := median(times[i+1])
			ratio := float64(m) / float64(ref)
			t.Logf("  %s: median %v, ratio %.2f", c.name, m, ratio)
			if ratio < low || ratio > high {
				out = append(out, fmt.Sprintf("%s: median %v against %v for a known address, ratio %.2f; want %.2f to %.2f",
					c.name, m, ref, ratio, low, high))
			}
		}
		return out, fastest
	}

	t.Log("without the floor (for the record):")
	measure(31, 0, 100)

	h.p.floor = answerFloor
	const attempts = 3
	for a := 1; ; a++ {
		t.Logf("with the floor of %v:", answerFloor)
		out, fastest := measure(7, 0.9, 1.1)
		if fastest < answerFloor {
			t.Fatalf("an answer came after %v, sooner than the floor", fastest)
		}
		if len(out) == 0 {
			break
		}
		if a == attempts {
			for _, o := range out {
				t.Error(o)
			}
			break
		}
		t.Logf("attempt %d of %d out of the band; measuring again", a, attempts)
	}
	if n := len(h.mailsTo(reference)); n < 31+7 {
		t.Errorf("the known address got %d messages", n)
	}
}
