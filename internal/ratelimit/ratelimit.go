package ratelimit

import (
	"container/list"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limiter decides whether one more request under key may proceed, and
// records the request when it allows it. When it does not, retry is how
// long until it would. err is a failure of the limiter itself (a shared
// limiter that cannot be reached), not a refusal.
type Limiter interface {
	Allow(ctx context.Context, key string) (ok bool, retry time.Duration, err error)
}

// Parse parses spec, "N/duration" ("5/60s", "100/1m") or "off", into a
// Window on the clock now (time.Now when nil); nil for "off".
func Parse(spec string, now func() time.Time) (*Window, error) {
	spec = strings.TrimSpace(spec)
	if spec == "off" {
		return nil, nil
	}
	n, d, ok := strings.Cut(spec, "/")
	limit, err := strconv.Atoi(n)
	if !ok || err != nil || limit < 1 {
		return nil, fmt.Errorf("rate limit %q: want N/duration with N >= 1, or off", spec)
	}
	window, err := time.ParseDuration(d)
	if err != nil || window <= 0 {
		return nil, fmt.Errorf("rate limit %q: want a positive duration after /", spec)
	}
	if now == nil {
		now = time.Now
	}
	return NewWindow(limit, window, DefaultMaxKeys, now), nil
}

// DefaultMaxKeys bounds the keys a Window of Parse remembers.
const DefaultMaxKeys = 100_000

// Window is an exact sliding-window limiter: it allows a request
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
type Window struct {
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

var _ Limiter = (*Window)(nil)

func NewWindow(limit int, window time.Duration, maxKeys int, now func() time.Time) *Window {
	return &Window{limit: limit, window: window, maxKeys: maxKeys, now: now,
		keys: make(map[string]*list.Element), lru: list.New()}
}

// Allow implements Limiter; it never fails.
func (l *Window) Allow(_ context.Context, key string) (bool, time.Duration, error) {
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
func (l *Window) evict(horizon int64) {
	for e := l.lru.Back(); e != nil; e = l.lru.Back() {
		w := e.Value.(*window)
		if w.last > horizon && l.lru.Len() < l.maxKeys {
			return
		}
		l.lru.Remove(e)
		delete(l.keys, w.key)
	}
}

// Len is the number of keys remembered.
func (l *Window) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
