package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/oidcd/oidcd/fsm/trail"
)

// AuditQuery selects events: those after seq After, at most Limit, that
// match every filter given; with Newest, the newest first, those before
// After when After is set (the person's page shows their last sign-ins,
// the console the newest events). It is the trail's own query, which
// answers the same on either layout.
type AuditQuery = trail.Query

// MaxAuditPage bounds one page of events.
const MaxAuditPage = trail.MaxPage

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
		if s.f.tr != nil && trailLayout(tx) {
			var err error
			out, err = s.f.queryTrail(tx, q)
			return err
		}
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

// AuditVerification is what VerifyAudit found: the trail's Verification,
// whose BrokenAt here also names the last event when it is not the head
// the state recorded.
type AuditVerification = trail.Verification

// VerifyAudit recomputes the chain of the kept events, from the oldest
// (whose prev_hash is taken as it stands: the events before it were
// pruned) to the head.
func (s *State) VerifyAudit() (AuditVerification, error) {
	var v AuditVerification
	err := s.f.view(func(tx *bolt.Tx) error {
		if s.f.tr != nil && trailLayout(tx) {
			var err error
			v, err = s.f.verifyTrail(tx)
			return err
		}
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
		if trailLayout(tx) {
			if floor := auditFloor(tx); st.HeadSeq >= floor {
				st.Events = int(st.HeadSeq - floor + 1) // #nosec G115 -- a count of kept events
			}
			bs := b.Stats()
			st.Bytes = bs.LeafInuse + bs.BranchInuse + bs.InlineBucketInuse + s.f.trailBytes()
			return nil
		}
		if k, _ := b.Cursor().First(); len(k) == 8 {
			st.Events = int(st.HeadSeq - binary.BigEndian.Uint64(k) + 1) // #nosec G115 -- a count of kept events
		}
		for _, bk := range []*bolt.Bucket{b, tx.Bucket(bucketAuditIdx)} {
			if bk == nil {
				continue
			}
			bs := bk.Stats()
			st.Bytes += bs.LeafInuse + bs.BranchInuse + bs.InlineBucketInuse
		}
		return nil
	})
	return st, err
}

// queryTrail answers q on a state of format 3: the trail's events up to
// its Last (read once, after tx began, and never above tx's head), then
// the staged events above it, all at or above the floor.
func (f *FSM) queryTrail(tx *bolt.Tx, q AuditQuery) ([]Event, error) {
	head, _ := auditHead(tx)
	floor := auditFloor(tx)
	last, _ := f.tr.store.Last()
	last = min(last, head)
	tq := trail.Query{Limit: q.Limit, Type: q.Type, Subject: q.Subject, ClientID: q.ClientID, OrgID: q.OrgID}
	match := func(e *Event) bool {
		return (q.Type == "" || e.Type == q.Type) && (q.Subject == "" || e.Subject == q.Subject) &&
			(q.ClientID == "" || e.ClientID == q.ClientID) && (q.OrgID == "" || e.OrgID == q.OrgID)
	}
	var out []Event
	c := tx.Bucket(bucketAudit).Cursor()
	staged := func(k, v []byte) (Event, bool, error) {
		var e Event
		if len(k) != 8 {
			return e, false, nil
		}
		if err := decodeRecord(v, &e); err != nil {
			return e, false, fmt.Errorf("fsm: audit event %d: %w", binary.BigEndian.Uint64(k), err)
		}
		return e, match(&e), nil
	}
	if !q.Newest {
		if q.After == ^uint64(0) {
			return nil, nil
		}
		lo := max(q.After+1, floor)
		if last >= lo {
			tq.After = lo - 1
			es, err := f.tr.store.Query(tq)
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				if e.Seq > last {
					break
				}
				out = append(out, e)
			}
		}
		for k, v := c.Seek(seqKey(max(lo, last+1))); k != nil && len(out) < q.Limit; k, v = c.Next() {
			e, ok, err := staged(k, v)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, e)
			}
		}
		return out, nil
	}
	hi := head
	if q.After > 0 {
		hi = min(hi, q.After-1)
	}
	if hi < floor {
		return nil, nil
	}
	low := max(floor, last+1)
	if hi >= low {
		k, v := c.Seek(seqKey(hi))
		if k == nil || binary.BigEndian.Uint64(k) > hi {
			k, v = c.Prev()
		}
		for ; k != nil && len(out) < q.Limit; k, v = c.Prev() {
			if len(k) == 8 && binary.BigEndian.Uint64(k) < low {
				break
			}
			e, ok, err := staged(k, v)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, e)
			}
		}
	}
	if len(out) < q.Limit && last >= floor {
		tq.Newest, tq.After, tq.Limit = true, min(hi, last)+1, q.Limit-len(out)
		es, err := f.tr.store.Query(tq)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if e.Seq < floor {
				break
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// verifyTrail is VerifyAudit on a state of format 3: the trail from the
// floor (trail.Verify) up to its Last, then the staged events above it
// continuing the chain, the last of which must be the recorded head.
func (f *FSM) verifyTrail(tx *bolt.Tx) (AuditVerification, error) {
	head, headHash := auditHead(tx)
	floor := auditFloor(tx)
	v := AuditVerification{HeadHash: headHash}
	if head < floor {
		v.OK = true // nothing kept
		return v, nil
	}
	broken := func(seq uint64, why string) (AuditVerification, error) {
		v.BrokenAt, v.Reason = &seq, why
		return v, nil
	}
	last, _ := f.tr.store.Last()
	last = min(last, head)
	var prev string
	if last >= floor {
		tv, err := f.tr.store.Verify(floor)
		if err != nil {
			return v, err
		}
		if !tv.OK {
			at := floor
			if tv.BrokenAt != nil {
				at = *tv.BrokenAt
			}
			v.Count, v.FirstSeq, v.LastSeq = tv.Count, tv.FirstSeq, tv.LastSeq
			return broken(at, "the trail: "+tv.Reason)
		}
		if tv.FirstSeq != floor {
			return broken(floor, fmt.Sprintf("the trail begins at %d, not at the oldest kept %d", tv.FirstSeq, floor))
		}
		es, err := f.tr.store.Query(trail.Query{After: last - 1, Limit: 1})
		if err != nil {
			return v, err
		}
		if len(es) != 1 || es[0].Seq != last {
			return broken(last, "the trail does not hold its last event")
		}
		prev = es[0].Hash
		v.FirstSeq, v.LastSeq, v.Count = floor, last, last-floor+1
	}
	want := max(floor, last+1)
	c := tx.Bucket(bucketAudit).Cursor()
	for k, raw := c.Seek(seqKey(want)); k != nil; k, raw = c.Next() {
		if len(k) != 8 {
			return broken(want, "a key that is not a seq")
		}
		seq := binary.BigEndian.Uint64(k)
		if seq != want { // seq > want: Seek
			return broken(want, fmt.Sprintf("events %d-%d are missing: not on this node yet (its trail is catching up) or removed", want, seq-1))
		}
		var e Event
		if err := decodeRecord(raw, &e); err != nil {
			return broken(seq, "the event does not decode")
		}
		if e.Seq != seq {
			return broken(seq, "the event's seq is not its key")
		}
		if v.Count > 0 && e.PrevHash != prev {
			return broken(seq, "prev_hash is not the previous event's hash")
		}
		if h, err := EventHash(e); err != nil || h != e.Hash {
			return broken(seq, "the hash does not match the event")
		}
		if v.Count == 0 {
			v.FirstSeq = seq
		}
		v.Count++
		v.LastSeq, prev = seq, e.Hash
		want = seq + 1
	}
	if v.LastSeq < head {
		return broken(want, fmt.Sprintf("events %d-%d are missing: not on this node yet (its trail is catching up) or removed", want, head))
	}
	if prev != headHash {
		return broken(v.LastSeq, fmt.Sprintf("the last event is not the recorded head %d", head))
	}
	v.OK = true
	return v, nil
}
