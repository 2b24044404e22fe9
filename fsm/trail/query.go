package trail

import (
	"fmt"
	"sort"
)

// MaxPage bounds one page of events (fsm.MaxAuditPage).
const MaxPage = 1000

// Query selects events: those after seq After, at most Limit (≤ 0 or
// more than MaxPage: MaxPage), that match every filter given. It is
// fsm.AuditQuery.
type Query struct {
	After    uint64
	Limit    int
	Type     string
	Subject  string
	ClientID string
	OrgID    string
	// Newest answers the newest events first (descending seq), those
	// before After when After is set.
	Newest bool
}

// keys are the index keys of q's filters.
func (q *Query) keys() []string {
	var keys []string
	for _, kv := range [...]struct {
		kind  byte
		value string
	}{{kindSubject, q.Subject}, {kindClient, q.ClientID}, {kindOrg, q.OrgID}, {kindType, q.Type}} {
		if kv.value != "" {
			keys = append(keys, string(kv.kind)+kv.value)
		}
	}
	return keys
}

func (q *Query) match(e *Event) bool {
	return (q.Type == "" || e.Type == q.Type) && (q.Subject == "" || e.Subject == q.Subject) &&
		(q.ClientID == "" || e.ClientID == q.ClientID) && (q.OrgID == "" || e.OrgID == q.OrgID)
}

// view is a reader's snapshot of the store: the segments it reads (each
// held by a reference) and how far.
type view struct {
	segs  []segView
	first uint64 // the oldest visible event (floor applied), 0: none
	last  uint64
	hash  string
}

// segView is one segment as a snapshot sees it.
type segView struct {
	seg    *segment
	first  uint64 // its first event (not the floor)
	last   uint64
	hash   string
	blocks []blockRef
	post   map[string][]uint32 // the active segment's postings of the asked keys
}

// snapshot takes a view, with the active segment's postings of keys.
func (s *Store) snapshot(keys []string) (*view, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	v := &view{first: s.firstLocked(), last: s.last, hash: s.lastHash}
	for _, seg := range s.sealed {
		seg.acquire()
		v.segs = append(v.segs, segView{seg: seg, first: seg.first, last: seg.last, hash: seg.lastHash, blocks: seg.blocks})
	}
	if s.act != nil {
		s.act.acquire()
		sv := segView{seg: s.act, first: s.act.first, last: s.last, hash: s.lastHash,
			blocks: s.actBlocks[:len(s.actBlocks):len(s.actBlocks)], post: map[string][]uint32{}}
		for _, k := range keys {
			p := s.actPost[k]
			sv.post[k] = p[:len(p):len(p)]
		}
		v.segs = append(v.segs, sv)
	}
	return v, nil
}

func (v *view) release() {
	for _, sv := range v.segs {
		sv.seg.release()
	}
}

// lookup gives the ordinals of key's events in the segment.
func (sv *segView) lookup(key string) ([]uint32, error) {
	if sv.post != nil {
		return sv.post[key], nil
	}
	return sv.seg.lookup(key)
}

// blockOf is the index of the block holding seq.
func (sv *segView) blockOf(seq uint64) int {
	return sort.Search(len(sv.blocks), func(i int) bool { return sv.blocks[i].last() >= seq })
}

// Query answers q as fsm.State.AuditEvents does: ascending seq from
// After+1, or with Newest descending from the newest (from After−1 when
// After is set). A filtered query reads, in each segment, the postings of
// every filter given, intersects them and decodes only the blocks that
// hold a match: never the whole trail.
func (s *Store) Query(q Query) ([]Event, error) {
	if q.Limit <= 0 || q.Limit > MaxPage {
		q.Limit = MaxPage
	}
	keys := q.keys()
	v, err := s.snapshot(keys)
	if err != nil {
		return nil, err
	}
	defer v.release()
	if v.first == 0 {
		return nil, nil
	}
	lo, hi := v.first, v.last
	if q.Newest {
		if q.After > 0 {
			hi = min(hi, q.After-1)
		}
	} else {
		if q.After == ^uint64(0) {
			return nil, nil
		}
		lo = max(lo, q.After+1)
	}
	if lo > hi {
		return nil, nil
	}
	c := collector{q: &q, lo: lo, hi: hi}
	for i := range v.segs {
		sv := &v.segs[i]
		if q.Newest {
			sv = &v.segs[len(v.segs)-1-i]
		}
		if sv.last < lo || sv.first > hi {
			continue
		}
		var err error
		if len(keys) == 0 {
			err = c.scan(sv)
		} else {
			err = c.filtered(sv, keys)
		}
		if err != nil {
			return nil, err
		}
		if len(c.out) >= q.Limit {
			break
		}
	}
	return c.out, nil
}

// collector gathers a query's answer, segment by segment.
type collector struct {
	q      *Query
	lo, hi uint64
	out    []Event
}

func (c *collector) full() bool { return len(c.out) >= c.q.Limit }

// take adds e when it is in range and matches.
func (c *collector) take(e *Event) {
	if e.Seq >= c.lo && e.Seq <= c.hi && c.q.match(e) && !c.full() {
		c.out = append(c.out, *e)
	}
}

// scan reads a segment's blocks in the query's order.
func (c *collector) scan(sv *segView) error {
	i, j := sv.blockOf(c.lo), sv.blockOf(c.hi)
	for k := 0; k <= j-i && !c.full(); k++ {
		b := i + k
		if c.q.Newest {
			b = j - k
		}
		if b >= len(sv.blocks) {
			continue
		}
		evs, err := sv.seg.readBlock(sv.blocks[b])
		if err != nil {
			return err
		}
		for n := range evs {
			if c.q.Newest {
				n = len(evs) - 1 - n
			}
			c.take(&evs[n])
		}
	}
	return nil
}

// filtered reads the events of a segment that every key indexes.
func (c *collector) filtered(sv *segView, keys []string) error {
	var hits []uint32
	for i, k := range keys {
		p, err := sv.lookup(k)
		if err != nil {
			return err
		}
		if i == 0 {
			hits = p
		} else {
			hits = intersect(hits, p)
		}
		if len(hits) == 0 {
			return nil
		}
	}
	var cur []Event
	curBlock := -1
	for n := range hits {
		if c.full() {
			break
		}
		if c.q.Newest {
			n = len(hits) - 1 - n
		}
		seq := sv.first + uint64(hits[n])
		if seq < c.lo || seq > c.hi {
			continue
		}
		b := sv.blockOf(seq)
		if b >= len(sv.blocks) {
			return sv.seg.errorf("postings name event %d, past its blocks", seq)
		}
		if b != curBlock {
			evs, err := sv.seg.readBlock(sv.blocks[b])
			if err != nil {
				return err
			}
			cur, curBlock = evs, b
		}
		e := &cur[seq-sv.blocks[b].first]
		if e.Seq != seq {
			return fmt.Errorf("trail: event %d read as %d", seq, e.Seq)
		}
		c.take(e)
	}
	return nil
}

// intersect is the ordinals in both sorted lists.
func intersect(a, b []uint32) []uint32 {
	var out []uint32
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}
