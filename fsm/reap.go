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
	APIKeys, Emails, Links, Invitations                      int
	// More: with a Limit, some bucket has records this reap did not reach.
	More bool
}

func init() { register(TypeReap, applyReap) }

// reaped is one bucket a Reap sweeps, as its entity's file registers it
// (reaps), beside the record and the commands that write it: how a value
// of the bucket is read and when it stops mattering, which count of
// ReapStats its deletions add to, and what goes with a deleted record.
type reaped struct {
	bucket []byte
	// dead decodes a value of bucket and reports whether it can no
	// longer matter at before.
	dead func(tx *bolt.Tx, v []byte, before time.Time) bool
	// count is the field of ReapStats that counts the deletions; nil:
	// they are not counted.
	count func(*ReapStats) *int
	// cleanup, when set, runs right after the bucket's sweep, in the
	// same transaction, with the values of the records it deleted (in key
	// order): their index entries and dependent records.
	cleanup func(tx *bolt.Tx, dead [][]byte, st *ReapStats)
}

// reapTable is every bucket a Reap sweeps, in registration order (the
// order of the files, then of the reaps calls in each). Only an entity's
// own order matters: sso_by_token is swept after sso_sessions, whose
// deletions it follows.
var reapTable []reaped

// reaps adds r to the buckets a Reap sweeps; called from the entities'
// init.
func reaps(r reaped) {
	for _, have := range reapTable {
		if string(have.bucket) == string(r.bucket) {
			panic("fsm: bucket " + string(r.bucket) + " reaped twice")
		}
	}
	reapTable = append(reapTable, r)
}

// expiring is the reaped entry of a bucket of records of type T (read
// with the record codec) that die when dead says.
func expiring[T any](bucket []byte, count func(*ReapStats) *int, dead func(r *T, before time.Time) bool) reaped {
	return reaped{bucket: bucket, count: count, dead: func(_ *bolt.Tx, v []byte, before time.Time) bool {
		var r T
		mustUnmarshal(v, &r)
		return dead(&r, before)
	}}
}

func applyReap(tx *bolt.Tx, _ uint64, p []byte) Result {
	r := decode[Reap](p)
	var st ReapStats
	switch {
	case r.AuditBefore.IsZero():
	case trailLayout(tx):
		// Format 3: the floor moves over whole chunks; the nodes drop
		// their trail below it after the commit (audit_trail.go).
		st.AuditEvents = advanceFloor(tx, r.AuditBefore)
	default:
		st.AuditEvents = pruneAudit(tx, r.AuditBefore, AuditPruneBatch)
	}
	if r.Before.IsZero() { // only the audit trail's backlog (reapOn)
		return Result{Value: st}
	}
	for _, e := range reapTable {
		dead, more := reapBucket(tx, e.bucket, r.Limit, func(v []byte) bool { return e.dead(tx, v, r.Before) }, e.cleanup != nil)
		st.More = st.More || more
		if e.count != nil {
			*e.count(&st) += len(dead)
		}
		if e.cleanup != nil {
			e.cleanup(tx, dead, &st)
		}
	}
	return Result{Value: st}
}

// reapBucket deletes the records of bucket for which dead is true, among
// all of them (limit 0) or among the next limit after the position the
// last call left in the meta bucket, wrapping around at the end. It
// returns one entry per deleted record, a copy of its value when keep is
// set (nil otherwise). more reports that records remain before the end.
func reapBucket(tx *bolt.Tx, bucket []byte, limit int, dead func(v []byte) bool, keep bool) (deleted [][]byte, more bool) {
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
			var val []byte
			if keep {
				val = append([]byte(nil), v...)
			}
			deleted = append(deleted, val)
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
	return deleted, more
}
