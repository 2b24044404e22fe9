package admin

import (
	"net/http"
	"sync"
	"time"

	"github.com/oidcd/oidcd/internal/httpx"
)

// Bounds of the admin token guard: guesses per source address.
const (
	guardLimit   = 20          // attempts in flight or failed, per address and window
	guardWindow  = time.Minute // failures are forgotten after this
	guardEntries = 10000       // addresses remembered at most; more are refused
)

// guard limits admin token guesses per source address (an IPv6 address
// counts per /64). An attempt is reserved before the token is compared
// and released only when it matched, so concurrent guesses cannot all
// pass the check together: at most guardLimit are ever compared per
// window. It lives in each node's memory; the admin token is 256 random
// bits (or at least 32 bytes of the operator's), so the limit is about
// noise and log volume, not about the odds of a guess.
type guard struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[string]*guardEntry
}

type guardEntry struct {
	count int
	start time.Time
}

func newGuard(now func() time.Time) *guard {
	return &guard{now: now, entries: map[string]*guardEntry{}}
}

// reserve counts one attempt from key; false when the key is over the
// limit (the attempt must not be evaluated).
func (g *guard) reserve(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	e := g.entries[key]
	if e == nil || now.Sub(e.start) >= guardWindow {
		if e == nil && len(g.entries) >= guardEntries {
			g.prune(now)
			if len(g.entries) >= guardEntries {
				return false
			}
		}
		e = &guardEntry{start: now}
		g.entries[key] = e
	}
	if e.count >= guardLimit {
		return false
	}
	e.count++
	return true
}

// release gives back an attempt that turned out to hold the right token.
func (g *guard) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.entries[key]; e != nil && e.count > 0 {
		e.count--
		if e.count == 0 {
			delete(g.entries, key)
		}
	}
}

func (g *guard) prune(now time.Time) {
	for k, e := range g.entries {
		if now.Sub(e.start) >= guardWindow {
			delete(g.entries, k)
		}
	}
}

// sourceKey is the request's source address as the guard counts it
// (httpx.SourceKey).
func sourceKey(r *http.Request) string { return httpx.SourceKey(httpx.ClientAddr(r)) }
