package fsm

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Throttle counts failures (or sends) under one key — an account, an IP
// address, a phone number — and locks the key once Limit is reached inside
// Window. Replicated, so spreading guesses over nodes does not help, and a
// lock survives restarts and leader changes; it ends by itself at
// LockedUntil.
type Throttle struct {
	Key         string    `json:"key"`
	Count       int       `json:"count"`
	WindowStart time.Time `json:"window_start"`
	LockedUntil time.Time `json:"locked_until,omitzero"`
	ExpiresAt   time.Time `json:"expires_at"` // reaped after this
}

// Locked reports whether the key is locked at now.
func (t Throttle) Locked(now time.Time) bool { return now.Before(t.LockedUntil) }

// ThrottleRule is one key to count and its policy.
type ThrottleRule struct {
	Key     string        `json:"key"`
	Limit   int           `json:"limit"`
	Window  time.Duration `json:"window"`
	Lockout time.Duration `json:"lockout"`
}

// ThrottleHit counts one event against each rule's key at At. The Value is
// the []Throttle after counting, in rule order.
type ThrottleHit struct {
	Rules []ThrottleRule `json:"rules"`
	At    time.Time      `json:"at"`
}

// ThrottleClear forgets keys (a success, or an operator clearing a lock).
type ThrottleClear struct {
	Keys []string `json:"keys"`
}

func init() {
	register(TypeThrottleHit, applyThrottleHit)
	register(TypeThrottleClear, applyThrottleClear)
}

func applyThrottleHit(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[ThrottleHit](p)
	if len(c.Rules) == 0 || len(c.Rules) > 8 {
		return invalid
	}
	out := make([]Throttle, 0, len(c.Rules))
	for _, r := range c.Rules {
		if !validKey(r.Key) || r.Limit < 1 || r.Window <= 0 || r.Lockout < 0 {
			return invalid
		}
	}
	for _, r := range c.Rules {
		t := Throttle{Key: r.Key}
		get(tx, bucketThrottle, r.Key, &t)
		if !t.Locked(c.At) && !c.At.Before(t.WindowStart.Add(r.Window)) {
			t.Count, t.WindowStart = 0, c.At // a fresh window
		}
		t.Count++
		if t.Count >= r.Limit && !t.Locked(c.At) {
			t.LockedUntil = c.At.Add(r.Lockout)
		}
		t.ExpiresAt = t.WindowStart.Add(r.Window)
		if t.LockedUntil.After(t.ExpiresAt) {
			t.ExpiresAt = t.LockedUntil
		}
		put(tx, bucketThrottle, r.Key, t)
		out = append(out, t)
	}
	return Result{Value: out}
}

func applyThrottleClear(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[ThrottleClear](p)
	if !validKey(c.Keys...) {
		return invalid
	}
	n := 0
	for _, k := range c.Keys {
		if exists(tx, bucketThrottle, k) {
			del(tx, bucketThrottle, k)
			n++
		}
	}
	return Result{Value: n}
}

// Throttle returns the counter of key (zero when none).
func (s *State) Throttle(key string) (Throttle, error) {
	t := Throttle{Key: key}
	err := s.f.view(func(tx *bolt.Tx) error { get(tx, bucketThrottle, key, &t); return nil })
	return t, err
}

// Throttles lists the counters locked at now, in key order.
func (s *State) Throttles(now time.Time) ([]Throttle, error) {
	var out []Throttle
	err := s.f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketThrottle).ForEach(func(_, v []byte) error {
			var t Throttle
			mustUnmarshal(v, &t)
			if t.Locked(now) {
				out = append(out, t)
			}
			return nil
		})
	})
	return out, err
}
