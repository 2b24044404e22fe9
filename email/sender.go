package email

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/mail"
)

// Defaults of the Sender (docs/operators/email.md, "Delivery and
// retries").
const (
	// DefaultConcurrency is how many messages are being sent at once, on
	// the leader, for the whole cluster: a relay is one server, and a few
	// connections keep it busy without looking like a flood.
	DefaultConcurrency = 4
	// DefaultFirstRetry is the wait after the first temporary failure; it
	// doubles after each further one, up to DefaultMaxRetry.
	DefaultFirstRetry = 30 * time.Second
	DefaultMaxRetry   = time.Hour
	// DefaultGiveUp is how old a message may grow while it is retried: a
	// temporary failure of a message this old fails it for good.
	DefaultGiveUp = 24 * time.Hour
	// DefaultSendTimeout bounds one attempt at one destination (the relay,
	// the outbox file).
	DefaultSendTimeout = time.Minute
)

// How the Sender reads the outbox: at most the oldest scanLimit pending
// messages each time it looks (dispatch), and at most batchLimit outcomes
// in one command.
const (
	scanLimit  = 1000
	batchLimit = 64
	// maxErrorLen bounds the error text recorded with an outcome.
	maxErrorLen = 300
)

// SenderConfig wires the leader's delivery of the outbox to one node.
type SenderConfig struct {
	State   *fsm.State
	Applier fsm.Applier
	// KEK opens the sealed bodies (Open); nil opens clear ones only.
	KEK *kek.KEK
	// Mail are where every message goes: the site's relay, the outbox
	// file, or both. A message is sent once each of them has accepted it.
	// Empty: mail is off and Run returns at once.
	Mail       []mail.Sender
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Sender is the leader's delivery of the replicated outbox.
type Sender struct {
	cfg     SenderConfig
	log     *slog.Logger
	metrics *metrics
	notify  chan struct{}

	// Tuning; NewSender sets the defaults, package tests shorten them.
	tick        time.Duration // how often Run looks without a Notify
	concurrency int
	firstRetry  time.Duration
	maxRetry    time.Duration
	giveUp      time.Duration
	sendTimeout time.Duration
	scanLimit   int
	batchLimit  int
}

// NewSender returns the Sender of cfg and registers the outbox metrics on
// cfg.Registerer (when set), whether or not mail is on: the queue's
// gauges watch the state on every node.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.State == nil || cfg.Applier == nil {
		return nil, errors.New("email: State and Applier are required")
	}
	if len(cfg.Mail) > 64 {
		return nil, errors.New("email: at most 64 destinations")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer, cfg.State, cfg.Now)
	if err != nil {
		return nil, err
	}
	return &Sender{
		cfg: cfg, log: cfg.Logger.With("component", "email"), metrics: m, notify: make(chan struct{}, 1),
		tick: time.Second, concurrency: DefaultConcurrency,
		firstRetry: DefaultFirstRetry, maxRetry: DefaultMaxRetry, giveUp: DefaultGiveUp, sendTimeout: DefaultSendTimeout,
		scanLimit: scanLimit, batchLimit: batchLimit,
	}, nil
}

// Notify wakes Run: messages may be due. It never blocks.
func (s *Sender) Notify() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// OnApply tells the Sender which command types the FSM just applied
// (wire it into fsm.FSM.OnApply); it calls Notify when one of them may
// enqueue or finish a message (Wakes). It must not block, and does not.
func (s *Sender) OnApply(types []fsm.Type) {
	if slices.ContainsFunc(types, Wakes) {
		s.Notify()
	}
}

// Wakes reports whether an applied command of type t may enqueue a
// message or record an outcome.
func Wakes(t fsm.Type) bool {
	switch t {
	case fsm.TypeEnqueueEmail, fsm.TypeIssueLink, fsm.TypeCreateInvitation, fsm.TypeUseLink, fsm.TypeEmailOutcome:
		return true
	}
	return false
}

// attempt is one delivery attempt of a message, to be recorded.
type attempt struct {
	email fsm.Email
	// accepted has bit i set when destination i (SenderConfig.Mail) has
	// accepted the message, in this attempt or an earlier one.
	accepted uint64
	outcome  fsm.Outcome
}

// run is the state of one Run, owned by its loop.
type run struct {
	// inflight holds the messages being sent or whose outcome is not yet
	// recorded: none of them is sent again meanwhile.
	inflight map[string]bool
	// accepted remembers, for a message that will be tried again, the
	// destinations that already have it, so a retry after the relay
	// failed does not write the outbox file twice. It is this leader's
	// memory only: a new leader sends to every destination again.
	accepted map[string]uint64
	busy     int // attempts being sent
	results  chan attempt
	wg       sync.WaitGroup

	// What the last look saw: whether it read every pending message (not
	// only the oldest scanLimit), whether a due message was left for want
	// of a free slot, and the earliest retry time of the others.
	complete bool
	more     bool
	nextDue  time.Time
	waiting  int // messages seen waiting for a retry
}

// Run delivers the outbox while ctx lives; the node runs it only on the
// leader (cluster.OnLeader).
//
// It looks at the pending messages when woken by Notify, when an outcome
// is recorded, and at least every second when something may be due, and
// sends each due message with at most DefaultConcurrency in flight and
// never two attempts of one message at once. A message stays in flight
// until its outcome is recorded (EmailOutcome, several outcomes a
// command), so a slow write never causes a second send. A temporary
// failure is retried after 30 s, then 1, 2, 4 ... minutes up to an hour
// apart, until the message is a day old; a failure of the message itself
// (a 5xx answer to it, an address refused, a body that does not open) or
// the day reached records it failed, with the error's text, never the
// body (see final).
//
// What is pending when leadership moves is sent by the next leader, and
// an attempt cut short by the move is not recorded: delivery is at least
// once.
func (s *Sender) Run(ctx context.Context) {
	if len(s.cfg.Mail) == 0 {
		if st, err := s.cfg.State.EmailStats(); err == nil && st.Pending > 0 {
			s.log.Warn("mail is off (no --smtp-url or --email-outbox): pending messages stay queued", "pending", st.Pending)
		}
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &run{inflight: map[string]bool{}, accepted: map[string]uint64{}, results: make(chan attempt)}
	defer func() {
		cancel() // abort the sends in flight: their outcomes are not recorded
		r.wg.Wait()
	}()
	s.log.Info("mail sender started", "destinations", len(s.cfg.Mail), "concurrency", s.concurrency)
	var unrecorded []attempt
	timer := time.NewTimer(0)
	defer timer.Stop()
	look := true
	for {
		if len(unrecorded) > 0 {
			n := min(len(unrecorded), s.batchLimit)
			if s.record(ctx, r, unrecorded[:n]) {
				unrecorded = slices.Delete(unrecorded, 0, n)
				look = true // slots and messages are free again
			}
		}
		// With every slot taken a look could start nothing: a finished
		// attempt frees one and wakes the loop.
		if r.busy < s.concurrency && (look || s.due(r)) {
			s.dispatch(ctx, r)
			look = false
		}
		wait := s.tick
		if len(unrecorded) > 0 {
			wait = s.tick / 10 // more to record, or a failed write to try again soon
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			s.log.Info("mail sender stopped", "in_flight", len(r.inflight))
			return
		case <-s.notify:
			look = true
		case <-timer.C:
		case a := <-r.results:
			r.busy--
			unrecorded = append(unrecorded, a)
			for more := true; more; { // batch whatever else has finished
				select {
				case a := <-r.results:
					r.busy--
					unrecorded = append(unrecorded, a)
				default:
					more = false
				}
			}
		}
	}
}

// due reports whether a look may find a message to start that the last
// one did not: it read only part of the outbox, left a due message for
// want of a slot, or a retry's time has come.
func (s *Sender) due(r *run) bool {
	return !r.complete || r.more || (!r.nextDue.IsZero() && !s.cfg.Now().Before(r.nextDue))
}

// dispatch starts an attempt for each due message that is not in flight,
// oldest first, while a slot is free.
//
// It reads no more of the outbox than it needs: the messages in flight
// and those waiting for a retry (which sit at the head, being the
// oldest), the free slots and a margin; and reads further, up to
// scanLimit, only while slots stay free and more may follow. A look
// during a burst of thousands of messages reads a few dozen.
func (s *Sender) dispatch(ctx context.Context, r *run) {
	now := s.cfg.Now()
	limit := min(s.scanLimit, len(r.inflight)+r.waiting+s.concurrency+16)
	for {
		pending, err := s.cfg.State.PendingEmails(limit)
		if err != nil {
			s.log.Warn("mail: read pending messages", "error", err)
			r.complete = false
			return
		}
		full := len(pending) >= limit
		r.complete, r.more, r.nextDue, r.waiting = !full, false, time.Time{}, 0
		for _, e := range pending {
			switch {
			case r.inflight[e.ID]:
			case e.NextAttemptAt.After(now):
				r.waiting++
				if r.nextDue.IsZero() || e.NextAttemptAt.Before(r.nextDue) {
					r.nextDue = e.NextAttemptAt
				}
			case r.busy >= s.concurrency:
				r.more = true
			default:
				s.start(ctx, r, e)
			}
		}
		if !full || r.busy >= s.concurrency || limit >= s.scanLimit {
			return
		}
		limit = min(limit*4, s.scanLimit)
	}
}

// start sends one attempt of e in the background; its result comes back
// on r.results.
func (s *Sender) start(ctx context.Context, r *run, e fsm.Email) {
	r.busy++
	r.inflight[e.ID] = true
	accepted := r.accepted[e.ID]
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		a, ok := s.attempt(ctx, e, accepted)
		if !ok {
			return // cut short: leadership moved or the node stops
		}
		select {
		case r.results <- a:
		case <-ctx.Done():
		}
	}()
}

// attempt opens e's body and hands it to each destination that does not
// have it yet, then decides the outcome. false: ctx ended first, and the
// attempt is not to be recorded.
func (s *Sender) attempt(ctx context.Context, e fsm.Email, accepted uint64) (attempt, bool) {
	a := attempt{email: e, accepted: accepted}
	if e.UserID != "" {
		// Erasing a person stops what is still owed to them: their links
		// died with them, and no mail about an account that is gone.
		if _, err := s.cfg.State.User(e.UserID); errors.Is(err, fsm.ErrNotFound) {
			a.outcome = s.outcome(e, []error{errors.New("the person was erased before it was sent")}, true)
			return a, true
		}
	}
	body, err := Open(s.cfg.KEK, e)
	if err != nil {
		// Never retried: no node of this cluster holds another key for it.
		a.outcome = s.outcome(e, []error{fmt.Errorf("the body does not open: %w", err)}, true)
		return a, true
	}
	m := mail.Message{To: e.To, Subject: body.Subject, Text: body.Text, HTML: body.HTML, Kind: e.Kind, Link: body.Link, Locale: e.Locale}
	var errs []error
	permanent := false
	for i, dest := range s.cfg.Mail {
		bit := uint64(1) << i
		if a.accepted&bit != 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, s.sendTimeout)
		err := dest.Send(sctx, m)
		cancel()
		if ctx.Err() != nil {
			return a, false
		}
		if err != nil {
			errs = append(errs, err)
			permanent = permanent || final(err)
			continue
		}
		a.accepted |= bit
	}
	a.outcome = s.outcome(e, errs, permanent)
	return a, true
}

// final reports whether a destination's error means the message can never
// be delivered there: package mail's permanent refusal of the message
// itself (an address that is not one, a 5xx answer to its recipient or
// its content). A permanent fault of the relay as a whole (no STARTTLS,
// an untrusted certificate, a refused login or From address) is not final
// for the message: it is retried for the day, while an operator fixes the
// relay; so is every error of a destination that does not classify its
// errors.
func final(err error) bool {
	var me *mail.Error
	if !errors.As(err, &me) || me.Temporary {
		return false
	}
	switch me.Step {
	case mail.StepMessage, mail.StepRecipient, mail.StepData:
		return true
	}
	return false
}

// outcome decides what an attempt of e that ended with errs means.
func (s *Sender) outcome(e fsm.Email, errs []error, permanent bool) fsm.Outcome {
	now := s.cfg.Now()
	o := fsm.Outcome{ID: e.ID, At: now}
	if len(errs) == 0 {
		o.State = fsm.EmailSent
		return o
	}
	o.Error = errorText(errs)
	age := now.Sub(e.CreatedAt)
	switch {
	case permanent:
		o.State = fsm.EmailFailed
	case age >= s.giveUp:
		o.State = fsm.EmailFailed
		o.Error = truncate(fmt.Sprintf("gave up after %s: %s", s.giveUp, o.Error))
	default:
		next := now.Add(s.backoff(e.Attempts + 1))
		if last := e.CreatedAt.Add(s.giveUp); next.After(last) {
			next = last // the last try is when the message turns a day old
		}
		o.State, o.NextAttemptAt = fsm.EmailPending, next
	}
	return o
}

// backoff is the wait after the n-th failed attempt (n from 1): the first
// retry after firstRetry, each later one twice as long, at most maxRetry.
func (s *Sender) backoff(n int) time.Duration {
	d := s.firstRetry
	for i := 1; i < n && d < s.maxRetry; i++ {
		d *= 2
	}
	return min(d, s.maxRetry)
}

// errorText is the recorded text of errs: each destination's error, which
// names the step that failed and never holds the message.
func errorText(errs []error) string {
	parts := make([]string, len(errs))
	for i, err := range errs {
		parts[i] = err.Error()
	}
	return truncate(strings.Join(parts, "; "))
}

// truncate keeps a recorded error short (the state keeps at most 512
// bytes), on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxErrorLen {
		return s
	}
	cut := maxErrorLen
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}

// record writes outcomes in one EmailOutcome command and counts them.
// false: the write failed; the caller keeps them in flight and tries
// again.
func (s *Sender) record(ctx context.Context, r *run, as []attempt) bool {
	out := fsm.EmailOutcome{Outcomes: make([]fsm.Outcome, len(as))}
	for i, a := range as {
		out.Outcomes[i] = a.outcome
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := s.cfg.Applier.Apply(actx, fsm.MustCommand(fsm.TypeEmailOutcome, out))
	if err == nil {
		err = res.Err
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("mail: record outcomes", "count", len(as), "error", err)
		}
		return false
	}
	for _, a := range as {
		e, o := a.email, a.outcome
		delete(r.inflight, e.ID)
		switch o.State {
		case fsm.EmailSent:
			delete(r.accepted, e.ID)
			s.metrics.attempts.WithLabelValues("sent").Inc()
			s.metrics.sent.Inc()
			s.metrics.latency.Observe(o.At.Sub(e.CreatedAt).Seconds())
			s.log.Debug("mail: sent", "email", e.ID, "kind", e.Kind, "attempt", e.Attempts+1)
		case fsm.EmailFailed:
			delete(r.accepted, e.ID)
			s.metrics.attempts.WithLabelValues("failed").Inc()
			s.metrics.failed.Inc()
			s.log.Warn("mail: failed for good", "email", e.ID, "kind", e.Kind, "attempts", e.Attempts+1, "error", o.Error)
		default:
			r.accepted[e.ID] = a.accepted
			s.metrics.attempts.WithLabelValues("retry").Inc()
			s.log.Info("mail: will retry", "email", e.ID, "kind", e.Kind, "attempt", e.Attempts+1,
				"next_attempt_at", o.NextAttemptAt, "error", o.Error)
		}
	}
	return true
}
