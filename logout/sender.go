package logout

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/keys"
)

// How the sender reads the pending deliveries: pages of scanLimit, oldest
// first, each in its own read transaction, at most scanPages of them each
// time it looks (Service.scanLimit and Service.scanPages; package tests
// lower them). Passing over a delivery whose receiver is busy costs about
// 0.1 µs (BenchmarkScanPendingPastABusyClient in fsm, plus the map
// lookups here), so one look costs a few milliseconds at most. A look
// that stops on its bound with slots free looks again after a tenth of a
// tick: a backlog of 100,000 deliveries behind a dead receiver is walked
// in seven looks, about 0.7 s, and then rests for a tick.
const (
	scanLimit = 1024
	scanPages = 16
)

// logoutClaims are the claims of a logout token, exactly as back-channel
// logout sends them: aud is a plain string, events holds the logout event
// with an empty object, sid is absent in the sub-only shape, and there is
// never a nonce.
type logoutClaims struct {
	Iss    string              `json:"iss"`
	Aud    string              `json:"aud"`
	Iat    int64               `json:"iat"`
	Exp    int64               `json:"exp"`
	JTI    string              `json:"jti"`
	Sub    string              `json:"sub"`
	OrgID  string              `json:"organization_id"`
	SID    string              `json:"sid,omitempty"`
	Events map[string]struct{} `json:"events"`
}

// logoutToken signs the token of delivery d at now. The jti is the
// delivery's id, so every attempt of one delivery carries the same jti.
func (s *Service) logoutToken(d fsm.Delivery, now time.Time) ([]byte, error) {
	c := logoutClaims{
		Iss: s.cfg.Issuer, Aud: d.ClientID, Iat: now.Unix(), Exp: now.Add(LogoutTokenLifetime).Unix(),
		JTI: d.ID, Sub: d.Sub, OrgID: d.OrgID, SID: d.SID,
		Events: map[string]struct{}{eventBackchannelLogout: {}},
	}
	return s.cfg.Keys.Sign(c, keys.TypLogout)
}

// attempt is the result of one delivery attempt, to be recorded.
type attempt struct {
	d       fsm.Delivery
	host    string // receiverHost(d.URI)
	outcome fsm.Outcome
}

// RunSender delivers pending back-channel logouts while ctx lives; the node
// runs it only on the leader.
//
// It wakes on Notify and at least every second, reads the deliveries that
// are due, and posts each one with at most 16 attempts in flight, at most
// 4 of them to one client and 4 to one receiving host (the host:port of
// the back-channel URI), and never two attempts of one delivery at once:
// a receiver that hangs holds its own slots and no others. Outcomes are
// recorded with DeliveryOutcome, batched; a delivery stays in flight here
// until its outcome is recorded, so a slow write cannot cause a second
// send. A failed attempt is retried after 1s, 2s, 4s and 8s, and
// abandoned after the fifth. What is pending when leadership moves is
// sent by the next leader: delivery is at least once, and receivers drop
// repeats by jti.
func (s *Service) RunSender(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	sd := &sender{
		inflight: map[string]bool{},
		slots:    newSlots(s.concurrency, s.perClient, s.perHost),
		results:  make(chan attempt),
	}
	defer func() {
		cancel() // abort sends in flight: their outcomes are not recorded
		sd.wg.Wait()
	}()
	var unrecorded []attempt
	timer := time.NewTimer(0)
	defer timer.Stop()
	s.log.Info("back-channel sender started", "slots", s.concurrency, "per_client", s.perClient, "per_host", s.perHost)
	for {
		if len(unrecorded) > 0 && s.record(ctx, unrecorded) {
			for _, a := range unrecorded {
				delete(sd.inflight, a.d.ID)
			}
			unrecorded = nil
		}
		s.dispatch(ctx, sd)
		wait := s.tick
		if sd.resume != "" && !sd.slots.full() {
			wait = s.tick / 10 // the scan stopped on its bound: go on soon
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			s.log.Info("back-channel sender stopped", "in_flight", len(sd.inflight))
			return
		case <-s.notify:
		case <-timer.C:
		case a := <-sd.results:
			sd.slots.release(a.d.ClientID, a.host)
			unrecorded = append(unrecorded, a)
			for more := true; more; { // batch whatever else has finished
				select {
				case a := <-sd.results:
					sd.slots.release(a.d.ClientID, a.host)
					unrecorded = append(unrecorded, a)
				default:
					more = false
				}
			}
		}
	}
}

// sender is the state of one RunSender, owned by its loop.
type sender struct {
	// inflight holds the deliveries being sent or whose outcome is not
	// yet recorded: none of them is sent again.
	inflight map[string]bool
	slots    *slots // attempts being sent
	results  chan attempt
	wg       sync.WaitGroup
	// resume is the id of the furthest pending delivery the scans have
	// examined since they last reached the end ("" from the oldest).
	resume string
}

// dispatch starts an attempt for each due delivery that is not in flight
// and whose client and host have a free slot, while the pool has one.
//
// The scan is fair: a delivery whose client or host is at its cap is
// passed over by its index entry, without being read, and does not count
// against anything but the page. Each dispatch reads the oldest page
// first (so the oldest due deliveries go first), then goes on from where
// the previous dispatches stopped, at most scanPages pages in all: a
// delivery behind any number of a hung receiver's is examined within a
// bounded number of dispatches, which happen at least every tick.
func (s *Service) dispatch(ctx context.Context, sd *sender) {
	if sd.slots.full() {
		return // a finished attempt wakes the loop
	}
	now := s.now()
	hosts := map[string]string{} // back-channel URI -> receiverHost
	visit := func(ref fsm.PendingRef, read func() (fsm.Delivery, bool)) bool {
		if sd.inflight[ref.ID] {
			return true
		}
		host, ok := hosts[ref.URI]
		if !ok {
			host = receiverHost(ref.URI)
			hosts[ref.URI] = host
		}
		if !sd.slots.free(ref.ClientID, host) {
			return true // its receiver is busy: its own tokens wait
		}
		d, ok := read()
		if !ok || d.NextAttemptAt.After(now) {
			return true
		}
		s.start(ctx, sd, d, host)
		return !sd.slots.full()
	}
	from := ""
	for page := range s.scanPages {
		last, err := s.cfg.State.ScanPending(from, s.scanLimit, visit)
		if err != nil {
			s.log.Warn("back-channel: read pending deliveries", "error", err)
			return
		}
		if last == "" { // reached the end: the next scan starts over
			sd.resume = ""
			return
		}
		sd.resume = max(sd.resume, last) // ids sort in creation order
		if sd.slots.full() {
			return
		}
		from = last
		if page == 0 {
			from = sd.resume
		}
	}
}

// start sends one attempt of d in the background, in a slot of its
// client and host; its result comes back on sd.results.
func (s *Service) start(ctx context.Context, sd *sender, d fsm.Delivery, host string) {
	sd.slots.take(d.ClientID, host)
	sd.inflight[d.ID] = true
	sd.wg.Add(1)
	go func() {
		defer sd.wg.Done()
		a := s.attempt(ctx, d)
		a.host = host
		select {
		case sd.results <- a:
		case <-ctx.Done():
		}
	}()
}

// slots counts the attempts in flight: in all, per client and per
// receiving host, each under its cap.
type slots struct {
	max, perClient, perHost int
	n                       int
	clients                 map[string]int
	hosts                   map[string]int
}

func newSlots(max, perClient, perHost int) *slots {
	return &slots{max: max, perClient: perClient, perHost: perHost, clients: map[string]int{}, hosts: map[string]int{}}
}

// full: no attempt may start.
func (s *slots) full() bool { return s.n >= s.max }

// free reports whether an attempt to client at host may start.
func (s *slots) free(client, host string) bool {
	return s.n < s.max && s.clients[client] < s.perClient && s.hosts[host] < s.perHost
}

func (s *slots) take(client, host string) {
	s.n++
	s.clients[client]++
	s.hosts[host]++
}

func (s *slots) release(client, host string) {
	s.n--
	if s.clients[client]--; s.clients[client] <= 0 {
		delete(s.clients, client)
	}
	if s.hosts[host]--; s.hosts[host] <= 0 {
		delete(s.hosts, host)
	}
}

// receiverHost is the host:port a back-channel URI is posted to, the key
// of the per-host cap: the host lowercased and the scheme's default port
// made explicit, so that one receiver has one key however its URIs spell
// it. A URI that does not parse is its own key (its post fails anyway).
func receiverHost(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" {
		return uri
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// attempt posts d once and decides its outcome.
func (s *Service) attempt(ctx context.Context, d fsm.Delivery) attempt {
	err := s.post(ctx, d)
	now := s.now()
	a := attempt{d: d, outcome: fsm.Outcome{ID: d.ID, At: now}}
	n := d.Attempts + 1
	switch {
	case err == nil:
		a.outcome.State = fsm.DeliverySent
	case n >= s.maxAttempts:
		a.outcome.State, a.outcome.Error = fsm.DeliveryAbandoned, truncate(err.Error())
	default:
		wait := s.backoff[min(n, len(s.backoff))-1]
		a.outcome.State, a.outcome.Error, a.outcome.NextAttemptAt = fsm.DeliveryPending, truncate(err.Error()), now.Add(wait)
	}
	return a
}

// post sends the logout token of d; any 2xx is success.
func (s *Service) post(ctx context.Context, d fsm.Delivery) error {
	tok, err := s.logoutToken(d, s.now())
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.sendTimeout)
	defer cancel()
	body := url.Values{"logout_token": {string(tok)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URI, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	return nil
}

// record writes outcomes in one DeliveryOutcome command and counts them.
// false: the write failed; the caller keeps them and tries again.
func (s *Service) record(ctx context.Context, as []attempt) bool {
	out := fsm.DeliveryOutcome{Outcomes: make([]fsm.Outcome, len(as))}
	for i, a := range as {
		out.Outcomes[i] = a.outcome
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.cfg.Applier.Apply(actx, fsm.MustCommand(fsm.TypeDeliveryOutcome, out)); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("back-channel: record outcomes", "count", len(as), "error", err)
		}
		return false
	}
	for _, a := range as {
		d, o := a.d, a.outcome
		switch o.State {
		case fsm.DeliverySent:
			s.metrics.sent.Inc()
			s.metrics.latency.Observe(o.At.Sub(d.CreatedAt).Seconds())
			s.log.Debug("back-channel: delivered", "delivery", d.ID, "client_id", d.ClientID, "host", a.host, "attempt", d.Attempts+1)
		case fsm.DeliveryAbandoned:
			s.metrics.abandoned.Inc()
			s.log.Warn("back-channel: abandoned", "delivery", d.ID, "client_id", d.ClientID, "host", a.host, "attempts", d.Attempts+1, "error", o.Error)
		default:
			s.metrics.retries.Inc()
			s.log.Info("back-channel: will retry", "delivery", d.ID, "client_id", d.ClientID, "host", a.host, "attempt", d.Attempts+1,
				"next_attempt_at", o.NextAttemptAt, "error", o.Error)
		}
	}
	return true
}

// truncate keeps a recorded error short.
func truncate(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max]
	}
	return s
}
