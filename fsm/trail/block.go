package trail

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"
	"time"
)

// A block is the unit of writing, reading and shipping: consecutive
// events, self-contained so that any block decodes (and verifies) alone
// and a peer can store the bytes it received as they are. Its payload:
//
//	codec     1 byte (codecFlate)
//	first     uvarint, the seq of its first event
//	count     uvarint, ≥ 1
//	prev      the first event's prev_hash: 0 (empty), 1 and 32 raw bytes
//	          (lower-case hex of 64 digits, every prev_hash fsm writes),
//	          or 2, uvarint length and the text as it stands
//	hashes    count × 32 raw bytes, uncompressed (they do not compress,
//	          and leaving them out keeps the text's Huffman tables tight)
//	columns   raw DEFLATE of the other fields, column by column
//
// Seqs are implicit (first + i) and so are the prev_hashes after the
// first (the previous event's hash): a block cannot hold a broken seq or
// prev_hash, only an event whose hash is not its fields', which is what
// verifying finds. The columns, each a uvarint length and its bytes: the
// times (4 bytes: nanoseconds and two flags, zero time and a zone offset;
// then the seconds since the previous event's, zigzag varint; then the
// offset in seconds when not UTC), a string column for each of type,
// outcome, actor, subject, client_id, organization_id, sid, ip and node,
// the number of detail pairs of each event, and string columns of the
// detail keys (sorted) and values. A string column is a reference per
// event (uvarint: 0 for a new value, i for the block's i-th distinct
// value) and then the new values (uvarint length and bytes): a block
// repeats no value, and DEFLATE sees the UUIDs together, the sids
// together.
const codecFlate = 1

// Bounds on what a block may claim, so bad bytes on disk or on the wire
// cost an error, not the memory they ask for.
const (
	maxBlockEvents = 1 << 20
	maxBlockBytes  = 256 << 20
)

// Time flags in the 4-byte time word (nanoseconds take 30 bits).
const (
	timeZero   = 1 << 30
	timeOffset = 1 << 31
)

// String columns, in the order they are written.
const (
	colType = iota
	colOutcome
	colActor
	colSubject
	colClient
	colOrg
	colSID
	colIP
	colNode
	colDetailKey
	colDetailValue
	numCols
)

var errCorrupt = errors.New("trail: corrupt block")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

// strCol is a string column being written.
type strCol struct {
	dict map[string]uint64
	refs []byte
	lits []byte
}

func (c *strCol) add(s string) {
	if i, ok := c.dict[s]; ok {
		c.refs = binary.AppendUvarint(c.refs, i)
		return
	}
	c.dict[s] = uint64(len(c.dict) + 1)
	c.refs = binary.AppendUvarint(c.refs, 0)
	c.lits = append(binary.AppendUvarint(c.lits, uint64(len(s))), s...)
}

var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.DefaultCompression)
	return w
}}

// encodeBlock appends to dst the payload of a block of events, which must
// be consecutive and chained (the caller checked). Their hashes must be
// 64 hex digits (the caller checked they are EventHash's).
func encodeBlock(dst []byte, events []Event) ([]byte, error) {
	if len(events) == 0 || len(events) > maxBlockEvents {
		return dst, fmt.Errorf("trail: a block of %d events", len(events))
	}
	dst = append(dst, codecFlate)
	dst = binary.AppendUvarint(dst, events[0].Seq)
	dst = binary.AppendUvarint(dst, uint64(len(events)))
	dst = appendPrev(dst, events[0].PrevHash)
	for i := range events {
		var h [32]byte
		if n, err := hex.Decode(h[:], []byte(events[i].Hash)); err != nil || n != 32 {
			return dst, fmt.Errorf("trail: event %d: hash %q is not 32 bytes of hex", events[i].Seq, events[i].Hash)
		}
		dst = append(dst, h[:]...)
	}
	cols := encodeColumns(events)
	buf := bytes.NewBuffer(dst)
	w := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(w)
	w.Reset(buf)
	if _, err := w.Write(cols); err != nil {
		return dst, fmt.Errorf("trail: compress: %w", err)
	}
	if err := w.Close(); err != nil {
		return dst, fmt.Errorf("trail: compress: %w", err)
	}
	return buf.Bytes(), nil
}

// appendPrev appends the first event's prev_hash (see encodeBlock).
func appendPrev(dst []byte, prev string) []byte {
	var h [32]byte
	switch n, err := hex.Decode(h[:], []byte(prev)); {
	case prev == "":
		return append(dst, 0)
	case err == nil && n == 32 && hex.EncodeToString(h[:]) == prev:
		return append(append(dst, 1), h[:]...)
	}
	return append(binary.AppendUvarint(append(dst, 2), uint64(len(prev))), prev...)
}

// encodeColumns is the uncompressed column data of events.
func encodeColumns(events []Event) []byte {
	var cols [numCols]strCol
	for i := range cols {
		cols[i].dict = make(map[string]uint64)
	}
	var times, counts []byte
	var prevSec int64
	var keys []string
	for i := range events {
		e := &events[i]
		times, prevSec = appendTime(times, e.Time, prevSec)
		for c, s := range [...]string{e.Type, e.Outcome, e.Actor, e.Subject, e.ClientID, e.OrgID, e.SID, e.IP, e.Node} {
			cols[c].add(s)
		}
		counts = binary.AppendUvarint(counts, uint64(len(e.Detail)))
		keys = keys[:0]
		for k := range e.Detail {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			cols[colDetailKey].add(k)
			cols[colDetailValue].add(e.Detail[k])
		}
	}
	out := appendSection(nil, times)
	for c := colType; c <= colNode; c++ {
		out = appendSection(appendSection(out, cols[c].refs), cols[c].lits)
	}
	out = appendSection(out, counts)
	for c := colDetailKey; c <= colDetailValue; c++ {
		out = appendSection(appendSection(out, cols[c].refs), cols[c].lits)
	}
	return out
}

func appendSection(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// appendTime appends t as the time column holds it. The zone is kept as
// its offset: the hash covers the RFC 3339 text, which shows the offset
// alone, and fsm's times are UTC.
func appendTime(dst []byte, t time.Time, prevSec int64) ([]byte, int64) {
	if t.IsZero() {
		return binary.LittleEndian.AppendUint32(dst, timeZero), prevSec
	}
	word := uint32(t.Nanosecond())
	_, off := t.Zone()
	if off != 0 {
		word |= timeOffset
	}
	dst = binary.LittleEndian.AppendUint32(dst, word)
	sec := t.Unix()
	dst = binary.AppendVarint(dst, sec-prevSec)
	if off != 0 {
		dst = binary.AppendVarint(dst, int64(off))
	}
	return dst, sec
}

// blockHead is what a payload says before its columns.
type blockHead struct {
	first  uint64
	count  int
	prev   string
	hashes []byte // count × 32
	cols   []byte // the compressed columns
}

// last is the seq of the block's last event.
func (h *blockHead) last() uint64 { return h.first + uint64(h.count) - 1 }

// hash is the raw hash of the i-th event.
func (h *blockHead) hash(i int) []byte { return h.hashes[32*i : 32*i+32] }

// parseHead reads a payload's head without decompressing it.
func parseHead(p []byte) (blockHead, error) {
	var h blockHead
	r := reader{b: p}
	if r.byte() != codecFlate {
		return h, fmt.Errorf("%w: unknown codec", errCorrupt)
	}
	h.first = r.uvarint()
	n := r.uvarint()
	if r.err != nil || n == 0 || n > maxBlockEvents || h.first+n-1 < h.first {
		return h, fmt.Errorf("%w: bad count", errCorrupt)
	}
	h.count = int(n)
	switch r.byte() {
	case 0:
	case 1:
		h.prev = hex.EncodeToString(r.bytes(32))
	case 2:
		h.prev = string(r.bytes(r.uvarint()))
	default:
		r.fail()
	}
	h.hashes = r.bytes(32 * n)
	h.cols = r.b
	if r.err != nil {
		return h, fmt.Errorf("%w: truncated head", errCorrupt)
	}
	return h, nil
}

var flateReaders sync.Pool

// decodeBlock gives back the events of a payload, seqs and prev_hashes
// filled in. Repeated values share one string.
func decodeBlock(p []byte) ([]Event, error) {
	h, err := parseHead(p)
	if err != nil {
		return nil, err
	}
	cols, err := inflate(h.cols)
	if err != nil {
		return nil, err
	}
	events := make([]Event, h.count)
	if err := decodeColumns(cols, events); err != nil {
		return nil, err
	}
	prev := h.prev
	for i := range events {
		events[i].Seq = h.first + uint64(i)
		events[i].PrevHash = prev
		events[i].Hash = hex.EncodeToString(h.hash(i))
		prev = events[i].Hash
	}
	return events, nil
}

// inflate decompresses a block's columns, at most maxBlockBytes.
func inflate(b []byte) ([]byte, error) {
	src := bytes.NewReader(b)
	fr, _ := flateReaders.Get().(io.ReadCloser)
	if fr == nil {
		fr = flate.NewReader(src)
	} else if err := fr.(flate.Resetter).Reset(src, nil); err != nil {
		return nil, err
	}
	defer flateReaders.Put(fr)
	out := make([]byte, 0, 4*len(b))
	buf := bytes.NewBuffer(out)
	if _, err := buf.ReadFrom(io.LimitReader(fr, maxBlockBytes+1)); err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	if buf.Len() > maxBlockBytes {
		return nil, fmt.Errorf("%w: too large", errCorrupt)
	}
	return buf.Bytes(), nil
}

// decodeColumns fills events (seq and hashes aside) from the column data.
func decodeColumns(b []byte, events []Event) error {
	r := reader{b: b}
	if err := decodeTimes(r.section(), events); err != nil {
		return err
	}
	for c := colType; c <= colNode; c++ {
		col := strReader{refs: reader{b: r.section()}, lits: reader{b: r.section()}}
		for i := range events {
			s := col.next()
			e := &events[i]
			switch c {
			case colType:
				e.Type = s
			case colOutcome:
				e.Outcome = s
			case colActor:
				e.Actor = s
			case colSubject:
				e.Subject = s
			case colClient:
				e.ClientID = s
			case colOrg:
				e.OrgID = s
			case colSID:
				e.SID = s
			case colIP:
				e.IP = s
			case colNode:
				e.Node = s
			}
		}
		if col.err() != nil {
			return col.err()
		}
	}
	counts := reader{b: r.section()}
	keys := strReader{refs: reader{b: r.section()}, lits: reader{b: r.section()}}
	values := strReader{refs: reader{b: r.section()}, lits: reader{b: r.section()}}
	for i := range events {
		n := counts.uvarint()
		if n == 0 || counts.err != nil || n > uint64(len(keys.refs.b)) {
			if counts.err != nil || n > 0 {
				return fmt.Errorf("%w: detail counts", errCorrupt)
			}
			continue
		}
		d := make(EventDetail, n)
		for ; n > 0; n-- {
			k := keys.next()
			d[k] = values.next()
		}
		events[i].Detail = d
	}
	if r.err != nil || keys.err() != nil || values.err() != nil {
		return fmt.Errorf("%w: columns", errCorrupt)
	}
	return nil
}

// decodeTimes reads the time column.
func decodeTimes(b []byte, events []Event) error {
	r := reader{b: b}
	var sec int64
	for i := range events {
		word := r.uint32()
		if word&timeZero != 0 {
			continue
		}
		sec += r.varint()
		loc := time.UTC
		if word&timeOffset != 0 {
			off := r.varint()
			if off < -1<<20 || off > 1<<20 {
				r.fail()
			}
			loc = time.FixedZone("", int(off))
		}
		ns := int64(word &^ (timeZero | timeOffset))
		if ns >= 1e9 {
			r.fail()
		}
		events[i].Time = time.Unix(sec, ns).In(loc)
	}
	if r.err != nil {
		return fmt.Errorf("%w: times", errCorrupt)
	}
	return nil
}

// strReader reads a string column.
type strReader struct {
	refs, lits reader
	dict       []string
	bad        bool
}

func (c *strReader) next() string {
	i := c.refs.uvarint()
	if i == 0 {
		s := string(c.lits.bytes(c.lits.uvarint()))
		c.dict = append(c.dict, s)
		return s
	}
	if i > uint64(len(c.dict)) {
		c.bad = true
		return ""
	}
	return c.dict[i-1]
}

func (c *strReader) err() error {
	if c.bad || c.refs.err != nil || c.lits.err != nil {
		return fmt.Errorf("%w: string column", errCorrupt)
	}
	return nil
}

// reader reads a byte slice, remembering the first failure instead of
// panicking: bytes from disk or a peer are never trusted.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errCorrupt
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) uint32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *reader) uint64() uint64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) section() []byte { return r.bytes(r.uvarint()) }
