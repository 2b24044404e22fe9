package trail

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Options tune a Store; zero values take the defaults.
type Options struct {
	// SegmentEvents is the number of events after which the active
	// segment is sealed (default 65536).
	SegmentEvents int
	// BlockEvents is the number of events of a block of a sealed segment
	// (default 256): a read decodes one block for one event, and DEFLATE
	// needs some hundreds of events to find the repeats.
	BlockEvents int
	// SegmentBytes seals the active segment early once its file is this
	// large (default 16 MiB; negative: never). One-event appends compress
	// poorly (some 400 bytes an event against 110 sealed); this bounds how
	// much of the trail is in that form when events come slowly.
	SegmentBytes int64
	// Workers is the number of goroutines that decode and hash blocks in
	// Import and Verify (default GOMAXPROCS).
	Workers int
}

func (o *Options) defaults() {
	if o.SegmentEvents <= 0 {
		o.SegmentEvents = 65536
	}
	if o.BlockEvents <= 0 {
		o.BlockEvents = 256
	}
	if o.BlockEvents > o.SegmentEvents {
		o.BlockEvents = o.SegmentEvents
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = 16 << 20
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
}

// sealFault, when set (tests), fails every seal before it begins.
var sealFault func() error

// ErrClosed is returned by every method of a closed store.
var ErrClosed = errors.New("trail: closed")

// Store is an audit trail on local disk: sealed segments and at most one
// active segment, in one directory. One writer at a time (Append, Import,
// Truncate, DropBelow, Reset; they take turns on a mutex), any number of
// readers (Query, Verify, Export), which work on a snapshot taken under a
// short lock and never hold back the writer.
type Store struct {
	dir string
	opt Options

	wmu sync.Mutex // held by the one writer for its whole operation

	mu        sync.RWMutex // guards what follows; held briefly
	sealed    []*segment   // ascending seq
	act       *segment     // the active segment, nil when there is none
	actBlocks []blockRef
	actPost   map[string][]uint32
	actSize   int64
	last      uint64 // the newest event held, 0 when empty
	lastHash  string
	floor     uint64 // events below are hidden (DropBelow, Reset)
	failed    error  // a write failed halfway: no more writes until reopened
	closed    bool
}

// Open opens (creating it 0700 when needed) the store in dir and recovers
// what a crash left: temporary files are removed; the active segment's
// torn or corrupt tail (a frame whose length or CRC is wrong) is cut off
// at its last whole block; an active segment that a seal or Truncate had
// already replaced is removed; segments wholly below the floor are
// removed. A damaged sealed segment (header, trailer or index tables) is
// an error naming its file; its blocks are checked when read.
func Open(dir string, opt Options) (*Store, error) {
	opt.defaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("trail: %w", err)
	}
	s := &Store{dir: dir, opt: opt, actPost: map[string][]uint32{}}
	floor, reset, err := readFloor(dir)
	if err != nil {
		return nil, err
	}
	s.floor = floor
	if err := s.load(reset); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// load opens the directory's segments.
func (s *Store) load(reset bool) error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("trail: %w", err)
	}
	var actives []string
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(s.dir, name)
		switch {
		case strings.HasSuffix(name, ".tmp"):
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("trail: %w", err)
			}
		case reset && (strings.HasPrefix(name, "seg-") || strings.HasPrefix(name, "active-")):
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("trail: %w", err)
			}
		case strings.HasPrefix(name, "seg-") && strings.HasSuffix(name, ".trail"):
			seg, err := openSealed(path)
			if err != nil {
				return err
			}
			if filepath.Base(path) != sealedName(seg.first, seg.last) {
				seg.release()
				return seg.errorf("holds %d-%d, not what its name says", seg.first, seg.last)
			}
			s.sealed = append(s.sealed, seg)
		case strings.HasPrefix(name, "active-") && strings.HasSuffix(name, ".trail"):
			actives = append(actives, path)
		}
	}
	if reset {
		if err := writeFloor(s.dir, s.floor, false); err != nil {
			return err
		}
	}
	slices.SortFunc(s.sealed, func(a, b *segment) int { return cmpSeq(a.first, b.first) })
	for i := 1; i < len(s.sealed); i++ {
		if s.sealed[i].first <= s.sealed[i-1].last {
			return s.sealed[i].errorf("overlaps %s", filepath.Base(s.sealed[i-1].path))
		}
	}
	if len(actives) > 1 {
		return fmt.Errorf("trail: %d active segments in %s", len(actives), s.dir)
	}
	if len(actives) == 1 {
		if err := s.loadActive(actives[0]); err != nil {
			return err
		}
	}
	if err := s.settleActive(); err != nil {
		return err
	}
	s.setLast()
	return s.dropBelowFloor()
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// settleActive resolves an active segment whose events a sealed segment
// also holds: a seal that renamed its segment but did not remove the
// active one (same range: the active one goes), or a Truncate that wrote
// the kept part of a sealed segment as the active one but did not remove
// the sealed one yet (same first, fewer events: the sealed one goes).
func (s *Store) settleActive() error {
	if s.act == nil || len(s.sealed) == 0 {
		return nil
	}
	top := s.sealed[len(s.sealed)-1]
	actLast := s.actBlocks[len(s.actBlocks)-1].last()
	switch {
	case s.act.first > top.last:
		return nil
	case s.act.first == top.first && actLast == top.last:
		return s.dropActive()
	case s.act.first == top.first && actLast > top.last:
		// A seal renamed its segment but failed after, and the active
		// one took more events since: the active one holds them all.
		s.sealed = s.sealed[:len(s.sealed)-1]
		top.release()
		if err := os.Remove(top.path); err != nil {
			return fmt.Errorf("trail: %w", err)
		}
		return syncDir(s.dir)
	case s.act.first == top.first && actLast < top.last:
		s.sealed = s.sealed[:len(s.sealed)-1]
		top.release()
		if err := os.Remove(top.path); err != nil {
			return fmt.Errorf("trail: %w", err)
		}
		return syncDir(s.dir)
	}
	return s.act.errorf("overlaps %s", filepath.Base(top.path))
}

// setLast derives last and lastHash from the segments.
func (s *Store) setLast() {
	s.last, s.lastHash = 0, ""
	if s.act != nil {
		s.last = s.actBlocks[len(s.actBlocks)-1].last()
		s.lastHash = s.actLastHash()
	} else if n := len(s.sealed); n > 0 {
		s.last, s.lastHash = s.sealed[n-1].last, s.sealed[n-1].lastHash
	}
}

// actLastHash is kept beside the blocks; see appendActive.
func (s *Store) actLastHash() string { return s.act.lastHash }

// loadActive opens the active segment, cuts a torn tail off and indexes
// its events.
func (s *Store) loadActive(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("trail: %w", err)
	}
	seg := &segment{path: path, f: f}
	seg.refs.Store(1)
	data, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return fmt.Errorf("trail: %w", err)
	}
	first, ok := parseHeader(data, magicActive)
	if !ok {
		if _, err := checkFrame(frameAt(data, headerSize)); err == nil {
			f.Close()
			return seg.errorf("bad header")
		}
		f.Close() // torn in its first write: it held nothing
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("trail: %w", err)
		}
		return syncDir(s.dir)
	}
	seg.first = first
	s.act, s.actBlocks, s.actPost = seg, nil, map[string][]uint32{}
	off := int64(headerSize)
	for off < int64(len(data)) {
		p, err := checkFrame(frameAt(data, off))
		if err != nil {
			break // a torn or corrupt tail
		}
		evs, err := decodeBlock(p)
		if err != nil {
			return seg.errorf("block at %d: %v", off, err)
		}
		if err := s.follows(seg, evs); err != nil {
			return seg.errorf("block at %d: %v", off, err)
		}
		size := int64(frameHead + len(p))
		s.indexActive(evs, blockRef{off: off, size: size, first: evs[0].Seq, count: len(evs)})
		off += size
	}
	if off < int64(len(data)) {
		if err := s.cutActive(off); err != nil {
			return err
		}
	}
	s.actSize = off
	if len(s.actBlocks) == 0 {
		return s.dropActive()
	}
	return nil
}

// follows checks that evs continue the active segment.
func (s *Store) follows(seg *segment, evs []Event) error {
	if len(s.actBlocks) == 0 {
		if evs[0].Seq != seg.first {
			return fmt.Errorf("begins at %d, not at the header's %d", evs[0].Seq, seg.first)
		}
		return nil
	}
	if want := s.actBlocks[len(s.actBlocks)-1].last() + 1; evs[0].Seq != want || evs[0].PrevHash != seg.lastHash {
		return fmt.Errorf("does not follow seq %d", want-1)
	}
	return nil
}

// frameAt is the frame at off as far as its length says (or what there is).
func frameAt(data []byte, off int64) []byte {
	if off+frameHead > int64(len(data)) {
		return data[min(off, int64(len(data))):]
	}
	n := int64(binary.LittleEndian.Uint32(data[off:]))
	return data[off:min(off+frameHead+n, int64(len(data)))]
}

// cutActive truncates the active segment's file at off, durably.
func (s *Store) cutActive(off int64) error {
	if err := s.act.f.Truncate(off); err != nil {
		return fmt.Errorf("trail: cut %s: %w", s.act.path, err)
	}
	if err := s.act.f.Sync(); err != nil {
		return fmt.Errorf("trail: cut %s: %w", s.act.path, err)
	}
	return nil
}

// dropActive removes the active segment's file (the caller holds mu, or
// no reader can see the store yet).
func (s *Store) dropActive() error {
	a := s.act
	s.act, s.actBlocks, s.actPost, s.actSize = nil, nil, map[string][]uint32{}, 0
	if err := os.Remove(a.path); err != nil && !os.IsNotExist(err) {
		a.release()
		return fmt.Errorf("trail: %w", err)
	}
	a.release()
	return syncDir(s.dir)
}

// indexActive records a block of the active segment in memory.
func (s *Store) indexActive(evs []Event, ref blockRef) {
	var keys []string
	for i := range evs {
		ord := uint32(evs[i].Seq - s.act.first)
		keys = eventKeys(&evs[i], keys)
		for _, k := range keys {
			s.actPost[k] = append(s.actPost[k], ord)
		}
	}
	s.actBlocks = append(s.actBlocks, ref)
	s.act.lastHash = evs[len(evs)-1].Hash
}

// dropBelowFloor removes the segments wholly below the floor, oldest
// first, so a crash leaves a trail without a hole.
func (s *Store) dropBelowFloor() error {
	removed := false
	for len(s.sealed) > 0 && s.sealed[0].last < s.floor {
		seg := s.sealed[0]
		s.sealed = s.sealed[1:]
		if err := os.Remove(seg.path); err != nil {
			return fmt.Errorf("trail: %w", err)
		}
		seg.release()
		removed = true
	}
	if s.act != nil && len(s.sealed) == 0 && s.last < s.floor {
		if err := s.dropActive(); err != nil {
			return err
		}
	}
	s.setLast()
	if removed {
		return syncDir(s.dir)
	}
	return nil
}

// The floor file: magic, floor (uint64 LE), a reset flag (a Reset
// was under way) and a CRC-32C of the rest.
const floorFile = "floor"

var magicFloor = []byte("TRLFLR01")

func readFloor(dir string) (uint64, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, floorFile))
	if os.IsNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("trail: %w", err)
	}
	if len(b) != 21 || string(b[:8]) != string(magicFloor) || checksum(b[:17]) != binary.LittleEndian.Uint32(b[17:]) || b[16] > 1 {
		return 0, false, fmt.Errorf("trail: %s: corrupt", filepath.Join(dir, floorFile))
	}
	return binary.LittleEndian.Uint64(b[8:]), b[16] == 1, nil
}

// writeFloor replaces the floor file durably.
func writeFloor(dir string, floor uint64, reset bool) error {
	b := binary.LittleEndian.AppendUint64(append([]byte(nil), magicFloor...), floor)
	if reset {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.LittleEndian.AppendUint32(b, checksum(b))
	return writeFileAtomic(dir, floorFile, [][]byte{b})
}

// writeFileAtomic writes name in dir through a temporary file, synced and
// renamed, and syncs dir.
func writeFileAtomic(dir, name string, parts [][]byte) error {
	f, err := os.CreateTemp(dir, name+"-*.tmp")
	if err != nil {
		return fmt.Errorf("trail: %w", err)
	}
	tmp := f.Name()
	for _, p := range parts {
		if _, err = f.Write(p); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("trail: write %s: %w", name, err)
	}
	return syncDir(dir)
}

// Last is the seq and hash of the newest event held (0 and "" when the
// store is empty): the next Append begins at seq+1 with prev_hash hash.
func (s *Store) Last() (seq uint64, hash string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last, s.lastHash
}

// First is the seq of the oldest event readers see (held and not below
// the floor), 0 when there is none.
func (s *Store) First() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.firstLocked()
}

func (s *Store) firstLocked() uint64 {
	var first uint64
	switch {
	case len(s.sealed) > 0:
		first = s.sealed[0].first
	case s.act != nil:
		first = s.act.first
	default:
		return 0
	}
	return max(first, s.floor)
}

// Len is the number of events readers see (First to Last; a segment lost
// from the middle still counts, Verify reports it).
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if f := s.firstLocked(); f > 0 {
		return int(s.last - f + 1)
	}
	return 0
}

// Close closes the store's files (a reader still at work finishes first).
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.closeFiles()
	return nil
}

func (s *Store) closeFiles() {
	for _, seg := range s.sealed {
		seg.release()
	}
	if s.act != nil {
		s.act.release()
	}
	s.sealed, s.act = nil, nil
}

// writable is nil when a writer may go on (the caller holds wmu).
func (s *Store) writable() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if s.failed != nil {
		return fmt.Errorf("trail: a write failed, reopen the store: %w", s.failed)
	}
	return nil
}

// fail stops writes after a write whose effect on disk is unknown.
func (s *Store) fail(err error) error {
	s.mu.Lock()
	s.failed = err
	s.mu.Unlock()
	return err
}

// Append adds events to the trail, durably: they are written as one
// block of the active segment and synced (with the directory when the
// segment's file is new) before Append returns. They must be consecutive
// from Last()+1 (from any seq at or above the floor when the store is
// empty), chain (each prev_hash the previous event's hash; the first
// event's onto Last's, or as it stands when the store is empty) and carry
// their EventHash: else Append writes nothing and says why.
func (s *Store) Append(events []Event) error {
	if len(events) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.check(events); err != nil {
		return err
	}
	return s.appendChecked(events)
}

// check refuses events that do not continue the trail.
func (s *Store) check(events []Event) error {
	s.mu.RLock()
	seq, hash, empty, floor := s.last, s.lastHash, s.last == 0, s.floor
	s.mu.RUnlock()
	var buf []byte
	for i := range events {
		e := &events[i]
		switch {
		case i == 0 && empty && e.Seq == 0:
			return errors.New("trail: seq 0")
		case i == 0 && empty && e.Seq < floor:
			return fmt.Errorf("trail: event %d is below the floor %d", e.Seq, floor)
		case (i > 0 || !empty) && e.Seq != seq+1:
			return fmt.Errorf("trail: event %d does not follow %d", e.Seq, seq)
		case (i > 0 || !empty) && e.PrevHash != hash:
			return fmt.Errorf("trail: event %d: prev_hash is not the hash of event %d", e.Seq, seq)
		}
		var sum [32]byte
		var err error
		if sum, buf, err = eventSum(e, buf); err != nil {
			return fmt.Errorf("trail: event %d: %w", e.Seq, err)
		}
		if !hashIs(sum, e.Hash) {
			return fmt.Errorf("trail: event %d: its hash is not the hash of its fields", e.Seq)
		}
		seq, hash = e.Seq, e.Hash
	}
	return nil
}

// hashIs reports whether h spells sum in lower-case hex.
func hashIs(sum [32]byte, h string) bool {
	var b [64]byte
	hex.Encode(b[:], sum[:])
	return string(b[:]) == h
}

// pblock is a block to write: its payload and its events.
type pblock struct {
	payload []byte
	events  []Event
}

// appendChecked writes checked events to the active segment, a block at
// a time, sealing it when full. The events are durable once their block
// is synced, so a seal that fails does not fail the Append: the active
// segment stays as it is (readable, one block more), and the next Append
// tries the seal again.
func (s *Store) appendChecked(events []Event) error {
	if s.actFull() {
		_ = s.seal() // a seal that failed before: try again
	}
	for len(events) > 0 {
		n := len(events)
		if room := s.opt.SegmentEvents - s.actCount(); room > 0 && room < n {
			n = room
		}
		p, err := encodeBlock(nil, events[:n])
		if err != nil {
			return err
		}
		if err := s.appendActive([]pblock{{p, events[:n]}}); err != nil {
			return err
		}
		events = events[n:]
		if s.actFull() {
			_ = s.seal() // the events are durable; the next Append seals
		}
	}
	return nil
}

// actCount is the number of events in the active segment (the writer
// calls it; the writer alone changes them).
func (s *Store) actCount() int {
	if s.act == nil {
		return 0
	}
	return int(s.last - s.act.first + 1)
}

func (s *Store) actFull() bool {
	return s.act != nil && (s.actCount() >= s.opt.SegmentEvents || (s.opt.SegmentBytes > 0 && s.actSize >= s.opt.SegmentBytes))
}

// appendActive writes blocks at the end of the active segment (creating
// it) in one write and one sync, then shows them to readers.
func (s *Store) appendActive(blocks []pblock) error {
	var buf []byte
	created := s.act == nil
	off := s.actSize
	if created {
		buf = appendHeader(buf, magicActive, blocks[0].events[0].Seq)
		off = 0
	}
	refs := make([]blockRef, len(blocks))
	for i, b := range blocks {
		start := int64(len(buf))
		buf = appendFrame(buf, b.payload)
		refs[i] = blockRef{off: off + start, size: int64(len(buf)) - start, first: b.events[0].Seq, count: len(b.events)}
	}
	seg := s.act
	if created {
		f, err := os.OpenFile(filepath.Join(s.dir, activeName(blocks[0].events[0].Seq)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("trail: %w", err)
		}
		seg = &segment{path: f.Name(), f: f, first: blocks[0].events[0].Seq}
		seg.refs.Store(1)
	}
	if err := writeSync(seg.f, buf, off); err != nil {
		if created {
			seg.f.Close()
			os.Remove(seg.path)
			return err
		}
		if terr := seg.f.Truncate(off); terr != nil {
			return s.fail(err)
		}
		return err
	}
	if created {
		if err := syncDir(s.dir); err != nil {
			return s.fail(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if created {
		s.act, s.actBlocks, s.actPost, s.actSize = seg, nil, map[string][]uint32{}, 0
	}
	for i, b := range blocks {
		s.indexActive(b.events, refs[i])
	}
	s.actSize = off + int64(len(buf))
	s.last, s.lastHash = blocks[len(blocks)-1].events[len(blocks[len(blocks)-1].events)-1].Seq, s.act.lastHash
	return nil
}

func writeSync(f *os.File, b []byte, off int64) error {
	if _, err := f.WriteAt(b, off); err != nil {
		return fmt.Errorf("trail: write %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("trail: sync %s: %w", f.Name(), err)
	}
	return nil
}

// seal rewrites the active segment as a sealed one (blocks of
// BlockEvents, index, trailer), renames it into place and removes the
// active file.
func (s *Store) seal() error {
	if sealFault != nil {
		if err := sealFault(); err != nil {
			return err
		}
	}
	w := newSegWriter(s.dir, s.opt.BlockEvents)
	for _, b := range s.actBlocks {
		p, err := s.act.readFrame(b.off, b.size)
		if err != nil {
			w.abort()
			return err
		}
		evs, err := decodeBlock(p)
		if err != nil {
			w.abort()
			return s.act.errorf("block at %d: %v", b.off, err)
		}
		if err := w.addBlock(p, evs); err != nil {
			w.abort()
			return err
		}
	}
	seg, err := w.finish()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed = append(s.sealed, seg)
	return s.dropActive()
}

// Truncate drops every event after seq after: the state machine, started
// after a crash, finds the trail ahead of its committed state. An event
// inside the active segment is cut by rewriting that segment; inside a
// sealed one, by removing the segments after it and writing its kept
// events as the new active segment.
func (s *Store) Truncate(after uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if s.last <= after {
		return nil
	}
	if s.act != nil && s.act.first > after {
		s.mu.Lock()
		err := s.dropActive()
		s.setLast()
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if s.act != nil {
		return s.rewriteActive(s.act, s.actBlocks, after)
	}
	for n := len(s.sealed); n > 0 && s.sealed[n-1].first > after; n = len(s.sealed) {
		seg := s.sealed[n-1]
		if err := os.Remove(seg.path); err != nil {
			return fmt.Errorf("trail: %w", err)
		}
		s.mu.Lock()
		s.sealed = s.sealed[:n-1]
		s.setLast()
		s.mu.Unlock()
		seg.release()
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	if n := len(s.sealed); n > 0 && s.sealed[n-1].last > after {
		return s.rewriteActive(s.sealed[n-1], s.sealed[n-1].blocks, after)
	}
	return nil
}

// rewriteActive writes the events of src up to after (its whole blocks
// as they are, the block holding after cut) as the active segment,
// through a temporary file renamed into place. src is the active segment
// or, when it is sealed, the newest sealed segment, removed once the new
// active one is in place (Open finishes that after a crash).
func (s *Store) rewriteActive(src *segment, blocks []blockRef, after uint64) error {
	parts := [][]byte{appendHeader(nil, magicActive, src.first)}
	for _, b := range blocks {
		if b.first > after {
			break
		}
		p, err := src.readFrame(b.off, b.size)
		if err != nil {
			return err
		}
		if b.last() > after {
			evs, err := decodeBlock(p)
			if err != nil {
				return src.errorf("block at %d: %v", b.off, err)
			}
			if p, err = encodeBlock(nil, evs[:after-b.first+1]); err != nil {
				return err
			}
		}
		parts = append(parts, appendFrame(nil, p))
	}
	name := activeName(src.first)
	if err := writeFileAtomic(s.dir, name, parts); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.act
	s.act = nil
	if src.sealed {
		s.sealed = s.sealed[:len(s.sealed)-1]
	}
	err := s.loadActive(filepath.Join(s.dir, name))
	if old != nil && old != s.act {
		old.release()
	}
	if err == nil && src.sealed {
		src.release()
		if err = os.Remove(src.path); err == nil {
			err = syncDir(s.dir)
		}
	}
	s.setLast()
	if err != nil {
		s.failed = err
	}
	return err
}

// DropBelow is retention: it hides every event below floor from reads
// and Verify at once, and removes the segments whose events are all
// below it. The floor is durable (a file beside the segments); it only
// rises.
func (s *Store) DropBelow(floor uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if floor <= s.floor {
		return nil
	}
	if err := writeFloor(s.dir, floor, false); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.floor = floor
	return s.dropBelowFloor()
}

// Reset forgets every event, for a node that restored a snapshot of
// another history: the store is empty, its floor is first, and the next
// Append (or Import) may begin at any seq from first. A crash during
// Reset finishes it at Open.
func (s *Store) Reset(first uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if err := writeFloor(s.dir, first, true); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	segs := s.sealed
	if s.act != nil {
		segs = append(segs, s.act)
	}
	s.sealed, s.act, s.actBlocks, s.actPost, s.actSize = nil, nil, nil, map[string][]uint32{}, 0
	s.floor = first
	s.setLast()
	for _, seg := range segs {
		if err := os.Remove(seg.path); err != nil {
			s.failed = err
			return fmt.Errorf("trail: %w", err)
		}
		seg.release()
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	return writeFloor(s.dir, first, false)
}
