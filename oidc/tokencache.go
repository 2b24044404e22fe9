package oidc

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// tokenCacheSize bounds the verified-token cache. An entry is about
// 0.4 KB (the SHA-256 key and the compacted claims, with the map and the
// clock: 424 bytes measured, 536 before compact), so a full cache holds
// about 28 MB; expired entries are swept
// as new tokens arrive, so it holds about that only while that many
// tokens are live and in use.
const tokenCacheSize = 1 << 16

// tokenCacheShards splits the cache so that concurrent bearer checks
// seldom wait on one another's lock; a power of two.
const tokenCacheShards = 16

// sweepPerAdd is how many slots each add examines for an expired entry
// to drop, so that the cache follows the number of live tokens instead of
// staying at its high-water mark: a shard of n slots is swept once every
// n/sweepPerAdd adds.
const sweepPerAdd = 2

// maxScopeSets bounds the interned scope lists (scopes are a subset of
// what a client may ask for, so a handful of lists cover every token).
const maxScopeSets = 64

// tokenCache remembers the access tokens that passed every check of
// parseAccessToken, so that a token presented again skips the JWS parse
// and the RSA verification. It is keyed by the SHA-256 of the token
// string.
//
// A hit stands only for what a token string cannot change: its signature
// by the key named kid, and its claims. The caller still checks on every
// hit what may have changed since: that kid is still published (a key's
// retention ends, or it is removed) and exp against its clock. Only tokens
// that passed every check are added, so garbage cannot fill the cache,
// and the liveness check of the store (revocation, sessions, suspensions)
// is never cached.
//
// It holds at most tokenCacheSize entries. A full shard evicts with the
// CLOCK algorithm: expired entries and entries not used since the hand
// last passed go first, so tokens in use survive a flood of new ones.
type tokenCache struct {
	shards [tokenCacheShards]tokenShard

	scopesMu sync.Mutex
	scopes   map[string][]string // interned scope lists, by their join
}

// tokenShard is one part of the cache; slots is the clock.
type tokenShard struct {
	mu    sync.Mutex
	max   int
	m     map[[32]byte]*tokenEntry
	slots []*tokenEntry // grows to max; nil where an entry was removed
	free  []int         // indexes of nil slots
	hand  int
	sweep int    // the slot the expiry sweep looks at next
	kid   string // the last kid added, shared by the entries that have it
}

// tokenEntry is one verified token. tok.scopes is shared by every hit:
// read only.
type tokenEntry struct {
	key  [32]byte
	slot int
	used bool // hit since the hand last passed
	kid  string
	tok  accessToken
}

// newTokenCache returns a cache of at most size entries (at least one per
// shard).
func newTokenCache(size int) *tokenCache {
	c := &tokenCache{scopes: map[string][]string{}}
	per := max(size/tokenCacheShards, 1)
	for i := range c.shards {
		c.shards[i].max = per
		c.shards[i].m = make(map[[32]byte]*tokenEntry)
	}
	return c
}

func (c *tokenCache) shard(key [32]byte) *tokenShard {
	return &c.shards[key[0]&(tokenCacheShards-1)]
}

// get returns the kid and claims cached under key.
func (c *tokenCache) get(key [32]byte) (kid string, tok accessToken, ok bool) {
	s := c.shard(key)
	s.mu.Lock()
	e := s.m[key]
	if e != nil {
		e.used = true
		kid, tok, ok = e.kid, e.tok, true
	}
	s.mu.Unlock()
	return kid, tok, ok
}

// remove drops the entry of key, if any.
func (c *tokenCache) remove(key [32]byte) {
	s := c.shard(key)
	s.mu.Lock()
	if e := s.m[key]; e != nil {
		s.drop(e)
	}
	s.mu.Unlock()
}

// add caches a token that passed every check at now. A token already
// present is left as it is. It also drops the expired entries under the
// shard's sweep (sweepPerAdd slots).
func (c *tokenCache) add(key [32]byte, kid string, tok accessToken, now time.Time) {
	tok = c.compact(tok)
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[key] != nil {
		return
	}
	s.sweepExpired(now, sweepPerAdd)
	if kid == s.kid {
		kid = s.kid // one copy per shard, not one per token
	} else {
		s.kid = kid
	}
	e := &tokenEntry{key: key, kid: kid, tok: tok}
	switch {
	case len(s.free) > 0:
		e.slot = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
	case len(s.slots) < s.max:
		e.slot = len(s.slots)
		s.slots = append(s.slots, nil)
	default:
		e.slot = s.evict(now)
	}
	s.slots[e.slot] = e
	s.m[key] = e
}

// evict frees a slot of a full shard and returns its index: the first
// entry under the hand that has expired or was not used since the hand
// last passed. It ends within two turns, as the first clears every used
// bit.
func (s *tokenShard) evict(now time.Time) int {
	for {
		i := s.hand
		s.hand = (s.hand + 1) % len(s.slots)
		e := s.slots[i]
		if e.used && now.Before(e.tok.exp.Add(clockSkew)) {
			e.used = false
			continue
		}
		delete(s.m, e.key)
		s.slots[i] = nil
		return i
	}
}

// sweepExpired looks at the next n slots of the sweep and drops the
// entries that have expired at now.
func (s *tokenShard) sweepExpired(now time.Time, n int) {
	for range min(n, len(s.slots)) {
		s.sweep = (s.sweep + 1) % len(s.slots)
		if e := s.slots[s.sweep]; e != nil && !now.Before(e.tok.exp.Add(clockSkew)) {
			s.drop(e)
		}
	}
}

// compact returns tok with jti, sid, sub and org copied into one string
// and its scope list interned: a cached token then holds two small
// allocations instead of the half dozen the JWT parse left (one per
// claim and per scope), and nothing of the parsed token stays reachable.
func (c *tokenCache) compact(tok accessToken) accessToken {
	var b strings.Builder
	b.Grow(len(tok.jti) + len(tok.sid) + len(tok.sub) + len(tok.org))
	for _, s := range []string{tok.jti, tok.sid, tok.sub, tok.org} {
		b.WriteString(s)
	}
	all := b.String()
	cut := func(n int) string {
		s := all[:n]
		all = all[n:]
		return s
	}
	tok.jti, tok.sid, tok.sub, tok.org = cut(len(tok.jti)), cut(len(tok.sid)), cut(len(tok.sub)), cut(len(tok.org))
	tok.scopes = c.intern(tok.scopes)
	return tok
}

// intern returns the shared copy of the scope list equal to scopes
// (read only, like every cached token's scopes); once maxScopeSets lists
// are interned, a private copy.
func (c *tokenCache) intern(scopes []string) []string {
	var buf [128]byte
	key := buf[:0]
	for _, s := range scopes {
		key = append(append(key, s...), 0)
	}
	c.scopesMu.Lock()
	defer c.scopesMu.Unlock()
	// The lookup converts key without copying it; only a new list does.
	if shared, ok := c.scopes[string(key)]; ok && slices.Equal(shared, scopes) {
		return shared
	}
	own := make([]string, len(scopes))
	for i, s := range scopes {
		own[i] = strings.Clone(s)
	}
	if len(c.scopes) < maxScopeSets {
		c.scopes[string(key)] = own
	}
	return own
}

func (s *tokenShard) drop(e *tokenEntry) {
	delete(s.m, e.key)
	s.slots[e.slot] = nil
	s.free = append(s.free, e.slot)
}

// len is the number of entries.
func (c *tokenCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
