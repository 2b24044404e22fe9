package fsm

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Code is an authorization code, stored under the SHA-256 of its value.
type Code struct {
	Hash          string    `json:"hash" cbor:"1,keyasint"`
	ClientID      string    `json:"client_id" cbor:"2,keyasint"`
	RedirectURI   string    `json:"redirect_uri" cbor:"3,keyasint"`
	UserID        string    `json:"user_id,omitempty" cbor:"4,keyasint,omitempty"` // empty once redeemed (see applyRedeemCode)
	OrgID         string    `json:"org_id,omitempty" cbor:"5,keyasint,omitempty"`
	SID           string    `json:"sid,omitempty" cbor:"6,keyasint,omitempty"`
	SSOSessionID  string    `json:"sso_session_id,omitempty" cbor:"7,keyasint,omitempty"`
	Scopes        []string  `json:"scopes" cbor:"8,keyasint"`
	Nonce         string    `json:"nonce,omitempty" cbor:"9,keyasint,omitempty"`
	Challenge     string    `json:"code_challenge" cbor:"10,keyasint"`
	AuthTime      time.Time `json:"auth_time,omitzero" cbor:"11,keyasint,omitzero"`
	AMR           []string  `json:"amr,omitempty" cbor:"12,keyasint,omitempty"`
	ACR           string    `json:"acr,omitempty" cbor:"13,keyasint,omitempty"`
	RequestedAt   time.Time `json:"rat,omitzero" cbor:"14,keyasint,omitzero"`
	IssuedAt      time.Time `json:"issued_at" cbor:"15,keyasint"`
	ExpiresAt     time.Time `json:"expires_at" cbor:"16,keyasint"`
	RedeemedAt    time.Time `json:"redeemed_at,omitzero" cbor:"17,keyasint,omitzero"`
	AccessJTI     string    `json:"access_jti,omitempty" cbor:"18,keyasint,omitempty"`
	AccessExpires time.Time `json:"access_expires,omitzero" cbor:"19,keyasint,omitzero"`
}

// Consent records the scopes a person granted an app.
type Consent struct {
	UserID   string    `json:"user_id" cbor:"1,keyasint"`
	ClientID string    `json:"client_id" cbor:"2,keyasint"`
	Scopes   []string  `json:"scopes" cbor:"3,keyasint"`
	At       time.Time `json:"at" cbor:"4,keyasint"`
}

// IssueCode is one sign-in step in one command: it reuses the live app
// session of (SSO session, client, organization) or opens one with NewSID,
// records consent when given, keeps the SSO session alive, and stores the
// code. Code.SID is filled in by apply; the Value is the sid used.
type IssueCode struct {
	Code          Code      `json:"code"`
	NewSID        string    `json:"new_sid"`
	IdleExpiresAt time.Time `json:"idle_expires_at"` // the SSO session's new idle deadline
	Consent       *Consent  `json:"consent,omitempty"`
}

// RedeemCode exchanges a code once. The proposer has checked PKCE and the
// redirect URI against the code it read; apply re-checks what can change
// between that read and now, and marks the code used. A second redemption
// revokes the access token of the first.
type RedeemCode struct {
	Hash          string    `json:"hash"`
	ClientID      string    `json:"client_id"`
	At            time.Time `json:"at"`
	AccessJTI     string    `json:"access_jti"`
	AccessExpires time.Time `json:"access_expires"`
}

func init() {
	register(TypeIssueCode, applyIssueCode)
	register(TypeRedeemCode, applyRedeemCode)
	// A code is reaped once it and the access token it issued expired.
	reaps(expiring(bucketCodes, func(st *ReapStats) *int { return &st.Codes }, func(c *Code, before time.Time) bool {
		return !c.ExpiresAt.After(before) && (c.AccessExpires.IsZero() || !c.AccessExpires.After(before))
	}))
}

func applyIssueCode(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[IssueCode](p)
	if !validKey(c.Code.Hash) || !validID(c.NewSID, c.Code.SSOSessionID, c.Code.ClientID, c.Code.OrgID, c.Code.UserID) {
		return invalid
	}
	code := c.Code
	var sso SSOSession
	if !get(tx, bucketSSO, code.SSOSessionID, &sso) || !sso.Live(code.IssuedAt) || sso.UserID != code.UserID {
		return Result{Err: ErrSessionEnded}
	}
	if exists(tx, bucketCodes, code.Hash) {
		return Result{Err: &ConflictError{Field: "code"}}
	}
	key := appKey(sso.ID, code.ClientID, code.OrgID)
	if sid := tx.Bucket(bucketAppKey).Get([]byte(key)); sid != nil {
		code.SID = string(sid)
	} else {
		if exists(tx, bucketApp, c.NewSID) {
			return Result{Err: &ConflictError{Field: "sid"}}
		}
		a := AppSession{ID: c.NewSID, SSOSessionID: sso.ID, ClientID: code.ClientID, OrgID: code.OrgID, UserID: code.UserID, CreatedAt: code.IssuedAt}
		put(tx, bucketApp, a.ID, a)
		putIndex(tx, bucketAppKey, key, a.ID)
		putIndex(tx, bucketAppBySSO, sso.ID+"/"+a.ID, "")
		putIndex(tx, bucketAppByUser, a.UserID+"/"+a.ID, "")
		putIndex(tx, bucketAppByOrg, a.OrgID+"/"+a.ID, "")
		code.SID = a.ID
	}
	if c.IdleExpiresAt.After(sso.IdleExpiresAt) {
		sso.IdleExpiresAt = c.IdleExpiresAt
	}
	sso.LastSeen = code.IssuedAt
	put(tx, bucketSSO, sso.ID, sso)
	if c.Consent != nil {
		put(tx, bucketConsents, c.Consent.UserID+"/"+c.Consent.ClientID, *c.Consent)
	}
	put(tx, bucketCodes, code.Hash, code)
	return Result{Value: code.SID}
}

func applyRedeemCode(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[RedeemCode](p)
	if !validKey(c.Hash) {
		return invalid
	}
	var code Code
	if !get(tx, bucketCodes, c.Hash, &code) {
		return Result{Err: ErrNotFound}
	}
	if code.ClientID != c.ClientID {
		return Result{Err: ErrMismatch}
	}
	if !code.RedeemedAt.IsZero() {
		if code.AccessJTI != "" {
			revoke(tx, code.AccessJTI, code.AccessExpires)
		}
		return Result{Err: ErrAlreadyUsed}
	}
	if !c.At.Before(code.ExpiresAt) {
		return Result{Err: ErrExpired}
	}
	if _, _, _, err := liveAccess(tx, nil, code.SID, c.At); err != nil {
		return Result{Err: err}
	}
	code.RedeemedAt, code.AccessJTI, code.AccessExpires = c.At, c.AccessJTI, c.AccessExpires
	// A redeemed code stays until its access token expires, only so that a
	// replay can be recognised and revoke that token: keep what the token
	// endpoint checks before it gets there, and drop the rest (the person,
	// session, nonce and strength were over half of the live state under
	// load).
	put(tx, bucketCodes, code.Hash, Code{
		Hash: code.Hash, ClientID: code.ClientID, RedirectURI: code.RedirectURI, Scopes: code.Scopes, SID: code.SID, // the audit event of a replay names it
		Challenge: code.Challenge, IssuedAt: code.IssuedAt, ExpiresAt: code.ExpiresAt,
		RedeemedAt: code.RedeemedAt, AccessJTI: code.AccessJTI, AccessExpires: code.AccessExpires,
	})
	return Result{Value: code}
}

// Code returns a code by the hash of its value.
func (s *State) Code(hash string) (Code, error) {
	var out Code
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketCodes, hash, &out); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return out, err
}

// Consent returns what a person granted an app.
func (s *State) Consent(userID, clientID string) (Consent, error) {
	var out Consent
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketConsents, userID+"/"+clientID, &out); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return out, err
}
