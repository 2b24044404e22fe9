package fsm

import (
	"bytes"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Throttle counts failures (or sends) under one key — an account, an IP
// address, a phone number — and locks the key once Limit is reached inside
// Window. Replicated, so spreading guesses over nodes does not help, and a
// lock survives restarts and leader changes; it ends by itself at
// LockedUntil.
type Throttle struct {
	Key         string    `json:"key" cbor:"1,keyasint"`
	Count       int       `json:"count" cbor:"2,keyasint"`
	WindowStart time.Time `json:"window_start" cbor:"3,keyasint"`
	LockedUntil time.Time `json:"locked_until,omitzero" cbor:"4,keyasint,omitzero"`
	ExpiresAt   time.Time `json:"expires_at" cbor:"5,keyasint"` // reaped after this
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

// ThrottleClear forgets keys (a success, or an operator clearing a lock):
// Keys exactly, every key that starts with one of Prefixes, and gives one
// reserved attempt back to each of Release (its count drops by one; a
// lock it holds stays). The Value is how many keys were forgotten.
type ThrottleClear struct {
	Keys     []string `json:"keys"`
	Prefixes []string `json:"prefixes,omitempty"`
	Release  []string `json:"release,omitempty"`
}

// ThrottleReserve counts one attempt against every rule's key before the
// attempt is evaluated (a password or a code checked, a text message
// sent). When any key is locked at At, nothing is counted and the result
// is ErrLocked; otherwise each key's count grows by one and a key that
// reaches its limit is locked (the attempt that reached it is still
// evaluated). Checking and counting in one apply is what makes the limit
// exact: concurrent attempts cannot all pass a check made before any of
// them was counted, so at most Limit attempts are evaluated per window.
// The Value is the []Throttle after counting, in rule order. A success
// settles its reservation with a ThrottleClear (Keys for the subject,
// Release for per-address keys), carried by the command the success
// writes anyway (StartSSOSession, StepUpSSOSession).
type ThrottleReserve struct {
	Rules []ThrottleRule `json:"rules"`
	At    time.Time      `json:"at"`
}

func init() {
	register(TypeThrottleHit, applyThrottleHit)
	register(TypeThrottleClear, applyThrottleClear)
	register(TypeThrottleReserve, applyThrottleReserve)
	// A throttle is reaped once its window and lock are over.
	reaps(expiring(bucketThrottle, func(st *ReapStats) *int { return &st.Throttles }, func(t *Throttle, before time.Time) bool {
		return !t.ExpiresAt.After(before)
	}))
}

func validRules(rules []ThrottleRule) bool {
	if len(rules) == 0 || len(rules) > 8 {
		return false
	}
	for _, r := range rules {
		if !validKey(r.Key) || r.Limit < 1 || r.Window <= 0 || r.Lockout < 0 {
			return false
		}
	}
	return true
}

func applyThrottleReserve(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[ThrottleReserve](p)
	if !validRules(c.Rules) {
		return invalid
	}
	for _, r := range c.Rules {
		t := Throttle{Key: r.Key}
		if get(tx, bucketThrottle, r.Key, &t) && t.Locked(c.At) {
			return Result{Err: ErrLocked, Value: []Throttle{t}}
		}
	}
	return Result{Value: countThrottles(tx, c.Rules, c.At)}
}

func applyThrottleHit(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[ThrottleHit](p)
	if !validRules(c.Rules) {
		return invalid
	}
	return Result{Value: countThrottles(tx, c.Rules, c.At)}
}

// countThrottles counts one event against each rule's key at at.
func countThrottles(tx *bolt.Tx, rules []ThrottleRule, at time.Time) []Throttle {
	out := make([]Throttle, 0, len(rules))
	for _, r := range rules {
		t := Throttle{Key: r.Key}
		get(tx, bucketThrottle, r.Key, &t)
		if !t.Locked(at) && !at.Before(t.WindowStart.Add(r.Window)) {
			t.Count, t.WindowStart = 0, at // a fresh window
		}
		t.Count++
		if t.Count >= r.Limit && !t.Locked(at) {
			t.LockedUntil = at.Add(r.Lockout)
		}
		t.ExpiresAt = t.WindowStart.Add(r.Window)
		if t.LockedUntil.After(t.ExpiresAt) {
			t.ExpiresAt = t.LockedUntil
		}
		put(tx, bucketThrottle, r.Key, t)
		out = append(out, t)
	}
	return out
}

// prefixKeysRaw lists the keys of bucket that start with prefix.
func prefixKeysRaw(tx *bolt.Tx, bucket []byte, prefix string) []string {
	var out []string
	c := tx.Bucket(bucket).Cursor()
	for k, _ := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, _ = c.Next() {
		out = append(out, string(k))
	}
	return out
}

func applyThrottleClear(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[ThrottleClear](p)
	if !validClear(&c) {
		return invalid
	}
	return Result{Value: settleThrottles(tx, &c)}
}

func validClear(c *ThrottleClear) bool {
	return c == nil || (validKey(c.Keys...) && validKey(c.Prefixes...) && validKey(c.Release...) &&
		len(c.Keys)+len(c.Prefixes)+len(c.Release) <= 16)
}

// settleThrottles carries out c (nothing when nil) and returns how many
// keys it forgot.
func settleThrottles(tx *bolt.Tx, c *ThrottleClear) int {
	if c == nil {
		return 0
	}
	n := 0
	for _, k := range c.Keys {
		if exists(tx, bucketThrottle, k) {
			del(tx, bucketThrottle, k)
			n++
		}
	}
	for _, pre := range c.Prefixes {
		for _, k := range prefixKeysRaw(tx, bucketThrottle, pre) {
			del(tx, bucketThrottle, k)
			n++
		}
	}
	for _, k := range c.Release {
		var t Throttle
		if get(tx, bucketThrottle, k, &t) && t.Count > 0 {
			// A reserved key locks when its count reaches the limit, in-flight
			// attempts included, and refuses reservations while locked, so
			// its count is at the limit: one given back brings it below and
			// lifts the lock. Otherwise a sign-in storm from one address (an
			// office behind one NAT) would lock that address out for the
			// whole lockout while its attempts were all succeeding.
			t.Count--
			t.LockedUntil = time.Time{}
			put(tx, bucketThrottle, k, t)
		}
	}
	return n
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
