package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// mail is a message to to of kind, about userA, with a body that says
// whom it is for (the proposer seals it; opaque here).
func mail(to, kind string) OutgoingEmail {
	return OutgoingEmail{To: to, Kind: kind, Locale: "en", UserID: userA, Body: []byte("sealed for " + to)}
}

// emailIDs are the ids of es, in order.
func emailIDs(es []Email) []string {
	ids := make([]string, 0, len(es))
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

// enqueue commits msgs at at and returns the ids given.
func enqueue(h *harness, at time.Time, msgs ...OutgoingEmail) []string {
	h.t.Helper()
	return emailIDs(h.mustApply(TypeEnqueueEmail, EnqueueEmail{Emails: msgs, At: at}).Value.([]Email))
}

// unchanged fails when fn changes any record (the applied index aside).
func unchanged(t *testing.T, h *harness, what string, fn func()) {
	t.Helper()
	before, _ := stateDigest(t, h.f)
	fn()
	if after, left := stateDigest(t, h.f); after != before {
		t.Errorf("%s changed the state; now: %s", what, left)
	}
}

// TestEnqueueEmailIDs: a message's id is its command's raft index (20
// digits) and its place in the command (4 digits), so ids sort in the
// order messages were committed, and two nodes applying the same log
// hold the same outbox, to the byte.
func TestEnqueueEmailIDs(t *testing.T) {
	build := func(t *testing.T) *harness {
		h := newHarness(t)
		h.index = 99
		enqueue(h, t0, mail("a@example.com", EmailInvitation), mail("b@example.com", EmailVerify), mail("c@example.com", EmailPasswordReset))
		h.index = 1233
		enqueue(h, t0.Add(time.Minute), mail("d@example.com", EmailRegistration))
		return h
	}
	h := build(t)
	want := []string{"00000000000000000100-0000", "00000000000000000100-0001", "00000000000000000100-0002", "00000000000000001234-0000"}
	all, total, err := h.f.State().Emails(Page{Page: 1, PageSize: 10})
	if err != nil || total != 4 || !reflect.DeepEqual(emailIDs(all), want) {
		t.Fatalf("outbox: %v (%d) %v, want %v", emailIDs(all), total, err, want)
	}
	e := all[1]
	wantRec := Email{ID: want[1], To: "b@example.com", Kind: EmailVerify, Locale: "en", UserID: userA, Body: []byte("sealed for b@example.com"),
		CreatedAt: t0, State: EmailPending, NextAttemptAt: t0}
	if !reflect.DeepEqual(normTimes(e), normTimes(wantRec)) {
		t.Errorf("stored message:\ngot  %+v\nwant %+v", e, wantRec)
	}
	if got, err := h.f.State().Email(want[3]); err != nil || got.To != "d@example.com" || !got.CreatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("Email(%s): %+v %v", want[3], got, err)
	}
	if _, err := h.f.State().Email("00000000000000000100-0003"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Email of an id never given: %v, want ErrNotFound", err)
	}
	page2, _, _ := h.f.State().Emails(Page{Page: 2, PageSize: 3})
	if got := emailIDs(page2); !reflect.DeepEqual(got, want[3:]) {
		t.Errorf("page 2 of 3: %v, want %v", got, want[3:])
	}
	// Another node, the same log.
	other := build(t)
	if a, b := mustDigest(t, h), mustDigest(t, other); a != b {
		t.Errorf("two nodes applying the same entries differ: %s and %s", a, b)
	}
}

func mustDigest(t *testing.T, h *harness) string {
	t.Helper()
	d, _ := stateDigest(t, h.f)
	return d
}

// TestEnqueueEmailRefuses: what no proposer sends is refused whole, with
// nothing stored. A CR or LF in an address is the proposer's to refuse
// (the mail library refuses it again); fsm bounds lengths only.
func TestEnqueueEmailRefuses(t *testing.T) {
	many := func(n int) []OutgoingEmail {
		out := make([]OutgoingEmail, n)
		for i := range out {
			out[i] = mail(fmt.Sprintf("p%d@example.com", i), EmailInvitation)
		}
		return out
	}
	with := func(f func(*OutgoingEmail)) []OutgoingEmail {
		m := mail("a@example.com", EmailVerify)
		f(&m)
		return []OutgoingEmail{mail("ok@example.com", EmailVerify), m}
	}
	long := strings.Repeat("a", 320-len("@example.com")) + "@example.com"
	cases := []struct {
		name string
		msgs []OutgoingEmail
		want error
	}{
		{"none", nil, ErrInvalid},
		{"empty list", []OutgoingEmail{}, ErrInvalid},
		{"nine", many(9), ErrInvalid},
		{"eight", many(8), nil},
		{"unknown kind", with(func(m *OutgoingEmail) { m.Kind = "newsletter" }), ErrInvalid},
		{"no kind", with(func(m *OutgoingEmail) { m.Kind = "" }), ErrInvalid},
		{"kind in another case", with(func(m *OutgoingEmail) { m.Kind = "Invitation" }), ErrInvalid},
		{"no address", with(func(m *OutgoingEmail) { m.To = "" }), ErrInvalid},
		{"address of 321 bytes", with(func(m *OutgoingEmail) { m.To = "x" + long }), ErrInvalid},
		{"address of 320 bytes", with(func(m *OutgoingEmail) { m.To = long }), nil},
		{"CR LF in the address: the proposer's to refuse", with(func(m *OutgoingEmail) { m.To = "a@example.com\r\nBcc: x@example.net" }), nil},
		{"no body", with(func(m *OutgoingEmail) { m.Body = nil }), ErrInvalid},
		{"body one byte too large", with(func(m *OutgoingEmail) { m.Body = make([]byte, MaxEmailBody+1) }), ErrInvalid},
		{"body of MaxEmailBody", with(func(m *OutgoingEmail) { m.Body = make([]byte, MaxEmailBody) }), nil},
		{"locale of 36 bytes", with(func(m *OutgoingEmail) { m.Locale = strings.Repeat("x", 36) }), ErrInvalid},
		{"no locale", with(func(m *OutgoingEmail) { m.Locale = "" }), nil},
		{"user id with a slash", with(func(m *OutgoingEmail) { m.UserID = userA + "/x" }), ErrInvalid},
		{"no user", with(func(m *OutgoingEmail) { m.UserID = "" }), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			before := mustDigest(t, h)
			r := h.apply(TypeEnqueueEmail, EnqueueEmail{Emails: c.msgs, At: t0})
			if !errors.Is(r.Err, c.want) {
				t.Fatalf("got %v, want %v", r.Err, c.want)
			}
			all, total, _ := h.f.State().Emails(Page{Page: 1, PageSize: 20})
			switch {
			case c.want != nil && mustDigest(t, h) != before:
				t.Errorf("a refused command stored %d messages", total)
			case c.want == nil && (total != len(c.msgs) || len(r.Value.([]Email)) != total):
				t.Errorf("stored %d messages, want %d", total, len(c.msgs))
			case c.want == nil && !reflect.DeepEqual(all[len(all)-1].Body, c.msgs[len(c.msgs)-1].Body):
				t.Errorf("the body was not kept as given")
			}
		})
	}
}

// TestEmailOutcome: a pending outcome schedules a retry; sent and failed
// are final, drop the body and leave the pending index; a later outcome
// for a final message (a new leader retried it), an unknown id and an
// unknown state change nothing.
func TestEmailOutcome(t *testing.T) {
	h := newHarness(t)
	ids := enqueue(h, t0, mail("a@example.com", EmailVerify), mail("b@example.com", EmailInvitation),
		mail("c@example.com", EmailPasswordReset), mail("d@example.com", EmailChanged))
	retry := t0.Add(3 * time.Minute)
	h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{
		{ID: ids[0], State: EmailPending, At: t0.Add(time.Second), NextAttemptAt: retry, Error: "451 4.7.1 try again later"},
		{ID: ids[1], State: EmailSent, At: t0.Add(2 * time.Second)},
		{ID: ids[2], State: EmailFailed, At: t0.Add(3 * time.Second), Error: "550 5.1.1 no such user"},
		{ID: ids[3], State: "bounced", At: t0.Add(4 * time.Second), Error: "?"},
		{ID: "00000000000000000099-0000", State: EmailSent, At: t0},
		{ID: "", State: EmailSent, At: t0},
	}})
	// Late duplicates and a reopening attempt: ignored.
	h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{
		{ID: ids[1], State: EmailPending, At: t0.Add(time.Hour), NextAttemptAt: t0.Add(time.Hour), Error: "late"},
		{ID: ids[2], State: EmailSent, At: t0.Add(time.Hour)},
	}})
	body := func(i int) []byte { return []byte("sealed for " + string(rune('a'+i)) + "@example.com") }
	cases := []struct {
		id        string
		state     string
		attempts  int
		next      time.Time
		done      time.Time
		lastError string
		body      []byte
	}{
		{ids[0], EmailPending, 1, retry, time.Time{}, "451 4.7.1 try again later", body(0)},
		{ids[1], EmailSent, 1, t0, t0.Add(2 * time.Second), "", nil},
		{ids[2], EmailFailed, 1, t0, t0.Add(3 * time.Second), "550 5.1.1 no such user", nil},
		{ids[3], EmailPending, 0, t0, time.Time{}, "", body(3)},
	}
	for _, c := range cases {
		e, err := h.f.State().Email(c.id)
		if err != nil {
			t.Fatal(err)
		}
		if e.State != c.state || e.Attempts != c.attempts || !e.NextAttemptAt.Equal(c.next) || !e.DoneAt.Equal(c.done) ||
			e.LastError != c.lastError || !reflect.DeepEqual(e.Body, c.body) {
			t.Errorf("%s: got %s attempts=%d next=%v done=%v error=%q body=%q\nwant %s attempts=%d next=%v done=%v error=%q body=%q",
				c.id, e.State, e.Attempts, e.NextAttemptAt, e.DoneAt, e.LastError, e.Body,
				c.state, c.attempts, c.next, c.done, c.lastError, c.body)
		}
	}
	pending, err := h.f.State().PendingEmails(10)
	if got, want := emailIDs(pending), []string{ids[0], ids[3]}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("pending: %v %v, want %v", got, err, want)
	}
	// The retry succeeds: the error of the last attempt goes with it.
	h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{{ID: ids[0], State: EmailSent, At: retry}}})
	if e, _ := h.f.State().Email(ids[0]); e.State != EmailSent || e.Attempts != 2 || e.LastError != "" || e.Body != nil || !e.DoneAt.Equal(retry) {
		t.Errorf("after the retry: %+v", e)
	}
}

// TestEmailOutcomeErrorIsBounded: LastError keeps at most MaxEmailError
// bytes, cut between characters: a cut inside one would store a record
// the codec cannot read back, and every node would fail on it.
func TestEmailOutcomeErrorIsBounded(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name, err, want string
	}{
		{"short", "421 busy", "421 busy"},
		{"exactly the bound", a(MaxEmailError), a(MaxEmailError)},
		{"over the bound", a(MaxEmailError + 100), a(MaxEmailError)},
		{"a two-byte character across the bound", a(MaxEmailError-1) + "é tail", a(MaxEmailError - 1)},
		{"a two-byte character ending at the bound", a(MaxEmailError-2) + "é tail", a(MaxEmailError-2) + "é"},
		{"a three-byte character across the bound", a(MaxEmailError-2) + "€", a(MaxEmailError - 2)},
		{"a four-byte character across the bound", a(MaxEmailError-1) + "😀", a(MaxEmailError - 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			id := enqueue(h, t0, mail("a@example.com", EmailVerify))[0]
			h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{{ID: id, State: EmailPending, NextAttemptAt: t0, Error: c.err}}})
			e, err := h.f.State().Email(id)
			if err != nil {
				t.Fatal(err)
			}
			if e.LastError != c.want || !utf8.ValidString(e.LastError) {
				t.Errorf("LastError: %d bytes ending %q, want %d bytes ending %q", len(e.LastError), tail(e.LastError), len(c.want), tail(c.want))
			}
			// The record stays readable by every path: listing, stats, reap.
			if _, _, err := h.f.State().Emails(Page{Page: 1, PageSize: 10}); err != nil {
				t.Fatal(err)
			}
			h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{{ID: id, State: EmailFailed, At: t0, Error: c.err}}})
			if st := h.mustApply(TypeReap, Reap{Before: t0}).Value.(ReapStats); st.Emails != 1 {
				t.Errorf("reaped %d messages, want 1", st.Emails)
			}
		})
	}
}

func tail(s string) string {
	if len(s) > 8 {
		return s[len(s)-8:]
	}
	return s
}

func TestTruncateUTF8(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"", 4, ""},
		{"abc", 4, "abc"},
		{"abcdef", 4, "abcd"},
		{"abé", 3, "ab"},
		{"abé", 4, "abé"},
		{"€€", 4, "€"},
		{"€", 2, ""},
		{"ab\xffcd", 4, "ab"},       // invalid input becomes U+FFFD (3 bytes): cut before it
		{"ab\xffcd", 5, "ab\uFFFD"}, // and is kept whole when it fits
	}
	for _, c := range cases {
		if got := truncateUTF8(c.in, c.n); got != c.want || !utf8.ValidString(got) {
			t.Errorf("truncateUTF8(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestPendingEmails: oldest first, at most max.
func TestPendingEmails(t *testing.T) {
	h := newHarness(t)
	first := enqueue(h, t0, mail("a@example.com", EmailVerify), mail("b@example.com", EmailVerify))
	second := enqueue(h, t0.Add(time.Minute), mail("c@example.com", EmailVerify))
	third := enqueue(h, t0.Add(2*time.Minute), mail("d@example.com", EmailVerify))
	h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{{ID: first[1], State: EmailSent, At: t0}}})
	cases := []struct {
		max  int
		want []string
	}{
		{0, nil},
		{-1, nil},
		{1, []string{first[0]}},
		{2, []string{first[0], second[0]}},
		{3, []string{first[0], second[0], third[0]}},
		{100, []string{first[0], second[0], third[0]}},
	}
	for _, c := range cases {
		got, err := h.f.State().PendingEmails(c.max)
		if err != nil || !reflect.DeepEqual(emailIDs(got), append([]string{}, c.want...)) {
			t.Errorf("PendingEmails(%d): %v %v, want %v", c.max, emailIDs(got), err, c.want)
		}
	}
}

// TestEmailStats counts the outbox by state; OldestPending is the
// creation time of the oldest message still pending.
func TestEmailStats(t *testing.T) {
	h := newHarness(t)
	steps := []struct {
		name string
		do   func()
		want EmailStats
	}{
		{"empty", func() {}, EmailStats{}},
		{"two pending", func() { enqueue(h, t0, mail("a@example.com", EmailVerify), mail("b@example.com", EmailVerify)) },
			EmailStats{Pending: 2, OldestPending: t0}},
		{"a third, later", func() { enqueue(h, t0.Add(time.Hour), mail("c@example.com", EmailVerify)) },
			EmailStats{Pending: 3, OldestPending: t0}},
		{"the oldest retried later: still the oldest", func() {
			ids, _ := h.f.State().PendingEmails(1)
			h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{{ID: ids[0].ID, State: EmailPending, NextAttemptAt: t0.Add(2 * time.Hour)}}})
		}, EmailStats{Pending: 3, OldestPending: t0}},
		{"the two oldest final", func() {
			ids, _ := h.f.State().PendingEmails(2)
			h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{{ID: ids[0].ID, State: EmailSent, At: t0}, {ID: ids[1].ID, State: EmailFailed, At: t0}}})
		}, EmailStats{Pending: 1, Sent: 1, Failed: 1, OldestPending: t0.Add(time.Hour)}},
		{"all final", func() {
			ids, _ := h.f.State().PendingEmails(1)
			h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{{ID: ids[0].ID, State: EmailSent, At: t0}}})
		}, EmailStats{Sent: 2, Failed: 1}},
	}
	for _, s := range steps {
		s.do()
		got, err := h.f.State().EmailStats()
		if err != nil || got.Pending != s.want.Pending || got.Sent != s.want.Sent || got.Failed != s.want.Failed || !got.OldestPending.Equal(s.want.OldestPending) {
			t.Errorf("%s: %+v %v, want %+v", s.name, got, err, s.want)
		}
	}
}

// TestEmailReap: a final message is reaped once its DoneAt is at or
// before the reap's Before (which the leader sets a grace in the past); a
// pending one never is, however old, in a full reap or a limited sweep.
func TestEmailReap(t *testing.T) {
	cases := []struct {
		name   string
		before time.Time
		limit  int
		want   []string // left, by recipient
	}{
		{"before anything is final", t0.Add(5 * time.Minute), 0, []string{"sent", "failed", "pending", "retrying"}},
		{"after the sent one", t0.Add(15 * time.Minute), 0, []string{"failed", "pending", "retrying"}},
		{"at the failed one's DoneAt", t0.Add(20 * time.Minute), 0, []string{"pending", "retrying"}},
		{"a year on", t0.Add(365 * 24 * time.Hour), 0, []string{"pending", "retrying"}},
		{"a year on, one record a reap", t0.Add(365 * 24 * time.Hour), 1, []string{"pending", "retrying"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			ids := enqueue(h, t0, mail("sent", EmailVerify), mail("failed", EmailVerify), mail("pending", EmailVerify), mail("retrying", EmailVerify))
			h.mustApply(TypeEmailOutcome, EmailOutcome{Outcomes: []Outcome{
				{ID: ids[0], State: EmailSent, At: t0.Add(10 * time.Minute)},
				{ID: ids[1], State: EmailFailed, At: t0.Add(20 * time.Minute), Error: "550"},
				{ID: ids[3], State: EmailPending, NextAttemptAt: t0.Add(time.Hour), Error: "451"},
			}})
			reaped := 0
			for round := 0; round < 20; round++ { // a limited sweep wraps around
				st := h.mustApply(TypeReap, Reap{Before: c.before, Limit: c.limit}).Value.(ReapStats)
				reaped += st.Emails
				if !st.More {
					break
				}
			}
			all, _, _ := h.f.State().Emails(Page{Page: 1, PageSize: 10})
			var left []string
			for _, e := range all {
				left = append(left, e.To)
			}
			if !reflect.DeepEqual(left, c.want) || reaped != 4-len(c.want) {
				t.Errorf("left %v after reaping %d, want %v", left, reaped, c.want)
			}
			if p, _ := h.f.State().PendingEmails(10); len(p) != 2 {
				t.Errorf("pending after the reap: %v, want 2", emailIDs(p))
			}
		})
	}
}
