package email

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/mail"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/internal/testkit/promtest"
	"github.com/oidcd/oidcd/internal/testkit/testclock"
)

// dest is a fake destination (mail.Sender): it records what it accepted,
// answers with fail when set, and with gate set holds every send until
// the gate closes.
type dest struct {
	mu        sync.Mutex
	calls     int
	got       []mail.Message
	fail      func(call int, m mail.Message) error
	gate      chan struct{}
	active    int
	maxActive int
}

func (d *dest) Send(ctx context.Context, m mail.Message) error {
	d.mu.Lock()
	d.calls++
	call := d.calls
	d.active++
	d.maxActive = max(d.maxActive, d.active)
	gate, fail := d.gate, d.fail
	d.mu.Unlock()
	defer func() { d.mu.Lock(); d.active--; d.mu.Unlock() }()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return &mail.Error{Step: mail.StepData, Temporary: true, Err: ctx.Err()}
		}
	}
	if fail != nil {
		if err := fail(call, m); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.got = append(d.got, m)
	d.mu.Unlock()
	return nil
}

func (d *dest) accepted() []mail.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]mail.Message(nil), d.got...)
}

func (d *dest) stats() (calls, active, maxActive int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls, d.active, d.maxActive
}

// applier counts the EmailOutcome commands it applies and, while held,
// makes them wait.
type applier struct {
	*fsmtest.Applier
	mu       sync.Mutex
	outcomes []int // outcomes per EmailOutcome command
	hold     chan struct{}
	holding  int // EmailOutcome applies waiting on hold
}

func (a *applier) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	if cmd.Type == fsm.TypeEmailOutcome {
		a.mu.Lock()
		hold := a.hold
		a.holding++
		a.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				a.mu.Lock()
				a.holding--
				a.mu.Unlock()
				return fsm.Result{}, ctx.Err()
			}
		}
		var o fsm.EmailOutcome
		if err := json.Unmarshal(cmd.Payload, &o); err != nil {
			return fsm.Result{}, err
		}
		a.mu.Lock()
		a.holding--
		a.outcomes = append(a.outcomes, len(o.Outcomes))
		a.mu.Unlock()
	}
	return a.Applier.Apply(ctx, cmd)
}

func (a *applier) commands() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.outcomes...)
}

type harness struct {
	t     *testing.T
	a     *applier
	kek   *kek.KEK
	clock *testclock.Clock
	dests []*dest
	s     *Sender
	reg   *prometheus.Registry
	stop  func()
}

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func newKEK(t *testing.T) *kek.KEK {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	k, err := kek.New(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newHarness is a Sender over a fresh state with n fake destinations, a
// fake clock at t0 and short ticks; tune adjusts it before Run starts.
func newHarness(t *testing.T, n int, tune func(*Sender)) *harness {
	t.Helper()
	h := &harness{t: t, a: &applier{Applier: fsmtest.New(t)}, kek: newKEK(t), clock: testclock.New(t0), reg: prometheus.NewRegistry()}
	var ds []mail.Sender
	for range n {
		d := &dest{}
		h.dests = append(h.dests, d)
		ds = append(ds, d)
	}
	s, err := NewSender(SenderConfig{State: h.a.State(), Applier: h.a, KEK: h.kek, Mail: ds, Now: h.clock.Now, Registerer: h.reg})
	if err != nil {
		t.Fatal(err)
	}
	s.tick = 5 * time.Millisecond
	if tune != nil {
		tune(s)
	}
	h.s = s
	h.a.FSM.OnApply = s.OnApply
	h.start()
	t.Cleanup(func() { h.stop() })
	return h
}

// start runs the Sender as a leader would, until stop.
func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.s.Run(ctx); close(done) }()
	h.stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			h.t.Error("Run did not return within 10 s of its context's end")
		}
	}
}

// enqueue commits one message per address, each with a link holding a
// token, and returns their ids.
func (h *harness) enqueue(k *kek.KEK, to ...string) []string {
	h.t.Helper()
	var out []fsm.OutgoingEmail
	for _, addr := range to {
		m, err := Compose(PasswordReset, "en", Data{Site: "id.example.com", Link: "https://id.example.com/password/reset/TOKEN-" + addr, Expires: 30 * time.Minute})
		if err != nil {
			h.t.Fatal(err)
		}
		o, err := Outgoing(k, addr, fsm.EmailPasswordReset, "en", "", m)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, o)
	}
	var ids []string
	for len(out) > 0 { // at most 8 a command
		n := min(len(out), 8)
		res, err := h.a.Apply(context.Background(), fsm.MustCommand(fsm.TypeEnqueueEmail, fsm.EnqueueEmail{Emails: out[:n], At: h.clock.Now()}))
		if err != nil || res.Err != nil {
			h.t.Fatalf("enqueue: %v %v", err, res.Err)
		}
		for _, e := range res.Value.([]fsm.Email) {
			ids = append(ids, e.ID)
		}
		out = out[n:]
	}
	return ids
}

func (h *harness) email(id string) fsm.Email {
	h.t.Helper()
	e, err := h.a.State().Email(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

// waitFor polls cond for up to 5 s.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitState waits until message id is in state and has had attempts.
func (h *harness) waitState(id, state string, attempts int) fsm.Email {
	h.t.Helper()
	var e fsm.Email
	h.waitFor(fmt.Sprintf("%s %s after %d attempts", id, state, attempts), func() bool {
		e = h.email(id)
		return e.State == state && e.Attempts == attempts
	})
	return e
}

func (h *harness) metrics() map[string]float64 { return promtest.Gather(h.t, h.reg) }

// waitMetrics waits up to 5 s until every metric named in want has its
// value: the counters move just after the outcome's record is applied.
func (h *harness) waitMetrics(want map[string]float64) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := h.metrics()
		var wrong []string
		for name, v := range want {
			if got[name] != v {
				wrong = append(wrong, fmt.Sprintf("%s = %v, want %v", name, got[name], v))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("metrics:\n%s", strings.Join(wrong, "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func addrs(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("person%d@example.com", i))
	}
	return out
}

func tempErr(msg string) error {
	return &mail.Error{Step: mail.StepRecipient, Temporary: true, Err: errors.New(msg)}
}

func permErr(msg string) error {
	return &mail.Error{Step: mail.StepRecipient, Err: errors.New(msg)}
}

// TestDeliversEveryMessageOnce: every committed message reaches the
// destination once, opened, with its kind, link and locale, and is
// recorded sent with its body dropped.
func TestDeliversEveryMessageOnce(t *testing.T) {
	h := newHarness(t, 1, nil)
	ids := h.enqueue(h.kek, addrs(12)...)
	for _, id := range ids {
		e := h.waitState(id, fsm.EmailSent, 1)
		if e.Body != nil || !e.DoneAt.Equal(t0) || e.LastError != "" {
			t.Errorf("%s: body %d bytes, done at %v, error %q", id, len(e.Body), e.DoneAt, e.LastError)
		}
	}
	got := h.dests[0].accepted()
	if len(got) != len(ids) {
		t.Fatalf("destination got %d messages, want %d", len(got), len(ids))
	}
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m.To] {
			t.Errorf("%s got two messages", m.To)
		}
		seen[m.To] = true
		if m.Kind != fsm.EmailPasswordReset || m.Locale != "en" || m.Link != "https://id.example.com/password/reset/TOKEN-"+m.To ||
			!strings.Contains(m.Text, m.Link) || m.Subject == "" || m.HTML == "" {
			t.Errorf("message to %s: %+v", m.To, m)
		}
	}
	if _, _, maxActive := h.dests[0].stats(); maxActive > DefaultConcurrency {
		t.Errorf("%d sends at once, want at most %d", maxActive, DefaultConcurrency)
	}
	h.waitMetrics(map[string]float64{
		"oidcd_email_sent_total": 12, "oidcd_email_failed_total": 0, `oidcd_email_attempts_total{result="sent"}`: 12,
		"oidcd_email_queued": 0, "oidcd_email_oldest_queued_age_seconds": 0, "oidcd_email_delivery_seconds_count": 12,
	})
}

// TestConcurrencyIsBounded: with every send held, exactly
// DefaultConcurrency messages are in flight, and the rest go out once the
// relay answers.
func TestConcurrencyIsBounded(t *testing.T) {
	h := newHarness(t, 1, nil)
	gate := make(chan struct{})
	h.dests[0].gate = gate
	ids := h.enqueue(h.kek, addrs(10)...)
	h.waitFor("the slots to fill", func() bool { _, active, _ := h.dests[0].stats(); return active == DefaultConcurrency })
	time.Sleep(50 * time.Millisecond) // ticks pass: nothing more starts
	if calls, active, _ := h.dests[0].stats(); calls != DefaultConcurrency || active != DefaultConcurrency {
		t.Fatalf("%d sends started, %d active; want %d", calls, active, DefaultConcurrency)
	}
	close(gate)
	for _, id := range ids {
		h.waitState(id, fsm.EmailSent, 1)
	}
	if calls, _, maxActive := h.dests[0].stats(); calls != len(ids) || maxActive != DefaultConcurrency {
		t.Fatalf("%d sends, at most %d at once; want %d and %d", calls, maxActive, len(ids), DefaultConcurrency)
	}
}

// TestOutcomesAreBatched: outcomes that finish while a record is being
// written go in the next command together, at most batchLimit a command.
func TestOutcomesAreBatched(t *testing.T) {
	for _, limit := range []int{batchLimit, 2} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			h := newHarness(t, 1, func(s *Sender) { s.batchLimit = limit })
			hold, rest := make(chan struct{}), make(chan struct{})
			h.a.mu.Lock()
			h.a.hold = hold
			h.a.mu.Unlock()
			// The first send finishes alone; the others once its record
			// is being written.
			h.dests[0].fail = func(call int, _ mail.Message) error {
				if call > 1 {
					<-rest
				}
				return nil
			}
			ids := h.enqueue(h.kek, addrs(DefaultConcurrency)...)
			h.waitFor("the first record to wait", func() bool { h.a.mu.Lock(); defer h.a.mu.Unlock(); return h.a.holding == 1 })
			close(rest)
			h.waitFor("every send", func() bool { return len(h.dests[0].accepted()) == len(ids) })
			time.Sleep(50 * time.Millisecond) // the other attempts finish and wait for the loop
			close(hold)
			for _, id := range ids {
				h.waitState(id, fsm.EmailSent, 1)
			}
			want := []int{1, DefaultConcurrency - 1}
			if limit == 2 {
				want = []int{1, 2, 1}
			}
			if got := h.a.commands(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("outcomes per command: got %v, want %v", got, want)
			}
		})
	}
}

// TestNoSecondSendWhileInFlight: a message being sent, and then one whose
// outcome is not yet recorded, is never sent again, however often the
// sender is woken and however late the clock.
func TestNoSecondSendWhileInFlight(t *testing.T) {
	h := newHarness(t, 1, nil)
	gate := make(chan struct{})
	h.dests[0].gate = gate
	hold := make(chan struct{})
	h.a.mu.Lock()
	h.a.hold = hold
	h.a.mu.Unlock()
	id := h.enqueue(h.kek, "zoe@example.com")[0]
	h.waitFor("the send", func() bool { calls, _, _ := h.dests[0].stats(); return calls == 1 })
	for range 20 {
		h.clock.Add(2 * time.Hour)
		h.s.Notify()
		time.Sleep(5 * time.Millisecond)
	}
	close(gate) // accepted; its outcome now waits for the held record
	h.waitFor("the record to wait", func() bool { h.a.mu.Lock(); defer h.a.mu.Unlock(); return h.a.holding == 1 })
	for range 20 {
		h.clock.Add(2 * time.Hour)
		h.s.Notify()
		time.Sleep(5 * time.Millisecond)
	}
	if calls, _, _ := h.dests[0].stats(); calls != 1 {
		t.Fatalf("%d sends of one message in flight", calls)
	}
	close(hold)
	h.waitState(id, fsm.EmailSent, 1)
	time.Sleep(50 * time.Millisecond)
	if calls, _, _ := h.dests[0].stats(); calls != 1 {
		t.Fatalf("%d sends after the outcome, want 1", calls)
	}
}

// TestRetryScheduleAndGiveUp: a relay that always answers with a
// temporary error is tried again after 30 s, then twice as long each
// time up to an hour apart, last when the message turns a day old, and
// then the message fails with the error's text and without its body.
func TestRetryScheduleAndGiveUp(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.dests[0].fail = func(int, mail.Message) error { return tempErr("451 try later") }
	id := h.enqueue(h.kek, "zoe@example.com")[0]
	var waits []time.Duration
	var e fsm.Email
	for n := 1; ; n++ {
		if n > 60 {
			t.Fatal("still pending after 60 attempts")
		}
		h.waitFor(fmt.Sprintf("attempt %d recorded", n), func() bool { e = h.email(id); return e.Attempts == n })
		if e.State == fsm.EmailFailed {
			break
		}
		if e.State != fsm.EmailPending || !strings.Contains(e.LastError, "451 try later") || e.Body == nil {
			t.Fatalf("after attempt %d: %+v", n, e)
		}
		waits = append(waits, e.NextAttemptAt.Sub(h.clock.Now()))
		// Just before the retry is due nothing happens.
		h.clock.Set(e.NextAttemptAt.Add(-time.Second))
		h.s.Notify()
		time.Sleep(15 * time.Millisecond)
		if calls, _, _ := h.dests[0].stats(); calls != n {
			t.Fatalf("attempt %d came %v early", n+1, time.Second)
		}
		h.clock.Set(e.NextAttemptAt)
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute}
	for len(want) < 30 {
		want = append(want, time.Hour)
	}
	// 30 s + ... + 32 min is 3,810 s; 22 hours follow; the last retry is
	// at the day's end, 3,390 s later.
	want = append(want[:29], 3390*time.Second)
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits between attempts:\n got %v\nwant %v", waits, want)
	}
	if !e.DoneAt.Equal(t0.Add(DefaultGiveUp)) || e.Body != nil || !strings.HasPrefix(e.LastError, "gave up after 24h0m0s: ") ||
		!strings.Contains(e.LastError, "451 try later") || e.Attempts != len(want)+1 {
		t.Fatalf("after giving up: %+v", e)
	}
	h.waitMetrics(map[string]float64{
		"oidcd_email_failed_total": 1, `oidcd_email_attempts_total{result="retry"}`: float64(len(want)),
		`oidcd_email_attempts_total{result="failed"}`: 1, "oidcd_email_sent_total": 0, "oidcd_email_queued": 0,
	})
}

// TestPermanentAndTemporaryErrors: a permanent refusal of the message
// fails it at once; a temporary error, or a fault of the relay as a whole
// an operator can fix, is retried and then sent. The recorded error never
// holds the message.
func TestPermanentAndTemporaryErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fail     func(call int, m mail.Message) error
		state    string
		attempts int
		errText  string
	}{
		{"550 refused", func(int, mail.Message) error { return permErr("550 no such user") }, fsm.EmailFailed, 1, "550 no such user"},
		{"bad address", func(int, mail.Message) error {
			return &mail.Error{Step: mail.StepMessage, Err: errors.New("mail: To: no angle-addr")}
		}, fsm.EmailFailed, 1, "no angle-addr"},
		{"451 then sent", func(call int, _ mail.Message) error {
			if call == 1 {
				return tempErr("451 greylisted")
			}
			return nil
		}, fsm.EmailSent, 2, "451 greylisted"},
		{"untrusted certificate, then fixed", func(call int, _ mail.Message) error {
			if call == 1 {
				return &mail.Error{Step: mail.StepTLSVerify, Err: errors.New("x509: certificate signed by unknown authority")}
			}
			return nil
		}, fsm.EmailSent, 2, "unknown authority"},
		{"login refused, then fixed", func(call int, _ mail.Message) error {
			if call == 1 {
				return &mail.Error{Step: mail.StepAuth, Err: errors.New("535 authentication failed")}
			}
			return nil
		}, fsm.EmailSent, 2, "535"},
		{"content refused", func(int, mail.Message) error {
			return &mail.Error{Step: mail.StepData, Err: errors.New("554 rejected as spam")}
		}, fsm.EmailFailed, 1, "554"},
		{"unclassified error then sent", func(call int, _ mail.Message) error {
			if call == 1 {
				return errors.New("connection reset")
			}
			return nil
		}, fsm.EmailSent, 2, "connection reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1, nil)
			h.dests[0].fail = tc.fail
			id := h.enqueue(h.kek, "zoe@example.com")[0]
			var e fsm.Email
			if tc.state == fsm.EmailSent {
				e = h.waitState(id, fsm.EmailPending, 1)
				if !strings.Contains(e.LastError, tc.errText) || !e.NextAttemptAt.Equal(t0.Add(30*time.Second)) {
					t.Fatalf("after the first attempt: %+v", e)
				}
				h.clock.Add(30 * time.Second)
				e = h.waitState(id, tc.state, tc.attempts)
			} else if e = h.waitState(id, tc.state, 1); !strings.Contains(e.LastError, tc.errText) || e.Body != nil {
				t.Fatalf("failed message: %+v", e)
			}
			if strings.Contains(e.LastError, "TOKEN-") {
				t.Fatalf("the recorded error holds the link: %q", e.LastError)
			}
		})
	}
}

// TestBodyUnderAnotherKEKFails: a body this node cannot open fails for
// good at once, without a send, and says why.
func TestBodyUnderAnotherKEKFails(t *testing.T) {
	h := newHarness(t, 1, nil)
	id := h.enqueue(newKEK(t), "zoe@example.com")[0]
	e := h.waitState(id, fsm.EmailFailed, 1)
	if !strings.Contains(e.LastError, "the body does not open") || !strings.Contains(e.LastError, "this node's --kek-file holds") || e.Body != nil {
		t.Fatalf("failed message: %+v", e)
	}
	if calls, _, _ := h.dests[0].stats(); calls != 0 {
		t.Fatalf("%d sends of a body that does not open", calls)
	}
	h.waitMetrics(map[string]float64{"oidcd_email_failed_total": 1})
}

// TestTwoDestinations: with a relay and an outbox file, a message is sent
// once both accept it; a retry goes only to the one that failed; a
// permanent refusal by either fails it.
func TestTwoDestinations(t *testing.T) {
	t.Run("retry goes only where it failed", func(t *testing.T) {
		h := newHarness(t, 2, nil)
		relay, outbox := h.dests[0], h.dests[1]
		relay.fail = func(call int, _ mail.Message) error {
			if call == 1 {
				return tempErr("421 busy")
			}
			return nil
		}
		id := h.enqueue(h.kek, "zoe@example.com")[0]
		h.waitState(id, fsm.EmailPending, 1)
		h.clock.Add(30 * time.Second)
		h.waitState(id, fsm.EmailSent, 2)
		if r, o := len(relay.accepted()), len(outbox.accepted()); r != 1 || o != 1 {
			t.Fatalf("relay got %d, outbox %d; want 1 each", r, o)
		}
		if calls, _, _ := outbox.stats(); calls != 1 {
			t.Fatalf("outbox written %d times", calls)
		}
	})
	t.Run("a permanent refusal fails it", func(t *testing.T) {
		h := newHarness(t, 2, nil)
		h.dests[1].fail = func(int, mail.Message) error { return permErr("outbox refused") }
		id := h.enqueue(h.kek, "zoe@example.com")[0]
		e := h.waitState(id, fsm.EmailFailed, 1)
		if !strings.Contains(e.LastError, "outbox refused") {
			t.Fatalf("error %q", e.LastError)
		}
	})
}

// TestQueueGauges: the queue's gauges read the state: how many messages
// wait and how long the oldest has.
func TestQueueGauges(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.dests[0].fail = func(int, mail.Message) error { return tempErr("421 down") }
	ids := h.enqueue(h.kek, addrs(3)...)
	for _, id := range ids {
		h.waitState(id, fsm.EmailPending, 1)
	}
	h.clock.Add(10 * time.Second) // before the first retry
	h.waitMetrics(map[string]float64{"oidcd_email_queued": 3, "oidcd_email_oldest_queued_age_seconds": 10, `oidcd_email_attempts_total{result="retry"}`: 3})
	h.dests[0].mu.Lock()
	h.dests[0].fail = nil
	h.dests[0].mu.Unlock()
	h.clock.Add(20 * time.Second)
	for _, id := range ids {
		h.waitState(id, fsm.EmailSent, 2)
	}
	h.waitMetrics(map[string]float64{"oidcd_email_queued": 0, "oidcd_email_oldest_queued_age_seconds": 0, "oidcd_email_sent_total": 3})
}

// TestAttemptCutShortIsNotRecorded: leadership lost in the middle of a
// send records nothing, and the next leader's sender sends it again
// (at least once).
func TestAttemptCutShortIsNotRecorded(t *testing.T) {
	h := newHarness(t, 1, nil)
	gate := make(chan struct{})
	h.dests[0].gate = gate
	id := h.enqueue(h.kek, "zoe@example.com")[0]
	h.waitFor("the send", func() bool { calls, _, _ := h.dests[0].stats(); return calls == 1 })
	h.stop()
	if e := h.email(id); e.State != fsm.EmailPending || e.Attempts != 0 {
		t.Fatalf("after the cut: %+v", e)
	}
	h.dests[0].mu.Lock()
	h.dests[0].gate = nil
	h.dests[0].mu.Unlock()
	h.start()
	h.waitState(id, fsm.EmailSent, 1)
	if calls, _, _ := h.dests[0].stats(); calls != 2 {
		t.Fatalf("%d sends, want 2 (the cut one and the next leader's)", calls)
	}
}

// TestMailOffRunReturns: with no destination Run returns at once and the
// metrics are still there.
func TestMailOffRunReturns(t *testing.T) {
	a := fsmtest.New(t)
	reg := prometheus.NewRegistry()
	s, err := NewSender(SenderConfig{State: a.State(), Applier: a, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run without destinations did not return")
	}
	m := promtest.Gather(t, reg)
	for _, name := range []string{"oidcd_email_queued", "oidcd_email_oldest_queued_age_seconds", "oidcd_email_sent_total", "oidcd_email_failed_total"} {
		if _, ok := m[name]; !ok {
			t.Errorf("%s is not exported", name)
		}
	}
}

func TestWakes(t *testing.T) {
	for _, tc := range []struct {
		t    fsm.Type
		want bool
	}{
		{fsm.TypeEnqueueEmail, true}, {fsm.TypeIssueLink, true}, {fsm.TypeCreateInvitation, true}, {fsm.TypeUseLink, true},
		{fsm.TypeEmailOutcome, true}, {fsm.TypeDeleteInvitation, false}, {fsm.TypeNoop, false}, {fsm.TypeDeliveryOutcome, false},
	} {
		if got := Wakes(tc.t); got != tc.want {
			t.Errorf("Wakes(%s) = %v, want %v", tc.t, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	s := &Sender{firstRetry: DefaultFirstRetry, maxRetry: DefaultMaxRetry}
	for n, want := range map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 7: 32 * time.Minute, 8: time.Hour, 9: time.Hour, 1000: time.Hour} {
		if got := s.backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestTruncateKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", maxErrorLen)
	got := truncate(s)
	if len(got) > maxErrorLen || !strings.HasPrefix(s, got) || strings.ToValidUTF8(got, "?") != got {
		t.Fatalf("truncate: %d bytes, valid %v", len(got), strings.ToValidUTF8(got, "?") == got)
	}
}

// TestDueMessageBehindManyWaiting: a new message behind a hundred older
// ones waiting for their retry is found and sent at once by a leader that
// has not seen them before: the look reads further while slots stay free.
func TestDueMessageBehindManyWaiting(t *testing.T) {
	// No ticks: only commits and outcomes wake the sender, so the look
	// that follows the commit must find the message.
	h := newHarness(t, 1, func(s *Sender) { s.tick = time.Hour })
	h.dests[0].fail = func(_ int, m mail.Message) error {
		if strings.HasPrefix(m.To, "person") {
			return tempErr("451 later")
		}
		return nil
	}
	ids := h.enqueue(h.kek, addrs(100)...)
	for _, id := range ids {
		h.waitState(id, fsm.EmailPending, 1)
	}
	h.stop() // a new leader: it has not seen them yet
	h.start()
	id := h.enqueue(h.kek, "zoe@example.com")[0]
	h.waitState(id, fsm.EmailSent, 1)
	if e := h.email(ids[99]); e.Attempts != 1 {
		t.Fatalf("a waiting message was tried again early: %+v", e)
	}
}

// TestNothingGoesToAnErasedPerson: a message about a person erased before
// it was sent fails without a send; one about a person who exists goes.
func TestNothingGoesToAnErasedPerson(t *testing.T) {
	h := newHarness(t, 1, nil)
	const kept, erased = "1a000000-0000-4000-8000-000000000001", "1a000000-0000-4000-8000-000000000002"
	for _, id := range []string{kept, erased} {
		u := fsm.User{ID: id, Email: id + "@example.com", CreatedAt: t0, UpdatedAt: t0}
		if res, err := h.a.Apply(context.Background(), fsm.MustCommand(fsm.TypeCreateUser, fsm.CreateUser{User: u})); err != nil || res.Err != nil {
			t.Fatalf("create %s: %v %v", id, err, res.Err)
		}
	}
	if res, err := h.a.Apply(context.Background(), fsm.MustCommand(fsm.TypeDeleteUser, fsm.DeleteUser{ID: erased, At: t0})); err != nil || res.Err != nil {
		t.Fatalf("erase: %v %v", err, res.Err)
	}
	m, err := Compose(EmailChanged, "en", Data{Site: "id.example.com", Email: "new@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	var out []fsm.OutgoingEmail
	for _, id := range []string{kept, erased} {
		o, err := Outgoing(h.kek, id+"@example.com", fsm.EmailChanged, "en", id, m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	res, err := h.a.Apply(context.Background(), fsm.MustCommand(fsm.TypeEnqueueEmail, fsm.EnqueueEmail{Emails: out, At: h.clock.Now()}))
	if err != nil || res.Err != nil {
		t.Fatalf("enqueue: %v %v", err, res.Err)
	}
	ids := res.Value.([]fsm.Email)
	h.waitState(ids[0].ID, fsm.EmailSent, 1)
	e := h.waitState(ids[1].ID, fsm.EmailFailed, 1)
	if !strings.Contains(e.LastError, "erased") || e.Body != nil {
		t.Fatalf("the erased person's message: %+v", e)
	}
	if calls, _, _ := h.dests[0].stats(); calls != 1 {
		t.Fatalf("%d sends, want 1 (the person who exists)", calls)
	}
}
