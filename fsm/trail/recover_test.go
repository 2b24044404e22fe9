package trail_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm/trail"
)

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	ents, _ := os.ReadDir(from)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTornTail: the active segment cut at every byte of its last block,
// or with garbage after it, opens with exactly its whole blocks, and
// takes the lost events again.
func TestTornTail(t *testing.T) {
	all := makeTrail(20, 10, 50, 1)
	dir := t.TempDir()
	opt := trail.Options{SegmentEvents: 1000, BlockEvents: 16}
	s := open(t, dir, opt)
	appendBatches(t, s, all[:40], rand.New(rand.NewSource(1)), 10)
	size := func() int64 {
		fi, _ := os.Stat(files(t, dir, "active-")[0])
		return fi.Size()
	}
	whole := size()
	if err := s.Append(all[40:45]); err != nil {
		t.Fatal(err)
	}
	end := size()
	s.Close()
	active := filepath.Base(files(t, dir, "active-")[0])
	for cut := whole; cut < end; cut++ {
		d := t.TempDir()
		copyDir(t, dir, d)
		if err := os.Truncate(filepath.Join(d, active), cut); err != nil {
			t.Fatal(err)
		}
		s := open(t, d, opt)
		if seq, h := s.Last(); seq != 40 || h != all[39].Hash {
			t.Fatalf("cut at %d of %d-%d: Last %d", cut, whole, end, seq)
		}
		if (cut-whole)%64 == 0 {
			if err := s.Append(all[40:]); err != nil {
				t.Fatalf("cut at %d: %v", cut, err)
			}
			mustVerify(t, s, 50)
		}
		s.Close()
	}
	for _, garbage := range [][]byte{{0}, bytes.Repeat([]byte{0}, 100), []byte("garbage after the last block"), {0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5}} {
		d := t.TempDir()
		copyDir(t, dir, d)
		f, _ := os.OpenFile(filepath.Join(d, active), os.O_WRONLY|os.O_APPEND, 0)
		f.Write(garbage)
		f.Close()
		s := open(t, d, opt)
		if seq, _ := s.Last(); seq != 45 {
			t.Fatalf("garbage %q: Last %d", garbage, seq)
		}
		mustVerify(t, s, 45)
	}
}

// TestTornFirstWrite: an active segment torn in its first write (header
// and first block) held nothing and goes.
func TestTornFirstWrite(t *testing.T) {
	all := makeTrail(21, 10, 303, 1)
	dir := t.TempDir()
	s := open(t, dir, small)
	appendBatches(t, s, all[:300], rand.New(rand.NewSource(1)), 50)
	if err := s.Append(all[300:]); err != nil {
		t.Fatal(err)
	}
	s.Close()
	active := files(t, dir, "active-")[0]
	fi, _ := os.Stat(active)
	for _, cut := range []int64{0, 5, 19, 20, 27, fi.Size() - 1} {
		d := t.TempDir()
		copyDir(t, dir, d)
		os.Truncate(filepath.Join(d, filepath.Base(active)), cut)
		s := open(t, d, small)
		if seq, _ := s.Last(); seq != 300 {
			t.Fatalf("cut at %d: Last %d", cut, seq)
		}
		if len(files(t, d, "active-")) != 0 {
			t.Fatalf("cut at %d: the empty active segment stayed", cut)
		}
	}
}

// TestSealInterrupted: a seal that renamed its segment but did not remove
// the active one; a Truncate that wrote the active one but did not remove
// the sealed one.
func TestSealInterrupted(t *testing.T) {
	all := makeTrail(22, 10, 600, 1)
	dir := t.TempDir()
	s := open(t, dir, small)
	appendBatches(t, s, all[:299], rand.New(rand.NewSource(1)), 50)
	s.Close()
	keep, keep299 := t.TempDir(), t.TempDir()
	copyDir(t, dir, keep)
	copyDir(t, dir, keep299)
	s = open(t, dir, small)
	if err := s.Append(all[299:300]); err != nil { // seals 1-300
		t.Fatal(err)
	}
	s.Close()
	// The active segment of 299 events plus the last one, as it was
	// before the seal removed it.
	s = open(t, keep, trail.Options{SegmentEvents: 1000, BlockEvents: 16})
	if err := s.Append(all[299:300]); err != nil {
		t.Fatal(err)
	}
	s.Close()
	copyDir(t, keep, dir) // both now: seg-1-300 and active-1
	s = open(t, dir, small)
	if len(files(t, dir, "active-")) != 0 {
		t.Fatal("the sealed events' active segment stayed")
	}
	mustVerify(t, s, 300)
	if err := s.Append(all[300:]); err != nil {
		t.Fatal(err)
	}
	s.Close()

	d := t.TempDir()
	copyDir(t, dir, d)
	seg := files(t, d, "seg-00000000000000000301")[0]
	os.Remove(seg)         // as Truncate(450) would have first
	copyDir(t, keep299, d) // a shorter active segment beside seg-1-300
	s = open(t, d, small)
	if seq, _ := s.Last(); seq != 299 {
		t.Fatalf("Last %d", seq)
	}
	if len(files(t, d, "seg-")) != 0 {
		t.Fatalf("the sealed segment a Truncate replaced stayed: %v", files(t, d, ""))
	}
}

// flipByte flips one byte of a file.
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0x20
	os.WriteFile(path, b, 0o600)
}

func TestCorruptSealed(t *testing.T) {
	all := makeTrail(23, 10, 1000, 1)
	dir := t.TempDir()
	s := open(t, dir, small)
	appendBatches(t, s, all, rand.New(rand.NewSource(1)), 50)
	s.Close()
	segs := files(t, dir, "seg-")

	// The trailer or tables: Open says which file.
	for _, off := range []int64{3, -1, -30, -100} {
		d := t.TempDir()
		copyDir(t, dir, d)
		flipByte(t, filepath.Join(d, filepath.Base(segs[1])), off)
		if _, err := trail.Open(d, small); err == nil || !strings.Contains(err.Error(), filepath.Base(segs[1])) {
			t.Fatalf("flipped byte %d: Open: %v", off, err)
		}
	}

	// A block: Verify finds it, a read of it fails naming the file.
	d := t.TempDir()
	copyDir(t, dir, d)
	flipByte(t, filepath.Join(d, filepath.Base(segs[1])), 200)
	s = open(t, d, small)
	v, err := s.Verify(0)
	if err != nil || v.OK || v.BrokenAt == nil || *v.BrokenAt != 301 || !strings.Contains(v.Reason, "decode") {
		t.Fatalf("verify: %+v %v", v, err)
	}
	if v.Count != 300 {
		t.Fatalf("verified %d before the break", v.Count)
	}
	if _, err := s.Query(trail.Query{After: 300, Limit: 1}); err == nil || !strings.Contains(err.Error(), filepath.Base(segs[1])) {
		t.Fatalf("query of the damaged block: %v", err)
	}
	if v, _ := s.Verify(301 + 16); !v.OK {
		t.Fatalf("verify above the damaged block: %+v", v)
	}
}

func TestVerifyRemovedSegment(t *testing.T) {
	all := makeTrail(24, 10, 1000, 1)
	dir := t.TempDir()
	s := open(t, dir, small)
	appendBatches(t, s, all, rand.New(rand.NewSource(1)), 50)
	s.Close()
	os.Remove(files(t, dir, "seg-")[1])
	s = open(t, dir, small)
	v, _ := s.Verify(0)
	if v.OK || v.BrokenAt == nil || *v.BrokenAt != 601 || !strings.Contains(v.Reason, "follows 300") {
		t.Fatalf("verify: %+v", v)
	}
	if v, _ := s.Verify(601); !v.OK || v.Count != 400 {
		t.Fatalf("verify from 601: %+v", v)
	}
}

func exportAll(t testing.TB, s *trail.Store, from, to uint64) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.Export(&b, from, to); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestExportImport(t *testing.T) {
	all := makeTrail(25, 40, 2000, 1)
	a := open(t, t.TempDir(), small)
	appendBatches(t, a, all, rand.New(rand.NewSource(1)), 70)

	bdir := t.TempDir()
	b := open(t, bdir, small)
	if n, err := b.Import(bytes.NewReader(exportAll(t, a, 0, ^uint64(0)))); err != nil || n != 2000 {
		t.Fatalf("import: %d, %v", n, err)
	}
	mustVerify(t, b, 2000)
	got, _ := b.Query(trail.Query{Subject: all[7].Subject})
	sameEvents(t, "imported", got, naive(all, 0, trail.Query{Subject: all[7].Subject}))

	// In pieces, cut inside blocks, onto a store that has the start.
	c := open(t, t.TempDir(), small)
	for _, r := range [][2]uint64{{1, 5}, {6, 333}, {334, 1001}, {1002, 2000}} {
		if n, err := c.Import(bytes.NewReader(exportAll(t, a, r[0], r[1]))); err != nil || n != int(r[1]-r[0]+1) {
			t.Fatalf("import %v: %d, %v", r, n, err)
		}
	}
	mustVerify(t, c, 2000)
	got, _ = c.Query(trail.Query{Newest: true})
	sameEvents(t, "pieces", got, naive(all, 0, trail.Query{Newest: true}))

	// Refused: a stream that does not follow.
	if _, err := c.Import(bytes.NewReader(exportAll(t, a, 1500, 2000))); err == nil {
		t.Fatal("imported events it has")
	}
	if err := a.Export(io.Discard, 2001, 3000); err == nil {
		t.Fatal("exported events it lacks")
	}
}

// frames splits a stream into its frames' offsets.
func frames(stream []byte) []int {
	var offs []int
	for off := 8; ; {
		n := int(binary.LittleEndian.Uint32(stream[off:]))
		if n == 0 {
			return offs
		}
		offs = append(offs, off)
		off += 8 + n
	}
}

// TestImportTampered: an event altered (and its frame's CRC made good) or
// a stream cut short: what verifies before is kept, nothing after.
func TestImportTampered(t *testing.T) {
	all := makeTrail(26, 40, 1000, 1)
	a := open(t, t.TempDir(), small)
	appendBatches(t, a, all, rand.New(rand.NewSource(1)), 70)
	stream := exportAll(t, a, 0, ^uint64(0))
	offs := frames(stream)

	// The 5th frame: flip a byte of its second event's hash.
	bad := append([]byte(nil), stream...)
	f := offs[4]
	n := int(binary.LittleEndian.Uint32(bad[f:]))
	payload := bad[f+8 : f+8+n]
	pos := bytes.Index(payload, decodeHex(all[0].Hash)) // not there: find by the frame's first event
	_ = pos
	evs, err := trail.DecodeBlock(payload)
	if err != nil {
		t.Fatal(err)
	}
	h := bytes.Index(payload, decodeHex(evs[1].Hash))
	payload[h] ^= 1
	binary.LittleEndian.PutUint32(bad[f+4:], crc32c(payload))
	b := open(t, t.TempDir(), small)
	got, err := b.Import(bytes.NewReader(bad))
	if err == nil || !strings.Contains(err.Error(), "hash") {
		t.Fatalf("tampered stream: %v", err)
	}
	if seq, _ := b.Last(); got != int(evs[1].Seq-1) || seq != evs[1].Seq-1 {
		t.Fatalf("kept %d events, Last %d; want %d", got, seq, evs[1].Seq-1)
	}
	mustVerify(t, b, evs[1].Seq-1)

	// Cut short in the middle of the 10th frame.
	c := open(t, t.TempDir(), small)
	got, err = c.Import(bytes.NewReader(stream[:offs[9]+20]))
	if err == nil {
		t.Fatal("a cut stream imported")
	}
	first9, _ := trail.DecodeBlock(stream[offs[9]+8 : offs[10]])
	if seq, _ := c.Last(); got != int(first9[0].Seq-1) || seq != first9[0].Seq-1 {
		t.Fatalf("kept %d events of a cut stream, Last %d", got, seq)
	}
	if n, err := c.Import(bytes.NewReader(exportAll(t, a, first9[0].Seq, 1000))); err != nil || got+n != 1000 {
		t.Fatalf("the rest: %d, %v", n, err)
	}
	mustVerify(t, c, 1000)
}
