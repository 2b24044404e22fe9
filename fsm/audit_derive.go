package fsm

import (
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
)

func init() {
	auditDerive[TypeRedeemCode] = deriveRedeem
	auditDerive[TypeThrottleReserve] = deriveReserve
	auditDerive[TypeAddKey] = deriveAddKey
	auditDerive[TypeRemoveKey] = deriveRemoveKey
	auditDerive[TypeCheckSMSCode] = deriveCheckSMS
}

// deriveCheckSMS records the stamp's failure only: a code that checks
// opens the session, whose write records the sign-in.
func deriveCheckSMS(_ *bolt.Tx, _ []byte, res Result, _ *Audit, se *Event) []Event {
	if se == nil || res.Err == nil {
		return nil
	}
	return []Event{*se}
}

// deriveRedeem completes a token event with the person, organization and
// app session of the code: from the redeemed code, or, for a replay, the
// app session whose token the replay revoked.
func deriveRedeem(tx *bolt.Tx, p []byte, res Result, _ *Audit, se *Event) []Event {
	if se == nil {
		return nil
	}
	if code, ok := res.Value.(Code); ok {
		se.Subject, se.OrgID, se.SID = code.UserID, code.OrgID, code.SID
		if se.Detail == nil {
			se.Detail = map[string]string{}
		}
		se.Detail["jti"] = code.AccessJTI // the access token's id (not the token)
	} else if errors.Is(res.Err, ErrAlreadyUsed) {
		var code Code
		if get(tx, bucketCodes, decode[RedeemCode](p).Hash, &code) {
			se.SID = code.SID
			var a AppSession
			if code.SID != "" && get(tx, bucketApp, code.SID, &a) {
				se.Subject, se.OrgID = a.UserID, a.OrgID
			}
			se.Detail["reason"] = "replay"
			if code.AccessJTI != "" {
				se.Detail["revoked_jti"] = code.AccessJTI // the first exchange's token, revoked by this replay
			}
		}
	}
	return []Event{*se}
}

// deriveReserve records a sign-in failure when the attempt counted locks
// a key (a lockout starts), once per lockout: attempts refused while
// locked commit nothing and record nothing, so a flood against a locked
// account or address cannot grow the trail.
func deriveReserve(_ *bolt.Tx, p []byte, res Result, stamp *Audit, _ *Event) []Event {
	ts, ok := res.Value.([]Throttle)
	if stamp == nil || !ok || res.Err != nil {
		return nil
	}
	c := decode[ThrottleReserve](p)
	for _, t := range ts {
		for _, r := range c.Rules {
			if r.Key == t.Key && t.Count == r.Limit && t.Locked(c.At) {
				e := eventFrom(stamp)
				e.Outcome = OutcomeFailure
				if e.Detail == nil {
					e.Detail = map[string]string{}
				}
				e.Detail["reason"] = "lockout"
				e.Detail["until"] = t.LockedUntil.UTC().Format(time.RFC3339)
				return []Event{e}
			}
		}
	}
	return nil
}

func deriveAddKey(_ *bolt.Tx, p []byte, res Result, stamp *Audit, se *Event) []Event {
	if res.Err != nil {
		return nil
	}
	k := decode[AddKey](p).Key
	e := systemEvent(stamp, k.CreatedAt, EventKey)
	e.Detail = map[string]string{"action": "created", "kid": k.Kid, "activates_at": k.ActivatesAt.UTC().Format(time.RFC3339)}
	return withStamp(se, e)
}

func deriveRemoveKey(_ *bolt.Tx, p []byte, res Result, stamp *Audit, se *Event) []Event {
	if res.Err != nil {
		return nil
	}
	t := time.Time{}
	if stamp != nil {
		t = stamp.Time
	}
	e := systemEvent(stamp, t, EventKey)
	e.Detail = map[string]string{"action": "retired", "kid": decode[RemoveKey](p).Kid}
	return withStamp(se, e)
}

// withStamp is e after the stamp's own event, when there is one (an admin
// write that also rotates a key records both).
func withStamp(se *Event, e Event) []Event {
	if se != nil {
		return []Event{*se, e}
	}
	return []Event{e}
}
