package trail

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
)

// Files. A segment holds consecutive events in blocks, each framed as
//
//	length  uint32 LE, of the payload
//	crc     uint32 LE, CRC-32C of the payload
//	payload (block.go)
//
// after a 20-byte header (magic, first seq uint64 LE, CRC-32C of the
// two). The active segment (active-<first>.trail) is that and nothing
// else, one block an Append; a crash can only tear its last frame, which
// Open cuts off. A sealed segment (seg-<first>-<last>.trail) is written
// once, through a temporary file renamed into place, and never changes:
// its blocks of BlockEvents events are followed by its index and a
// fixed-size trailer:
//
//	postings   for each key (kind byte and value), the ordinals (seq −
//	           first) of its events: uvarint deltas
//	key table  the keys in byte order, in chunks of sparseEvery, each
//	           chunk framed like a block; an entry is uvarint key length,
//	           key, uvarint postings offset, length and count, uint32 CRC
//	           of the postings
//	sparse     uvarint chunk count; for each chunk its first key (uvarint
//	           length and bytes), uvarint offset and framed length
//	blocks     uvarint block count; for each its framed length and event
//	           count (uvarint)
//	trailer    trailerSize bytes, see trailer
//
// Open reads only the trailer, the sparse table and the block table; a
// lookup binary-searches the sparse table, reads one chunk and one
// postings list. So memory is a key in sparseEvery and a few bytes a
// block, whatever the number of distinct subjects.
const (
	headerSize  = 20
	frameHead   = 8
	sparseEvery = 128
	trailerSize = 8 + 8 + 8 + 4*8 + 32 + 4 + 4
)

var (
	magicActive  = []byte("TRLACT01")
	magicSealed  = []byte("TRLSEG01")
	magicTrailer = []byte("TRLEND01")
)

// Index kinds: the first byte of a key.
const (
	kindType    = 't'
	kindSubject = 's'
	kindClient  = 'c'
	kindOrg     = 'o'
)

// eventKeys are the index keys of e.
func eventKeys(e *Event, keys []string) []string {
	keys = keys[:0]
	for _, kv := range [...]struct {
		kind  byte
		value string
	}{{kindType, e.Type}, {kindSubject, e.Subject}, {kindClient, e.ClientID}, {kindOrg, e.OrgID}} {
		if kv.value != "" {
			keys = append(keys, string(kv.kind)+kv.value)
		}
	}
	return keys
}

// blockRef locates a block in its segment.
type blockRef struct {
	off   int64 // of the frame
	size  int64 // of the frame, head included
	first uint64
	count int
}

func (b blockRef) last() uint64 { return b.first + uint64(b.count) - 1 }

type sparseEntry struct {
	key       string
	off, size int64
}

// segment is an open segment file. Readers hold a reference while they
// read it, so that a file a writer removes or replaces (seal, Truncate,
// DropBelow) is closed only when the last of them is done.
type segment struct {
	path   string
	f      *os.File
	refs   atomic.Int32
	sealed bool
	first  uint64

	// Sealed segments only; immutable.
	last      uint64
	lastHash  string
	blocks    []blockRef
	postOff   int64
	keyOff    int64
	sparse    []sparseEntry
	postLimit int64 // end of the postings
}

func (s *segment) acquire() { s.refs.Add(1) }

func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.f.Close()
	}
}

func (s *segment) errorf(format string, a ...any) error {
	return fmt.Errorf("trail: segment %s: %s", filepath.Base(s.path), fmt.Sprintf(format, a...))
}

// readFrame reads the frame at off, size bytes long, and gives back its
// checked payload.
func (s *segment) readFrame(off, size int64) ([]byte, error) {
	if size < frameHead || size > maxBlockBytes {
		return nil, s.errorf("frame at %d: bad size %d", off, size)
	}
	buf := make([]byte, size)
	if _, err := s.f.ReadAt(buf, off); err != nil {
		return nil, s.errorf("frame at %d: %v", off, err)
	}
	p, err := checkFrame(buf)
	if err != nil {
		return nil, s.errorf("frame at %d: %v", off, err)
	}
	return p, nil
}

// readBlock reads and decodes a block.
func (s *segment) readBlock(b blockRef) ([]Event, error) {
	p, err := s.readFrame(b.off, b.size)
	if err != nil {
		return nil, err
	}
	evs, err := decodeBlock(p)
	if err != nil {
		return nil, s.errorf("block at %d: %v", b.off, err)
	}
	if len(evs) != b.count || evs[0].Seq != b.first {
		return nil, s.errorf("block at %d is not the one indexed", b.off)
	}
	return evs, nil
}

// checkFrame gives back a whole frame's payload, or an error when its
// length or CRC is wrong.
func checkFrame(b []byte) ([]byte, error) {
	if len(b) < frameHead {
		return nil, fmt.Errorf("%w: short frame", errCorrupt)
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || uint64(n) != uint64(len(b)-frameHead) {
		return nil, fmt.Errorf("%w: frame length", errCorrupt)
	}
	p := b[frameHead:]
	if checksum(p) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, fmt.Errorf("%w: CRC mismatch", errCorrupt)
	}
	return p, nil
}

func appendFrame(dst, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, checksum(payload))
	return append(dst, payload...)
}

func appendHeader(dst, magic []byte, first uint64) []byte {
	n := len(dst)
	dst = binary.LittleEndian.AppendUint64(append(dst, magic...), first)
	return binary.LittleEndian.AppendUint32(dst, checksum(dst[n:]))
}

// parseHeader gives the first seq of a header, or false.
func parseHeader(b, magic []byte) (uint64, bool) {
	if len(b) < headerSize || !bytes.Equal(b[:8], magic) || checksum(b[:16]) != binary.LittleEndian.Uint32(b[16:]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), true
}

// trailer is the fixed end of a sealed segment.
type trailer struct {
	first, last                           uint64
	postOff, keyOff, sparseOff, blocksOff uint64
	lastHash                              [32]byte
	metaCRC                               uint32 // of the sparse and block tables
}

func (t *trailer) append(dst []byte) []byte {
	n := len(dst)
	dst = append(dst, magicTrailer...)
	for _, v := range [...]uint64{t.first, t.last, t.postOff, t.keyOff, t.sparseOff, t.blocksOff} {
		dst = binary.LittleEndian.AppendUint64(dst, v)
	}
	dst = append(dst, t.lastHash[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, t.metaCRC)
	return binary.LittleEndian.AppendUint32(dst, checksum(dst[n:]))
}

func parseTrailer(b []byte) (trailer, bool) {
	var t trailer
	if len(b) != trailerSize || !bytes.Equal(b[:8], magicTrailer) ||
		checksum(b[:trailerSize-4]) != binary.LittleEndian.Uint32(b[trailerSize-4:]) {
		return t, false
	}
	r := reader{b: b[8:]}
	t.first, t.last = r.uint64(), r.uint64()
	t.postOff, t.keyOff, t.sparseOff, t.blocksOff = r.uint64(), r.uint64(), r.uint64(), r.uint64()
	copy(t.lastHash[:], r.bytes(32))
	t.metaCRC = r.uint32()
	return t, true
}

// openSealed opens a sealed segment and reads its tables; any damage to
// them is an error naming the file.
func openSealed(path string) (*segment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trail: %w", err)
	}
	s := &segment{path: path, f: f, sealed: true}
	s.refs.Store(1)
	if err := s.loadTables(); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func (s *segment) loadTables() error {
	fi, err := s.f.Stat()
	if err != nil {
		return s.errorf("%v", err)
	}
	size := fi.Size()
	if size < headerSize+trailerSize {
		return s.errorf("too short (%d bytes)", size)
	}
	head := make([]byte, headerSize)
	tb := make([]byte, trailerSize)
	if _, err := s.f.ReadAt(head, 0); err != nil {
		return s.errorf("%v", err)
	}
	if _, err := s.f.ReadAt(tb, size-trailerSize); err != nil {
		return s.errorf("%v", err)
	}
	first, ok := parseHeader(head, magicSealed)
	t, tok := parseTrailer(tb)
	end := uint64(size - trailerSize)
	if !ok || !tok || t.first != first || t.last < first ||
		!(headerSize <= t.postOff && t.postOff <= t.keyOff && t.keyOff <= t.sparseOff && t.sparseOff <= t.blocksOff && t.blocksOff <= end) {
		return s.errorf("bad header or trailer")
	}
	meta := make([]byte, end-t.sparseOff)
	if _, err := s.f.ReadAt(meta, int64(t.sparseOff)); err != nil {
		return s.errorf("%v", err)
	}
	if checksum(meta) != t.metaCRC {
		return s.errorf("index tables: CRC mismatch")
	}
	s.first, s.last, s.lastHash = first, t.last, hex.EncodeToString(t.lastHash[:])
	s.postOff, s.postLimit, s.keyOff = int64(t.postOff), int64(t.keyOff), int64(t.keyOff)
	if err := s.parseSparse(meta[:t.blocksOff-t.sparseOff], int64(t.sparseOff-t.keyOff)); err != nil {
		return err
	}
	return s.parseBlocks(meta[t.blocksOff-t.sparseOff:], int64(t.postOff))
}

func (s *segment) parseSparse(b []byte, tableLen int64) error {
	r := reader{b: b}
	n := r.uvarint()
	if n > uint64(len(b)) {
		return s.errorf("sparse table: bad count")
	}
	var prevKey string
	for i := uint64(0); i < n && r.err == nil; i++ {
		e := sparseEntry{key: string(r.bytes(r.uvarint())), off: int64(r.uvarint()), size: int64(r.uvarint())}
		if e.off < 0 || e.size < frameHead || e.off+e.size > tableLen || (i > 0 && e.key <= prevKey) {
			return s.errorf("sparse table: bad entry")
		}
		prevKey = e.key
		s.sparse = append(s.sparse, e)
	}
	if r.err != nil || len(r.b) != 0 {
		return s.errorf("sparse table: %v", errCorrupt)
	}
	return nil
}

func (s *segment) parseBlocks(b []byte, limit int64) error {
	r := reader{b: b}
	n := r.uvarint()
	if n == 0 || n > uint64(len(b)) {
		return s.errorf("block table: bad count")
	}
	off, seq := int64(headerSize), s.first
	s.blocks = make([]blockRef, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		size, count := r.uvarint(), r.uvarint()
		if size < frameHead || size > maxBlockBytes || count == 0 || count > maxBlockEvents || off+int64(size) > limit {
			return s.errorf("block table: bad entry")
		}
		s.blocks = append(s.blocks, blockRef{off: off, size: int64(size), first: seq, count: int(count)})
		off, seq = off+int64(size), seq+count
	}
	if r.err != nil || len(r.b) != 0 || off != limit || seq-1 != s.last {
		return s.errorf("block table: does not cover the segment")
	}
	return nil
}

// lookup gives the ordinals (seq − first) of the events under key.
func (s *segment) lookup(key string) ([]uint32, error) {
	i := sort.Search(len(s.sparse), func(i int) bool { return s.sparse[i].key > key }) - 1
	if i < 0 {
		return nil, nil
	}
	chunk, err := s.readFrame(s.keyOff+s.sparse[i].off, s.sparse[i].size)
	if err != nil {
		return nil, err
	}
	r := reader{b: chunk}
	for len(r.b) > 0 && r.err == nil {
		k := string(r.bytes(r.uvarint()))
		off, n, count, crc := r.uvarint(), r.uvarint(), r.uvarint(), r.uint32()
		if r.err != nil || k > key {
			break
		}
		if k == key {
			return s.postings(off, n, count, crc)
		}
	}
	if r.err != nil {
		return nil, s.errorf("key table: %v", r.err)
	}
	return nil, nil
}

// postings reads and decodes one postings list.
func (s *segment) postings(off, n, count uint64, crc uint32) ([]uint32, error) {
	if off+n < off || int64(off+n) > s.postLimit-s.postOff || count > n {
		return nil, s.errorf("key table: bad postings")
	}
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, s.postOff+int64(off)); err != nil {
		return nil, s.errorf("postings: %v", err)
	}
	if checksum(b) != crc {
		return nil, s.errorf("postings: CRC mismatch")
	}
	out := make([]uint32, 0, count)
	r := reader{b: b}
	var v uint64
	for i := uint64(0); i < count; i++ {
		d := r.uvarint()
		if i > 0 && d == 0 {
			r.fail()
		}
		v += d
		if v > s.last-s.first {
			r.fail()
		}
		out = append(out, uint32(v))
	}
	if r.err != nil {
		return nil, s.errorf("postings: %v", r.err)
	}
	return out, nil
}

// segWriter writes a sealed segment: blocks as they come, then the index
// and trailer, in a temporary file that finish renames into place.
type segWriter struct {
	dir         string
	blockEvents int
	f           *os.File
	w           *bufio.Writer
	off         int64
	first, next uint64
	lastHash    string
	blocks      []blockRef
	pending     []Event
	post        map[postKey][]uint32
}

// postKey is an index key while a segment is written (kind and value
// apart: no string is built an event).
type postKey struct {
	kind  byte
	value string
}

func (k postKey) String() string { return string(k.kind) + k.value }

func newSegWriter(dir string, blockEvents int) *segWriter {
	return &segWriter{dir: dir, blockEvents: blockEvents, post: make(map[postKey][]uint32)}
}

// count is the number of events added.
func (w *segWriter) count() int { return int(w.next - w.first) }

// add takes consecutive, chained, verified events.
func (w *segWriter) add(evs []Event) error {
	if w.f == nil && len(evs) > 0 {
		if err := w.start(evs[0].Seq); err != nil {
			return err
		}
	}
	w.index(evs)
	w.pending = append(w.pending, evs...)
	for len(w.pending) >= w.blockEvents {
		if err := w.flush(w.blockEvents); err != nil {
			return err
		}
	}
	return nil
}

// addBlock takes a verified block: its payload is written as it stands
// when it is a whole block of this segment's size, saving its compression.
func (w *segWriter) addBlock(payload []byte, evs []Event) error {
	if len(w.pending) > 0 || len(evs) != w.blockEvents {
		return w.add(evs)
	}
	if w.f == nil {
		if err := w.start(evs[0].Seq); err != nil {
			return err
		}
	}
	w.index(evs)
	return w.write(payload, evs)
}

func (w *segWriter) start(first uint64) error {
	f, err := os.CreateTemp(w.dir, "seg-*.tmp")
	if err != nil {
		return fmt.Errorf("trail: %w", err)
	}
	w.f, w.w = f, bufio.NewWriterSize(f, 1<<20)
	w.first, w.next = first, first
	_, err = w.w.Write(appendHeader(nil, magicSealed, first))
	w.off = headerSize
	return err
}

func (w *segWriter) index(evs []Event) {
	for i := range evs {
		e := &evs[i]
		ord := uint32(e.Seq - w.first)
		for _, k := range [...]postKey{{kindType, e.Type}, {kindSubject, e.Subject}, {kindClient, e.ClientID}, {kindOrg, e.OrgID}} {
			if k.value != "" {
				w.post[k] = append(w.post[k], ord)
			}
		}
	}
	w.next = evs[len(evs)-1].Seq + 1
}

// flush encodes the first n pending events as a block.
func (w *segWriter) flush(n int) error {
	p, err := encodeBlock(nil, w.pending[:n])
	if err != nil {
		return err
	}
	if err := w.write(p, w.pending[:n]); err != nil {
		return err
	}
	w.pending = append(w.pending[:0], w.pending[n:]...)
	return nil
}

func (w *segWriter) write(payload []byte, evs []Event) error {
	frame := appendFrame(nil, payload)
	if _, err := w.w.Write(frame); err != nil {
		return fmt.Errorf("trail: %w", err)
	}
	w.blocks = append(w.blocks, blockRef{off: w.off, size: int64(len(frame)), first: evs[0].Seq, count: len(evs)})
	w.off += int64(len(frame))
	w.lastHash = evs[len(evs)-1].Hash
	return nil
}

// abort removes the temporary file.
func (w *segWriter) abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}

// finish writes the index and trailer and renames the file into place,
// durably; it gives back the segment opened.
func (w *segWriter) finish() (*segment, error) {
	if len(w.pending) > 0 {
		if err := w.flush(len(w.pending)); err != nil {
			w.abort()
			return nil, err
		}
	}
	path, err := w.writeIndex()
	if err != nil {
		w.abort()
		return nil, err
	}
	s, err := openSealed(path)
	if err != nil {
		_ = os.Remove(path) // the active segment still holds its events
		return nil, err
	}
	return s, nil
}

func (w *segWriter) writeIndex() (string, error) {
	t := trailer{first: w.first, last: w.next - 1, postOff: uint64(w.off)}
	if n, err := hex.Decode(t.lastHash[:], []byte(w.lastHash)); err != nil || n != 32 {
		return "", fmt.Errorf("trail: last hash %q", w.lastHash)
	}
	keys := make([]string, 0, len(w.post))
	lists := make(map[string][]uint32, len(w.post))
	for k, l := range w.post {
		keys = append(keys, k.String())
		lists[k.String()] = l
	}
	slices.Sort(keys)
	var postings, table, sparse, chunk []byte
	var nchunks uint64
	flushChunk := func(firstKey string) {
		sparse = binary.AppendUvarint(append(binary.AppendUvarint(sparse, uint64(len(firstKey))), firstKey...), uint64(len(table)))
		framed := appendFrame(nil, chunk)
		sparse = binary.AppendUvarint(sparse, uint64(len(framed)))
		table = append(table, framed...)
		chunk = chunk[:0]
		nchunks++
	}
	for i, k := range keys {
		start := len(postings)
		var prev uint32
		for j, o := range lists[k] {
			if j == 0 {
				postings = binary.AppendUvarint(postings, uint64(o))
			} else {
				postings = binary.AppendUvarint(postings, uint64(o-prev))
			}
			prev = o
		}
		chunk = append(binary.AppendUvarint(chunk, uint64(len(k))), k...)
		chunk = binary.AppendUvarint(chunk, uint64(start))
		chunk = binary.AppendUvarint(chunk, uint64(len(postings)-start))
		chunk = binary.AppendUvarint(chunk, uint64(len(lists[k])))
		chunk = binary.LittleEndian.AppendUint32(chunk, checksum(postings[start:]))
		if (i+1)%sparseEvery == 0 || i == len(keys)-1 {
			flushChunk(keys[i-i%sparseEvery])
		}
	}
	sparse = append(binary.AppendUvarint(nil, nchunks), sparse...)
	blocks := binary.AppendUvarint(nil, uint64(len(w.blocks)))
	for _, b := range w.blocks {
		blocks = binary.AppendUvarint(binary.AppendUvarint(blocks, uint64(b.size)), uint64(b.count))
	}
	t.keyOff = t.postOff + uint64(len(postings))
	t.sparseOff = t.keyOff + uint64(len(table))
	t.blocksOff = t.sparseOff + uint64(len(sparse))
	meta := append(sparse, blocks...)
	t.metaCRC = checksum(meta)
	for _, b := range [][]byte{postings, table, meta, t.append(nil)} {
		if _, err := w.w.Write(b); err != nil {
			return "", fmt.Errorf("trail: %w", err)
		}
	}
	path := filepath.Join(w.dir, sealedName(t.first, t.last))
	if err := w.w.Flush(); err != nil {
		return "", fmt.Errorf("trail: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return "", fmt.Errorf("trail: %w", err)
	}
	if err := w.f.Close(); err != nil {
		return "", fmt.Errorf("trail: %w", err)
	}
	tmp := w.f.Name()
	w.f = nil
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("trail: %w", err)
	}
	return path, syncDir(w.dir)
}

func sealedName(first, last uint64) string { return fmt.Sprintf("seg-%020d-%020d.trail", first, last) }
func activeName(first uint64) string       { return fmt.Sprintf("active-%020d.trail", first) }

// syncDir makes a directory's entries (a file created, renamed or
// removed) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("trail: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("trail: sync %s: %w", dir, err)
	}
	return nil
}
