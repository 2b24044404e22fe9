package fsm

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Access is what the bearer paths need about a live access token: the ids
// of its app session, the organization that owns the minting app, and the
// person's email when it was asked for.
type Access struct {
	ClientID      string // the app that minted the token (AppSession.ClientID)
	ClientOrgID   string // the organization that owns that app (Client.OrganizationID)
	UserID        string // AppSession.UserID
	OrgID         string // AppSession.OrgID
	Email         string // User.Email; only when CheckAccess's email is set
	EmailVerified bool   // User.EmailVerified; likewise
}

// CheckAccess reports whether an access token with this jti and sid is
// still honoured at now: not revoked (ErrAlreadyUsed), its app session
// known (ErrNotFound), the app and SSO sessions live (ErrSessionEnded),
// the client not suspended, the organization and the membership active
// and the person still there (ErrAccessChanged). It reads each record
// once, in one transaction, decoding only the fields those checks need
// (the views below), and the person's record only when email is set.
func (s *State) CheckAccess(jti, sid string, now time.Time, email bool) (Access, error) {
	var out Access
	var res error
	err := s.f.view(func(tx *bolt.Tx) error {
		res = checkAccess(tx, s.f.accessGenFor(tx), jti, sid, now, email, &out)
		return nil
	})
	if err != nil {
		return Access{}, err
	}
	return out, res
}

func checkAccess(tx *bolt.Tx, g *accessGen, jti, sid string, now time.Time, email bool, out *Access) error {
	if tx.Bucket(bucketRevoked).Get([]byte(jti)) != nil {
		return ErrAlreadyUsed
	}
	a, cl, found, err := liveAccess(tx, g, sid, now)
	if !found {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	*out = Access{ClientID: a.ClientID, ClientOrgID: cl.OrganizationID, UserID: a.UserID, OrgID: a.OrgID}
	u, ok := g.user(tx, a.UserID)
	if !ok {
		return ErrAccessChanged
	}
	if email {
		out.Email, out.EmailVerified = u.Email, u.EmailVerified
	}
	return nil
}

// liveAccess is the liveness of app session sid at now, for the bearer
// paths and for a code's redemption alike: the app and SSO sessions live
// (ErrSessionEnded), the client not suspended, the organization and the
// membership active (ErrAccessChanged). found is false when there is no
// such app session. g serves the rarely changing records (nil: none, as
// in a write transaction).
func liveAccess(tx *bolt.Tx, g *accessGen, sid string, now time.Time) (a appView, cl clientView, found bool, err error) {
	if !get(tx, bucketApp, sid, &a) {
		return a, cl, false, ErrSessionEnded
	}
	if !a.EndedAt.IsZero() {
		return a, cl, true, ErrSessionEnded
	}
	var sso ssoView
	if !get(tx, bucketSSO, a.SSOSessionID, &sso) ||
		!(SSOSession{IdleExpiresAt: sso.IdleExpiresAt, ExpiresAt: sso.ExpiresAt, EndedAt: sso.EndedAt}).Live(now) {
		return a, cl, true, ErrSessionEnded
	}
	cl, ok := g.client(tx, a.ClientID)
	if !ok || cl.Suspended {
		return a, cl, true, ErrAccessChanged
	}
	if st, ok := g.orgStatus(tx, a.OrgID); !ok || st != OrgActive {
		return a, cl, true, ErrAccessChanged
	}
	if st, ok := g.memberStatus(tx, a.UserID, a.OrgID); !ok || st != MembershipActive {
		return a, cl, true, ErrAccessChanged
	}
	return a, cl, true, nil
}

// Views: the fields of a record that a hot path reads, under the record's
// own names. The record codec decodes a view from the stored record and
// skips the other fields.
type (
	appView struct {
		SSOSessionID string    `json:"sso_session_id" cbor:"2,keyasint"`
		ClientID     string    `json:"client_id" cbor:"3,keyasint"`
		OrgID        string    `json:"org_id" cbor:"4,keyasint"`
		UserID       string    `json:"user_id" cbor:"5,keyasint"`
		EndedAt      time.Time `json:"ended_at" cbor:"7,keyasint"`
	}
	ssoView struct {
		IdleExpiresAt time.Time `json:"idle_expires_at" cbor:"8,keyasint"`
		ExpiresAt     time.Time `json:"expires_at" cbor:"9,keyasint"`
		EndedAt       time.Time `json:"ended_at" cbor:"11,keyasint"`
	}
	clientView struct {
		OrganizationID string `json:"organization_id" cbor:"7,keyasint"`
		Suspended      bool   `json:"suspended" cbor:"13,keyasint"`
	}
	statusView struct {
		Status string `json:"status" cbor:"4,keyasint"` // Org.Status, Membership.Status
	}
	userView struct {
		Email         string `json:"email" cbor:"2,keyasint"`
		EmailVerified bool   `json:"email_verified" cbor:"3,keyasint"`
	}
	// clientAuthView is State.ClientAuth's view of a Client.
	clientAuthView struct {
		ID             string `json:"client_id" cbor:"1,keyasint"`
		Type           string `json:"type" cbor:"3,keyasint"`
		SecretHash     string `json:"secret_hash" cbor:"4,keyasint"`
		OrganizationID string `json:"organization_id" cbor:"7,keyasint"`
		Suspended      bool   `json:"suspended" cbor:"13,keyasint"`
	}
)
