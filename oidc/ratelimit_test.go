package oidc

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/ratelimit"
)

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
		{"192.0.2.1:1", long, "token\x00192.0.2.1\x00#" + authn.HashToken(long)},
	} {
		r.RemoteAddr = c.remote
		if got := rateKey(limitToken, c.id, r); got != c.want {
			t.Errorf("rateKey(%q): got %q, want %q", c.remote, got, c.want)
		}
	}
}

// sharedLimiter is a cluster's limiter as a provider sees it: a Window
// elsewhere, or an error when that cannot be reached.
type sharedLimiter struct {
	w      *ratelimit.Window
	broken atomic.Bool
}

func (l *sharedLimiter) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	if l.broken.Load() {
		return false, 0, errors.New("leader unreachable")
	}
	return l.w.Allow(ctx, key)
}

// TestSharedLimiterReplacesLocalLimiter: a provider given a RateLimiter
// asks it (the cluster's shared limiter) instead of counting locally, and
// a failing shared limiter is answered 500 server_error.
func TestSharedLimiterReplacesLocalLimiter(t *testing.T) {
	shared := &sharedLimiter{w: ratelimit.NewWindow(2, time.Minute, 10, time.Now)}
	a := newHarness(t, func(c *Config) { c.RateLimit, c.RateLimiter = "5/60s", shared })
	b := newHarness(t, func(c *Config) { c.RateLimit, c.RateLimiter = "5/60s", shared })
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
	shared.broken.Store(true)
	if rec := bcDo(t, a, req); rec.Code != 500 || !strings.Contains(rec.Body.String(), "server_error") {
		t.Fatalf("failing shared limiter: got %d %s, want 500 server_error", rec.Code, rec.Body)
	}
}
