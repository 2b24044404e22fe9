package fsm

import (
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// What the account page shows a person of their own and lets them end.

// EndConsentRevoked: the person withdrew their consent to the app on the
// account page.
const EndConsentRevoked = "consent_revoked"

// RevokeConsent withdraws the person's consent to an app. The app's live
// sessions of the person end in the same apply (logout tokens with sid
// are owed, as for a logout), so the app cannot go on with a grant the
// person took back. ErrNotFound: no such consent.
type RevokeConsent struct {
	UserID   string    `json:"user_id"`
	ClientID string    `json:"client_id"`
	At       time.Time `json:"at"`
}

func init() { register(TypeRevokeConsent, applyRevokeConsent) }

func applyRevokeConsent(tx *bolt.Tx, index uint64, p []byte) Result {
	c := decode[RevokeConsent](p)
	if !validID(c.UserID, c.ClientID) {
		return invalid
	}
	key := c.UserID + "/" + c.ClientID
	if !exists(tx, bucketConsents, key) {
		return Result{Err: ErrNotFound}
	}
	del(tx, bucketConsents, key)
	ended := EndedApps{Index: index}
	for _, sid := range prefixKeys(tx, bucketAppByUser, c.UserID) {
		var a AppSession
		if get(tx, bucketApp, sid, &a) && a.ClientID == c.ClientID {
			if a, ok := endApp(tx, sid, c.At, EndConsentRevoked); ok {
				ended.Apps = append(ended.Apps, a)
			}
		}
	}
	ended.Deliveries = enqueueLogouts(tx, index, c.At, CauseLogout, withSID(ended.Apps))
	return Result{Value: ended}
}

// SSOSessionsOf lists the person's SSO sessions that are live at now,
// with the app sessions live in each.
func (s *State) SSOSessionsOf(userID string, now time.Time) ([]SSOSession, map[string][]AppSession, error) {
	var out []SSOSession
	apps := map[string][]AppSession{}
	err := s.f.view(func(tx *bolt.Tx) error {
		for _, id := range prefixKeys(tx, bucketSSOByUser, userID) {
			var ss SSOSession
			if !get(tx, bucketSSO, id, &ss) || !ss.EndedAt.IsZero() || !ss.Live(now) {
				continue
			}
			out = append(out, ss)
			for _, sid := range prefixKeys(tx, bucketAppBySSO, id) {
				var a AppSession
				if get(tx, bucketApp, sid, &a) && a.EndedAt.IsZero() {
					apps[id] = append(apps[id], a)
				}
			}
		}
		return nil
	})
	return out, apps, err
}

// ConsentsOf lists the consents the person has given.
func (s *State) ConsentsOf(userID string) ([]Consent, error) {
	var out []Consent
	err := s.f.view(func(tx *bolt.Tx) error {
		prefix := userID + "/"
		c := tx.Bucket(bucketConsents).Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			var cs Consent
			if err := decodeRecord(v, &cs); err != nil {
				return err
			}
			out = append(out, cs)
		}
		return nil
	})
	return out, err
}
