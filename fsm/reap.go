package fsm

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Reap deletes what can no longer matter at Before: codes past expiry,
// revocations of tokens past expiry, SSO and app sessions that ended or
// expired before Before, and back-channel deliveries finished before it
// (pending ones stay until sent or abandoned). The leader proposes it periodically; the time is in
// the command so every replica deletes the same records.
type Reap struct {
	Before time.Time `json:"before"`
	// AuditBefore, when set, prunes audit events older than it, at most
	// AuditPruneBatch per reap (the oldest first).
	AuditBefore time.Time `json:"audit_before,omitzero"`
	// Limit, when set, bounds the records one Reap examines in each
	// bucket: it goes on from where the last one stopped (a position kept
	// in the state, so every replica examines the same records) and wraps
	// around at the end. Zero examines every record, as nodes before
	// Limit existed do; such a node ignores the field and reaps more at
	// once, never less, and readers treat an expired record that is still
	// there as gone.
	Limit int `json:"limit,omitzero"`
}

// ReapLimit is the Limit the leader's reaper proposes: one reap then costs
// the apply loop a few milliseconds however large the store (a full scan
// of 100,000 sessions took 218 ms: BenchmarkReapLive).
const ReapLimit = 4096

// AuditPruneBatch bounds the audit events one Reap deletes, so that one
// apply stays short however far behind pruning is.
const AuditPruneBatch = 10000

// ReapStats is the Value of Reap.
type ReapStats struct {
	Codes, Revocations, SSOSessions, AppSessions, Deliveries int
	Challenges, SMSCodes, Throttles, AuditEvents             int
	// More: with a Limit, some bucket has records this reap did not reach.
	More bool
}

func init() { register(TypeReap, applyReap) }

func applyReap(tx *bolt.Tx, _ uint64, p []byte) Result {
	r := decode[Reap](p)
	before := r.Before
	var st ReapStats
	deleteWhere := func(tx *bolt.Tx, bucket []byte, dead func(v []byte) bool) int {
		n, more := reapBucket(tx, bucket, r.Limit, dead)
		st.More = st.More || more
		return n
	}
	if !r.AuditBefore.IsZero() {
		st.AuditEvents = pruneAudit(tx, r.AuditBefore, AuditPruneBatch)
	}
	if before.IsZero() { // only the audit trail's backlog (node: reapOn)
		return Result{Value: st}
	}
	st.Codes = deleteWhere(tx, bucketCodes, func(v []byte) bool {
		var c Code
		mustUnmarshal(v, &c)
		return !c.ExpiresAt.After(before) && (c.AccessExpires.IsZero() || !c.AccessExpires.After(before))
	})
	st.Revocations = deleteWhere(tx, bucketRevoked, func(v []byte) bool {
		exp, err := time.Parse(time.RFC3339, string(v))
		return err == nil && !exp.After(before)
	})
	var deadSSO []SSOSession
	st.SSOSessions = deleteWhere(tx, bucketSSO, func(v []byte) bool {
		var s SSOSession
		mustUnmarshal(v, &s)
		dead := (!s.EndedAt.IsZero() && !s.EndedAt.After(before)) || !s.Live(before)
		if dead {
			deadSSO = append(deadSSO, s)
		}
		return dead
	})
	for _, s := range deadSSO {
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
	}
	deleteWhere(tx, bucketSSOToken, func(v []byte) bool { return !exists(tx, bucketSSO, string(v)) })
	st.Deliveries = deleteWhere(tx, bucketDeliveries, func(v []byte) bool {
		var d Delivery
		mustUnmarshal(v, &d)
		return d.State != DeliveryPending && !d.DoneAt.After(before)
	})
	st.Challenges = deleteWhere(tx, bucketChallenges, func(v []byte) bool {
		var c Challenge
		mustUnmarshal(v, &c)
		return !c.ExpiresAt.After(before)
	})
	st.SMSCodes = deleteWhere(tx, bucketSMSCodes, func(v []byte) bool {
		var c SMSCode
		mustUnmarshal(v, &c)
		return !c.ExpiresAt.After(before)
	})
	st.Throttles = deleteWhere(tx, bucketThrottle, func(v []byte) bool {
		var t Throttle
		mustUnmarshal(v, &t)
		return !t.ExpiresAt.After(before)
	})
	return Result{Value: st}
}

// reapBucket deletes the records of bucket for which dead is true, among
// all of them (limit 0) or among the next limit after the position the
// last call left in the meta bucket, wrapping around at the end. more
// reports that records remain before the end.
func reapBucket(tx *bolt.Tx, bucket []byte, limit int, dead func(v []byte) bool) (n int, more bool) {
	meta := tx.Bucket(bucketMeta)
	posKey := append([]byte(keyReapPrefix), bucket...)
	var keys [][]byte
	c := tx.Bucket(bucket).Cursor()
	k, v := c.First()
	if limit > 0 {
		if pos := meta.Get(posKey); pos != nil {
			if k, v = c.Seek(pos); k != nil && string(k) == string(pos) {
				k, v = c.Next()
			}
		}
	}
	var last []byte
	for seen := 0; k != nil && (limit == 0 || seen < limit); k, v = c.Next() {
		seen++
		last = k
		if dead(v) {
			keys = append(keys, append([]byte(nil), k...))
		}
	}
	if limit > 0 {
		var err error
		if more = k != nil; more {
			err = meta.Put(posKey, append([]byte(nil), last...))
		} else {
			err = meta.Delete(posKey)
		}
		if err != nil {
			panic(err)
		}
	}
	for _, k := range keys {
		if err := tx.Bucket(bucket).Delete(k); err != nil {
			panic(err)
		}
	}
	if len(keys) > 0 {
		accessWrite(tx, bucket)
	}
	return len(keys), more
}
