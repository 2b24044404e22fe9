package signin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

// TestLockedAddressSignInsWriteNothing: once an address is locked, its
// sign-in attempts are refused with 429 before any replicated write. The
// address is locked the way an attacker locks it (throttleIP's limit of
// wrong passwords, spread over unknown accounts so no account delay
// applies); then 30 more attempts, the right password among them, leave
// the applied index where it was. Without the local check each refused
// attempt was a ThrottleReserve through raft.
func TestLockedAddressSignInsWriteNothing(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	form := postForm(t, b.get(authzPath(authzQuery(hPublic, false))), "method")
	try := func(email, pw string) page {
		t.Helper()
		return b.submit(form, "method", "password", map[string]string{"email": email, "password": pw})
	}
	for i := range throttleIP.limit {
		if p := try(fmt.Sprintf("nobody%d@example.com", i), "wrong password"); p.status != http.StatusBadRequest {
			t.Fatalf("wrong password %d: got %d, want 400", i+1, p.status)
		}
	}
	if ip, err := h.applier.State().Throttle(throttleIP.prefix + "127.0.0.1"); err != nil || !ip.Locked(h.clock.Now()) {
		t.Fatalf("the address after %d failures: %+v %v, want locked", throttleIP.limit, ip, err)
	}
	before := h.applier.State().Applied()
	for i := range 30 {
		email, pw := fmt.Sprintf("nobody%d@example.com", i), "wrong password"
		if i%3 == 0 {
			email, pw = hEmail, hPassword
		}
		if p := try(email, pw); p.status != http.StatusTooManyRequests {
			t.Fatalf("attempt %d from the locked address: got %d, want 429", i+1, p.status)
		}
	}
	if got := h.applier.State().Applied(); got != before {
		t.Errorf("applied index after 30 refused attempts: got %d, want %d (unchanged)", got, before)
	}
}

// TestReserveRefusesALockedKeyWithoutWriting: every caller's rules (a
// password, a second-factor or text-message code, a text message sent)
// are refused with errLocked and no write when any one of their keys is
// locked, and reserved through one write when none is.
func TestReserveRefusesALockedKeyWithoutWriting(t *testing.T) {
	const ip = "192.0.2.7"
	cases := []struct {
		name   string
		rules  []fsm.ThrottleRule
		locked int // index of the rule whose key is locked
	}{
		{"password, address locked", passwordRules(hEmail, ip), 2},
		{"password, account locked", passwordRules(hEmail, ip), 1},
		{"second factor, person locked", []fsm.ThrottleRule{throttleCode.rule(hUser), throttleIP.rule(ip)}, 0},
		{"sms code, address locked", []fsm.ThrottleRule{throttleCode.rule("tel+15550100"), throttleIP.rule(ip)}, 1},
		{"sms send, number locked", []fsm.ThrottleRule{throttleSMSTo.rule("+15550100"), throttleSMSIP.rule(ip)}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			before := h.applier.State().Applied()
			if _, err := h.p.reserve(ctx, nil, tc.rules...); err != nil {
				t.Fatalf("nothing locked: %v", err)
			}
			if got := h.applier.State().Applied(); got != before+1 {
				t.Fatalf("nothing locked: applied index %d, want %d (one reservation)", got, before+1)
			}
			lock := tc.rules[tc.locked]
			lock.Limit = 1
			h.apply(fsm.TypeThrottleHit, fsm.ThrottleHit{Rules: []fsm.ThrottleRule{lock}, At: h.clock.Now()})
			before = h.applier.State().Applied()
			for range 10 {
				if _, err := h.p.reserve(ctx, h.p.lockoutEvent("", ""), tc.rules...); !errors.Is(err, errLocked) {
					t.Fatalf("%s locked: got %v, want errLocked", lock.Key, err)
				}
			}
			if got := h.applier.State().Applied(); got != before {
				t.Errorf("10 refused reservations: applied index %d, want %d (unchanged)", got, before)
			}
			h.clock.Add(lock.Lockout)
			if _, err := h.p.reserve(ctx, nil, tc.rules...); err != nil {
				t.Errorf("after the lockout: %v", err)
			}
		})
	}
}

// TestReserveConfirmsALockWithAReadIndex: a lock found in this node's
// state is confirmed after a read index before the attempt is refused, so
// a lock lifted elsewhere a moment ago (here: the clear this node applies
// while it catches up) lets the attempt through to its reservation; a
// lock that stands is refused with no write, read index or not, and so
// is one the cluster cannot vouch for.
func TestReserveConfirmsALockWithAReadIndex(t *testing.T) {
	var (
		reads   int
		catchUp func() // what this node has yet to apply
		fail    error
	)
	h := newHarness(t, func(c *Config) {
		c.ReadIndex = func(context.Context) error {
			reads++
			if catchUp != nil {
				catchUp()
				catchUp = nil
			}
			return fail
		}
	})
	ctx := context.Background()
	rules := []fsm.ThrottleRule{throttleCode.rule(hUser), throttleIP.rule("192.0.2.7")}
	lock := rules[1]
	lock.Limit = 1
	h.apply(fsm.TypeThrottleHit, fsm.ThrottleHit{Rules: []fsm.ThrottleRule{lock}, At: h.clock.Now()})

	catchUp = func() { h.apply(fsm.TypeThrottleClear, fsm.ThrottleClear{Keys: []string{lock.Key}}) }
	if _, err := h.p.reserve(ctx, nil, rules...); err != nil || reads != 1 {
		t.Fatalf("a lock lifted elsewhere: got %v after %d read indexes, want a reservation after 1", err, reads)
	}

	h.apply(fsm.TypeThrottleHit, fsm.ThrottleHit{Rules: []fsm.ThrottleRule{lock}, At: h.clock.Now()})
	before := h.applier.State().Applied()
	for i, f := range []error{nil, errors.New("no leader")} {
		fail = f
		if _, err := h.p.reserve(ctx, nil, rules...); !errors.Is(err, errLocked) {
			t.Errorf("a lock that stands (read index error %v): got %v, want errLocked", f, err)
		}
		if reads != 2+i {
			t.Errorf("read indexes: got %d, want %d", reads, 2+i)
		}
	}
	if got := h.applier.State().Applied(); got != before {
		t.Errorf("refused reservations: applied index %d, want %d (unchanged)", got, before)
	}
}
