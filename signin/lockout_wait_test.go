package signin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/webui"
)

// TestLockoutPageSaysHowLongToWait: the sign-in page shown for a lockout
// answers 429 with Retry-After (the seconds until the lock ends) and says
// about how many minutes to wait.
func TestLockoutPageSaysHowLongToWait(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	signIn := func() page { // a fresh form each time: a pending request expires
		t.Helper()
		form := postForm(t, b.get(authzPath(authzQuery(hPublic, false))), "method")
		return b.submit(form, "method", "password", map[string]string{"email": hEmail, "password": hPassword})
	}
	lock := throttleIP.rule("127.0.0.1")
	lock.Limit = 1
	h.apply(fsm.TypeThrottleHit, fsm.ThrottleHit{Rules: []fsm.ThrottleRule{lock}, At: h.clock.Now()})

	cases := []struct {
		after       time.Duration // since the lock began
		retryAfter  string
		wantMessage string
	}{
		{0, "900", "Wait about 15 minutes, then try again."},
		{10*time.Minute + 1*time.Second, "299", "Wait about 5 minutes, then try again."},
		{14*time.Minute + 30*time.Second, "30", "Wait about a minute, then try again."},
	}
	start := h.clock.Now()
	for _, tc := range cases {
		h.clock.Add(start.Add(tc.after).Sub(h.clock.Now()))
		p := signIn()
		if p.status != http.StatusTooManyRequests {
			t.Fatalf("%s into the lock: got %d, want 429", tc.after, p.status)
		}
		if got := p.header.Get("Retry-After"); got != tc.retryAfter {
			t.Errorf("%s into the lock: got Retry-After %q, want %q", tc.after, got, tc.retryAfter)
		}
		if !strings.Contains(p.body, tc.wantMessage) {
			t.Errorf("%s into the lock: the page lacks %q\n%s", tc.after, tc.wantMessage, p.body)
		}
	}
	// Once the lock has ended the right password signs in.
	h.clock.Add(start.Add(lock.Lockout).Sub(h.clock.Now()))
	if p := signIn(); p.status == http.StatusTooManyRequests {
		t.Fatalf("after the lock: got 429, want the sign-in to go on")
	}
}

// TestReserveSaysUntilWhen: a refused reservation carries the latest end
// of the locks among its keys.
func TestReserveSaysUntilWhen(t *testing.T) {
	h := newHarness(t)
	rules := passwordRules(hEmail, "192.0.2.7")
	short, long := rules[0], rules[2]
	short.Limit, short.Lockout = 1, 2*time.Minute
	long.Limit, long.Lockout = 1, 10*time.Minute
	h.apply(fsm.TypeThrottleHit, fsm.ThrottleHit{Rules: []fsm.ThrottleRule{short, long}, At: h.clock.Now()})
	_, err := h.p.reserve(context.Background(), nil, rules...)
	var le *lockedError
	if !errors.As(err, &le) || !errors.Is(err, errLocked) {
		t.Fatalf("got %v, want a lockedError that Is errLocked", err)
	}
	if want := h.clock.Now().Add(10 * time.Minute); !le.until.Equal(want) {
		t.Errorf("got until %s, want %s (the later lock)", le.until, want)
	}
}

// testText is a catalog message of the pages in the language tag.
func testText(t *testing.T, tag language.Tag, key string, args ...any) string {
	t.Helper()
	u, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	return u.Text(tag, key, args...)
}

// TestLockoutMessage: the wait is rounded up, in whole minutes on the
// page and whole seconds in Retry-After; an unknown end keeps the plain
// message and sends no Retry-After.
func TestLockoutMessage(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		err        error
		retryAfter string
		msg        string
		lang       language.Tag
	}{
		{&lockedError{until: now.Add(15 * time.Minute)}, "900", "Wait about 15 minutes", language.English},
		{&lockedError{until: now.Add(61 * time.Second)}, "61", "Wait about 2 minutes", language.English},
		{&lockedError{until: now.Add(60 * time.Second)}, "60", "Wait about a minute", language.English},
		{&lockedError{until: now.Add(1500 * time.Millisecond)}, "2", "Wait about a minute", language.English},
		{&lockedError{}, "", "Wait a few minutes", language.English},
		{&lockedError{until: now}, "", "Wait a few minutes", language.English},
		{errLocked, "", "Wait a few minutes", language.English},
		{&lockedError{until: now.Add(15 * time.Minute)}, "900", "Warten Sie etwa 15 Minuten", language.German},
		{&lockedError{until: now.Add(50 * time.Second)}, "50", "Patientez environ une minute", language.French},
		{&lockedError{until: now.Add(3 * time.Minute)}, "180", "約 3 分待って", language.Japanese},
	}
	for _, tc := range cases {
		w := httptest.NewRecorder()
		msg := lockout(w, tc.err, now, func(key string, args ...any) string { return testText(t, tc.lang, key, args...) })
		if got := w.Header().Get("Retry-After"); got != tc.retryAfter || !strings.Contains(msg, tc.msg) {
			t.Errorf("%+v: got Retry-After %q and %q, want %q and %q", tc.err, got, msg, tc.retryAfter, tc.msg)
		}
	}
}
