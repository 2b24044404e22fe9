package oidc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestNewRateLimiter(t *testing.T) {
	for _, c := range []struct {
		spec   string
		ok     bool
		limit  int
		window time.Duration
	}{
		{"5/60s", true, 5, time.Minute},
		{"100/1m", true, 100, time.Minute},
		{"1/1h30m", true, 1, 90 * time.Minute},
		{" 5/60s ", true, 5, time.Minute},
		{"off", true, 0, 0},
		{"", false, 0, 0},
		{"5", false, 0, 0},
		{"5/", false, 0, 0},
		{"/60s", false, 0, 0},
		{"0/60s", false, 0, 0},
		{"-1/60s", false, 0, 0},
		{"x/60s", false, 0, 0},
		{"5/60", false, 0, 0},
		{"5/0s", false, 0, 0},
		{"5/-1s", false, 0, 0},
		{"OFF", false, 0, 0},
	} {
		t.Run(c.spec, func(t *testing.T) {
			l, err := newRateLimiter(c.spec, time.Now)
			if (err == nil) != c.ok {
				t.Fatalf("error: got %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				return
			}
			if c.limit == 0 {
				if l.backend != nil {
					t.Errorf("off: got a backend, want none")
				}
				return
			}
			w := l.backend.(*windowLimiter)
			if w.limit != c.limit || w.window != c.window {
				t.Errorf("got %d/%v, want %d/%v", w.limit, w.window, c.limit, c.window)
			}
		})
	}
}

func TestWindowLimiter(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := newWindowLimiter(5, time.Minute, 100, clock.Now)
	ctx := context.Background()
	allow := func(key string) (bool, time.Duration) {
		ok, retry, err := l.Allow(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok, retry
	}
	steps := []struct {
		advance time.Duration
		key     string
		ok      bool
		retry   time.Duration
	}{
		{0, "a", true, 0},
		{10 * time.Second, "a", true, 0},
		{10 * time.Second, "a", true, 0},
		{10 * time.Second, "a", true, 0},
		{10 * time.Second, "a", true, 0},                 // t=40s: five in the window
		{10 * time.Second, "a", false, 10 * time.Second}, // t=50s: the first leaves at 60s
		{0, "b", true, 0},                                // another key is unaffected
		{10 * time.Second, "a", true, 0},                 // t=60s: the first left
		{0, "a", false, 10 * time.Second},                // t=60s: the second leaves at 70s
		{9 * time.Second, "a", false, time.Second},       // t=69s
		{time.Second, "a", true, 0},                      // t=70s
		{2 * time.Minute, "a", true, 0},                  // all gone: a fresh window
	}
	for i, s := range steps {
		clock.Add(s.advance)
		ok, retry := allow(s.key)
		if ok != s.ok || retry != s.retry {
			t.Errorf("step %d (%s): got %v %v, want %v %v", i, s.key, ok, retry, s.ok, s.retry)
		}
	}
	// A sliding window never lets more than five through in any minute,
	// unlike a bucket refilling one every 12 s.
	l = newWindowLimiter(5, time.Minute, 100, clock.Now)
	allowed := 0
	for i := 0; i < 60; i++ {
		if ok, _ := allow("c"); ok {
			allowed++
		}
		clock.Add(time.Second)
	}
	if allowed != 5 {
		t.Errorf("requests allowed in one minute: got %d, want 5", allowed)
	}
}

func TestWindowLimiterBoundedMemory(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := newWindowLimiter(5, time.Minute, 10, clock.Now)
	for i := 0; i < 1000; i++ {
		l.Allow(context.Background(), fmt.Sprint("k", i))
	}
	if got := l.size(); got > 10 {
		t.Errorf("keys under a flood: got %d, want at most 10", got)
	}
	clock.Add(time.Minute)
	l.Allow(context.Background(), "late")
	if got := l.size(); got != 1 {
		t.Errorf("keys after a quiet window: got %d, want 1", got)
	}
}

// failingLimiter is a limiter whose store is down.
type failingLimiter struct{}

func (failingLimiter) Allow(context.Context, string) (bool, time.Duration, error) {
	return false, 0, errors.New("limiter store down")
}

func TestRateLimitEndpoints(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RateLimit = "5/60s" })
	tokenReq := func(clientID, secret, ip string) bcReq {
		return bcReq{method: "POST", path: PathToken, user: clientID, pass: secret, remote: ip + ":4000",
			form: bcTokenForm("unknown-code")}
	}
	introspectReq := func(ip string) bcReq {
		return bcReq{method: "POST", path: PathIntrospect, user: hConfidential, pass: hSecret, remote: ip + ":4000",
			form: url.Values{"token": {"x"}}}
	}
	revokeReq := func(ip string) bcReq {
		return bcReq{method: "POST", path: PathRevoke, remote: ip + ":4000",
			form: url.Values{"client_id": {hConfidential}, "client_secret": {hSecret}, "token": {"x"}}}
	}
	limited := func(t *testing.T, r bcReq, retryAfter string) {
		t.Helper()
		rec := bcDo(t, h, r)
		bcEnvelope(t, rec, http.StatusTooManyRequests, "RATE_LIMITED")
		if got := rec.Header().Get("Retry-After"); got != retryAfter {
			t.Errorf("Retry-After: got %q, want %q", got, retryAfter)
		}
	}
	notLimited := func(t *testing.T, r bcReq) {
		t.Helper()
		if rec := bcDo(t, h, r); rec.Code == http.StatusTooManyRequests {
			t.Errorf("got 429, want an answer")
		}
	}

	for i := 0; i < 5; i++ {
		if rec := bcDo(t, h, tokenReq(hConfidential, hSecret, "198.51.100.1")); rec.Code != http.StatusBadRequest {
			t.Fatalf("request %d: got %d, want 400 (%s)", i+1, rec.Code, rec.Body)
		}
	}
	h.clock.Add(15 * time.Second)
	t.Run("sixth token request", func(t *testing.T) {
		limited(t, tokenReq(hConfidential, hSecret, "198.51.100.1"), "45")
	})
	t.Run("same client over the form", func(t *testing.T) {
		r := tokenReq("", "", "198.51.100.1")
		r.form = bcWith(r.form, "client_id", hConfidential, "client_secret", "whatever")
		limited(t, r, "45")
	})
	t.Run("a wrong secret is limited before authentication", func(t *testing.T) {
		limited(t, tokenReq(hConfidential, "wrong", "198.51.100.1"), "45")
	})
	t.Run("another client, same address", func(t *testing.T) {
		notLimited(t, tokenReq(hSiblingApp, hSiblingSec, "198.51.100.1"))
	})
	t.Run("same client, another address", func(t *testing.T) {
		notLimited(t, tokenReq(hConfidential, hSecret, "198.51.100.2"))
	})
	t.Run("X-Forwarded-For is not trusted", func(t *testing.T) {
		r := tokenReq(hConfidential, hSecret, "198.51.100.1")
		r.header = map[string]string{"X-Forwarded-For": "203.0.113.9"}
		limited(t, r, "45")
	})
	t.Run("introspection has its own budget", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			notLimited(t, introspectReq("198.51.100.1"))
		}
		limited(t, introspectReq("198.51.100.1"), "60")
	})
	t.Run("revocation has its own budget", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			notLimited(t, revokeReq("198.51.100.1"))
		}
		limited(t, revokeReq("198.51.100.1"), "60")
	})
	t.Run("allowed again after 60 s", func(t *testing.T) {
		h.clock.Add(45 * time.Second)
		notLimited(t, tokenReq(hConfidential, hSecret, "198.51.100.1"))
	})
	t.Run("limiter failure", func(t *testing.T) {
		saved := h.p.limiter
		h.p.limiter = &rateLimiter{backend: failingLimiter{}}
		defer func() { h.p.limiter = saved }()
		for _, r := range []bcReq{tokenReq(hConfidential, hSecret, "198.51.100.3"), introspectReq("198.51.100.3"), revokeReq("198.51.100.3")} {
			rec := bcDo(t, h, r)
			if rec.Code != http.StatusInternalServerError || rec.Body.String() != `{"error":"server_error"}` {
				t.Errorf("%s: got %d %q, want 500 %q", r.path, rec.Code, rec.Body, `{"error":"server_error"}`)
			}
		}
	})
}

func TestRateKey(t *testing.T) {
	r, _ := http.NewRequest("POST", "/", nil)
	long := string(make([]byte, 1000))
	for _, c := range []struct{ remote, id, want string }{
		{"192.0.2.1:1234", "app", "token\x00192.0.2.1\x00app"},
		{"[2001:db8::1]:443", "app", "token\x002001:db8::/64\x00app"}, // an IPv6 address by its /64
		{"pipe", "app", "token\x00pipe\x00app"},
		{"192.0.2.1:1", long, "token\x00192.0.2.1\x00#" + hashToken(long)},
	} {
		r.RemoteAddr = c.remote
		if got := rateKey(limitToken, c.id, r); got != c.want {
			t.Errorf("rateKey(%q): got %q, want %q", c.remote, got, c.want)
		}
	}
}

// TestRateAllowReplacesLocalLimiter: a provider given RateAllow asks it
// (the cluster's shared limiter) instead of counting locally, and a
// failing shared limiter is answered 500 server_error (SPEC.md 4.5).
func TestRateAllowReplacesLocalLimiter(t *testing.T) {
	shared, err := NewLocalLimiter("2/60s", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	var broken atomic.Bool
	allow := func(ctx context.Context, key string) (bool, time.Duration, error) {
		if broken.Load() {
			return false, 0, errors.New("leader unreachable")
		}
		return shared(ctx, key)
	}
	a := newHarness(t, func(c *Config) { c.RateLimit, c.RateAllow = "5/60s", allow })
	b := newHarness(t, func(c *Config) { c.RateLimit, c.RateAllow = "5/60s", allow })
	req := bcReq{method: "POST", path: PathIntrospect, user: hConfidential, pass: hSecret, form: url.Values{"token": {"x"}}}
	for i, want := range []int{200, 200, 429} { // two nodes, one budget of 2
		h := a
		if i%2 == 1 {
			h = b
		}
		if got := bcDo(t, h, req).Code; got != want {
			t.Fatalf("request %d: got %d, want %d", i+1, got, want)
		}
	}
	broken.Store(true)
	if rec := bcDo(t, a, req); rec.Code != 500 || !strings.Contains(rec.Body.String(), "server_error") {
		t.Fatalf("failing shared limiter: got %d %s, want 500 server_error", rec.Code, rec.Body)
	}
}
