package oidc

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oidcd/oidcd/internal/clockcache"
)

// tokenCacheSize bounds the verified-token cache. An entry is about
// 0.4 KB (the SHA-256 key and the compacted claims, with the map and the
// clock: 424 bytes measured, 536 before compact), so a full cache holds
// about 28 MB; expired entries are swept as new tokens arrive, so it
// holds about that only while that many tokens are live and in use.
const tokenCacheSize = 1 << 16

// maxScopeSets bounds the interned scope lists (scopes are a subset of
// what a client may ask for, so a handful of lists cover every token).
const maxScopeSets = 64

// tokenCache remembers the access tokens that passed every check of
// parseAccessToken, so that a token presented again skips the JWS parse
// and the RSA verification. It is keyed by the SHA-256 of the token
// string, in a bounded cache that evicts with the CLOCK algorithm
// (clockcache): expired tokens and tokens not used lately go first, so
// tokens in use survive a flood of new ones.
//
// A hit stands only for what a token string cannot change: its signature
// by the key named kid, and its claims. The caller still checks on every
// hit what may have changed since: that kid is still published (a key's
// retention ends, or it is removed) and exp against its clock. Only tokens
// that passed every check are added, so garbage cannot fill the cache,
// and the liveness check of the store (revocation, sessions, suspensions)
// is never cached.
type tokenCache struct {
	c *clockcache.Cache[cachedToken]

	mu     sync.Mutex
	kid    string              // the last kid added, shared by the entries that have it
	scopes map[string][]string // interned scope lists, by their join
}

// cachedToken is one verified token. tok.scopes is shared by every hit:
// read only.
type cachedToken struct {
	kid string
	tok accessToken
}

// newTokenCache returns a cache of at most size entries.
func newTokenCache(size int) *tokenCache {
	return &tokenCache{
		c: clockcache.New(size, func(v cachedToken, now time.Time) bool {
			return now.Before(v.tok.exp.Add(clockSkew))
		}),
		scopes: map[string][]string{},
	}
}

// get returns the kid and claims cached under key.
func (c *tokenCache) get(key [32]byte) (kid string, tok accessToken, ok bool) {
	v, ok := c.c.Get(key)
	return v.kid, v.tok, ok
}

// remove drops the entry of key, if any.
func (c *tokenCache) remove(key [32]byte) { c.c.Remove(key) }

// add caches a token that passed every check at now. A token already
// present is left as it is.
func (c *tokenCache) add(key [32]byte, kid string, tok accessToken, now time.Time) {
	tok = c.compact(tok)
	c.mu.Lock()
	if kid == c.kid {
		kid = c.kid // one copy, not one per token
	} else {
		c.kid = kid
	}
	c.mu.Unlock()
	c.c.Add(key, cachedToken{kid: kid, tok: tok}, now)
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
	c.mu.Lock()
	defer c.mu.Unlock()
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

// len is the number of entries.
func (c *tokenCache) len() int { return c.c.Len() }
