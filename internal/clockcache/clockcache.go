// Package clockcache is a bounded, sharded cache keyed by a 32-byte hash,
// whose entries expire. A full shard evicts with the CLOCK algorithm:
// expired entries and entries not used since the hand last passed go
// first, so entries in use survive a flood of new ones; and each add
// sweeps a few slots for expired entries, so the cache follows the number
// of live entries instead of staying at its high-water mark.
//
// It is a leaf helper: it imports nothing of ours. The provider keeps its
// verified access tokens in one (package oidc).
package clockcache

import (
	"sync"
	"time"
)

// Shards splits the cache so that concurrent callers seldom wait on one
// another's lock; a power of two. A key's shard is its first byte's low
// bits: keys are hashes.
const Shards = 16

// sweepPerAdd is how many slots each add examines for an expired entry
// to drop: a shard of n slots is swept once every n/sweepPerAdd adds.
const sweepPerAdd = 2

// Cache holds at most its size of values of type V.
type Cache[V any] struct {
	shards [Shards]shard[V]
	// live reports whether v is still usable at now; an entry that is not
	// is dropped by the sweep and evicted first.
	live func(v V, now time.Time) bool
}

// shard is one part of the cache; slots is the clock.
type shard[V any] struct {
	mu    sync.Mutex
	max   int
	m     map[[32]byte]*entry[V]
	slots []*entry[V] // grows to max; nil where an entry was removed
	free  []int       // indexes of nil slots
	hand  int
	sweep int // the slot the expiry sweep looks at next
}

type entry[V any] struct {
	key  [32]byte
	slot int
	used bool // hit since the hand last passed
	v    V
}

// New returns a cache of at most size entries (at least one per shard);
// live says whether a value is still usable at a time.
func New[V any](size int, live func(v V, now time.Time) bool) *Cache[V] {
	c := &Cache[V]{live: live}
	per := max(size/Shards, 1)
	for i := range c.shards {
		c.shards[i].max = per
		c.shards[i].m = make(map[[32]byte]*entry[V])
	}
	return c
}

func (c *Cache[V]) shard(key [32]byte) *shard[V] {
	return &c.shards[key[0]&(Shards-1)]
}

// Get returns the value cached under key. It does not look at expiry:
// the caller checks what may have changed since it was added.
func (c *Cache[V]) Get(key [32]byte) (v V, ok bool) {
	s := c.shard(key)
	s.mu.Lock()
	if e := s.m[key]; e != nil {
		e.used = true
		v, ok = e.v, true
	}
	s.mu.Unlock()
	return v, ok
}

// Remove drops the entry of key, if any.
func (c *Cache[V]) Remove(key [32]byte) {
	s := c.shard(key)
	s.mu.Lock()
	if e := s.m[key]; e != nil {
		s.drop(e)
	}
	s.mu.Unlock()
}

// Add caches v under key at now. A key already present keeps its value.
// It also drops the expired entries under the shard's sweep.
func (c *Cache[V]) Add(key [32]byte, v V, now time.Time) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[key] != nil {
		return
	}
	c.sweepExpired(s, now, sweepPerAdd)
	e := &entry[V]{key: key, v: v}
	switch {
	case len(s.free) > 0:
		e.slot = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
	case len(s.slots) < s.max:
		e.slot = len(s.slots)
		s.slots = append(s.slots, nil)
	default:
		e.slot = c.evict(s, now)
	}
	s.slots[e.slot] = e
	s.m[key] = e
}

// evict frees a slot of a full shard and returns its index: the first
// entry under the hand that has expired or was not used since the hand
// last passed. It ends within two turns, as the first clears every used
// bit.
func (c *Cache[V]) evict(s *shard[V], now time.Time) int {
	for {
		i := s.hand
		s.hand = (s.hand + 1) % len(s.slots)
		e := s.slots[i]
		if e.used && c.live(e.v, now) {
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
func (c *Cache[V]) sweepExpired(s *shard[V], now time.Time, n int) {
	for range min(n, len(s.slots)) {
		s.sweep = (s.sweep + 1) % len(s.slots)
		if e := s.slots[s.sweep]; e != nil && !c.live(e.v, now) {
			s.drop(e)
		}
	}
}

func (s *shard[V]) drop(e *entry[V]) {
	delete(s.m, e.key)
	s.slots[e.slot] = nil
	s.free = append(s.free, e.slot)
}

// Len is the number of entries.
func (c *Cache[V]) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
