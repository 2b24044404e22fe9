package fsm

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/oidcd/oidcd/fsm/trail"
)

// The audit trail from state format 3 on (FormatTrail; DESIGN.md, "The
// audit trail"). The apply writes each event into the state's audit
// bucket only, in the transaction of its action, with the head in meta as
// before: atomicity and determinism come from bbolt, and the apply path
// gains no fsync. The bucket is now a staging area. The FSM's mover
// (runMover) reads staged events above the trail's Last in a read
// transaction and appends them to the local trail (package trail, under
// <dir of state.db>/trail, durable), and a later apply transaction
// deletes the staged events the trail holds (trimStaged, a bounded number
// a batch). So the staging of two replicas differs; nothing replicated
// depends on it: seqs, hashes, the head, the retention floor and the
// chunk times are written by the apply alone.
//
// Reads merge the trail (up to its Last, read once, and never above the
// transaction's head) with the staged events above it.

// FormatTrail is declared in format.go.

const (
	// trailChunk is the number of seqs of a retention chunk: the apply
	// records the time of each chunk's last event (one put every
	// trailChunk events), and a Reap moves the floor over whole chunks.
	trailChunk = 4096
	// moveBatch bounds the events one round of the mover appends.
	moveBatch = 4096
	// trimBatch bounds the staged events one apply batch deletes.
	trimBatch = 8192
	// moverEvery is how often the mover looks without being woken.
	moverEvery = time.Second
	// moverSpacing is the least time from a round that moved less than a
	// full batch to the next one. Each round makes the trail durable (an
	// fsync); woken by every apply that adds events, the mover made 1.4
	// of them a password sign-in under load. Spaced, the staging holds
	// events this much longer, which reads merge anyway, and a burst of
	// applies shares one round.
	moverSpacing = 100 * time.Millisecond
)

var (
	// bucketAuditChunks: the seq of a chunk's last event -> its time
	// (UnixNano, 8 bytes big-endian) and its hash (32 bytes), for the
	// whole chunks above the floor: retention reads the time, and a
	// node's trail is held against the hash (a replicated checkpoint).
	bucketAuditChunks = []byte("audit_chunks")
	// keyAuditFloor is the first kept seq (8 bytes), from format 3 on.
	keyAuditFloor = []byte("audit_floor")
)

// stateFormat is the format the state holds (State.StateFormat).
func (f *FSM) stateFormat() Format { return Format(f.format.Load()) }

// trailDir is the trail's directory beside the state file at path.
func trailDir(path string) string { return filepath.Join(filepath.Dir(path), "trail") }

// trailLayout reports whether tx's state keeps its trail outside (format 3).
func trailLayout(tx *bolt.Tx) bool {
	f, _ := getFormat(tx)
	return f >= FormatTrail
}

// auditFloor is the first kept seq of a format-3 state (1 when unset).
func auditFloor(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketMeta).Get(keyAuditFloor)
	if len(v) != 8 {
		return 1
	}
	return max(binary.BigEndian.Uint64(v), 1)
}

func putAuditFloor(tx *bolt.Tx, floor uint64) {
	if err := tx.Bucket(bucketMeta).Put(keyAuditFloor, seqKey(floor)); err != nil {
		panic(err)
	}
}

// chunkLast is the seq of the last event of the chunk holding seq.
func chunkLast(seq uint64) uint64 { return ((seq-1)/trailChunk + 1) * trailChunk }

func putChunk(tx *bolt.Tx, e *Event) {
	raw, _ := hex.DecodeString(e.Hash)
	b, err := tx.CreateBucketIfNotExists(bucketAuditChunks)
	if err == nil {
		v := binary.BigEndian.AppendUint64(nil, uint64(e.Time.UnixNano())) // #nosec G115 -- a time's bits
		err = b.Put(seqKey(e.Seq), append(v, raw...))
	}
	if err != nil {
		panic(err)
	}
}

// migrateToTrail is the apply of the SetStateFormat that reaches format
// 3: the index goes (the trail indexes its own segments), the audit
// bucket becomes the staging as it stands, the floor is the oldest event
// kept, and the times of the whole chunks are read from their last events.
func migrateToTrail(tx *bolt.Tx) {
	if err := tx.DeleteBucket(bucketAuditIdx); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		panic(err)
	}
	head, _ := auditHead(tx)
	b := tx.Bucket(bucketAudit)
	floor := head + 1
	if k, _ := b.Cursor().First(); len(k) == 8 {
		floor = binary.BigEndian.Uint64(k)
	}
	floor = max(floor, 1)
	putAuditFloor(tx, floor)
	if _, err := tx.CreateBucketIfNotExists(bucketAuditChunks); err != nil {
		panic(err)
	}
	for last := chunkLast(floor); last <= head; last += trailChunk {
		v := b.Get(seqKey(last))
		if v == nil {
			continue
		}
		var e Event
		if err := decodeRecord(v, &e); err != nil {
			continue // an altered event: verify names it; its chunk is kept
		}
		putChunk(tx, &e)
	}
}

// advanceFloor is retention from format 3 on: the floor moves over every
// whole chunk, from the oldest kept, whose recorded time is before
// before. It returns the number of events it passed.
func advanceFloor(tx *bolt.Tx, before time.Time) int {
	chunks := tx.Bucket(bucketAuditChunks)
	if chunks == nil {
		return 0
	}
	from := auditFloor(tx)
	floor := from
	for {
		last := chunkLast(floor)
		v := chunks.Get(seqKey(last))
		if len(v) < 8 || !time.Unix(0, int64(binary.BigEndian.Uint64(v[:8]))).Before(before) { // #nosec G115 -- a time's bits
			break
		}
		if err := chunks.Delete(seqKey(last)); err != nil {
			panic(err)
		}
		floor = last + 1
	}
	if floor == from {
		return 0
	}
	putAuditFloor(tx, floor)
	return int(floor - from) // #nosec G115 -- a count of events
}

// trimStaged deletes, at most trimBatch, the staged events the trail
// holds (seq at or below moved) and those below the floor: the apply
// batch's own transaction does it, so it costs no commit of its own. A
// delete lost to a crash is done again by a later batch.
func trimStaged(tx *bolt.Tx, moved uint64) {
	floor := auditFloor(tx)
	b := tx.Bucket(bucketAudit)
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && len(keys) < trimBatch; k, _ = c.Next() {
		if len(k) != 8 {
			continue // not a seq (an altered file): verify names it
		}
		if s := binary.BigEndian.Uint64(k); s > moved && s >= floor {
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			panic(err)
		}
	}
}

// stagedAt is the staged event seq, when the staging holds it.
func stagedAt(tx *bolt.Tx, seq uint64) (Event, bool) {
	var e Event
	v := tx.Bucket(bucketAudit).Get(seqKey(seq))
	if v == nil || decodeRecord(v, &e) != nil {
		return e, false
	}
	return e, true
}

// trailState is what the FSM keeps of its trail beside the store.
type trailState struct {
	store *trail.Store
	mu    sync.Mutex // one trail writer: the mover, ImportTrail, Restore
	// reconcile asks the mover to hold the trail against the state first
	// (the format was raised, an append was refused).
	reconcile atomic.Bool
	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	stopOnce  sync.Once
	err       atomic.Pointer[error] // the mover's last error, nil when it moved
	// manual (tests) keeps the background mover still: only moveOnce
	// called by hand moves.
	manual atomic.Bool
}

// openTrail opens the trail beside the state file, holds it against the
// state and starts the mover.
func (f *FSM) openTrail() error {
	st, err := trail.Open(trailDir(f.path), trail.Options{})
	if err != nil {
		return fmt.Errorf("fsm: the audit trail: %w", err)
	}
	f.tr = &trailState{store: st, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if err := f.reconcileTrail(f.db); err != nil {
		st.Close()
		return err
	}
	go f.runMover()
	return nil
}

// closeTrail stops the mover and closes the store.
func (f *FSM) closeTrail() {
	if f.tr == nil {
		return
	}
	f.tr.stopOnce.Do(func() { close(f.tr.stop) })
	<-f.tr.done
	f.tr.store.Close()
}

// wakeMover tells the mover there may be something to move.
func (f *FSM) wakeMover() {
	if f.tr == nil {
		return
	}
	select {
	case f.tr.wake <- struct{}{}:
	default:
	}
}

// reconcileTrail holds the trail against the state of db (the caller
// holds the trail's writer lock, or nothing else runs yet): a state of an
// older format keeps its events in bbolt, and the trail is emptied; else
// what is beyond the head is cut, another history (the hash at the
// overlap differs) is forgotten, and so is a trail that no longer reaches
// down to the floor. Neither case loses anything: the state's staged
// events and its peers' trails hold what this one lacks (TrailGap).
func (f *FSM) reconcileTrail(db *bolt.DB) error {
	var (
		layout       bool
		head, floor  uint64
		headHash     string
		atLast, next Event
		hasLast      bool
		hasNext      bool
	)
	st := f.tr.store
	last, lastHash := st.Last()
	read := func() error {
		return db.View(func(tx *bolt.Tx) error {
			layout = trailLayout(tx)
			head, headHash = auditHead(tx)
			floor = auditFloor(tx)
			atLast, hasLast = stagedAt(tx, last)
			next, hasNext = stagedAt(tx, last+1)
			return nil
		})
	}
	if err := read(); err != nil {
		return err
	}
	if !layout {
		if last != 0 || st.First() != 0 {
			return st.Reset(1)
		}
		return nil
	}
	if last > head {
		if err := st.Truncate(head); err != nil {
			return err
		}
		last, lastHash = st.Last()
		if err := read(); err != nil {
			return err
		}
	}
	same := true
	switch {
	case last == 0:
		same = false // empty: make sure its floor is the state's
	case last == head:
		same = lastHash == headHash
	case hasLast:
		same = atLast.Hash == lastHash
	case hasNext:
		same = next.PrevHash == lastHash
	default:
		// The staging does not reach down to the trail (a snapshot
		// from a peer that moved more): hold the trail against the
		// newest replicated checkpoint at or below its last, and cut
		// what lies after it, which nothing can vouch for (the gap
		// then begins there, at most a chunk lower).
		c, hash, ok := checkpoint(db, last)
		if !ok || c < floor {
			same = false
			break
		}
		es, err := st.Query(trail.Query{After: c - 1, Limit: 1})
		if err != nil {
			return err
		}
		if same = len(es) == 1 && es[0].Seq == c && es[0].Hash == hash; same {
			if err := st.Truncate(c); err != nil {
				return err
			}
			last = c
		}
	}
	if !same || st.First() > floor || last+1 < floor {
		return st.Reset(floor)
	}
	return st.DropBelow(floor)
}

// checkpoint is the newest chunk end at or below seq, with its hash.
func checkpoint(db *bolt.DB, seq uint64) (at uint64, hash string, ok bool) {
	_ = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAuditChunks)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, v := c.Seek(seqKey(seq))
		if k == nil || binary.BigEndian.Uint64(k) > seq {
			k, v = c.Prev()
		}
		if len(k) == 8 && len(v) == 8+32 {
			at, hash, ok = binary.BigEndian.Uint64(k), hex.EncodeToString(v[8:]), true
		}
		return nil
	})
	return at, hash, ok
}

// runMover moves staged events into the trail until Close.
func (f *FSM) runMover() {
	defer close(f.tr.done)
	tick := time.NewTicker(moverEvery)
	defer tick.Stop()
	for {
		select {
		case <-f.tr.stop:
			return
		case <-f.tr.wake:
		case <-tick.C:
		}
		for !f.tr.manual.Load() {
			more, err := f.moveOnce()
			if err != nil {
				f.tr.err.Store(&err)
			} else {
				f.tr.err.Store(nil)
			}
			if !more || err != nil {
				break
			}
			select {
			case <-f.tr.stop:
				return
			default:
			}
		}
		select {
		case <-f.tr.stop:
			return
		case <-time.After(moverSpacing):
		}
	}
}

// moveOnce is one round of the mover: reconcile when asked, follow the
// floor, and append the next staged events (at most moveBatch) unless the
// trail lacks events below them (TrailGap: catching up). more reports a
// full batch.
func (f *FSM) moveOnce() (more bool, err error) {
	tr := f.tr
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if f.stateFormat() < FormatTrail {
		return false, nil
	}
	if tr.reconcile.Load() {
		// Exclusive: an apply reads the trail's Last to trim the staging.
		f.mu.Lock()
		err := f.reconcileTrail(f.db)
		f.mu.Unlock()
		if err != nil {
			return false, err
		}
		tr.reconcile.Store(false)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	var batch []Event
	var floor uint64
	gap := false
	last, _ := tr.store.Last()
	err = f.db.View(func(tx *bolt.Tx) error {
		if !trailLayout(tx) {
			gap = true
			return nil
		}
		floor = auditFloor(tx)
		if last != 0 && last+1 < floor {
			return nil // handled below, outside the transaction
		}
		want := max(floor, last+1)
		c := tx.Bucket(bucketAudit).Cursor()
		k, v := c.Seek(seqKey(want))
		if k == nil {
			return nil
		}
		if binary.BigEndian.Uint64(k) != want {
			gap = true
			return nil
		}
		for ; k != nil && len(batch) < moveBatch; k, v = c.Next() {
			var e Event
			if err := decodeRecord(v, &e); err != nil {
				return fmt.Errorf("fsm: staged audit event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			batch = append(batch, e)
		}
		return nil
	})
	if err != nil || gap {
		return false, err
	}
	if last != 0 && last+1 < floor {
		// Retention passed everything the trail holds.
		return true, tr.store.Reset(floor)
	}
	if err := tr.store.DropBelow(floor); err != nil {
		return false, err
	}
	if len(batch) == 0 {
		return false, nil
	}
	if err := tr.store.Append(batch); err != nil {
		tr.reconcile.Store(true)
		return false, fmt.Errorf("fsm: move audit events %d-%d to the trail: %w", batch[0].Seq, batch[len(batch)-1].Seq, err)
	}
	return len(batch) == moveBatch, nil
}

// TrailGap is the range of seqs this replica's trail lacks below its
// staged events (ok false when it lacks nothing): after a snapshot from
// a peer whose mover had moved them out, or a reset. The mover waits
// meanwhile (the staging grows); the node fetches the range from a peer
// (ExportTrail there, ImportTrail here).
func (f *FSM) TrailGap() (from, to uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_ = f.db.View(func(tx *bolt.Tx) error {
		from, to, ok = f.gap(tx)
		return nil
	})
	return from, to, ok
}

// gap is TrailGap in tx.
func (f *FSM) gap(tx *bolt.Tx) (from, to uint64, ok bool) {
	if f.tr == nil || !trailLayout(tx) {
		return 0, 0, false
	}
	head, _ := auditHead(tx)
	floor := auditFloor(tx)
	last, _ := f.tr.store.Last()
	if last != 0 && last+1 < floor {
		last = 0
	}
	from = max(floor, last+1)
	to = head
	if k, _ := tx.Bucket(bucketAudit).Cursor().Seek(seqKey(from)); len(k) == 8 {
		to = binary.BigEndian.Uint64(k) - 1
	}
	if from > to {
		return 0, 0, false
	}
	return from, to, true
}

// TrailStatus is what the node's readiness shows of the trail.
type TrailStatus struct {
	// Last is the newest event of the local trail; Staged the events of
	// the state above it not yet moved.
	Last, Staged uint64
	// Gap, when set, is the range the trail lacks and must fetch.
	GapFrom, GapTo uint64
	Gap            bool
	// Err is the mover's last error ("" when it moved).
	Err string
}

// TrailStatus reports the trail's progress.
func (f *FSM) TrailStatus() TrailStatus {
	var s TrailStatus
	if f.tr == nil {
		return s
	}
	s.Last, _ = f.tr.store.Last()
	f.mu.RLock()
	_ = f.db.View(func(tx *bolt.Tx) error {
		s.GapFrom, s.GapTo, s.Gap = f.gap(tx)
		if head, _ := auditHead(tx); trailLayout(tx) && head > s.Last {
			s.Staged = head - max(s.Last, s.GapTo)
		}
		return nil
	})
	f.mu.RUnlock()
	if e := f.tr.err.Load(); e != nil {
		s.Err = (*e).Error()
	}
	return s
}

// readTx begins a read transaction on the current database without
// holding the swap lock for its length (a long export): a restore
// meanwhile swaps the file and the transaction reads the old one.
func (f *FSM) readTx() (*bolt.Tx, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.db.Begin(false)
}

// ExportTrail writes the events from seq from to seq to (both included)
// to w as a trail stream: those of the local trail, then the staged ones
// above it, for a peer that lacks them (its TrailGap). It fails when this
// replica does not hold the whole range.
func (f *FSM) ExportTrail(w io.Writer, from, to uint64) error {
	if f.tr == nil {
		return errors.New("fsm: no trail")
	}
	tx, err := f.readTx()
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a read transaction
	if !trailLayout(tx) {
		return errors.New("fsm: export trail: the state keeps its events in bbolt (format before 3)")
	}
	head, _ := auditHead(tx)
	floor := auditFloor(tx)
	to = min(to, head)
	if from < floor || from > to {
		return fmt.Errorf("fsm: export trail %d-%d: this replica keeps %d-%d", from, to, floor, head)
	}
	return f.tr.store.ExportWith(w, from, to, func(start uint64, emit func([]Event) error) error {
		if start > to {
			return nil
		}
		c := tx.Bucket(bucketAudit).Cursor()
		var batch []Event
		want := start
		for k, v := c.Seek(seqKey(start)); len(k) == 8 && binary.BigEndian.Uint64(k) <= to; k, v = c.Next() {
			var e Event
			if err := decodeRecord(v, &e); err != nil {
				return fmt.Errorf("fsm: staged audit event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if e.Seq != want {
				return fmt.Errorf("fsm: export trail: this replica lacks %d", want)
			}
			want++
			if batch = append(batch, e); len(batch) == moveBatch {
				if err := emit(batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		if want != to+1 {
			return fmt.Errorf("fsm: export trail: this replica lacks %d-%d", want, to)
		}
		if len(batch) > 0 {
			return emit(batch)
		}
		return nil
	})
}

// ImportTrail reads a stream a peer's ExportTrail wrote for this
// replica's gap and keeps it only when it fills the gap exactly: it must
// begin at the gap's first seq, chain onto the trail, and its last
// event's hash must be the prev_hash of the first staged event (the
// head's hash when nothing is staged). A stream of another history, or
// one cut short or altered, is refused with an error, and nothing of it
// is kept. On success the mover goes on.
func (f *FSM) ImportTrail(r io.Reader) error {
	if f.tr == nil {
		return errors.New("fsm: no trail")
	}
	tr := f.tr
	tr.mu.Lock()
	defer tr.mu.Unlock()
	from, to, ok := f.TrailGap()
	if !ok {
		return errors.New("fsm: import trail: this replica lacks nothing")
	}
	before, _ := tr.store.Last()
	if before != 0 && before+1 != from {
		before = 0 // the floor passed the trail: the gap starts afresh
	}
	undo := func(cause error) error {
		var err error
		if before == 0 {
			err = tr.store.Reset(from)
		} else {
			err = tr.store.Truncate(before)
		}
		if err != nil {
			return fmt.Errorf("fsm: import trail: %w (and undoing it: %v)", cause, err)
		}
		return fmt.Errorf("fsm: import trail: %w", cause)
	}
	if before == 0 {
		if err := tr.store.Reset(from); err != nil {
			return err
		}
	}
	if _, err := tr.store.Import(r); err != nil {
		return undo(err)
	}
	last, lastHash := tr.store.Last()
	if before == 0 && tr.store.First() != from {
		return undo(fmt.Errorf("the stream begins at %d, the gap at %d", tr.store.First(), from))
	}
	if last != to {
		return undo(fmt.Errorf("the stream ends at %d, the gap at %d", last, to))
	}
	var want string
	f.mu.RLock()
	_ = f.db.View(func(tx *bolt.Tx) error {
		if e, ok := stagedAt(tx, to+1); ok {
			want = e.PrevHash
		} else if head, h := auditHead(tx); head == to {
			want = h
		}
		return nil
	})
	f.mu.RUnlock()
	if want == "" || want != lastHash {
		return undo(fmt.Errorf("event %d of the stream is not the one event %d follows: another history", to, to+1))
	}
	f.wakeMover()
	return nil
}

// trailBytes is the size of the trail's files.
func (f *FSM) trailBytes() int {
	ents, err := os.ReadDir(trailDir(f.path))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += int(fi.Size())
		}
	}
	return n
}
