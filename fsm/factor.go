package fsm

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Factors are a person's second factors: an authenticator-app secret,
// recovery codes and passkeys. Everything secret is stored the way the
// proposer made it: the TOTP secret sealed under the operator's KEK
// (internal/kek), recovery codes as SHA-256 hashes. The state machine only
// compares and counts, so every replica decides a use the same way.
type Factors struct {
	UserID   string         `json:"user_id" cbor:"1,keyasint"`
	TOTP     *TOTP          `json:"totp,omitempty" cbor:"2,keyasint,omitempty"`
	Recovery []RecoveryCode `json:"recovery,omitempty" cbor:"3,keyasint,omitempty"`
	Passkeys []Passkey      `json:"passkeys,omitempty" cbor:"4,keyasint,omitempty"`
}

// TOTP is an enrolled authenticator app (RFC 6238).
type TOTP struct {
	Secret    []byte    `json:"secret" cbor:"1,keyasint"`    // sealed (internal/kek)
	LastStep  int64     `json:"last_step" cbor:"2,keyasint"` // the last accepted time step: no code at or before it works again
	CreatedAt time.Time `json:"created_at" cbor:"3,keyasint"`
}

// RecoveryCode is one single-use code, by hash.
type RecoveryCode struct {
	Hash   string    `json:"hash" cbor:"1,keyasint"`
	UsedAt time.Time `json:"used_at,omitzero" cbor:"2,keyasint,omitzero"`
}

// Passkey is a WebAuthn credential. Credential is the relying-party
// library's JSON of it; SignCount is kept here, outside that blob, because
// the state machine alone decides whether a counter grew.
type Passkey struct {
	ID         []byte          `json:"id" cbor:"1,keyasint"` // credential id
	Name       string          `json:"name,omitempty" cbor:"2,keyasint,omitempty"`
	Credential json.RawMessage `json:"credential" cbor:"3,keyasint"`
	SignCount  uint32          `json:"sign_count" cbor:"4,keyasint"`
	CreatedAt  time.Time       `json:"created_at" cbor:"5,keyasint"`
	LastUsedAt time.Time       `json:"last_used_at,omitzero" cbor:"6,keyasint,omitzero"`
}

// HasSecondFactor reports whether f can raise a session to mfa: an
// authenticator app or a passkey (recovery codes never do).
func (f Factors) HasSecondFactor() bool { return f.TOTP != nil || len(f.Passkeys) > 0 }

// RecoveryLeft counts the unused recovery codes.
func (f Factors) RecoveryLeft() int {
	n := 0
	for _, c := range f.Recovery {
		if c.UsedAt.IsZero() {
			n++
		}
	}
	return n
}

// SetTOTP enrolls (or, with a nil Secret, removes) the authenticator app.
type SetTOTP struct {
	UserID      string       `json:"user_id"`
	Secret      []byte       `json:"secret,omitempty"`
	At          time.Time    `json:"at"`
	EndSessions *EndSessions `json:"end_sessions,omitempty"`
}

// UseTOTP accepts the code of time step Step once: ErrReplay when Step is
// not after the last accepted step.
type UseTOTP struct {
	UserID string    `json:"user_id"`
	Step   int64     `json:"step"`
	At     time.Time `json:"at"`
}

// SetRecoveryCodes replaces the recovery codes.
type SetRecoveryCodes struct {
	UserID      string       `json:"user_id"`
	Hashes      []string     `json:"hashes"`
	At          time.Time    `json:"at"`
	EndSessions *EndSessions `json:"end_sessions,omitempty"`
}

// UseRecoveryCode spends the unused code with Hash: ErrWrongCode when there
// is none.
type UseRecoveryCode struct {
	UserID string    `json:"user_id"`
	Hash   string    `json:"hash"`
	At     time.Time `json:"at"`
}

// AddPasskey registers a credential; its id is unique across people.
type AddPasskey struct {
	UserID      string       `json:"user_id"`
	Passkey     Passkey      `json:"passkey"`
	EndSessions *EndSessions `json:"end_sessions,omitempty"`
}

// UsePasskey records an assertion: ErrReplay when the authenticator keeps
// a counter and SignCount did not grow (a cloned authenticator).
type UsePasskey struct {
	UserID    string    `json:"user_id"`
	ID        []byte    `json:"id"`
	SignCount uint32    `json:"sign_count"`
	At        time.Time `json:"at"`
}

// RemovePasskey deletes a credential.
type RemovePasskey struct {
	UserID      string       `json:"user_id"`
	ID          []byte       `json:"id"`
	EndSessions *EndSessions `json:"end_sessions,omitempty"`
}

const (
	maxRecoveryCodes = 20
	maxPasskeys      = 20
	maxBlob          = 16 << 10
)

func init() {
	register(TypeSetTOTP, applySetTOTP)
	register(TypeUseTOTP, applyUseTOTP)
	register(TypeSetRecoveryCodes, applySetRecoveryCodes)
	register(TypeUseRecoveryCode, applyUseRecoveryCode)
	register(TypeAddPasskey, applyAddPasskey)
	register(TypeUsePasskey, applyUsePasskey)
	register(TypeRemovePasskey, applyRemovePasskey)
}

// loadFactors reads u's factors; ok is false when the person does not
// exist.
func loadFactors(tx *bolt.Tx, userID string) (Factors, bool) {
	if !exists(tx, bucketUsers, userID) {
		return Factors{}, false
	}
	f := Factors{UserID: userID}
	get(tx, bucketFactors, userID, &f)
	return f, true
}

func storeFactors(tx *bolt.Tx, f Factors) {
	if f.TOTP == nil && len(f.Recovery) == 0 && len(f.Passkeys) == 0 {
		del(tx, bucketFactors, f.UserID)
		return
	}
	put(tx, bucketFactors, f.UserID, f)
}

func applySetTOTP(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[SetTOTP](p)
	if !validID(c.UserID) || len(c.Secret) > maxBlob || !validEndSessions(c.EndSessions) {
		return invalid
	}
	f, ok := loadFactors(tx, c.UserID)
	if !ok {
		return Result{Err: ErrNotFound}
	}
	f.TOTP = nil
	if len(c.Secret) > 0 {
		f.TOTP = &TOTP{Secret: c.Secret, CreatedAt: c.At}
	}
	storeFactors(tx, f)
	return Result{Value: endSessionsOf(tx, index, c.UserID, c.EndSessions)}
}

func applyUseTOTP(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[UseTOTP](p)
	if !validID(c.UserID) {
		return invalid
	}
	f, ok := loadFactors(tx, c.UserID)
	if !ok || f.TOTP == nil {
		return Result{Err: ErrNotFound}
	}
	if c.Step <= f.TOTP.LastStep {
		return Result{Err: ErrReplay}
	}
	f.TOTP.LastStep = c.Step
	storeFactors(tx, f)
	return Result{}
}

func applySetRecoveryCodes(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[SetRecoveryCodes](p)
	if !validID(c.UserID) || len(c.Hashes) > maxRecoveryCodes || !validKey(c.Hashes...) || !validEndSessions(c.EndSessions) {
		return invalid
	}
	f, ok := loadFactors(tx, c.UserID)
	if !ok {
		return Result{Err: ErrNotFound}
	}
	f.Recovery = nil
	for _, h := range c.Hashes {
		f.Recovery = append(f.Recovery, RecoveryCode{Hash: h})
	}
	storeFactors(tx, f)
	return Result{Value: endSessionsOf(tx, index, c.UserID, c.EndSessions)}
}

func applyUseRecoveryCode(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[UseRecoveryCode](p)
	if !validID(c.UserID) || !validKey(c.Hash) {
		return invalid
	}
	f, ok := loadFactors(tx, c.UserID)
	if !ok {
		return Result{Err: ErrNotFound}
	}
	// Hashes of random codes: comparing them in the clear leaks nothing
	// about the codes.
	i := slices.IndexFunc(f.Recovery, func(r RecoveryCode) bool { return r.Hash == c.Hash && r.UsedAt.IsZero() })
	if i < 0 {
		return Result{Err: ErrWrongCode}
	}
	f.Recovery[i].UsedAt = c.At
	storeFactors(tx, f)
	return Result{Value: f.RecoveryLeft()}
}

func passkeyKey(id []byte) string { return base64.RawURLEncoding.EncodeToString(id) }

func applyAddPasskey(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[AddPasskey](p)
	pk := c.Passkey
	if !validID(c.UserID) || len(pk.ID) == 0 || len(pk.ID) > 1023 || len(pk.Credential) > maxBlob || len(pk.Name) > 256 || !validEndSessions(c.EndSessions) {
		return invalid
	}
	f, ok := loadFactors(tx, c.UserID)
	if !ok {
		return Result{Err: ErrNotFound}
	}
	if exists(tx, bucketPasskeyIDs, passkeyKey(pk.ID)) {
		return Result{Err: &ConflictError{Field: "credential_id"}}
	}
	if len(f.Passkeys) >= maxPasskeys {
		return Result{Err: &ConflictError{Field: "passkeys"}}
	}
	f.Passkeys = append(f.Passkeys, pk)
	storeFactors(tx, f)
	putIndex(tx, bucketPasskeyIDs, passkeyKey(pk.ID), c.UserID)
	return Result{Value: endSessionsOf(tx, index, c.UserID, c.EndSessions)}
}

func applyUsePasskey(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[UsePasskey](p)
	if !validID(c.UserID) || len(c.ID) == 0 || len(c.ID) > 1023 {
		return invalid
	}
	f, ok := loadFactors(tx, c.UserID)
	if !ok {
		return Result{Err: ErrNotFound}
	}
	i := slices.IndexFunc(f.Passkeys, func(k Passkey) bool { return string(k.ID) == string(c.ID) })
	if i < 0 {
		return Result{Err: ErrNotFound}
	}
	// W3C WebAuthn 7.2 step 21: a counter that does not grow, when either
	// side is non-zero, signals a cloned authenticator.
	if (c.SignCount != 0 || f.Passkeys[i].SignCount != 0) && c.SignCount <= f.Passkeys[i].SignCount {
		return Result{Err: ErrReplay}
	}
	f.Passkeys[i].SignCount, f.Passkeys[i].LastUsedAt = c.SignCount, c.At
	storeFactors(tx, f)
	return Result{}
}

func applyRemovePasskey(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[RemovePasskey](p)
	if !validID(c.UserID) || len(c.ID) == 0 || len(c.ID) > 1023 || !validEndSessions(c.EndSessions) {
		return invalid
	}
	f, ok := loadFactors(tx, c.UserID)
	if !ok {
		return Result{Err: ErrNotFound}
	}
	i := slices.IndexFunc(f.Passkeys, func(k Passkey) bool { return string(k.ID) == string(c.ID) })
	if i < 0 {
		return Result{Err: ErrNotFound}
	}
	f.Passkeys = slices.Delete(f.Passkeys, i, i+1)
	storeFactors(tx, f)
	del(tx, bucketPasskeyIDs, passkeyKey(c.ID))
	return Result{Value: endSessionsOf(tx, index, c.UserID, c.EndSessions)}
}

// deleteFactors removes a person's factors (account erasure).
func deleteFactors(tx *bolt.Tx, userID string) {
	var f Factors
	if get(tx, bucketFactors, userID, &f) {
		for _, k := range f.Passkeys {
			del(tx, bucketPasskeyIDs, passkeyKey(k.ID))
		}
		del(tx, bucketFactors, userID)
	}
}

// Factors returns a person's second factors (empty when none).
func (s *State) Factors(userID string) (Factors, error) {
	var f Factors
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { f, ok = loadFactors(tx, userID); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return f, err
}

// TOTPSecrets calls fn with every enrolled person's sealed authenticator
// secret (the startup check opens each with the node's KEK).
func (s *State) TOTPSecrets(fn func(userID string, sealed []byte) error) error {
	return s.f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFactors).ForEach(func(_, v []byte) error {
			var f Factors
			mustUnmarshal(v, &f)
			if f.TOTP == nil {
				return nil
			}
			return fn(f.UserID, f.TOTP.Secret)
		})
	})
}
