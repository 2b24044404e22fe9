package clockcache

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// value is a cached value that is live until until.
type value struct {
	n     int
	until time.Time
}

func newCache(size int) *Cache[value] {
	return New(size, func(v value, at time.Time) bool { return at.Before(v.until) })
}

// key is a key of shard 0 numbered n (the shard is key[0]'s low bits).
func key(n int) [32]byte {
	var k [32]byte
	binary.BigEndian.PutUint64(k[8:], uint64(n))
	return k
}

func TestCache(t *testing.T) {
	live := value{n: 1, until: now.Add(time.Hour)}

	t.Run("miss, hit, remove", func(t *testing.T) {
		c := newCache(64)
		if _, ok := c.Get(key(1)); ok {
			t.Fatal("empty cache: got a hit")
		}
		c.Add(key(1), live, now)
		if v, ok := c.Get(key(1)); !ok || v != live {
			t.Fatalf("hit: got %+v %v", v, ok)
		}
		if _, ok := c.Get(key(2)); ok {
			t.Fatal("other key: got a hit")
		}
		c.Add(key(1), value{n: 2, until: live.until}, now)
		if v, _ := c.Get(key(1)); v.n != 1 {
			t.Fatalf("second add: got %d, want the first entry kept", v.n)
		}
		c.Remove(key(1))
		c.Remove(key(1))
		if _, ok := c.Get(key(1)); ok || c.Len() != 0 {
			t.Fatalf("after remove: got hit %v, %d entries", ok, c.Len())
		}
		c.Add(key(3), live, now) // reuses the freed slot
		if _, ok := c.Get(key(3)); !ok || c.Len() != 1 {
			t.Fatalf("after re-add: got hit %v, %d entries", ok, c.Len())
		}
	})

	t.Run("bounded under many distinct keys", func(t *testing.T) {
		const size = 256
		c := newCache(size)
		for i := range 100_000 {
			c.Add(sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i))), live, now)
		}
		if n := c.Len(); n != size {
			t.Fatalf("entries: got %d, want %d", n, size)
		}
		for i := range c.shards {
			s := &c.shards[i]
			if len(s.slots) > s.max || len(s.m) > s.max || len(s.free) != 0 {
				t.Fatalf("shard %d: %d slots, %d entries, %d free; max %d", i, len(s.slots), len(s.m), len(s.free), s.max)
			}
		}
	})

	t.Run("an entry in use survives a flood", func(t *testing.T) {
		c := newCache(4 * Shards) // 4 per shard
		hot := key(0)
		c.Add(hot, live, now)
		for i := 1; i <= 1000; i++ {
			if _, ok := c.Get(hot); !ok {
				t.Fatalf("hot entry evicted after %d new ones", i-1)
			}
			c.Add(key(i), live, now)
		}
		for i := 1001; i <= 1004; i++ { // unused now: the hand takes it
			c.Add(key(i), live, now)
		}
		if _, ok := c.Get(hot); ok {
			t.Fatal("unused entry: still cached, want evicted")
		}
	})

	t.Run("expired entries go first", func(t *testing.T) {
		c := newCache(4 * Shards)
		for i := range 4 {
			v := live
			if i == 2 {
				v.until = now
			}
			c.Add(key(i), v, now)
			c.Get(key(i)) // every entry in use
		}
		c.Add(key(4), live, now)
		for i, want := range []bool{true, true, false, true, true} {
			if _, ok := c.Get(key(i)); ok != want {
				t.Errorf("entry %d: cached %v, want %v", i, ok, want)
			}
		}
	})
}

func TestCacheSweepsExpiredEntries(t *testing.T) {
	c := newCache(8 * Shards) // 8 per shard
	short := value{until: now.Add(time.Minute)}
	for i := range 8 {
		c.Add(key(i), short, now)
	}
	later := now.Add(time.Minute) // every entry has expired
	long := value{until: later.Add(time.Hour)}
	for i := 100; i < 104; i++ { // 4 adds sweep 8 slots: the whole shard
		c.Add(key(i), long, later)
	}
	if n := c.Len(); n != 4 {
		t.Errorf("entries: got %d, want the 4 live ones", n)
	}
	for i := range 8 {
		if _, ok := c.Get(key(i)); ok {
			t.Errorf("expired entry %d: still cached", i)
		}
	}
	for i := 100; i < 104; i++ {
		if _, ok := c.Get(key(i)); !ok {
			t.Errorf("live entry %d: not cached", i)
		}
	}
	// Live entries are never swept: the shard fills up.
	for i := 200; i < 204; i++ {
		c.Add(key(i), long, later)
	}
	if n := c.Len(); n != 8 {
		t.Errorf("entries: got %d, want 8 (no live entry swept)", n)
	}
}
