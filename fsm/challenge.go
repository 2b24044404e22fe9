package fsm

import (
	"encoding/json"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Challenge is a WebAuthn ceremony in progress: the relying-party
// library's session data, replicated so that any node can finish a
// ceremony another node began. It is taken (read and deleted) once.
type Challenge struct {
	ID        string          `json:"id"`
	UserID    string          `json:"user_id"`
	Purpose   string          `json:"purpose"` // "register" or "assert"
	Data      json.RawMessage `json:"data"`
	ExpiresAt time.Time       `json:"expires_at"`
}

// PutChallenge stores a challenge.
type PutChallenge struct {
	Challenge Challenge `json:"challenge"`
}

// TakeChallenge deletes challenge ID and returns it as the Value when it is
// live at At and belongs to UserID for Purpose; ErrNotFound otherwise (an
// expired or foreign challenge is deleted too: it served its one try).
type TakeChallenge struct {
	ID      string    `json:"id"`
	UserID  string    `json:"user_id"`
	Purpose string    `json:"purpose"`
	At      time.Time `json:"at"`
}

// SMSCode is a text-message sign-in code in flight, by handle. UserID is
// empty when the number belongs to nobody: the flow looks the same, and no
// code can succeed.
type SMSCode struct {
	ID        string    `json:"id"`
	UserID    string    `json:"user_id,omitempty"`
	Phone     string    `json:"phone"`
	Hash      string    `json:"hash"`
	Attempts  int       `json:"attempts"`
	ExpiresAt time.Time `json:"expires_at"`
}

// IssueSMSCode stores a code.
type IssueSMSCode struct {
	Code SMSCode `json:"code"`
}

// CheckSMSCode tries Hash against code ID. A match deletes the code and
// returns it as the Value. A wrong guess counts; the MaxAttempts-th wrong
// guess deletes the code. Errors: ErrNotFound (unknown or used), ErrExpired,
// ErrWrongCode.
type CheckSMSCode struct {
	ID          string    `json:"id"`
	Hash        string    `json:"hash"`
	MaxAttempts int       `json:"max_attempts"`
	At          time.Time `json:"at"`
}

func init() {
	register(TypePutChallenge, applyPutChallenge)
	register(TypeTakeChallenge, applyTakeChallenge)
	register(TypeIssueSMSCode, applyIssueSMSCode)
	register(TypeCheckSMSCode, applyCheckSMSCode)
}

func applyPutChallenge(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[PutChallenge](p).Challenge
	if !validID(c.ID, c.UserID) || len(c.Data) > maxBlob || len(c.Purpose) > 32 {
		return invalid
	}
	if exists(tx, bucketChallenges, c.ID) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	put(tx, bucketChallenges, c.ID, c)
	return Result{}
}

func applyTakeChallenge(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[TakeChallenge](p)
	if !validID(c.ID) {
		return invalid
	}
	var ch Challenge
	if !get(tx, bucketChallenges, c.ID, &ch) {
		return Result{Err: ErrNotFound}
	}
	del(tx, bucketChallenges, c.ID)
	if !c.At.Before(ch.ExpiresAt) || ch.UserID != c.UserID || ch.Purpose != c.Purpose {
		return Result{Err: ErrNotFound}
	}
	return Result{Value: ch}
}

func applyIssueSMSCode(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[IssueSMSCode](p).Code
	if !validID(c.ID) || !validKey(c.Hash) || len(c.Phone) > 64 || (c.UserID != "" && !validID(c.UserID)) {
		return invalid
	}
	if exists(tx, bucketSMSCodes, c.ID) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	c.Attempts = 0
	put(tx, bucketSMSCodes, c.ID, c)
	return Result{}
}

func applyCheckSMSCode(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[CheckSMSCode](p)
	if !validID(c.ID) || !validKey(c.Hash) {
		return invalid
	}
	var code SMSCode
	if !get(tx, bucketSMSCodes, c.ID, &code) {
		return Result{Err: ErrNotFound}
	}
	if !c.At.Before(code.ExpiresAt) {
		del(tx, bucketSMSCodes, c.ID)
		return Result{Err: ErrExpired}
	}
	if code.UserID == "" || code.Hash != c.Hash {
		code.Attempts++
		if code.Attempts >= max(c.MaxAttempts, 1) {
			del(tx, bucketSMSCodes, c.ID)
		} else {
			put(tx, bucketSMSCodes, c.ID, code)
		}
		return Result{Err: ErrWrongCode}
	}
	del(tx, bucketSMSCodes, c.ID)
	return Result{Value: code}
}

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
	register(TypeStepUpSSOSession, applyStepUpSSOSession)
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

// StepUpSSOSession records a second factor on a live SSO session: Method
// joins its amr, ACR becomes its acr, and At its auth_time (the last
// authentication). The session and its app sessions stay: a step-up is not
// a fresh authentication (SPEC.md section 3), so the sid is kept.
type StepUpSSOSession struct {
	ID     string    `json:"id"`
	Method string    `json:"method"`
	ACR    string    `json:"acr"`
	At     time.Time `json:"at"`
}

func applyStepUpSSOSession(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[StepUpSSOSession](p)
	if !validID(c.ID) || !validKey(c.Method, c.ACR) || len(c.Method) > 16 || len(c.ACR) > 128 {
		return invalid
	}
	var s SSOSession
	if !get(tx, bucketSSO, c.ID, &s) {
		return Result{Err: ErrNotFound}
	}
	if !s.Live(c.At) {
		return Result{Err: ErrSessionEnded}
	}
	if !slices.Contains(s.AMR, c.Method) {
		s.AMR = append(s.AMR, c.Method)
	}
	s.ACR, s.AuthTime, s.LastSeen = c.ACR, c.At, c.At
	put(tx, bucketSSO, s.ID, s)
	return Result{Value: s}
}
