package fsm

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Challenge is a WebAuthn ceremony in progress: the relying-party
// library's session data, replicated so that any node can finish a
// ceremony another node began. It is taken (read and deleted) once.
type Challenge struct {
	ID        string          `json:"id" cbor:"1,keyasint"`
	UserID    string          `json:"user_id" cbor:"2,keyasint"`
	Purpose   string          `json:"purpose" cbor:"3,keyasint"` // "register" or "assert"
	Data      json.RawMessage `json:"data" cbor:"4,keyasint"`
	ExpiresAt time.Time       `json:"expires_at" cbor:"5,keyasint"`
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
	ID        string    `json:"id" cbor:"1,keyasint"`
	UserID    string    `json:"user_id,omitempty" cbor:"2,keyasint,omitempty"`
	Phone     string    `json:"phone" cbor:"3,keyasint"`
	Hash      string    `json:"hash" cbor:"4,keyasint"`
	Attempts  int       `json:"attempts" cbor:"5,keyasint"`
	ExpiresAt time.Time `json:"expires_at" cbor:"6,keyasint"`
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
	// Challenges and text-message codes are reaped once expired.
	reaps(expiring(bucketChallenges, func(st *ReapStats) *int { return &st.Challenges }, func(c *Challenge, before time.Time) bool {
		return !c.ExpiresAt.After(before)
	}))
	reaps(expiring(bucketSMSCodes, func(st *ReapStats) *int { return &st.SMSCodes }, func(c *SMSCode, before time.Time) bool {
		return !c.ExpiresAt.After(before)
	}))
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
