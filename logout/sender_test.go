package logout

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"
	dto "github.com/prometheus/client_model/go"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/keys"
)

// checkLogoutToken validates tok as docs/application-developers.md tells
// receivers, plus the exact shape: header, claim set, aud as a string,
// events, lifetime.
func (h *harness) checkLogoutToken(t *testing.T, tok, clientID string, withSID bool) map[string]any {
	t.Helper()
	set, err := h.keys.PublicSet()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jwt.Parse([]byte(tok), jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithClock(jwt.ClockFunc(h.clock.Now)),
		jwt.WithIssuer(h.s.cfg.Issuer), jwt.WithAudience(clientID), jwt.WithAcceptableSkew(5*time.Second)); err != nil {
		t.Fatalf("logout token does not validate: %v", err)
	}
	msg, err := jws.Parse([]byte(tok))
	if err != nil {
		t.Fatal(err)
	}
	hdr := msg.Signatures()[0].ProtectedHeaders()
	if hdr.Type() != keys.TypLogout || hdr.Algorithm() != jwa.RS256 || hdr.KeyID() == "" {
		t.Fatalf("header: typ %q alg %q kid %q", hdr.Type(), hdr.Algorithm(), hdr.KeyID())
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(msg.Payload(), &raw); err != nil {
		t.Fatal(err)
	}
	want := []string{"aud", "events", "exp", "iat", "iss", "jti", "organization_id", "sub"}
	if withSID {
		want = append(want, "sid")
	}
	var got []string
	for k := range raw {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("claims: got %v, want %v", got, want)
	}
	if string(raw["aud"]) != `"`+clientID+`"` {
		t.Fatalf("aud: got %s, want the plain string %q", raw["aud"], clientID)
	}
	if string(raw["events"]) != `{"http://schemas.openid.net/event/backchannel-logout":{}}` {
		t.Fatalf("events: got %s", raw["events"])
	}
	c := claimsOf(tok)
	if exp, iat := c["exp"].(float64), c["iat"].(float64); exp-iat != 120 {
		t.Fatalf("exp - iat: got %v, want 120", exp-iat)
	}
	return c
}

// logoutAll signs a browser out of sess through the FSM, as /logout does.
func (h *harness) logoutAll(sess browserSSO) fsm.EndedApps {
	h.t.Helper()
	res := h.apply(fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: sess.id, At: h.clock.Now(), Reason: fsm.EndLogout})
	return res.Value.(fsm.EndedApps)
}

// metric reads one counter, gauge or histogram count from the registry.
func (h *harness) metric(name string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	h.t.Fatalf("no metric %s", name)
	return 0
}

func (h *harness) delivery(id string) fsm.Delivery {
	h.t.Helper()
	d, err := h.applier.State().Delivery(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

func TestLogoutTokenWithSID(t *testing.T) {
	h := newHarness(t)
	h.runSender()
	sess := h.ssoSession(hUser)
	sidA, _ := h.signIn(sess, hUser, hAppA, hOrgA)
	sidM, _ := h.signIn(sess, hUser, hMulti, hOrgB)
	ended := h.logoutAll(sess)
	waitFor(t, "both deliveries", func() bool { return len(h.recvA.received()) == 1 && len(h.recvM.received()) == 1 })

	byClient := map[string]fsm.Delivery{}
	for _, d := range ended.Deliveries {
		byClient[d.ClientID] = d
	}
	for _, tt := range []struct {
		r             *receiver
		client, sid   string
		org           string
		wantDeliverID string
	}{{h.recvA, hAppA, sidA, hOrgA, byClient[hAppA].ID}, {h.recvM, hMulti, sidM, hOrgB, byClient[hMulti].ID}} {
		c := h.checkLogoutToken(t, tt.r.received()[0], tt.client, true)
		if c["sid"] != tt.sid || c["sub"] != hUser || c["organization_id"] != tt.org || c["iss"] != h.s.cfg.Issuer || c["jti"] != tt.wantDeliverID {
			t.Fatalf("%s: claims %v", tt.client, c)
		}
	}
	waitFor(t, "outcomes recorded", func() bool {
		ds, _ := h.applier.State().DeliveriesOf(ended.Index)
		return !anyPending(ds)
	})
	for _, d := range ended.Deliveries {
		if got := h.delivery(d.ID); got.State != fsm.DeliverySent || got.Attempts != 1 || got.DoneAt.IsZero() {
			t.Fatalf("delivery %s: %+v, want sent after one attempt", d.ID, got)
		}
	}
	h.waitMetric("oidcd_backchannel_sent_total", 2)
	h.waitMetric("oidcd_backchannel_delivery_seconds", 2)
	h.waitMetric("oidcd_backchannel_pending", 0)
}

func TestLogoutTokenSubOnlyOnErasure(t *testing.T) {
	h := newHarness(t)
	h.runSender()
	s1, s2 := h.ssoSession(hUser), h.ssoSession(hUser)
	h.signIn(s1, hUser, hAppA, hOrgA)
	h.signIn(s2, hUser, hAppA, hOrgA) // a second app session of the same app, org, person
	h.signIn(s1, hUser, hAppB, hOrgA)
	h.apply(fsm.TypeDeleteUser, fsm.DeleteUser{ID: hUser, At: h.clock.Now()})
	waitFor(t, "deliveries", func() bool { return len(h.recvA.received()) >= 1 && len(h.recvB.received()) >= 1 })
	time.Sleep(100 * time.Millisecond)
	if n := len(h.recvA.received()); n != 1 {
		t.Fatalf("app A: got %d tokens, want one sub-only token for both app sessions", n)
	}
	for _, rc := range []struct {
		r      *receiver
		client string
	}{{h.recvA, hAppA}, {h.recvB, hAppB}} {
		c := h.checkLogoutToken(t, rc.r.received()[0], rc.client, false)
		if c["sub"] != hUser || c["organization_id"] != hOrgA {
			t.Fatalf("%s: claims %v", rc.client, c)
		}
	}
}

func TestRetriesThenAbandons(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FrontChannelWait = -1 })
	h.runSender()
	h.recvA.status.Store(http.StatusServiceUnavailable)
	sess := h.ssoSession(hUser)
	h.signIn(sess, hUser, hAppA, hOrgA)
	h.signIn(sess, hUser, hAppB, hOrgA)
	ended := h.logoutAll(sess)
	var id string
	for _, d := range ended.Deliveries {
		if d.ClientID == hAppA {
			id = d.ID
		}
	}
	waitFor(t, "abandonment", func() bool { return h.delivery(id).State == fsm.DeliveryAbandoned })
	d := h.delivery(id)
	if d.Attempts != DefaultMaxAttempts || !strings.Contains(d.LastError, "503") || d.DoneAt.IsZero() {
		t.Fatalf("delivery: %+v, want abandoned after %d attempts with the 503 recorded", d, DefaultMaxAttempts)
	}
	got := h.recvA.received()
	if len(got) != DefaultMaxAttempts {
		t.Fatalf("receiver A: got %d attempts, want %d", len(got), DefaultMaxAttempts)
	}
	for _, tok := range got {
		if c := claimsOf(tok); c["jti"] != id {
			t.Fatalf("retry jti: got %v, want %s", c["jti"], id)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(h.recvA.received()); n != DefaultMaxAttempts {
		t.Fatalf("attempts after abandonment: %d", n)
	}
	h.waitMetric("oidcd_backchannel_retries_total", DefaultMaxAttempts-1)
	h.waitMetric("oidcd_backchannel_abandoned_total", 1)
	h.waitMetric("oidcd_backchannel_sent_total", 1)
}

func TestRetryThenSuccessKeepsTheJTI(t *testing.T) {
	h := newHarness(t)
	h.runSender()
	h.recvA.status.Store(http.StatusInternalServerError)
	sess := h.ssoSession(hUser)
	h.signIn(sess, hUser, hAppA, hOrgA)
	ended := h.logoutAll(sess)
	waitFor(t, "two failed attempts", func() bool { return h.delivery(ended.Deliveries[0].ID).Attempts >= 2 })
	h.recvA.status.Store(http.StatusNoContent)
	waitFor(t, "delivery", func() bool { return h.delivery(ended.Deliveries[0].ID).State == fsm.DeliverySent })
	got := h.recvA.received()
	if len(got) < 3 || claimsOf(got[0])["jti"] != claimsOf(got[len(got)-1])["jti"] {
		t.Fatalf("attempts: %d, jti first %v last %v", len(got), claimsOf(got[0])["jti"], claimsOf(got[len(got)-1])["jti"])
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	h := newHarness(t)
	h.s.backoff = []time.Duration{time.Hour}
	h.runSender()
	h.recvA.status.Store(http.StatusFound)
	sess := h.ssoSession(hUser)
	h.signIn(sess, hUser, hAppA, hOrgA)
	ended := h.logoutAll(sess)
	waitFor(t, "an attempt", func() bool { return h.delivery(ended.Deliveries[0].ID).Attempts == 1 })
	d := h.delivery(ended.Deliveries[0].ID)
	if d.State != fsm.DeliveryPending || !strings.Contains(d.LastError, "302") || !d.NextAttemptAt.After(h.clock.Now().Add(50*time.Minute)) {
		t.Fatalf("delivery after a 302: %+v", d)
	}
	h.waitMetric("oidcd_backchannel_pending", 1)
}

func TestSenderBoundsConcurrencyAndNeverOverlapsADelivery(t *testing.T) {
	h := newHarness(t)
	h.recvA.delay.Store(int64(100 * time.Millisecond))
	for range 20 {
		sess := h.ssoSession(hUser)
		h.signIn(sess, hUser, hAppA, hOrgA)
		h.logoutAll(sess)
	}
	h.runSender()
	waitFor(t, "20 deliveries", func() bool {
		ds, _ := h.applier.State().PendingDeliveries(100)
		return len(ds) == 0
	})
	h.recvA.mu.Lock()
	defer h.recvA.mu.Unlock()
	if len(h.recvA.tokens) != 20 || h.recvA.maxInFlight > DefaultPerClient || h.recvA.maxInFlight < 2 || h.recvA.overlap {
		t.Fatalf("tokens %d, max in flight %d (want 2..%d, one client's cap), overlap %v", len(h.recvA.tokens), h.recvA.maxInFlight, DefaultPerClient, h.recvA.overlap)
	}
}

func TestOutcomeWriteFailureDoesNotResend(t *testing.T) {
	h := newHarness(t)
	h.applier.failOn(fsm.TypeDeliveryOutcome, errors.New("not leader"))
	h.runSender()
	sess := h.ssoSession(hUser)
	h.signIn(sess, hUser, hAppA, hOrgA)
	ended := h.logoutAll(sess)
	waitFor(t, "an attempt", func() bool { return len(h.recvA.received()) == 1 })
	time.Sleep(150 * time.Millisecond) // several ticks
	if n := len(h.recvA.received()); n != 1 {
		t.Fatalf("attempts while the outcome could not be written: %d, want 1", n)
	}
	h.applier.failOn(fsm.TypeDeliveryOutcome, nil)
	waitFor(t, "the outcome", func() bool { return h.delivery(ended.Deliveries[0].ID).State == fsm.DeliverySent })
	if n := len(h.recvA.received()); n != 1 {
		t.Fatalf("attempts in all: %d, want 1", n)
	}
}

func TestNewLeaderResendsWhatWasInFlight(t *testing.T) {
	h := newHarness(t)
	h.recvA.delay.Store(int64(time.Minute))
	sess := h.ssoSession(hUser)
	h.signIn(sess, hUser, hAppA, hOrgA)
	ended := h.logoutAll(sess)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.s.RunSender(ctx); close(done) }()
	waitFor(t, "the first attempt", func() bool { return len(h.recvA.received()) == 1 })
	cancel() // leadership lost mid-send
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("RunSender did not return promptly")
	}
	if d := h.delivery(ended.Deliveries[0].ID); d.State != fsm.DeliveryPending || d.Attempts != 0 {
		t.Fatalf("after the lost leadership: %+v, want pending and untried", d)
	}
	h.recvA.delay.Store(0)
	h.runSender() // the next leader
	waitFor(t, "redelivery", func() bool { return h.delivery(ended.Deliveries[0].ID).State == fsm.DeliverySent })
	got := h.recvA.received()
	if len(got) != 2 || claimsOf(got[0])["jti"] != claimsOf(got[1])["jti"] {
		t.Fatalf("deliveries: %d, want 2 with one jti", len(got))
	}
}

func TestNotifyNeverBlocks(t *testing.T) {
	h := newHarness(t)
	done := make(chan struct{})
	go func() {
		for range 1000 {
			h.s.Notify()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Notify blocked")
	}
}

func TestLogoutTokenShapeIsExact(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	d := fsm.Delivery{ID: "00000000000000000042-0001", ClientID: hAppA, Sub: hUser, OrgID: hOrgA, SID: uuid.NewString()}
	tok, err := h.s.logoutToken(d, now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(tok), ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	want := `{"iss":"` + h.s.cfg.Issuer + `","aud":"app-a","iat":` + itoa(now.Unix()) + `,"exp":` + itoa(now.Unix()+120) +
		`,"jti":"00000000000000000042-0001","sub":"` + hUser + `","organization_id":"` + hOrgA + `","sid":"` + d.SID +
		`","events":{"http://schemas.openid.net/event/backchannel-logout":{}}}`
	if string(payload) != want {
		t.Fatalf("payload:\n got %s\nwant %s", payload, want)
	}
	d.SID = ""
	tok, _ = h.s.logoutToken(d, now)
	if strings.Contains(claimsJSON(string(tok)), `"sid"`) {
		t.Fatalf("sub-only token has a sid: %s", claimsJSON(string(tok)))
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func claimsJSON(tok string) string {
	b, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	return string(b)
}

// TestOnApplyWakes: OnApply wakes the sender after a command that may
// create or finish a delivery, and not after others.
func TestOnApplyWakes(t *testing.T) {
	s := &Service{notify: make(chan struct{}, 1), changed: make(chan struct{})}
	woke := func() bool {
		select {
		case <-s.notify:
			return true
		default:
			return false
		}
	}
	s.OnApply([]fsm.Type{fsm.TypeIssueCode, fsm.TypeRedeemCode})
	if woke() {
		t.Error("woke after commands that touch no delivery")
	}
	for _, typ := range []fsm.Type{fsm.TypeEndSSOSession, fsm.TypeDeliveryOutcome, fsm.TypeDirectorySyncBatch, fsm.TypeDeleteOrg} {
		s.OnApply([]fsm.Type{fsm.TypeIssueCode, typ})
		if !woke() {
			t.Errorf("%s did not wake the sender", typ)
		}
	}
}
