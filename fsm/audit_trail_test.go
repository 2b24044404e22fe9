package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// newAt is a harness whose state runs format (raised through the log as
// a cluster raises it), its background mover held still: the tests move
// by hand (moveAll), so what is staged and what is moved is theirs.
func newAt(t *testing.T, format Format) *harness {
	t.Helper()
	h := newHarness(t)
	h.f.tr.manual.Store(true)
	if format > FormatBase {
		h.mustApply(TypeSetStateFormat, SetStateFormat{Format: format, Version: FormatRelease(format)})
	}
	return h
}

// auditCmd is the stamped event number i: its subject, type, client and
// organization cycle at different periods, so filters select a mix.
func auditCmd(i int, at time.Time) Command {
	types := []string{EventSignin, EventToken, EventLogout, EventAdmin, EventKey}
	return NewAuditEvent(Audit{Type: types[i%len(types)], Actor: ActorPerson, Subject: fmt.Sprintf("user-%d", i%37),
		ClientID: fmt.Sprintf("app-%d", i%5), OrgID: fmt.Sprintf("org-%d", i%3), Node: "n1", IP: "192.0.2.1", Time: at,
		Detail: map[string]string{"n": fmt.Sprint(i)}})
}

// record applies n events numbered from start, batch entries a raft
// batch, event i at t0 plus i minutes.
func (h *harness) record(start, n, batch int) {
	h.t.Helper()
	for i := 0; i < n; {
		m := min(batch, n-i)
		logs := make([]*raft.Log, m)
		for j := range logs {
			h.index++
			k := start + i + j
			logs[j] = &raft.Log{Index: h.index, Type: raft.LogCommand, Data: auditCmd(k, t0.Add(time.Duration(k)*time.Minute)).Encode()}
		}
		for _, r := range h.f.ApplyBatch(logs) {
			if res, ok := r.(Result); ok && res.Err != nil {
				h.t.Fatal(res.Err)
			}
		}
		i += m
	}
}

func (h *harness) noop() { h.t.Helper(); h.mustApply(TypeNoop, nil) }

// moveAll runs the mover by hand until it has nothing more to move.
func moveAll(t *testing.T, f *FSM) {
	t.Helper()
	for {
		more, err := f.moveOnce()
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			return
		}
	}
}

// settle moves everything and lets applies trim the staging empty.
func (h *harness) settle() {
	h.t.Helper()
	for range 200 {
		moveAll(h.t, h.f)
		h.noop()
		if stagedCount(h.t, h.f) == 0 {
			return
		}
	}
	h.t.Fatalf("the staging does not drain: %d left", stagedCount(h.t, h.f))
}

func stagedCount(t *testing.T, f *FSM) int {
	t.Helper()
	n := 0
	if err := f.view(func(tx *bolt.Tx) error { n = tx.Bucket(bucketAudit).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func trailLast(f *FSM) uint64 { l, _ := f.tr.store.Last(); return l }

// answers are the answers of a fixed set of queries, and the whole trail
// paged through, as text: two states that answer alike give equal text.
func answers(t *testing.T, f *FSM) string {
	t.Helper()
	st := f.State()
	v, err := st.VerifyAudit()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "verify ok=%v count=%d first=%d last=%d head=%s\n", v.OK, v.Count, v.FirstSeq, v.LastSeq, v.HeadHash)
	line := func(q AuditQuery, es []Event) {
		fmt.Fprintf(&b, "%+v:", q)
		for _, e := range es {
			fmt.Fprintf(&b, " %d/%s", e.Seq, e.Hash[:8])
		}
		b.WriteString("\n")
	}
	last := v.LastSeq
	qs := []AuditQuery{{Limit: 10}, {After: 10, Limit: 25}, {Newest: true, Limit: 30}, {Newest: true, After: last / 2, Limit: 40},
		{Subject: "user-3", Limit: 20}, {Subject: "user-3", Newest: true, Limit: 5}, {Type: EventToken, ClientID: "app-2", Limit: 50},
		{OrgID: "org-1", After: last / 3, Limit: 33}, {After: last - 3}, {Newest: true, After: last - 2, Limit: 4},
		{Subject: "user-5", OrgID: "org-2", Newest: true, After: last - 100, Limit: 10}, {After: last}}
	for _, q := range qs {
		es, err := st.AuditEvents(q)
		if err != nil {
			t.Fatal(err)
		}
		line(q, es)
	}
	var after uint64
	n := 0
	h := 0
	for {
		es, err := st.AuditEvents(AuditQuery{After: after, Limit: MaxAuditPage})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			if e.Seq != after+1 && n > 0 {
				t.Fatalf("paging: %d after %d", e.Seq, after)
			}
			after = e.Seq
			n++
			h ^= int(e.Hash[0]) << (n % 8)
		}
	}
	fmt.Fprintf(&b, "paged %d to %d (%x)\n", n, after, h)
	return b.String()
}

// TestTrailFormat2KeepsTheOldLayout: a mixed cluster runs format 2, and
// its state applies as before: events and index in bbolt, retention by
// event, nothing moved to the trail; at the raise to 3 the index goes and
// every answer stays.
func TestTrailFormat2KeepsTheOldLayout(t *testing.T) {
	h := newAt(t, FormatGate)
	h.record(0, 300, 37)
	moveAll(t, h.f)
	if trailLast(h.f) != 0 {
		t.Fatalf("format 2 moved events to the trail: %d", trailLast(h.f))
	}
	var idx int
	h.f.view(func(tx *bolt.Tx) error { idx = tx.Bucket(bucketAuditIdx).Stats().KeyN; return nil })
	if idx == 0 {
		t.Fatal("format 2 wrote no index entries")
	}
	// Retention by event time, as before: events 0-9 are before t0+10m.
	st := h.mustApply(TypeReap, Reap{AuditBefore: t0.Add(10 * time.Minute)}).Value.(ReapStats)
	if st.AuditEvents != 10 {
		t.Fatalf("format 2 pruned %d, want 10 by their times", st.AuditEvents)
	}
	before := answers(t, h.f)
	h.mustApply(TypeSetStateFormat, SetStateFormat{Format: FormatTrail, Version: "0.5.0"})
	h.f.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketAuditIdx) != nil {
			t.Error("the index is still there at format 3")
		}
		if got := auditFloor(tx); got != 11 {
			t.Errorf("floor %d after the migration, want 11 (the oldest kept)", got)
		}
		return nil
	})
	if got := answers(t, h.f); got != before {
		t.Fatalf("answers changed at the raise:\n%s\nwant\n%s", got, before)
	}
	h.settle()
	if got := answers(t, h.f); got != before {
		t.Fatalf("answers changed once moved:\n%s\nwant\n%s", got, before)
	}
	// Reopened, the bucket is not made again.
	path := h.f.path
	h.f.Close()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketAuditIdx) != nil {
			t.Error("Open made the index bucket again")
		}
		return nil
	})
	if got := answers(t, f); got != before {
		t.Fatalf("answers changed after a reopen:\n%s\nwant\n%s", got, before)
	}
}

// TestTrailMigration: 100,000 events written at format 2; after the
// raise the audit bucket is the staging, which the mover drains in
// bounded batches; queries and verify answer the same before the raise,
// right after it, and once drained; the bucket ends empty.
func TestTrailMigration(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	h := newAt(t, FormatGate)
	h.record(0, n, 1000)
	before := answers(t, h.f)
	if !strings.Contains(before, fmt.Sprintf("verify ok=true count=%d", n)) {
		t.Fatalf("before: %s", before[:200])
	}
	h.mustApply(TypeSetStateFormat, SetStateFormat{Format: FormatTrail, Version: "0.5.0"})
	if got := answers(t, h.f); got != before {
		t.Fatalf("answers changed at the raise:\n%s\nwant\n%s", got, before)
	}
	var chunks int
	h.f.view(func(tx *bolt.Tx) error { chunks = tx.Bucket(bucketAuditChunks).Stats().KeyN; return nil })
	if chunks != n/trailChunk {
		t.Fatalf("%d chunk times recorded, want %d", chunks, n/trailChunk)
	}
	// Half way: the trail holds some, the staging the rest (and some of
	// what the trail holds, not trimmed yet).
	if _, err := h.f.moveOnce(); err != nil {
		t.Fatal(err)
	}
	if got := answers(t, h.f); got != before {
		t.Fatalf("answers changed half way:\n%s\nwant\n%s", got, before)
	}
	h.settle()
	if got := answers(t, h.f); got != before {
		t.Fatalf("answers changed once drained:\n%s\nwant\n%s", got, before)
	}
	if trailLast(h.f) != uint64(n) || stagedCount(t, h.f) != 0 {
		t.Fatalf("trail last %d, staged %d", trailLast(h.f), stagedCount(t, h.f))
	}
}

// TestTrailCrashBetweenAppendAndTrim: the mover appended, the apply that
// would delete the staged copies never ran (the node stopped): the
// reopened state sees staged events the trail already holds, answers the
// same, and a later apply deletes them.
func TestTrailCrashBetweenAppendAndTrim(t *testing.T) {
	h := newAt(t, FormatTrail)
	h.record(0, 500, 50)
	moveAll(t, h.f)
	want := answers(t, h.f)
	if trailLast(h.f) != 500 || stagedCount(t, h.f) != 500 {
		t.Fatalf("trail %d, staged %d", trailLast(h.f), stagedCount(t, h.f))
	}
	path := h.f.path
	h.f.Close()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	f.tr.manual.Store(true)
	h.f = f
	if trailLast(f) != 500 || stagedCount(t, f) != 500 {
		t.Fatalf("reopened: trail %d, staged %d", trailLast(f), stagedCount(t, f))
	}
	if got := answers(t, f); got != want {
		t.Fatalf("reopened:\n%s\nwant\n%s", got, want)
	}
	h.noop()
	if n := stagedCount(t, f); n != 0 {
		t.Fatalf("the next apply left %d staged events the trail holds", n)
	}
	if got := answers(t, f); got != want {
		t.Fatalf("trimmed:\n%s\nwant\n%s", got, want)
	}
	h.record(500, 10, 3)
	h.settle()
	if v, _ := f.State().VerifyAudit(); !v.OK || v.LastSeq != 510 || v.Count != 510 {
		t.Fatalf("after more: %+v", v)
	}
}

// TestTrailNeverHoldsUncommitted: a batch that rolls back (a format
// this build does not apply) recorded events in its transaction only:
// the mover never sees them.
func TestTrailNeverHoldsUncommitted(t *testing.T) {
	h := newAt(t, FormatTrail)
	h.record(0, 5, 5)
	logs := []*raft.Log{
		{Index: h.index + 1, Type: raft.LogCommand, Data: auditCmd(5, t0).Encode()},
		{Index: h.index + 2, Type: raft.LogCommand, Data: MustCommand(TypeSetStateFormat, SetStateFormat{Format: FormatTrail + 1, Version: "9.0.0"}).Encode()},
	}
	h.f.ApplyBatch(logs)
	moveAll(t, h.f)
	if trailLast(h.f) != 5 {
		t.Fatalf("the trail holds %d, want the 5 committed", trailLast(h.f))
	}
}

// snapshotBytes is a raft snapshot of f (Snapshot, Persist).
func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return s.Bytes()
}

func restoreBytes(t *testing.T, f *FSM, b []byte) {
	t.Helper()
	if err := f.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
}

// TestTrailAheadAfterRestore: a restore of an older snapshot leaves the
// trail ahead of the state: what is beyond the head is cut and the chain
// goes on from there with the new events; a snapshot of another history
// makes the trail forget its own, and the stream of that old history is
// refused.
func TestTrailAheadAfterRestore(t *testing.T) {
	h := newAt(t, FormatTrail)
	h.record(0, 300, 50)
	h.settle()
	old := snapshotBytes(t, h.f)
	h.record(300, 200, 50)
	moveAll(t, h.f)
	if trailLast(h.f) != 500 {
		t.Fatalf("trail %d", trailLast(h.f))
	}
	var mine bytes.Buffer
	if err := h.f.ExportTrail(&mine, 1, 500); err != nil {
		t.Fatal(err)
	}
	restoreBytes(t, h.f, old)
	h.index = h.f.Applied()
	if trailLast(h.f) != 300 {
		t.Fatalf("after the restore of the older snapshot the trail ends at %d, want 300", trailLast(h.f))
	}
	if v, _ := h.f.State().VerifyAudit(); !v.OK || v.LastSeq != 300 {
		t.Fatalf("verify after the restore: %+v", v)
	}
	h.record(1000, 50, 7) // other events at 301-350
	h.settle()
	v, _ := h.f.State().VerifyAudit()
	if !v.OK || v.LastSeq != 350 || v.Count != 350 {
		t.Fatalf("verify after new events: %+v", v)
	}
	if es := h.events(AuditQuery{After: 300, Limit: 1}); len(es) != 1 || es[0].Detail["n"] != "1000" {
		t.Fatalf("event 301: %+v", es)
	}

	// Another history: a state whose events differ, settled (its staging
	// is empty), restored here. The trail is forgotten; its gap is all.
	o := newAt(t, FormatTrail)
	o.record(5000, 400, 100)
	o.settle()
	restoreBytes(t, h.f, snapshotBytes(t, o.f))
	if trailLast(h.f) != 0 {
		t.Fatalf("the trail of another history kept %d", trailLast(h.f))
	}
	from, to, ok := h.f.TrailGap()
	if !ok || from != 1 || to != 400 {
		t.Fatalf("gap %d-%d %v, want 1-400", from, to, ok)
	}
	if v, _ := h.f.State().VerifyAudit(); v.OK || v.BrokenAt == nil || *v.BrokenAt != 1 {
		t.Fatalf("verify while catching up: %+v", v)
	}
	// The old history's stream is refused, and nothing of it is kept.
	if err := h.f.ImportTrail(bytes.NewReader(mine.Bytes())); err == nil {
		t.Fatal("a stream of another history was taken")
	}
	if trailLast(h.f) != 0 {
		t.Fatalf("a refused stream left %d events", trailLast(h.f))
	}
	var theirs bytes.Buffer
	if err := o.f.ExportTrail(&theirs, from, to); err != nil {
		t.Fatal(err)
	}
	if err := h.f.ImportTrail(&theirs); err != nil {
		t.Fatal(err)
	}
	if got, want := answers(t, h.f), answers(t, o.f); got != want {
		t.Fatalf("after the catch-up:\n%s\nwant\n%s", got, want)
	}
}

// TestTrailGapCatchUp: A holds 50,000 events, mostly moved out; its
// snapshot restored into a fresh B carries only the staging, so B lacks
// the rest (TrailGap) until it imports them from A; then a fresh C, from
// a later snapshot of A, fetches its gap from B, whose trail ends below
// it: B serves the rest from its staging. All three verify with the same
// head and answer the same queries.
func TestTrailGapCatchUp(t *testing.T) {
	a := newAt(t, FormatTrail)
	a.record(0, 40_000, 1000)
	a.settle()
	a.record(40_000, 10_000, 1000)
	for range 2 { // some moved and trimmed, the newest staged only
		if _, err := a.f.moveOnce(); err != nil {
			t.Fatal(err)
		}
		a.noop()
	}
	snap := snapshotBytes(t, a.f)

	b := newHarness(t)
	b.f.tr.manual.Store(true)
	restoreBytes(t, b.f, snap)
	b.index = b.f.Applied()
	from, to, ok := b.f.TrailGap()
	if !ok || from != 1 || to < 40_000 {
		t.Fatalf("B's gap %d-%d %v", from, to, ok)
	}
	if more, err := b.f.moveOnce(); err != nil || more || trailLast(b.f) != 0 {
		t.Fatalf("the mover moved while catching up: %v %v, trail %d", more, err, trailLast(b.f))
	}
	var stream bytes.Buffer
	if err := a.f.ExportTrail(&stream, from, to); err != nil {
		t.Fatal(err)
	}
	t.Logf("a stream of %d events: %d bytes", to-from+1, stream.Len())
	if err := b.f.ImportTrail(&stream); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := b.f.TrailGap(); ok {
		t.Fatal("B still has a gap")
	}
	want := answers(t, a.f)
	if got := answers(t, b.f); got != want {
		t.Fatalf("B after the import:\n%s\nwant\n%s", got, want)
	}
	if !strings.HasPrefix(want, "verify ok=true count=50000") {
		t.Fatalf("A: %s", want[:100])
	}

	a.settle()
	c := newHarness(t)
	c.f.tr.manual.Store(true)
	restoreBytes(t, c.f, snapshotBytes(t, a.f))
	from, to, ok = c.f.TrailGap()
	if !ok || to <= trailLast(b.f) {
		t.Fatalf("C's gap %d-%d %v (B's trail ends at %d)", from, to, ok, trailLast(b.f))
	}
	stream.Reset()
	if err := b.f.ExportTrail(&stream, from, to); err != nil {
		t.Fatal(err)
	}
	if err := c.f.ImportTrail(&stream); err != nil {
		t.Fatal(err)
	}
	c.index = c.f.Applied()
	if got := answers(t, c.f); got != answers(t, a.f) {
		t.Fatalf("C:\n%s\nwant\n%s", got, answers(t, a.f))
	}
	b.settle()
	c.settle()
	for _, f := range []*FSM{b.f, c.f} {
		if got := answers(t, f); got != answers(t, a.f) {
			t.Fatalf("settled:\n%s\nwant\n%s", got, answers(t, a.f))
		}
	}
}

// TestTrailImportRefusesAlteredStreams: a stream with a byte changed,
// one cut short, one that stops before the gap's end, one for another
// range: each is refused and the trail is as it was.
func TestTrailImportRefusesAlteredStreams(t *testing.T) {
	a := newAt(t, FormatTrail)
	a.record(0, 2000, 500)
	a.settle()
	a.record(2000, 100, 50)
	b := newHarness(t)
	b.f.tr.manual.Store(true)
	restoreBytes(t, b.f, snapshotBytes(t, a.f))
	from, to, ok := b.f.TrailGap()
	if !ok || from != 1 || to != 2000 {
		t.Fatalf("gap %d-%d %v", from, to, ok)
	}
	var good bytes.Buffer
	if err := a.f.ExportTrail(&good, from, to); err != nil {
		t.Fatal(err)
	}
	var short bytes.Buffer
	if err := a.f.ExportTrail(&short, from, to-10); err != nil {
		t.Fatal(err)
	}
	var shifted bytes.Buffer
	if err := a.f.ExportTrail(&shifted, from+1, to); err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good.Bytes())
	flipped[len(flipped)/2] ^= 0x40
	cases := map[string][]byte{
		"a byte changed": flipped,
		"cut short":      good.Bytes()[:good.Len()-30],
		"ends early":     short.Bytes(),
		"begins late":    shifted.Bytes(),
		"not a stream":   []byte("hello"),
	}
	for name, s := range cases {
		if err := b.f.ImportTrail(bytes.NewReader(s)); err == nil {
			t.Errorf("%s: taken", name)
		}
		if f, tt, ok := b.f.TrailGap(); trailLast(b.f) != 0 || !ok || f != from || tt != to {
			t.Errorf("%s: trail %d, gap %d-%d %v after the refusal", name, trailLast(b.f), f, tt, ok)
		}
	}
	if err := b.f.ImportTrail(bytes.NewReader(good.Bytes())); err != nil {
		t.Fatal(err)
	}
	if err := b.f.ImportTrail(bytes.NewReader(good.Bytes())); err == nil {
		t.Fatal("a second import with nothing lacking was taken")
	}
}

// TestTrailBackupRoundTrip: a backup (WriteTo) puts the trail's events
// back into the audit bucket: one bbolt file that CheckFile accepts, and
// whose restore on a fresh node answers as the source, its mover moving
// them out again. A raft snapshot of the same state carries only the
// staging.
func TestTrailBackupRoundTrip(t *testing.T) {
	a := newAt(t, FormatTrail)
	a.record(0, 9000, 1000)
	a.settle()
	a.record(9000, 500, 100) // staged only
	var backup bytes.Buffer
	if _, err := a.f.WriteTo(&backup); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(path); err != nil {
		t.Fatal(err)
	}
	snap := snapshotBytes(t, a.f)
	t.Logf("backup %d bytes, raft snapshot %d bytes", backup.Len(), len(snap))
	if len(snap) >= backup.Len()/2 {
		t.Errorf("the snapshot (%d bytes) carries the trail (backup %d)", len(snap), backup.Len())
	}
	b := newHarness(t)
	b.f.tr.manual.Store(true)
	restoreBytes(t, b.f, backup.Bytes())
	b.index = b.f.Applied()
	if _, _, ok := b.f.TrailGap(); ok {
		t.Fatal("a restored backup lacks events")
	}
	if n := stagedCount(t, b.f); n != 9500 {
		t.Fatalf("the backup staged %d events, want 9500", n)
	}
	want := answers(t, a.f)
	if got := answers(t, b.f); got != want {
		t.Fatalf("restored backup:\n%s\nwant\n%s", got, want)
	}
	b.settle()
	if got := answers(t, b.f); got != want {
		t.Fatalf("restored backup, moved:\n%s\nwant\n%s", got, want)
	}
}

// TestTrailRetentionByChunks: two replicas of one log, one that moved
// its events out and one that did not, prune alike: the floor moves over
// whole chunks whose last event is older than AuditBefore, both verify
// from it with the same head and answer the same, and the trail drops
// what is below it.
func TestTrailRetentionByChunks(t *testing.T) {
	a, b := newAt(t, FormatTrail), newAt(t, FormatTrail)
	n := 3*trailChunk + 100
	for _, h := range []*harness{a, b} {
		h.record(0, n, 1000)
	}
	a.settle()
	// Event i is at t0+i minutes; chunk 2 ends at seq 8192 (event 8191).
	cut := t0.Add(8191*time.Minute + time.Second)
	var got [2]ReapStats
	for i, h := range []*harness{a, b} {
		got[i] = h.mustApply(TypeReap, Reap{AuditBefore: cut}).Value.(ReapStats)
	}
	if got[0] != got[1] || got[0].AuditEvents != 2*trailChunk {
		t.Fatalf("reap stats %+v and %+v, want %d events on both", got[0], got[1], 2*trailChunk)
	}
	for _, h := range []*harness{a, b} {
		h.f.view(func(tx *bolt.Tx) error {
			if f := auditFloor(tx); f != 2*trailChunk+1 {
				t.Errorf("floor %d, want %d", f, 2*trailChunk+1)
			}
			return nil
		})
	}
	wa, wb := answers(t, a.f), answers(t, b.f)
	if wa != wb {
		t.Fatalf("the replicas answer apart:\n%s\n%s", wa, wb)
	}
	if !strings.HasPrefix(wa, fmt.Sprintf("verify ok=true count=%d first=%d", n-2*trailChunk, 2*trailChunk+1)) {
		t.Fatalf("after the reap: %s", wa[:120])
	}
	moveAll(t, a.f)
	if first := a.f.tr.store.First(); first != 2*trailChunk+1 {
		t.Fatalf("the trail begins at %d after the floor moved", first)
	}
	b.settle()
	if got := answers(t, b.f); got != wa {
		t.Fatalf("b settled:\n%s\nwant\n%s", got, wa)
	}
	// The last chunk is not whole: a later cut moves the floor no further.
	if st := a.mustApply(TypeReap, Reap{AuditBefore: t0.Add(time.Duration(n) * time.Hour)}).Value.(ReapStats); st.AuditEvents != trailChunk {
		t.Fatalf("the next reap pruned %d, want the one whole chunk left", st.AuditEvents)
	}
	a.f.view(func(tx *bolt.Tx) error {
		if f := auditFloor(tx); f != 3*trailChunk+1 {
			t.Errorf("floor %d", f)
		}
		return nil
	})
	if v, _ := a.f.State().VerifyAudit(); !v.OK || v.Count != 100 {
		t.Fatalf("verify: %+v", v)
	}
}

// TestTrailQueryMergeMatchesTheOldLayout: random events, batches and
// moves (the boundary between trail and staging anywhere, copies not yet
// trimmed), answered against a twin of format 2 given the same events:
// every query answers as the bbolt layout does.
func TestTrailQueryMergeMatchesTheOldLayout(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	h, twin := newAt(t, FormatTrail), newAt(t, FormatGate)
	k := 0
	for round := range 60 {
		n := 1 + r.Intn(120)
		for _, x := range []*harness{h, twin} {
			x.record(k, n, 1+r.Intn(40))
		}
		k += n
		switch r.Intn(4) {
		case 0:
			moveAll(t, h.f)
		case 1:
			if _, err := h.f.moveOnce(); err != nil {
				t.Fatal(err)
			}
			h.noop()
			twin.noop()
		}
		if round%5 != 4 {
			continue
		}
		last := uint64(k)
		everything := all(t, twin.f)
		for range 200 {
			q := AuditQuery{Limit: 1 + r.Intn(60), Newest: r.Intn(2) == 0}
			if r.Intn(3) > 0 {
				q.After = uint64(r.Intn(k + 2))
			}
			if r.Intn(4) == 0 { // around the boundary
				q.After = trailLast(h.f) + uint64(r.Intn(3)) - 1
			}
			switch r.Intn(5) {
			case 0:
				q.Subject = fmt.Sprintf("user-%d", r.Intn(40))
			case 1:
				q.Type = []string{EventSignin, EventToken, EventLogout, EventAdmin, EventKey}[r.Intn(5)]
			case 2:
				q.ClientID, q.OrgID = fmt.Sprintf("app-%d", r.Intn(5)), fmt.Sprintf("org-%d", r.Intn(3))
			}
			got, want := h.events(q), twin.events(q)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, %+v (trail to %d of %d): got %d events, want %d", round, q, trailLast(h.f), last, len(got), len(want))
			}
			if naive := naiveQuery(everything, q); !reflect.DeepEqual(got, naive) {
				t.Fatalf("round %d, %+v: got %d events, the naive model %d", round, q, len(got), len(naive))
			}
		}
		v, _ := h.f.State().VerifyAudit()
		w, _ := twin.f.State().VerifyAudit()
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("verify %+v, want %+v", v, w)
		}
	}
}

// all is every event f holds, paged through in ascending seq.
func all(t *testing.T, f *FSM) []Event {
	t.Helper()
	var out []Event
	for {
		var after uint64
		if len(out) > 0 {
			after = out[len(out)-1].Seq
		}
		es, err := f.State().AuditEvents(AuditQuery{After: after, Limit: MaxAuditPage})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			return out
		}
		out = append(out, es...)
	}
}

// naiveQuery answers q over every event by filtering the list.
func naiveQuery(evs []Event, q AuditQuery) []Event {
	var out []Event
	ok := func(e *Event) bool {
		return (q.Type == "" || e.Type == q.Type) && (q.Subject == "" || e.Subject == q.Subject) &&
			(q.ClientID == "" || e.ClientID == q.ClientID) && (q.OrgID == "" || e.OrgID == q.OrgID)
	}
	if q.Newest {
		for i := len(evs) - 1; i >= 0 && len(out) < q.Limit; i-- {
			if (q.After == 0 || evs[i].Seq < q.After) && ok(&evs[i]) {
				out = append(out, evs[i])
			}
		}
		return out
	}
	for i := range evs {
		if len(out) < q.Limit && evs[i].Seq > q.After && ok(&evs[i]) {
			out = append(out, evs[i])
		}
	}
	return out
}

// TestTrailTamperedSegmentIsNamed: a trail file altered on disk makes
// verify fail, naming a seq.
func TestTrailTamperedSegmentIsNamed(t *testing.T) {
	h := newAt(t, FormatTrail)
	h.record(0, 300, 100)
	h.settle()
	path := h.f.path
	h.f.Close()
	ents, _ := os.ReadDir(trailDir(path))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "active-") {
			p := filepath.Join(trailDir(path), e.Name())
			b, _ := os.ReadFile(p)
			b[len(b)-5] ^= 1
			os.WriteFile(p, b, 0o600)
		}
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The torn (altered) last block is cut at Open: the trail is
	// behind its staging, which was trimmed, so the events are missing.
	v, err := f.State().VerifyAudit()
	if err != nil {
		t.Fatal(err)
	}
	if v.OK || v.BrokenAt == nil {
		t.Fatalf("verify of an altered trail: %+v", v)
	}
}

// TestTrailSnapshotSize: the raft snapshot of a state of N events at
// format 2 (events and index in bbolt) and at format 3 once moved out,
// with events drawn like a busy site's (people, sessions, addresses);
// -v logs the figures.
func TestTrailSnapshotSize(t *testing.T) {
	n := 20_000
	r := rand.New(rand.NewSource(3))
	hexOf := func(k int) string {
		b := make([]byte, k)
		r.Read(b)
		return fmt.Sprintf("%x", b)
	}
	people := make([]string, 5000)
	sids := make([]string, len(people))
	ips := make([]string, len(people))
	for i := range people {
		people[i] = hexOf(4) + "-" + hexOf(2) + "-4" + hexOf(2)[1:] + "-8" + hexOf(2)[1:] + "-" + hexOf(6)
		sids[i] = hexOf(22)
		ips[i] = fmt.Sprintf("%d.%d.%d.%d", 1+r.Intn(223), r.Intn(256), r.Intn(256), 1+r.Intn(254))
	}
	types := []string{EventSignin, EventToken, EventToken, EventLogout, EventRevocation, EventAdmin}
	cmds := make([]Command, n)
	at := t0
	for i := range cmds {
		p := r.Intn(len(people))
		at = at.Add(time.Duration(r.Intn(5000)) * time.Millisecond)
		a := Audit{Type: types[r.Intn(len(types))], Actor: ActorPerson, Subject: people[p], SID: sids[p], IP: ips[p],
			ClientID: fmt.Sprintf("app-%d", r.Intn(20)), OrgID: fmt.Sprintf("org-%d", p%100), Node: fmt.Sprintf("n%d", 1+r.Intn(3)), Time: at}
		if a.Type == EventAdmin {
			a.Actor, a.Detail = ActorAdmin, map[string]string{"action": "POST /clients", "target": hexOf(16)}
		}
		cmds[i] = NewAuditEvent(a)
	}
	old, now := newAt(t, FormatGate), newAt(t, FormatTrail)
	for _, h := range []*harness{old, now} {
		for i := 0; i < n; i += 1000 {
			logs := make([]*raft.Log, 1000)
			for j := range logs {
				h.index++
				logs[j] = &raft.Log{Index: h.index, Type: raft.LogCommand, Data: cmds[i+j].Encode()}
			}
			h.f.ApplyBatch(logs)
		}
	}
	now.settle()
	inUse := func(f *FSM) int {
		n := 0
		f.view(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{bucketAudit, bucketAuditIdx} {
				if bk := tx.Bucket(b); bk != nil {
					st := bk.Stats()
					n += st.LeafInuse + st.BranchInuse + st.InlineBucketInuse
				}
			}
			return nil
		})
		return n
	}
	a, b := len(snapshotBytes(t, old.f)), len(snapshotBytes(t, now.f))
	t.Logf("%d events: format 2: snapshot %d bytes, audit and audit_index in use %d bytes (%d an event); "+
		"format 3: snapshot %d bytes, audit in use %d bytes, trail %d bytes (%d an event)",
		n, a, inUse(old.f), inUse(old.f)/n, b, inUse(now.f), now.f.trailBytes(), now.f.trailBytes()/n)
	if b > a/4 {
		t.Errorf("the format-3 snapshot is %d bytes, format 2's %d", b, a)
	}
}

var _ = binary.BigEndian
var _ = errors.New

// TestTrailReadersSeeOneTrailWhileTheMoverRuns: the background mover
// moves and the applies trim while readers page and verify: every
// answer is whole (consecutive seqs from 1, each chained onto the one
// before) and every verify holds.
func TestTrailReadersSeeOneTrailWhileTheMoverRuns(t *testing.T) {
	h := newAt(t, FormatTrail)
	h.f.tr.manual.Store(false)
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, err := h.f.State().VerifyAudit()
			if err != nil || !v.OK {
				errs <- fmt.Errorf("verify: %+v %v", v, err)
				return
			}
			var after uint64
			prev := ""
			for {
				es, err := h.f.State().AuditEvents(AuditQuery{After: after, Limit: 97})
				if err != nil {
					errs <- err
					return
				}
				if len(es) == 0 {
					break
				}
				for _, e := range es {
					if e.Seq != after+1 || (prev != "" && e.PrevHash != prev) {
						errs <- fmt.Errorf("event %d after %d", e.Seq, after)
						return
					}
					after, prev = e.Seq, e.Hash
				}
			}
			es, err := h.f.State().AuditEvents(AuditQuery{Newest: true, Limit: 50})
			if err != nil {
				errs <- err
				return
			}
			for i := 1; i < len(es); i++ {
				if es[i].Seq != es[i-1].Seq-1 {
					errs <- fmt.Errorf("newest: %d after %d", es[i].Seq, es[i-1].Seq)
					return
				}
			}
		}
	}()
	for i := range 40 {
		h.record(i*50, 50, 1+i%7)
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for trailLast(h.f) != 2000 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if trailLast(h.f) != 2000 {
		t.Fatalf("the background mover moved %d of 2000", trailLast(h.f))
	}
}

// TestTrailRestoreOfAnOlderFormat: a format-2 snapshot restored on a
// node whose trail holds events: the state keeps its events in bbolt
// again, and the trail is emptied (a later raise migrates afresh).
func TestTrailRestoreOfAnOlderFormat(t *testing.T) {
	h := newAt(t, FormatTrail)
	h.record(0, 100, 10)
	h.settle()
	old := newAt(t, FormatGate)
	old.record(500, 60, 10)
	restoreBytes(t, h.f, snapshotBytes(t, old.f))
	h.index = h.f.Applied()
	if trailLast(h.f) != 0 {
		t.Fatalf("the trail kept %d events under a format-2 state", trailLast(h.f))
	}
	want := answers(t, old.f)
	if got := answers(t, h.f); got != want {
		t.Fatalf("restored:\n%s\nwant\n%s", got, want)
	}
	h.mustApply(TypeSetStateFormat, SetStateFormat{Format: FormatTrail, Version: "0.5.0"})
	h.settle()
	if got := answers(t, h.f); got != want {
		t.Fatalf("raised again:\n%s\nwant\n%s", got, want)
	}
}

// TestTrailRetentionPassesAGap: a replica that lacks old events (its gap)
// needs them no more once the floor passes them: the gap goes, the mover
// goes on from the floor, and it answers as the replica that had them.
func TestTrailRetentionPassesAGap(t *testing.T) {
	a := newAt(t, FormatTrail)
	a.record(0, 3*trailChunk, 1000)
	a.settle()
	a.record(3*trailChunk, 300, 100)
	b := newHarness(t)
	b.f.tr.manual.Store(true)
	restoreBytes(t, b.f, snapshotBytes(t, a.f))
	b.index = a.index
	if from, to, ok := b.f.TrailGap(); !ok || from != 1 || to != 3*trailChunk {
		t.Fatalf("gap %d-%d %v", from, to, ok)
	}
	cut := t0.Add(time.Duration(3*trailChunk) * time.Minute) // every whole chunk is older
	for _, h := range []*harness{a, b} {
		if st := h.mustApply(TypeReap, Reap{AuditBefore: cut}).Value.(ReapStats); st.AuditEvents != 3*trailChunk {
			t.Fatalf("reap: %+v", st)
		}
	}
	if from, to, ok := b.f.TrailGap(); ok {
		t.Fatalf("a gap below the floor: %d-%d", from, to)
	}
	b.settle()
	a.settle()
	want := answers(t, a.f)
	if !strings.HasPrefix(want, fmt.Sprintf("verify ok=true count=300 first=%d", 3*trailChunk+1)) {
		t.Fatalf("a: %s", want[:100])
	}
	if got := answers(t, b.f); got != want {
		t.Fatalf("b:\n%s\nwant\n%s", got, want)
	}
}
