package admin

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/oidcd/oidcd/internal/httpx"
)

// Bounds of the admin credential guard: guesses per source address.
const (
	guardLimit   = 20          // attempts in flight or failed, per address and window
	guardWindow  = time.Minute // failures are forgotten after this
	guardEntries = 10000       // addresses remembered at most; more are refused
)

// Guard limits guesses of administrator credentials (the admin token) per
// client address (httpx.ClientAddr; an IPv6 address counts per /64). An
// attempt is reserved before the credential is compared and released
// only when it matched, so concurrent guesses cannot all pass the check
// together: at most guardLimit are ever compared per address and window.
//
// A node has one Guard, shared by every route that takes a credential:
// the admin API (and with it the CLI) and the console's token form
// (Config.Guard), so a guess counts the same wherever it is made and a
// refused address is refused everywhere. It lives in the node's memory:
// the admin token is 256 random bits (or at least 32 bytes of the
// operator's), so the limit is about noise and log volume, not about the
// odds of a guess, and it costs no replicated write.
type Guard struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[string]*guardEntry
}

type guardEntry struct {
	count int
	start time.Time
}

// NewGuard returns an empty Guard on the clock now (nil: time.Now).
func NewGuard(now func() time.Time) *Guard {
	if now == nil {
		now = time.Now
	}
	return &Guard{now: now, entries: map[string]*guardEntry{}}
}

// Reserve counts one credential attempt from r's client address, before
// the credential is compared. False: the address is over the limit, the
// credential must not be compared, and the caller answers 429 with
// Retry-After set to RetryAfter.
func (g *Guard) Reserve(r *http.Request) bool { return g.reserve(sourceKey(r)) }

// Release gives back the attempt Reserve counted for r, once its
// credential proved right: right credentials never use up an address's
// allowance.
func (g *Guard) Release(r *http.Request) { g.release(sourceKey(r)) }

// RetryAfter is the Retry-After value (seconds) of a refusal: the window
// after which an address's failures are forgotten.
func (*Guard) RetryAfter() string { return strconv.Itoa(int(guardWindow / time.Second)) }

// reserve counts one attempt from key; false when the key is over the
// limit (the attempt must not be evaluated).
func (g *Guard) reserve(key string) bool {
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

// release gives back an attempt that turned out to hold the right
// credential.
func (g *Guard) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.entries[key]; e != nil && e.count > 0 {
		e.count--
		if e.count == 0 {
			delete(g.entries, key)
		}
	}
}

func (g *Guard) prune(now time.Time) {
	for k, e := range g.entries {
		if now.Sub(e.start) >= guardWindow {
			delete(g.entries, k)
		}
	}
}

// sourceKey is the request's source address as the guard counts it
// (httpx.SourceKey).
func sourceKey(r *http.Request) string { return httpx.SourceKey(httpx.ClientAddr(r)) }
