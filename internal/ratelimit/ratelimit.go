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
// limiter that cannot be reached, a key it cannot read), not a refusal.
//
// A key counts against the limiter's own limit unless it was made by Own,
// which carries a limit of its own inside the key: a shared limiter
// (cluster.Cluster.RateLimiter) passes keys through unchanged, so the
// limit travels with each call without changing what crosses the wire.
type Limiter interface {
	Allow(ctx context.Context, key string) (ok bool, retry time.Duration, err error)
}

// Limit is a rate: at most N requests in any window of length Per.
type Limit struct {
	N   int
	Per time.Duration
}

// String is l as "N/duration", which ParseLimit reads back.
func (l Limit) String() string { return strconv.Itoa(l.N) + "/" + l.Per.String() }

// ParseLimit parses "N/duration" ("5/60s", "100/1m"), with N >= 1 and a
// positive duration; spaces around it are ignored.
func ParseLimit(spec string) (Limit, error) {
	spec = strings.TrimSpace(spec)
	n, d, ok := strings.Cut(spec, "/")
	limit, err := strconv.Atoi(n)
	if !ok || err != nil || limit < 1 {
		return Limit{}, fmt.Errorf("rate limit %q: want N/duration with N >= 1", spec)
	}
	per, err := time.ParseDuration(d)
	if err != nil || per <= 0 {
		return Limit{}, fmt.Errorf("rate limit %q: want a positive duration after /", spec)
	}
	return Limit{N: limit, Per: per}, nil
}

// Parse parses spec, "N/duration" ("5/60s", "100/1m") or "off", into a
// Window on the clock now (time.Now when nil); nil for "off".
func Parse(spec string, now func() time.Time) (*Window, error) {
	if strings.TrimSpace(spec) == "off" {
		return nil, nil
	}
	l, err := ParseLimit(spec)
	if err != nil {
		return nil, fmt.Errorf("%w, or off", err)
	}
	if now == nil {
		now = time.Now
	}
	return NewWindow(l.N, l.Per, DefaultMaxKeys, now), nil
}

// ownTag starts a key made by Own; no other key starts with it.
const ownTag = "\x01"

// Own returns the key of a second budget beside key's, with lim as its
// limit instead of the limiter's own. A request under Own(key, lim) counts
// against lim in a window of its own, never against key; and while key is
// full under the limiter's own limit, it is refused as key's requests are
// (with key's retry). So requests under key cannot borrow from Own's
// budget, and once key's budget is spent no request under either gets
// through: the answer to a request never depends on which of the two it
// was counted under. oidc counts the requests of a client that
// authenticated under Own and every other request under key (see
// oidc/ratelimit.go for why).
//
// The limit travels inside the key: a shared limiter passes it on as it
// is, and one that predates Own counts it as a key of its own under its
// own limit. The caller vouches for lim; keys never come from the network.
func Own(key string, lim Limit) string {
	return ownTag + lim.String() + "\x00" + key
}

// DefaultMaxKeys bounds the keys a Window of Parse remembers.
const DefaultMaxKeys = 100_000

// entriesPerKey is how many request times per remembered key, on average,
// a Window keeps at most: keys of Own may carry limits far above the
// Window's own, and the request times of a Window are bounded by
// maxKeys*entriesPerKey whatever their limits.
const entriesPerKey = 16

// Window is an exact sliding-window limiter: it allows a request
// when fewer than limit requests under the same key were allowed in the
// window before it. The default limit is "5 requests per 60 seconds", and a
// sliding log is the only simple scheme that never lets more than limit
// through in any window (a token bucket refilling at limit/window would
// let 5 + 4 through within 60 s). It keeps at most limit timestamps per
// key, in a ring that grows as requests come; a key of Own keeps its own
// limit and window.
//
// Memory is bounded: keys are kept in least-recently-used order; every
// call first drops keys idle for a whole window (they hold nothing that
// still counts) from the tail, and when more than maxKeys are live, or
// they hold more than maxKeys*16 request times, the least recently used
// are dropped too. That last case only happens under a flood of distinct
// keys; it fails open (a dropped key starts over) rather than rejecting
// everyone.
type Window struct {
	limit      int
	window     time.Duration
	maxKeys    int
	maxEntries int
	now        func() time.Time

	mu      sync.Mutex
	keys    map[string]*list.Element // of *window
	lru     *list.List               // front: most recently used
	entries int                      // request times held, over all keys
}

// window is the allowed-request times of one key.
type window struct {
	key   string
	limit int
	per   int64   // the window, in nanoseconds
	times []int64 // unix nanoseconds; a ring once full
	next  int     // oldest entry once the ring is full
	last  int64   // the latest allowed request
}

var _ Limiter = (*Window)(nil)

// NewWindow is a Window allowing limit requests per window under each key
// (keys of Own aside), remembering at most maxKeys keys.
func NewWindow(limit int, window time.Duration, maxKeys int, now func() time.Time) *Window {
	return &Window{limit: limit, window: window, maxKeys: maxKeys, maxEntries: maxKeys * entriesPerKey, now: now,
		keys: make(map[string]*list.Element), lru: list.New()}
}

// Allow implements Limiter. It fails only on a key that starts like one
// of Own but does not carry a limit (a bug of the caller).
func (l *Window) Allow(_ context.Context, key string) (bool, time.Duration, error) {
	lim, guard, own := Limit{N: l.limit, Per: l.window}, "", strings.HasPrefix(key, ownTag)
	if own {
		spec, rest, ok := strings.Cut(key[len(ownTag):], "\x00")
		parsed, err := ParseLimit(spec)
		if !ok || err != nil {
			return false, 0, fmt.Errorf("ratelimit: a key of Own without a limit (%q)", spec)
		}
		lim, guard = parsed, rest
	}
	now := l.now().UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evict(now)
	if own {
		if e, ok := l.keys[guard]; ok {
			if full, retry := e.Value.(*window).full(now); full {
				return false, retry, nil
			}
		}
	}
	e, ok := l.keys[key]
	if !ok {
		e = l.lru.PushFront(&window{key: key, limit: lim.N, per: int64(lim.Per)})
		l.keys[key] = e
	} else {
		l.lru.MoveToFront(e)
	}
	w := e.Value.(*window)
	if full, retry := w.full(now); full {
		return false, retry, nil
	}
	if w.add(now) {
		l.entries++
	}
	return true, 0, nil
}

// full reports whether w allows nothing more at now, and if so how long
// until it does.
func (w *window) full(now int64) (bool, time.Duration) {
	if len(w.times) < w.limit {
		return false, 0
	}
	horizon := now - w.per // requests at or before this no longer count
	if oldest := w.times[w.next]; oldest > horizon {
		return true, time.Duration(oldest - horizon)
	}
	return false, 0
}

// add records a request at now, which full allowed; true when the ring
// grew.
func (w *window) add(now int64) bool {
	w.last = now
	if len(w.times) < w.limit {
		w.times = append(w.times, now)
		return true
	}
	w.times[w.next] = now
	w.next = (w.next + 1) % w.limit
	return false
}

// evict drops idle keys from the tail, then the least recently used keys
// beyond maxKeys (leaving room for one more) or beyond maxEntries request
// times.
func (l *Window) evict(now int64) {
	for e := l.lru.Back(); e != nil; e = l.lru.Back() {
		w := e.Value.(*window)
		if w.last > now-w.per && l.lru.Len() < l.maxKeys && l.entries < l.maxEntries {
			return
		}
		l.lru.Remove(e)
		delete(l.keys, w.key)
		l.entries -= len(w.times)
	}
}

// Len is the number of keys remembered.
func (l *Window) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
