package trail

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The stream of Export and Import: the magic, then blocks framed as in a
// segment (length, CRC-32C, payload: whole blocks are shipped as they are
// stored, compressed, and a peer stores them as they come), then an end
// frame of length 0 followed by the number of events sent and the last
// seq (uint64 LE each) and a CRC-32C of the two. A stream cut short lacks
// the end and is an error, after its whole verified blocks are kept.
var magicStream = []byte("TRLEXP01")

const streamEnd = 8 + 8 + 4

// Export writes the events from seq from to seq to (both included; from
// 0: the oldest held; to past Last: Last) to w, for a peer that lacks
// them. It reads a snapshot and never holds back the writer.
func (s *Store) Export(w io.Writer, from, to uint64) error {
	v, err := s.snapshot(nil)
	if err != nil {
		return err
	}
	defer v.release()
	if from == 0 {
		from = v.first
	}
	to = min(to, v.last)
	if v.first == 0 || from < v.first || from > to {
		return fmt.Errorf("trail: export %d-%d: the store holds %d-%d", from, to, v.first, v.last)
	}
	return s.export(w, v, from, to, nil)
}

// ExportWith is Export of the events from from to to that the store
// holds (none when it ends before from), followed by the events more
// gives (consecutive, continuing them; the state machine's events not
// yet appended), in one stream. more is given the seq due next (the one
// after the store's part) and calls emit with batches of events in seq
// order from it; an error of emit or of more ends the export.
func (s *Store) ExportWith(w io.Writer, from, to uint64, more func(next uint64, emit func([]Event) error) error) error {
	v, err := s.snapshot(nil)
	if err != nil {
		return err
	}
	defer v.release()
	if from == 0 {
		return errors.New("trail: export from 0")
	}
	if end := min(to, v.last); from <= end && (v.first == 0 || from < v.first) {
		return fmt.Errorf("trail: export %d-%d: the store holds %d-%d", from, end, v.first, v.last)
	}
	return s.export(w, v, from, to, more)
}

func (s *Store) export(w io.Writer, v *view, from, to uint64, more func(next uint64, emit func([]Event) error) error) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(magicStream); err != nil {
		return fmt.Errorf("trail: export: %w", err)
	}
	var frame []byte
	var count, last uint64
	storeTo := min(to, v.last)
	for i := range v.segs {
		if from > storeTo {
			break
		}
		sv := &v.segs[i]
		if sv.last < from || sv.first > storeTo {
			continue
		}
		for _, b := range sv.blocks[sv.blockOf(from):] {
			if b.first > storeTo {
				break
			}
			p, err := sv.seg.readFrame(b.off, b.size)
			if err != nil {
				return err
			}
			if b.first < from || b.last() > storeTo {
				if p, err = cutBlock(p, from, storeTo); err != nil {
					return sv.seg.errorf("block at %d: %v", b.off, err)
				}
			}
			frame = appendFrame(frame[:0], p)
			if _, err := bw.Write(frame); err != nil {
				return fmt.Errorf("trail: export: %w", err)
			}
			count += uint64(min(b.last(), storeTo) - max(b.first, from) + 1)
			last = min(b.last(), storeTo)
		}
	}
	if more != nil {
		emit := func(evs []Event) error {
			for len(evs) > 0 {
				n := min(len(evs), s.opt.BlockEvents)
				blk := evs[:n]
				evs = evs[n:]
				want := from
				if count > 0 {
					want = last + 1
				}
				for i := range blk {
					if blk[i].Seq != want+uint64(i) {
						return fmt.Errorf("trail: export: event %d where %d was due", blk[i].Seq, want+uint64(i))
					}
				}
				if blk[n-1].Seq > to {
					return fmt.Errorf("trail: export: event %d beyond %d", blk[n-1].Seq, to)
				}
				p, err := encodeBlock(nil, blk)
				if err != nil {
					return err
				}
				frame = appendFrame(frame[:0], p)
				if _, err := bw.Write(frame); err != nil {
					return fmt.Errorf("trail: export: %w", err)
				}
				count += uint64(n)
				last = blk[n-1].Seq
			}
			return nil
		}
		next := from
		if count > 0 {
			next = last + 1
		}
		if err := more(next, emit); err != nil {
			return err
		}
	}
	if count == 0 {
		return fmt.Errorf("trail: export %d-%d: no event", from, to)
	}
	end := binary.LittleEndian.AppendUint64(make([]byte, frameHead), count)
	end = binary.LittleEndian.AppendUint64(end, last)
	end = binary.LittleEndian.AppendUint32(end, checksum(end[frameHead:]))
	if _, err := bw.Write(end); err != nil {
		return fmt.Errorf("trail: export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("trail: export: %w", err)
	}
	return nil
}

// Scan calls fn with the events from seq from to seq to that readers see
// (below the floor hidden), in seq order, a block at a time (fn must not
// keep the slice). It reads a snapshot and never holds back the writer.
func (s *Store) Scan(from, to uint64, fn func([]Event) error) error {
	v, err := s.snapshot(nil)
	if err != nil {
		return err
	}
	defer v.release()
	if v.first == 0 {
		return nil
	}
	from, to = max(from, v.first), min(to, v.last)
	for i := range v.segs {
		sv := &v.segs[i]
		if from > to {
			break
		}
		if sv.last < from || sv.first > to {
			continue
		}
		for _, b := range sv.blocks[sv.blockOf(from):] {
			if b.first > to {
				break
			}
			evs, err := sv.seg.readBlock(b)
			if err != nil {
				return err
			}
			lo, hi := 0, len(evs)
			for lo < hi && evs[lo].Seq < from {
				lo++
			}
			for hi > lo && evs[hi-1].Seq > to {
				hi--
			}
			if lo < hi {
				if err := fn(evs[lo:hi]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cutBlock re-encodes the events of a block within [from, to].
func cutBlock(p []byte, from, to uint64) ([]byte, error) {
	evs, err := decodeBlock(p)
	if err != nil {
		return nil, err
	}
	lo, hi := 0, len(evs)
	for lo < hi && evs[lo].Seq < from {
		lo++
	}
	for hi > lo && evs[hi-1].Seq > to {
		hi--
	}
	return encodeBlock(nil, evs[lo:hi])
}

// streamReader reads the frames of a stream.
type streamReader struct {
	r     *bufio.Reader
	count uint64 // events read
	last  uint64
	ended bool
}

// next gives the next block, nil at the end (after checking that the
// end agrees with what came).
func (sr *streamReader) next() (*checked, error) {
	var head [frameHead]byte
	if _, err := io.ReadFull(sr.r, head[:]); err != nil {
		return nil, sr.cut(err)
	}
	n := binary.LittleEndian.Uint32(head[:])
	if n == 0 {
		return nil, sr.end()
	}
	if n > maxBlockBytes {
		return nil, fmt.Errorf("trail: import: a frame of %d bytes", n)
	}
	frame := make([]byte, frameHead+int(n))
	copy(frame, head[:])
	if _, err := io.ReadFull(sr.r, frame[frameHead:]); err != nil {
		return nil, sr.cut(err)
	}
	c := &checked{}
	if c.payload, c.err = checkFrame(frame); c.err == nil {
		if h, err := parseHead(c.payload); err == nil {
			sr.count += uint64(h.count)
			sr.last = h.last()
		}
	}
	return c, nil
}

func (sr *streamReader) cut(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("trail: import: the stream ends without its end: %w", err)
}

func (sr *streamReader) end() error {
	var b [streamEnd]byte
	if _, err := io.ReadFull(sr.r, b[:]); err != nil {
		return sr.cut(err)
	}
	count, last := binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
	if checksum(b[:16]) != binary.LittleEndian.Uint32(b[16:]) || count != sr.count || last != sr.last {
		return fmt.Errorf("trail: import: the stream's end says %d events to %d, it held %d to %d", count, last, sr.count, sr.last)
	}
	sr.ended = true
	return nil
}

// Import appends the events of a stream Export wrote, and gives the
// number appended. Every event's hash is recomputed (on Options.Workers
// goroutines) and the chain checked in order onto Last (on an empty
// store: from the first event's prev_hash as it stands, at a seq at or
// above the floor). What verifies before a break is kept, durably; the
// break and what follows are not written, and Import says where it was.
// Runs of whole segments are written as sealed segments directly, their
// blocks stored as they came.
func (s *Store) Import(r io.Reader) (n int, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	magic := make([]byte, len(magicStream))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != string(magicStream) {
		return 0, errors.New("trail: import: not a trail stream")
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(); err != nil {
		return 0, err
	}
	in := &ingest{s: s, sealing: make(chan *segWriter, 2), sealed: make(chan error, 1)}
	in.seq, in.hash = s.last, s.lastHash
	go in.sealer()
	sr := &streamReader{r: br}
	perr := pipeline(s.opt.Workers, sr.next, in.take)
	in.flush()
	close(in.sealing)
	if serr := <-in.sealed; serr != nil {
		perr = serr
	}
	return in.n - in.lost, perr
}

// ingest writes the blocks of an Import as they verify.
type ingest struct {
	s       *Store
	w       *segWriter // the sealed segment being written, when there is no active one
	seq     uint64     // the last event taken
	hash    string
	n       int             // events taken
	lost    int             // events of segments that failed to seal (sealer's)
	sealing chan *segWriter // full segments, to finish in order
	sealed  chan error      // the sealer's end
}

// take checks a verified block's place in the chain and writes it.
func (in *ingest) take(c *checked) error {
	if c.err != nil {
		return fmt.Errorf("trail: import: a block after %d: %w", in.seq, c.err)
	}
	first := c.head.first
	empty := in.seq == 0
	switch {
	case empty && first == 0:
		return errors.New("trail: import: seq 0")
	case empty && first < in.s.floor:
		return fmt.Errorf("trail: import: event %d is below the floor %d", first, in.s.floor)
	case !empty && first != in.seq+1:
		return fmt.Errorf("trail: import: event %d does not follow %d", first, in.seq)
	case !empty && c.head.prev != in.hash:
		return fmt.Errorf("trail: import: event %d: prev_hash is not the hash of event %d", first, in.seq)
	}
	evs, payload := c.events, c.payload
	if c.bad >= 0 {
		evs, payload = evs[:c.bad], nil
	}
	if len(evs) > 0 {
		if err := in.write(payload, evs); err != nil {
			return err
		}
	}
	if c.bad >= 0 {
		return fmt.Errorf("trail: import: event %d: its hash is not the hash of its fields", c.events[c.bad].Seq)
	}
	return nil
}

// write stores verified events: into the active segment while there is
// one (until it is sealed), else into a sealed segment written directly.
func (in *ingest) write(payload []byte, evs []Event) error {
	s := in.s
	if payload == nil {
		var err error
		if payload, err = encodeBlock(nil, evs); err != nil {
			return err
		}
	}
	if s.act != nil {
		if err := s.appendActive([]pblock{{payload, evs}}); err != nil {
			return err
		}
		if s.actFull() {
			if err := s.seal(); err != nil {
				return err
			}
		}
	} else {
		if in.w == nil {
			in.w = newSegWriter(s.dir, s.opt.BlockEvents)
		}
		if err := in.w.addBlock(payload, evs); err != nil {
			return err
		}
		if in.w.count() >= s.opt.SegmentEvents {
			in.flush()
		}
	}
	in.n += len(evs)
	in.seq, in.hash = evs[len(evs)-1].Seq, evs[len(evs)-1].Hash
	return nil
}

// flush hands the sealed segment being written to the sealer, so that
// its sync overlaps the decoding and hashing of the next one.
func (in *ingest) flush() {
	if in.w != nil && in.w.count() > 0 {
		in.sealing <- in.w
	}
	in.w = nil
}

// sealer finishes segments in order and shows each to readers; after a
// failure it only removes the ones that follow (no hole in the trail).
func (in *ingest) sealer() {
	var err error
	for w := range in.sealing {
		if err != nil {
			w.abort()
			in.lost += w.count()
			continue
		}
		seg, ferr := w.finish()
		if ferr != nil {
			err = ferr
			in.lost += w.count()
			continue
		}
		s := in.s
		s.mu.Lock()
		s.sealed = append(s.sealed, seg)
		s.setLast()
		s.mu.Unlock()
	}
	in.sealed <- err
}
