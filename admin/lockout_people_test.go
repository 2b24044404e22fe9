package admin

import (
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/factor"
)

// TestLockoutsNameThePerson: GET /lockouts names the person a lockout is
// about (user_id) wherever the person is known: a password counter by the
// address typed (per account, and per account and address), a code
// counter by id or phone, a text-message number by phone; an address or
// number of nobody, and an IP address, name no one.
func TestLockoutsNameThePerson(t *testing.T) {
	e := newEnv(t)
	ann := e.createUser(`{"email":"Ann@Example.com","phone":"+15550100"}`)
	e.createUser(`{"email":"bob@example.com"}`)
	want := map[string]string{ // key: user_id
		factor.KeyPassword + factor.EmailSubject("ann@example.com"):                ann.ID,
		factor.KeyPassword + factor.EmailSubject("ANN@example.com") + "@192.0.2.7": ann.ID,
		factor.KeyPassword + factor.EmailSubject("nobody@example.com"):             "",
		factor.KeyCode + ann.ID:         ann.ID,
		factor.KeyCode + "tel+15550100": ann.ID,
		factor.KeyCode + "tel+15550199": "",
		factor.KeySMSTo + "+15550100":   ann.ID,
		factor.KeyIP + "192.0.2.7":      "",
	}
	var rules []fsm.ThrottleRule
	for k := range want {
		rules = append(rules, fsm.ThrottleRule{Key: k, Limit: 1, Window: time.Minute, Lockout: time.Hour})
	}
	mustApply(t, e.app, fsm.MustCommand(fsm.TypeThrottleHit, fsm.ThrottleHit{Rules: rules, At: e.clock.now()}))
	var lo struct{ Data []lockoutOut }
	decodeBody(t, e.must(200, "GET", "/admin/v1/lockouts", ""), &lo)
	if len(lo.Data) != len(want) {
		t.Fatalf("got %d lockouts, want %d: %+v", len(lo.Data), len(want), lo.Data)
	}
	for _, l := range lo.Data {
		if l.UserID != want[l.Key] {
			t.Errorf("%s (%s): got user_id %q, want %q", l.Key, l.Kind, l.UserID, want[l.Key])
		}
	}
}
