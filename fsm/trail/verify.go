package trail

import (
	"errors"
	"fmt"
	"sync"
)

// checked is a block decoded and hashed by a worker.
type checked struct {
	payload []byte
	head    blockHead
	events  []Event
	bad     int   // the first event whose hash is not its fields', or -1
	err     error // the block did not read or decode
	meta    any   // the producer's note (which segment and block)
	done    chan struct{}
}

// check decodes c's payload and recomputes every hash. Within a block the
// prev_hashes are the previous hashes by construction, so hashing checks
// the chain too, and blocks hash in parallel.
func (c *checked) check() {
	defer close(c.done)
	c.bad = -1
	if c.err != nil {
		return
	}
	if c.head, c.err = parseHead(c.payload); c.err != nil {
		return
	}
	if c.events, c.err = decodeBlock(c.payload); c.err != nil {
		return
	}
	var buf []byte
	for i := range c.events {
		var sum [32]byte
		var err error
		sum, buf, err = eventSum(&c.events[i], buf)
		if err != nil || string(sum[:]) != string(c.head.hash(i)) {
			c.bad = i
			return
		}
	}
}

// errStop ends a pipeline from its sink without being an error.
var errStop = errors.New("trail: stop")

// pipeline checks blocks on workers goroutines and gives them to sink in
// the order next produced them. next gives a block (payload or err set)
// or nil at the end; a sink error stops it (errStop: quietly).
func pipeline(workers int, next func() (*checked, error), sink func(*checked) error) error {
	work := make(chan *checked, 64)
	order := make(chan *checked, 64)
	stop := make(chan struct{})
	var perr error
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				c.check()
			}
		}()
	}
	go func() {
		defer close(order)
		defer close(work)
		for {
			c, err := next()
			if err != nil || c == nil {
				perr = err
				return
			}
			c.done = make(chan struct{})
			select {
			case work <- c:
			case <-stop:
				return
			}
			select {
			case order <- c:
			case <-stop:
				return
			}
		}
	}()
	var err error
	for c := range order {
		<-c.done
		if err = sink(c); err != nil {
			break
		}
	}
	close(stop)
	for range order {
	}
	wg.Wait()
	if err == nil {
		err = perr // order is closed: the producer is done with perr
	}
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// Verification is what Verify found (fsm.AuditVerification's shape).
type Verification struct {
	OK       bool   `json:"ok"`
	Count    uint64 `json:"count"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	HeadHash string `json:"head_hash"`
	// BrokenAt is the seq of the first event that does not verify: its
	// block does not read or decode, its seq does not follow the previous
	// event's (a segment is missing), its prev_hash is not the previous
	// event's hash, or its hash is not the hash of its fields.
	BrokenAt *uint64 `json:"broken_at,omitempty"`
	Reason   string  `json:"reason,omitempty"`
}

// blockNote says where a block in a Verify comes from.
type blockNote struct {
	sv     *segView
	ref    blockRef
	segEnd bool // the segment's last block
}

// Verify recomputes the chain from the oldest event kept at or above
// floor (whose prev_hash is taken as it stands) to the newest, on
// Options.Workers goroutines. HeadHash is the newest event's hash as the
// store holds it: the state machine compares it with the head it
// recorded, which alone can tell that the newest events were lost.
func (s *Store) Verify(floor uint64) (Verification, error) {
	v, err := s.snapshot(nil)
	if err != nil {
		return Verification{}, err
	}
	defer v.release()
	res := Verification{HeadHash: v.hash}
	if v.first == 0 {
		res.OK = true
		return res, nil
	}
	floor = max(floor, v.first)
	var notes []blockNote
	for i := range v.segs {
		sv := &v.segs[i]
		for j, b := range sv.blocks {
			if b.last() >= floor {
				notes = append(notes, blockNote{sv: sv, ref: b, segEnd: j == len(sv.blocks)-1})
			}
		}
	}
	pos := 0
	next := func() (*checked, error) {
		if pos == len(notes) {
			return nil, nil
		}
		n := &notes[pos]
		pos++
		c := &checked{meta: n}
		c.payload, c.err = n.sv.seg.readFrame(n.ref.off, n.ref.size)
		return c, nil
	}
	var prevHash string
	broken := func(seq uint64, why string) error {
		res.BrokenAt, res.Reason = &seq, why
		return errStop
	}
	sink := func(c *checked) error {
		n := c.meta.(*blockNote)
		start := max(floor, n.ref.first)
		switch {
		case c.err != nil:
			return broken(start, fmt.Sprintf("the block does not decode: %v", c.err))
		case c.head.first != n.ref.first || c.head.count != n.ref.count:
			return broken(start, "the block is not the one indexed")
		case res.Count > 0 && n.ref.first != res.LastSeq+1:
			return broken(n.ref.first, fmt.Sprintf("seq follows %d", res.LastSeq))
		case res.Count > 0 && c.head.prev != prevHash:
			return broken(n.ref.first, "prev_hash is not the previous event's hash")
		case c.bad >= 0 && c.events[c.bad].Seq >= floor:
			return broken(c.events[c.bad].Seq, "the hash does not match the event")
		}
		if res.Count == 0 {
			res.FirstSeq = start
		}
		res.Count += n.ref.last() - start + 1
		res.LastSeq, prevHash = n.ref.last(), c.events[len(c.events)-1].Hash
		if n.segEnd && n.sv.hash != prevHash {
			return broken(res.LastSeq, "the segment's recorded last hash is not its last event's")
		}
		return nil
	}
	if err := pipeline(s.opt.Workers, next, sink); err != nil {
		return res, err
	}
	if res.BrokenAt == nil {
		if res.LastSeq != v.last || prevHash != v.hash {
			seq := res.LastSeq
			res.BrokenAt, res.Reason = &seq, fmt.Sprintf("the last event is not the store's newest %d", v.last)
		} else {
			res.OK = true
		}
	}
	return res, nil
}
