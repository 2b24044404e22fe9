package oidc

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/clockcache"
	"github.com/oidcd/oidcd/keys"
)

// cacheKey is a key of shard 0 numbered n (the shard is key[0]'s low
// bits).
func cacheKey(n int) [32]byte {
	var k [32]byte
	binary.BigEndian.PutUint64(k[8:], uint64(n))
	return k
}

// TestTokenCache: the provider's cache hands back the kid and claims a
// token was added with, keeps the first entry of a key, and forgets a
// removed one (the cache's eviction and sweep are clockcache's, tested
// there); an entry is live until its exp and the clock skew.
func TestTokenCache(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	live := accessToken{jti: "j", sid: "s", sub: "u", org: "o", scopes: []string{"openid"}, exp: now.Add(time.Hour)}
	c := newTokenCache(64)
	if _, _, ok := c.get(cacheKey(1)); ok {
		t.Fatal("empty cache: got a hit")
	}
	c.add(cacheKey(1), "kid-1", live, now)
	kid, tok, ok := c.get(cacheKey(1))
	if !ok || kid != "kid-1" || tok.jti != "j" || !tok.exp.Equal(live.exp) {
		t.Fatalf("hit: got %q %+v %v, want kid-1 and the claims", kid, tok, ok)
	}
	c.add(cacheKey(1), "kid-2", live, now)
	if kid, _, _ := c.get(cacheKey(1)); kid != "kid-1" {
		t.Fatalf("second add: got kid %q, want the first entry kept", kid)
	}
	c.remove(cacheKey(1))
	if _, _, ok := c.get(cacheKey(1)); ok || c.len() != 0 {
		t.Fatalf("after remove: got hit %v, %d entries", ok, c.len())
	}
	// An entry whose exp and skew have passed is swept by later adds.
	short := live
	short.exp = now.Add(time.Minute)
	c.add(cacheKey(2), "kid", short, now)
	later := now.Add(time.Minute + clockSkew)
	for i := 100; i < 164; i++ {
		c.add(cacheKey(i), "kid", live, later)
	}
	if _, _, ok := c.get(cacheKey(2)); ok {
		t.Error("a token past exp and the skew: still cached")
	}
}

// countingKeys counts full verifications.
type countingKeys struct {
	Keys
	verifies atomic.Int64
}

func (k *countingKeys) VerifyKid(token []byte) ([]byte, string, error) {
	k.verifies.Add(1)
	return k.Keys.VerifyKid(token)
}

// withCountingKeys wraps the provider's keys in ck.
func withCountingKeys(ck *countingKeys) harnessOption {
	return func(c *Config) { ck.Keys, c.Keys = c.Keys, ck }
}

func TestBearerCache(t *testing.T) {
	t.Run("a token is verified once", func(t *testing.T) {
		ck := &countingKeys{}
		h := newHarness(t, withCountingKeys(ck))
		tok := bcTokens(t, h, hConfidential, hSecret, "openid", "email").AccessToken
		for range 3 {
			if got := bcUserinfoStatus(t, h, tok); got != http.StatusOK {
				t.Fatalf("userinfo: got %d, want 200", got)
			}
		}
		if got := bcIntrospect(t, h, hConfidential, hSecret, tok); got["active"] != true {
			t.Fatalf("introspect: got %v, want active", got)
		}
		if n := ck.verifies.Load(); n != 1 {
			t.Fatalf("verifications: got %d, want 1", n)
		}
		if n := h.p.tokens.len(); n != 1 {
			t.Fatalf("cached: got %d, want 1", n)
		}
	})

	t.Run("refused tokens are not cached", func(t *testing.T) {
		ck := &countingKeys{}
		h := newHarness(t, withCountingKeys(ck))
		res := bcTokens(t, h, hConfidential, hSecret)
		for _, tok := range []string{res.IDToken, flipMiddle(res.AccessToken), "a.b.c"} {
			for range 2 {
				if got := bcUserinfoStatus(t, h, tok); got != http.StatusUnauthorized {
					t.Fatalf("userinfo: got %d, want 401", got)
				}
			}
		}
		if n := h.p.tokens.len(); n != 0 {
			t.Fatalf("cached: got %d, want 0", n)
		}
		if n := ck.verifies.Load(); n != 6 {
			t.Fatalf("verifications: got %d, want 6 (every attempt)", n)
		}
	})

	t.Run("expiry is checked on every hit", func(t *testing.T) {
		ck := &countingKeys{}
		h := newHarness(t, withCountingKeys(ck))
		tok := bcTokens(t, h, hPublic, "").AccessToken // 600 s
		bcUserinfoStatus(t, h, tok)
		h.clock.Add(600*time.Second + clockSkew - time.Nanosecond)
		if got := bcUserinfoStatus(t, h, tok); got != http.StatusOK {
			t.Fatalf("just before exp + skew: got %d, want 200", got)
		}
		h.clock.Add(time.Nanosecond)
		if got := bcUserinfoStatus(t, h, tok); got != http.StatusUnauthorized {
			t.Fatalf("at exp + skew: got %d, want 401", got)
		}
		if n, v := h.p.tokens.len(), ck.verifies.Load(); n != 0 || v != 1 {
			t.Fatalf("got %d cached and %d verifications, want the entry dropped without verifying", n, v)
		}
	})

	t.Run("a revoked token is refused though its parse is cached", func(t *testing.T) {
		h := newHarness(t)
		tok := bcTokens(t, h, hConfidential, hSecret).AccessToken
		if got := bcUserinfoStatus(t, h, tok); got != http.StatusOK {
			t.Fatalf("before: got %d, want 200", got)
		}
		rec := bcDo(t, h, bcReq{method: "POST", path: PathRevoke, user: hConfidential, pass: hSecret, form: url.Values{"token": {tok}}})
		if rec.Code != http.StatusOK {
			t.Fatalf("revoke: got %d, want 200", rec.Code)
		}
		if n := h.p.tokens.len(); n != 1 {
			t.Fatalf("cached: got %d, want 1", n)
		}
		if got := bcUserinfoStatus(t, h, tok); got != http.StatusUnauthorized {
			t.Fatalf("userinfo: got %d, want 401", got)
		}
		if got := bcIntrospect(t, h, hConfidential, hSecret, tok); got["active"] != false {
			t.Fatalf("introspect: got %v, want inactive", got)
		}
	})

	t.Run("a removed key's tokens are refused though cached", func(t *testing.T) {
		h := newHarness(t)
		tok := bcTokens(t, h, hConfidential, hSecret).AccessToken
		if got := bcUserinfoStatus(t, h, tok); got != http.StatusOK {
			t.Fatalf("before: got %d, want 200", got)
		}
		h.clock.Add(time.Second) // past the first key's activation: no tie
		if _, err := h.keys.Rotate(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		if got := bcUserinfoStatus(t, h, tok); got != http.StatusOK {
			t.Fatalf("retired key: got %d, want 200 (still published)", got)
		}
		bcApply(t, h, fsm.TypeRemoveKey, fsm.RemoveKey{Kid: bcHeader(t, tok)["kid"]})
		if got := bcUserinfoStatus(t, h, tok); got != http.StatusUnauthorized {
			t.Fatalf("removed key: got %d, want 401", got)
		}
		if n := h.p.tokens.len(); n != 0 {
			t.Fatalf("cached: got %d, want the entry dropped", n)
		}
		if got := bcUserinfoStatus(t, h, bcTokens(t, h, hConfidential, hSecret).AccessToken); got != http.StatusOK {
			t.Fatalf("token of the new key: got %d, want 200", got)
		}
	})

	t.Run("tokens are refused when their key's retention ends, though cached", func(t *testing.T) {
		ck := &countingKeys{}
		h := newHarness(t, withCountingKeys(ck))
		bcSetClient(t, h, hPublic, func(c *fsm.Client) { c.AccessTokenTTL = 3 * 3600 })
		tok := bcTokens(t, h, hPublic, "").AccessToken
		bcUserinfoStatus(t, h, tok)
		h.clock.Add(time.Second) // past the first key's activation: no tie
		if _, err := h.keys.Rotate(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		h.clock.Add(time.Hour - time.Second) // keys.DefaultRetention
		if got := bcUserinfoStatus(t, h, tok); got != http.StatusOK {
			t.Fatalf("within retention: got %d, want 200", got)
		}
		h.clock.Add(time.Second)
		if got := bcUserinfoStatus(t, h, tok); got != http.StatusUnauthorized {
			t.Fatalf("retention over: got %d, want 401", got)
		}
		if n := ck.verifies.Load(); n != 1 {
			t.Fatalf("verifications: got %d, want 1 (the refusal came from the cache)", n)
		}
	})

	t.Run("bounded under many distinct tokens", func(t *testing.T) {
		ck := &countingKeys{}
		h := newHarness(t, withCountingKeys(ck))
		h.p.tokens = newTokenCache(clockcache.Shards) // one per shard
		var toks []string
		for range 40 {
			toks = append(toks, bcTokens(t, h, hPublic, "").AccessToken)
		}
		for round := range 2 {
			for i, tok := range toks {
				if got := bcUserinfoStatus(t, h, tok); got != http.StatusOK {
					t.Fatalf("round %d, token %d: got %d, want 200", round, i, got)
				}
			}
		}
		if n := h.p.tokens.len(); n > clockcache.Shards {
			t.Fatalf("cached: got %d, want at most %d", n, clockcache.Shards)
		}
		if n := ck.verifies.Load(); n <= 40 {
			t.Fatalf("verifications: got %d, want more than 40 (evicted tokens verified again)", n)
		}
	})
}

func TestTokenCacheCompactsEntries(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := newTokenCache(64)
	mk := func(n int) accessToken {
		return accessToken{jti: strings.Repeat("j", 43) + strconv.Itoa(n), sid: "sid-" + strconv.Itoa(n), sub: "sub-" + strconv.Itoa(n),
			org: "org-" + strconv.Itoa(n), scopes: []string{strings.Clone("openid"), strings.Clone("email")}, exp: now.Add(time.Hour)}
	}
	for i := range 2 {
		c.add(cacheKey(i), "kid", mk(i), now)
	}
	_, a, _ := c.get(cacheKey(0))
	_, b, _ := c.get(cacheKey(1))
	want := mk(0)
	if a.jti != want.jti || a.sid != want.sid || a.sub != want.sub || a.org != want.org || !slices.Equal(a.scopes, want.scopes) || !a.exp.Equal(want.exp) {
		t.Fatalf("got %+v, want %+v", a, want)
	}
	if &a.scopes[0] != &b.scopes[0] {
		t.Error("two tokens with the same scopes: want one shared list")
	}
	// Lists that join to the same string are kept apart.
	odd := mk(2)
	odd.scopes = []string{"openid email"}
	c.add(cacheKey(2), "kid", odd, now)
	if _, got, _ := c.get(cacheKey(2)); !slices.Equal(got.scopes, odd.scopes) {
		t.Errorf("scopes: got %q, want %q", got.scopes, odd.scopes)
	}
	// What a cached token costs: the entry, the joined claims and the
	// map's share; not the parse's strings.
	allocs := testing.AllocsPerRun(100, func() {
		c.remove(cacheKey(9))
		c.add(cacheKey(9), "kid", want, now)
	})
	if allocs > 2 {
		t.Errorf("allocations per add: got %.1f, want at most 2 (the entry and the claims)", allocs)
	}
}

// TestTokenKey: the cache's key is the token's SHA-256, whether the token
// goes through the stack buffer or not, and an ordinary one allocates
// nothing.
func TestTokenKey(t *testing.T) {
	for _, n := range []int{0, 1, 900, 2047, 2048, 2049, keys.MaxTokenSize} {
		raw := strings.Repeat("t", n)
		if got, want := tokenKey(raw), sha256.Sum256([]byte(raw)); got != want {
			t.Errorf("%d bytes: tokenKey = %x, want %x", n, got, want)
		}
	}
	raw := strings.Repeat("t", 900)
	if a := testing.AllocsPerRun(100, func() { tokenKey(raw) }); a != 0 {
		t.Errorf("tokenKey of 900 bytes allocates %v times, want 0", a)
	}
}
