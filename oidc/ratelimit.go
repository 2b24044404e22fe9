package oidc

import (
	"container/list"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oidcd/oidcd/internal/httpx"
)

// limiter decides whether one more request under key may proceed. It
// records the request when it allows it. When it does not, retry is how
// long until it would. err is a failure of the limiter itself (a
// replicated limiter that cannot reach its store), answered with 500.
//
// The local sliding window below is one implementation; a cluster-wide one
// can replace it behind the same interface.
type limiter interface {
	Allow(ctx context.Context, key string) (ok bool, retry time.Duration, err error)
}

// rateLimiter is the provider's request-rate guard of SPEC.md 8 for the
// token, introspection and revocation endpoints. A nil backend means
// "off": every request is allowed.
type rateLimiter struct {
	backend limiter
}

// Rate-limited endpoints: each has its own budget (SPEC.md 8, "separate
// statement for each").
const (
	limitToken      = "token"
	limitIntrospect = "introspect"
	limitRevoke     = "revoke"
)

// newRateLimiter parses spec, "N/duration" ("5/60s", "100/1m") or "off",
// into a local limiter on the clock now.
func newRateLimiter(spec string, now func() time.Time) (*rateLimiter, error) {
	spec = strings.TrimSpace(spec)
	if spec == "off" {
		return &rateLimiter{}, nil
	}
	n, d, ok := strings.Cut(spec, "/")
	limit, err := strconv.Atoi(n)
	if !ok || err != nil || limit < 1 {
		return nil, fmt.Errorf("oidc: rate limit %q: want N/duration with N >= 1, or off", spec)
	}
	window, err := time.ParseDuration(d)
	if err != nil || window <= 0 {
		return nil, fmt.Errorf("oidc: rate limit %q: want a positive duration after /", spec)
	}
	if now == nil {
		now = time.Now
	}
	return &rateLimiter{backend: newWindowLimiter(limit, window, defaultMaxKeys, now)}, nil
}

// RateAllowFunc decides one request under key (see limiter.Allow).
type RateAllowFunc func(ctx context.Context, key string) (ok bool, retry time.Duration, err error)

func (f RateAllowFunc) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	return f(ctx, key)
}

// NewLocalLimiter returns the sliding-window limiter of spec on clock now,
// or nil for "off". A cluster runs one on its leader and points every
// node's Config.RateAllow at it, so the limit holds for the cluster as a
// whole (SPEC.md section 8).
func NewLocalLimiter(spec string, now func() time.Time) (RateAllowFunc, error) {
	rl, err := newRateLimiter(spec, now)
	if err != nil || rl.backend == nil {
		return nil, err
	}
	return rl.backend.Allow, nil
}

// Allow asks the backend about key; a nil limiter or backend allows all.
func (l *rateLimiter) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	if l == nil || l.backend == nil {
		return true, 0, nil
	}
	return l.backend.Allow(ctx, key)
}

// rateKey is the limiter key of one request: endpoint, client IP and the
// client_id as sent, before authentication. The IP is the peer address of
// the connection, an IPv6 address by its /64 like every per-address rule
// (remoteIP); X-Forwarded-For is not trusted. Long client ids are hashed
// so a key stays small whatever a client sends.
func rateKey(endpoint, clientID string, r *http.Request) string {
	ip := remoteIP(r)
	if len(clientID) > 64 {
		clientID = "#" + hashToken(clientID)
	}
	return endpoint + "\x00" + ip + "\x00" + clientID
}

// rateLimit applies the limit of endpoint to this request. It answers and
// returns false when the request must stop here: 429 with the envelope of
// SPEC.md 2.11 and Retry-After, or 500 server_error when the limiter fails.
func (p *Provider) rateLimit(w http.ResponseWriter, r *http.Request, endpoint, clientID string) bool {
	ok, retry, err := p.limiter.Allow(r.Context(), rateKey(endpoint, clientID, r))
	if err != nil {
		p.log.Error("rate limiter failed", "endpoint", endpoint, "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		writeOAuthError(w, errTokServer)
		return false
	}
	if ok {
		return true
	}
	p.metrics.rateLimited.WithLabelValues(endpoint).Inc()
	secs := int64((retry + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteError(w, r, http.StatusTooManyRequests, httpx.CodeRateLimited, "too many requests; retry later")
	return false
}

// defaultMaxKeys bounds the keys a windowLimiter remembers.
const defaultMaxKeys = 100_000

// windowLimiter is an exact sliding-window limiter: it allows a request
// when fewer than limit requests under the same key were allowed in the
// window before it. SPEC.md 8 reads "5 requests per 60 seconds", and a
// sliding log is the only simple scheme that never lets more than limit
// through in any window (a token bucket refilling at limit/window would
// let 5 + 4 through within 60 s). It keeps at most limit timestamps per
// key, in a ring that grows as requests come.
//
// Memory is bounded: keys are kept in least-recently-used order; every
// call first drops keys idle for a whole window (they hold nothing that
// still counts) from the tail, and when more than maxKeys are live the
// least recently used are dropped too. That last case only happens under
// a flood of distinct keys; it fails open (a dropped key starts over)
// rather than rejecting everyone.
type windowLimiter struct {
	limit   int
	window  time.Duration
	maxKeys int
	now     func() time.Time

	mu   sync.Mutex
	keys map[string]*list.Element // of *window
	lru  *list.List               // front: most recently used
}

// window is the allowed-request times of one key.
type window struct {
	key   string
	times []int64 // unix nanoseconds; a ring once full
	next  int     // oldest entry once the ring is full
	last  int64   // the latest allowed request
}

var _ limiter = (*windowLimiter)(nil)

func newWindowLimiter(limit int, window time.Duration, maxKeys int, now func() time.Time) *windowLimiter {
	return &windowLimiter{limit: limit, window: window, maxKeys: maxKeys, now: now,
		keys: make(map[string]*list.Element), lru: list.New()}
}

// Allow implements limiter; it never fails.
func (l *windowLimiter) Allow(_ context.Context, key string) (bool, time.Duration, error) {
	now := l.now().UnixNano()
	horizon := now - int64(l.window) // requests at or before this no longer count
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evict(horizon)
	e, ok := l.keys[key]
	if !ok {
		e = l.lru.PushFront(&window{key: key})
		l.keys[key] = e
	} else {
		l.lru.MoveToFront(e)
	}
	w := e.Value.(*window)
	if len(w.times) < l.limit {
		w.times = append(w.times, now)
		w.last = now
		return true, 0, nil
	}
	if oldest := w.times[w.next]; oldest > horizon {
		return false, time.Duration(oldest - horizon), nil
	}
	w.times[w.next] = now
	w.next = (w.next + 1) % l.limit
	w.last = now
	return true, 0, nil
}

// evict drops idle keys from the tail, then the least recently used keys
// beyond maxKeys (leaving room for one more).
func (l *windowLimiter) evict(horizon int64) {
	for e := l.lru.Back(); e != nil; e = l.lru.Back() {
		w := e.Value.(*window)
		if w.last > horizon && l.lru.Len() < l.maxKeys {
			return
		}
		l.lru.Remove(e)
		delete(l.keys, w.key)
	}
}

// size is the number of remembered keys (tests).
func (l *windowLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
