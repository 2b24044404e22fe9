package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// AuditQuery selects events: those after seq After, at most Limit, that
// match every filter given.
type AuditQuery struct {
	After    uint64
	Limit    int
	Type     string
	Subject  string
	ClientID string
	OrgID    string
	// Newest answers the newest events first (descending seq), those
	// before After when After is set (the person's page shows their last
	// sign-ins, the console the newest events).
	Newest bool
}

// MaxAuditPage bounds one page of events.
const MaxAuditPage = 1000

// AuditEvents answers q in ascending seq. With a filter it walks the
// index of the most selective one given (subject, client, organization,
// type) from After on, and checks the others on each event it reads:
// never the whole trail.
func (s *State) AuditEvents(q AuditQuery) ([]Event, error) {
	if q.Limit <= 0 || q.Limit > MaxAuditPage {
		q.Limit = MaxAuditPage
	}
	var out []Event
	err := s.f.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return nil
		}
		match := func(e *Event) bool {
			return (q.Type == "" || e.Type == q.Type) && (q.Subject == "" || e.Subject == q.Subject) &&
				(q.ClientID == "" || e.ClientID == q.ClientID) && (q.OrgID == "" || e.OrgID == q.OrgID)
		}
		read := func(k, v []byte) (Event, error) {
			var e Event
			if err := decodeRecord(v, &e); err != nil {
				return e, fmt.Errorf("fsm: audit event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			return e, nil
		}
		var kind byte
		var value string
		switch {
		case q.Subject != "":
			kind, value = idxSubject, q.Subject
		case q.ClientID != "":
			kind, value = idxClient, q.ClientID
		case q.OrgID != "":
			kind, value = idxOrg, q.OrgID
		case q.Type != "":
			kind, value = idxType, q.Type
		}
		if kind == 0 {
			c := b.Cursor()
			first, next := func() ([]byte, []byte) { return c.Seek(seqKey(q.After + 1)) }, c.Next
			if q.Newest {
				first, next = func() ([]byte, []byte) {
					if q.After == 0 {
						return c.Last()
					}
					c.Seek(seqKey(q.After))
					return c.Prev()
				}, c.Prev
			}
			for k, v := first(); k != nil && len(out) < q.Limit; k, v = next() {
				e, err := read(k, v)
				if err != nil {
					return err
				}
				out = append(out, e)
			}
			return nil
		}
		prefix := idxKey(kind, value, 0)
		prefix = prefix[:len(prefix)-8]
		c := tx.Bucket(bucketAuditIdx).Cursor()
		first, next := func() ([]byte, []byte) { return c.Seek(idxKey(kind, value, q.After+1)) }, c.Next
		if q.Newest {
			end := ^uint64(0)
			if q.After > 0 {
				end = q.After - 1
			}
			first = func() ([]byte, []byte) {
				k, v := c.Seek(idxKey(kind, value, end))
				if k == nil || !bytes.Equal(k, idxKey(kind, value, end)) {
					return c.Prev()
				}
				return k, v
			}
			next = c.Prev
		}
		for k, _ := first(); k != nil && bytes.HasPrefix(k, prefix) && len(out) < q.Limit; k, _ = next() {
			sk := k[len(prefix):]
			v := b.Get(sk)
			if v == nil {
				continue
			}
			e, err := read(sk, v)
			if err != nil {
				return err
			}
			if match(&e) {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// AuditVerification is what VerifyAudit found.
type AuditVerification struct {
	OK       bool   `json:"ok"`
	Count    uint64 `json:"count"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	HeadHash string `json:"head_hash"`
	// BrokenAt is the seq of the first event that does not verify: it does
	// not decode, its seq is not its key or not the next one, its
	// prev_hash is not the previous event's hash, or its hash is not the
	// hash of its fields; or the last event is not the head the state
	// recorded.
	BrokenAt *uint64 `json:"broken_at,omitempty"`
	Reason   string  `json:"reason,omitempty"`
}

// VerifyAudit recomputes the chain of the kept events, from the oldest
// (whose prev_hash is taken as it stands: the events before it were
// pruned) to the head.
func (s *State) VerifyAudit() (AuditVerification, error) {
	var v AuditVerification
	err := s.f.view(func(tx *bolt.Tx) error {
		headSeq, headHash := auditHead(tx)
		v.HeadHash = headHash
		b := tx.Bucket(bucketAudit)
		if b == nil {
			v.OK = headSeq == 0
			return nil
		}
		broken := func(seq uint64, why string) error {
			v.BrokenAt, v.Reason = &seq, why
			return nil
		}
		var prev Event
		c := b.Cursor()
		for k, raw := c.First(); k != nil; k, raw = c.Next() {
			if len(k) != 8 {
				return broken(prev.Seq+1, "a key that is not a seq")
			}
			seq := binary.BigEndian.Uint64(k)
			var e Event
			if err := decodeRecord(raw, &e); err != nil {
				return broken(seq, "the event does not decode")
			}
			if e.Seq != seq {
				return broken(seq, "the event's seq is not its key")
			}
			if v.Count > 0 && seq != prev.Seq+1 {
				return broken(seq, fmt.Sprintf("seq follows %d", prev.Seq))
			}
			if v.Count > 0 && e.PrevHash != prev.Hash {
				return broken(seq, "prev_hash is not the previous event's hash")
			}
			h, err := EventHash(e)
			if err != nil || h != e.Hash {
				return broken(seq, "the hash does not match the event")
			}
			if v.Count == 0 {
				v.FirstSeq = seq
			}
			v.Count++
			v.LastSeq = seq
			prev = e
		}
		if v.LastSeq != headSeq || (v.Count > 0 && prev.Hash != headHash) {
			return broken(v.LastSeq, fmt.Sprintf("the last event is not the recorded head %d", headSeq))
		}
		v.OK = true
		return nil
	})
	return v, err
}

// AuditStats are the trail's size: the events kept, and the bytes of the
// pages that hold them and their index entries.
type AuditStats struct {
	Events, Bytes int
	HeadSeq       uint64
}

// AuditStats measures the trail (the byte count walks the trail's pages,
// not its events).
func (s *State) AuditStats() (AuditStats, error) {
	var st AuditStats
	err := s.f.view(func(tx *bolt.Tx) error {
		st.HeadSeq, _ = auditHead(tx)
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return nil
		}
		if k, _ := b.Cursor().First(); len(k) == 8 {
			st.Events = int(st.HeadSeq - binary.BigEndian.Uint64(k) + 1) // #nosec G115 -- a count of kept events
		}
		for _, bk := range []*bolt.Bucket{b, tx.Bucket(bucketAuditIdx)} {
			bs := bk.Stats()
			st.Bytes += bs.LeafInuse + bs.BranchInuse + bs.InlineBucketInuse
		}
		return nil
	})
	return st, err
}
