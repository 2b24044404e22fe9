package logout

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/keys"
)

// scanLimit is how many pending deliveries one scan reads, oldest first.
const scanLimit = 1024

// logoutClaims are the claims of a logout token, exactly SPEC.md section
// 6: aud is a plain string, events holds the logout event with an empty
// object, sid is absent in the sub-only shape, and there is never a nonce.
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
	outcome fsm.Outcome
}

// RunSender delivers pending back-channel logouts while ctx lives; the node
// runs it only on the leader.
//
// It wakes on Notify and at least every second, reads the deliveries that
// are due, and posts each one with at most 8 in flight and never two
// attempts of one delivery at once. Outcomes are recorded with
// DeliveryOutcome, batched; a delivery stays in flight here until its
// outcome is recorded, so a slow write cannot cause a second send. A
// failed attempt is retried after 1s, 2s, 4s and 8s, and abandoned after
// the fifth. What is pending when leadership moves is sent by the next
// leader: delivery is at least once, and receivers drop repeats by jti.
func (s *Service) RunSender(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // abort sends in flight: their outcomes are not recorded
		wg.Wait()
	}()
	inflight := map[string]bool{}
	sem := make(chan struct{}, s.concurrency)
	results := make(chan attempt)
	var unrecorded []attempt
	timer := time.NewTimer(0)
	defer timer.Stop()
	s.log.Info("back-channel sender started")
	for {
		if len(unrecorded) > 0 && s.record(ctx, unrecorded) {
			for _, a := range unrecorded {
				delete(inflight, a.d.ID)
			}
			unrecorded = nil
		}
		s.dispatch(ctx, inflight, sem, results, &wg)
		timer.Reset(s.tick)
		select {
		case <-ctx.Done():
			s.log.Info("back-channel sender stopped", "in_flight", len(inflight))
			return
		case <-s.notify:
		case <-timer.C:
		case a := <-results:
			unrecorded = append(unrecorded, a)
			for more := true; more; { // batch whatever else has finished
				select {
				case a := <-results:
					unrecorded = append(unrecorded, a)
				default:
					more = false
				}
			}
		}
	}
}

// dispatch starts an attempt for each due delivery that is not in flight,
// while a slot is free.
func (s *Service) dispatch(ctx context.Context, inflight map[string]bool, sem chan struct{}, results chan<- attempt, wg *sync.WaitGroup) {
	ds, err := s.cfg.State.PendingDeliveries(scanLimit)
	if err != nil {
		s.log.Warn("back-channel: read pending deliveries", "error", err)
		return
	}
	now := s.now()
	for _, d := range ds {
		if inflight[d.ID] || d.NextAttemptAt.After(now) {
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			return // all slots busy; a finished attempt wakes the loop
		}
		inflight[d.ID] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := s.attempt(ctx, d)
			<-sem
			select {
			case results <- a:
			case <-ctx.Done():
			}
		}()
	}
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
			s.log.Debug("back-channel: delivered", "delivery", d.ID, "client_id", d.ClientID, "attempt", d.Attempts+1)
		case fsm.DeliveryAbandoned:
			s.metrics.abandoned.Inc()
			s.log.Warn("back-channel: abandoned", "delivery", d.ID, "client_id", d.ClientID, "attempts", d.Attempts+1, "error", o.Error)
		default:
			s.metrics.retries.Inc()
			s.log.Info("back-channel: will retry", "delivery", d.ID, "client_id", d.ClientID, "attempt", d.Attempts+1,
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
