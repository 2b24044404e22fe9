package fsm

import (
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Reasons an SSO or app session ended.
const (
	EndLogout      = "logout"
	EndSuperseded  = "superseded"
	EndErased      = "erased"
	EndOrgDeleted  = "org_deleted"
	EndClientGone  = "client_deleted"
	EndMemberGone  = "membership_removed"
	EndPlainExpiry = "expired"
	// EndCredential: the person's password, phone or a second factor
	// changed, so every other session they had was ended.
	EndCredential = "credential_changed" // #nosec G101 -- a reason name, not a credential
)

// SSOSession is a person's session with the provider, held by the browser's
// cookie. The cookie carries a secret; only its SHA-256 is stored.
type SSOSession struct {
	ID            string    `json:"id" cbor:"1,keyasint"`
	UserID        string    `json:"user_id" cbor:"2,keyasint"`
	AuthTime      time.Time `json:"auth_time" cbor:"3,keyasint"` // last authentication
	AMR           []string  `json:"amr" cbor:"4,keyasint"`
	ACR           string    `json:"acr" cbor:"5,keyasint"`
	CreatedAt     time.Time `json:"created_at" cbor:"6,keyasint"`
	LastSeen      time.Time `json:"last_seen" cbor:"7,keyasint"`
	IdleExpiresAt time.Time `json:"idle_expires_at" cbor:"8,keyasint"`
	ExpiresAt     time.Time `json:"expires_at" cbor:"9,keyasint"` // absolute
	// Verified holds, per amr method, when this session last verified it
	// (the opening method at CreatedAt, each step-up at its time).
	// /account asks for a fresh verification of the strongest credential
	// before a credential changes; sessions older than this field have
	// none and are asked again.
	Verified  map[string]time.Time `json:"verified,omitempty" cbor:"10,keyasint,omitempty"`
	EndedAt   time.Time            `json:"ended_at,omitzero" cbor:"11,keyasint,omitzero"`
	EndReason string               `json:"end_reason,omitempty" cbor:"12,keyasint,omitempty"`
	// IdentityID and ProviderID: the session was opened through that
	// link at that upstream provider (federation.go), "" otherwise;
	// UpstreamSID is the upstream's own session (its ID token's sid),
	// which its back-channel logout names. UpstreamIDToken is the
	// upstream's ID token, kept only for a provider that ends its session
	// at sign-out (id_token_hint).
	IdentityID      string `json:"identity_id,omitempty" cbor:"13,keyasint,omitempty"`
	ProviderID      string `json:"provider_id,omitempty" cbor:"14,keyasint,omitempty"`
	UpstreamSID     string `json:"upstream_sid,omitempty" cbor:"15,keyasint,omitempty"`
	UpstreamIDToken string `json:"upstream_id_token,omitempty" cbor:"16,keyasint,omitempty"`
}

// Live reports whether the session can be used at now.
func (s SSOSession) Live(now time.Time) bool {
	return s.EndedAt.IsZero() && now.Before(s.ExpiresAt) && now.Before(s.IdleExpiresAt)
}

// AppSession is the session of one app, for one organization, under one SSO
// session; its ID is the `sid` claim.
type AppSession struct {
	ID           string    `json:"sid" cbor:"1,keyasint"`
	SSOSessionID string    `json:"sso_session_id" cbor:"2,keyasint"`
	ClientID     string    `json:"client_id" cbor:"3,keyasint"`
	OrgID        string    `json:"org_id" cbor:"4,keyasint"`
	UserID       string    `json:"user_id" cbor:"5,keyasint"`
	CreatedAt    time.Time `json:"created_at" cbor:"6,keyasint"`
	EndedAt      time.Time `json:"ended_at,omitzero" cbor:"7,keyasint,omitzero"`
	EndReason    string    `json:"end_reason,omitempty" cbor:"8,keyasint,omitempty"`
}

// StartSSOSession opens an SSO session after an authentication. With
// Supersedes set, that earlier session of the same browser ends first, with
// all its app sessions (a fresh authentication).
type StartSSOSession struct {
	Session    SSOSession `json:"session"`
	TokenHash  string     `json:"token_hash"`
	Supersedes string     `json:"supersedes,omitempty"`
	// Settle settles the throttle reservation of the sign-in that opens
	// the session, in the same apply (ThrottleReserve).
	Settle *ThrottleClear `json:"settle,omitempty"`
}

// EndSSOSession ends an SSO session and every app session under it.
type EndSSOSession struct {
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// EndedApps is the Value of commands that end app sessions: the sessions
// they ended, the back-channel deliveries recorded for them, and the raft
// index of the command (DeliveriesOf(Index) finds the deliveries later).
type EndedApps struct {
	Index      uint64       `json:"index"`
	Apps       []AppSession `json:"apps"`
	Deliveries []Delivery   `json:"deliveries"`
}

// Causes of back-channel logouts (Delivery.Cause).
const (
	CauseLogout     = "logout"
	CauseSuperseded = "superseded"
	CauseErased     = "erased"
	CauseOrgDeleted = "org_deleted"
	CauseCredential = "credential_changed" // #nosec G101 -- a cause name, not a credential
)

// EndSessions rides on a command that changes a credential (UpdateUser of
// a password or phone, SetTOTP, SetRecoveryCodes, AddPasskey,
// RemovePasskey): in the same apply, every live SSO session of the person
// except Except ends, and logout tokens with sid are owed for its app
// sessions. A reset thereby evicts whoever held a session, and the change
// and the eviction can never be seen apart.
type EndSessions struct {
	Except string    `json:"except,omitempty"` // the session making the change on /account
	At     time.Time `json:"at"`
}

// endSessionsOf carries out e for userID (nothing when e is nil).
func endSessionsOf(tx *bolt.Tx, index uint64, userID string, e *EndSessions) EndedApps {
	ended := EndedApps{Index: index}
	if e == nil {
		return ended
	}
	for _, ssoID := range prefixKeys(tx, bucketSSOByUser, userID) {
		if ssoID != e.Except {
			ended.Apps = append(ended.Apps, endSSO(tx, ssoID, e.At, EndCredential)...)
		}
	}
	ended.Deliveries = enqueueLogouts(tx, index, e.At, CauseCredential, withSID(ended.Apps))
	return ended
}

// validEndSessions checks the optional EndSessions of a command.
func validEndSessions(e *EndSessions) bool { return e == nil || e.Except == "" || validID(e.Except) }

func init() {
	register(TypeStartSSOSession, applyStartSSOSession)
	register(TypeEndSSOSession, applyEndSSOSession)
	register(TypeStepUpSSOSession, applyStepUpSSOSession)
	// An SSO session is reaped once it ended or expired, and its app
	// sessions and index entries with it; then the cookie tokens of
	// sessions no longer there.
	sso := expiring(bucketSSO, func(st *ReapStats) *int { return &st.SSOSessions }, func(s *SSOSession, before time.Time) bool {
		return (!s.EndedAt.IsZero() && !s.EndedAt.After(before)) || !s.Live(before)
	})
	sso.cleanup = reapSSOSessions
	reaps(sso)
	reaps(reaped{bucket: bucketSSOToken, dead: func(tx *bolt.Tx, v []byte, _ time.Time) bool { return !exists(tx, bucketSSO, string(v)) }})
}

// reapSSOSessions deletes the app sessions of reaped SSO sessions, with
// their index entries, and the sessions' sso_by_user entries.
func reapSSOSessions(tx *bolt.Tx, dead [][]byte, st *ReapStats) {
	for _, v := range dead {
		var s SSOSession
		mustUnmarshal(v, &s)
		for _, sid := range prefixKeys(tx, bucketAppBySSO, s.ID) {
			var a AppSession
			if get(tx, bucketApp, sid, &a) {
				del(tx, bucketApp, sid)
				del(tx, bucketAppKey, appKey(a.SSOSessionID, a.ClientID, a.OrgID))
				del(tx, bucketAppByUser, a.UserID+"/"+sid)
				del(tx, bucketAppByOrg, a.OrgID+"/"+sid)
				st.AppSessions++
			}
			del(tx, bucketAppBySSO, s.ID+"/"+sid)
		}
		del(tx, bucketSSOByUser, s.UserID+"/"+s.ID)
		unindexFederatedSession(tx, s)
	}
}

func applyStartSSOSession(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[StartSSOSession](p)
	if !validID(c.Session.ID, c.Session.UserID) || !validKey(c.TokenHash) || (c.Supersedes != "" && !validID(c.Supersedes)) || !validClear(c.Settle) {
		return invalid
	}
	if exists(tx, bucketSSO, c.Session.ID) || exists(tx, bucketSSOToken, c.TokenHash) {
		return Result{Err: &ConflictError{Field: "id"}}
	}
	if !exists(tx, bucketUsers, c.Session.UserID) {
		return Result{Err: &NotFoundError{Field: "user_id"}}
	}
	if c.Session.IdentityID != "" || c.Session.ProviderID != "" {
		return invalid // only a FederatedSignIn opens a session through a link
	}
	return Result{Value: startSSO(tx, index, c)}
}

// startSSO opens a checked session: the superseded one ends first.
func startSSO(tx *bolt.Tx, index uint64, c StartSSOSession) EndedApps {
	ended := EndedApps{Index: index}
	if c.Supersedes != "" {
		ended.Apps = endSSO(tx, c.Supersedes, c.Session.CreatedAt, EndSuperseded)
		ended.Deliveries = enqueueLogouts(tx, index, c.Session.CreatedAt, CauseSuperseded, withSID(ended.Apps))
	}
	put(tx, bucketSSO, c.Session.ID, c.Session)
	settleThrottles(tx, c.Settle)
	putIndex(tx, bucketSSOToken, c.TokenHash, c.Session.ID)
	putIndex(tx, bucketSSOByUser, c.Session.UserID+"/"+c.Session.ID, "")
	indexFederatedSession(tx, c.Session)
	return ended
}

func applyEndSSOSession(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[EndSSOSession](p)
	if !validID(c.ID) {
		return invalid
	}
	if !exists(tx, bucketSSO, c.ID) {
		return Result{Err: ErrNotFound}
	}
	ended := EndedApps{Index: index, Apps: endSSO(tx, c.ID, c.At, c.Reason)}
	if c.Reason != EndPlainExpiry { // plain expiry sends no logout token
		ended.Deliveries = enqueueLogouts(tx, index, c.At, CauseLogout, withSID(ended.Apps))
	}
	return Result{Value: ended}
}

// endSSO ends a live SSO session and its live app sessions, returning the
// app sessions it ended. Ending an ended session changes nothing.
func endSSO(tx *bolt.Tx, id string, at time.Time, reason string) []AppSession {
	var s SSOSession
	if !get(tx, bucketSSO, id, &s) || !s.EndedAt.IsZero() {
		return nil
	}
	s.EndedAt, s.EndReason = at, reason
	put(tx, bucketSSO, s.ID, s)
	var ended []AppSession
	for _, sid := range prefixKeys(tx, bucketAppBySSO, id) {
		if a, ok := endApp(tx, sid, at, reason); ok {
			ended = append(ended, a)
		}
	}
	return ended
}

// endApp ends one app session if it is not ended yet.
func endApp(tx *bolt.Tx, sid string, at time.Time, reason string) (AppSession, bool) {
	var a AppSession
	if !get(tx, bucketApp, sid, &a) || !a.EndedAt.IsZero() {
		return a, false
	}
	a.EndedAt, a.EndReason = at, reason
	put(tx, bucketApp, a.ID, a)
	del(tx, bucketAppKey, appKey(a.SSOSessionID, a.ClientID, a.OrgID))
	return a, true
}

func appKey(sso, client, org string) string { return sso + "/" + client + "/" + org }

// SSOSessionByToken finds the session whose cookie secret hashes to hash.
func (s *State) SSOSessionByToken(hash string) (SSOSession, error) {
	var out SSOSession
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error {
		if id := tx.Bucket(bucketSSOToken).Get([]byte(hash)); id != nil {
			ok = get(tx, bucketSSO, string(id), &out)
		}
		return nil
	})
	if err == nil && !ok {
		err = ErrNotFound
	}
	return out, err
}

// SSOSession returns one SSO session by id.
func (s *State) SSOSession(id string) (SSOSession, error) {
	var out SSOSession
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketSSO, id, &out); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return out, err
}

// AppSession returns one app session by sid.
func (s *State) AppSession(sid string) (AppSession, error) {
	var out AppSession
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error { ok = get(tx, bucketApp, sid, &out); return nil })
	if err == nil && !ok {
		err = ErrNotFound
	}
	return out, err
}

// LiveAppSession returns the live app session for (SSO session, client,
// organization), the one a repeat sign-in reuses.
func (s *State) LiveAppSession(ssoID, clientID, orgID string) (AppSession, error) {
	var out AppSession
	var ok bool
	err := s.f.view(func(tx *bolt.Tx) error {
		if sid := tx.Bucket(bucketAppKey).Get([]byte(appKey(ssoID, clientID, orgID))); sid != nil {
			ok = get(tx, bucketApp, string(sid), &out)
		}
		return nil
	})
	if err == nil && !ok {
		err = ErrNotFound
	}
	return out, err
}

// StepUpSSOSession records a second factor on a live SSO session: Method
// joins its amr, ACR becomes its acr, and At its auth_time (the last
// authentication). The session and its app sessions stay: a step-up is not
// a fresh authentication, so the sid is kept.
type StepUpSSOSession struct {
	ID     string    `json:"id"`
	Method string    `json:"method"`
	ACR    string    `json:"acr"`
	At     time.Time `json:"at"`
	// Settle settles the throttle reservation of the verification.
	Settle *ThrottleClear `json:"settle,omitempty"`
}

func applyStepUpSSOSession(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[StepUpSSOSession](p)
	if !validID(c.ID) || !validKey(c.Method, c.ACR) || len(c.Method) > 16 || len(c.ACR) > 128 || !validClear(c.Settle) {
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
	if s.Verified == nil {
		s.Verified = map[string]time.Time{}
	}
	s.Verified[c.Method] = c.At
	s.ACR, s.AuthTime, s.LastSeen = c.ACR, c.At, c.At
	put(tx, bucketSSO, s.ID, s)
	settleThrottles(tx, c.Settle)
	return Result{Value: s}
}
