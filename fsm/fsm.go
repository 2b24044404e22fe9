package fsm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// handler applies one decoded command inside tx. It validates first and
// writes second, so one that returns a domain error has written nothing,
// except where a write is that failure's outcome and must commit with it:
// a replayed code revokes the first exchange's access token
// (applyRedeemCode), a challenge is spent even when it does not match
// (applyTakeChallenge), an expired text-message code is deleted and a
// wrong one counts an attempt (applyCheckSMSCode). After the handler, the
// apply records the stamp's failure event when it asks for one
// (auditApply). There are no savepoints: the batch commits as one
// transaction (DESIGN.md, "Domain errors never write").
type handler func(tx *bolt.Tx, index uint64, payload []byte) Result

var handlers = map[Type]handler{}

// register fills the dispatch table; called from the per-entity files' init.
func register(t Type, h handler) {
	if _, dup := handlers[t]; dup {
		panic("fsm: duplicate handler for " + t.String())
	}
	handlers[t] = h
}

// FSM is the bbolt-backed raft state machine. It implements raft.FSM and
// raft.BatchingFSM.
type FSM struct {
	path string

	mu sync.RWMutex // guards db against the swap in Restore
	db *bolt.DB

	appliedMu sync.Mutex
	applied   uint64
	appliedCh chan struct{} // closed and replaced on every applied batch
	results   [resultRing]indexedResult

	expectMu  sync.Mutex
	expect    uint64 // raft index of the snapshot the next Restore reads
	expectSet bool
	restores  atomic.Uint64
	// brandingGen counts the commits that may have changed what
	// State.BrandingFor answers, and the restores (BrandingGeneration).
	brandingGen atomic.Uint64

	// OnApply, when set, is called after each committed batch with the
	// command types it held. It must not block. Used for metrics and for
	// cache invalidation (JWKS).
	OnApply func(types []Type)
	// OnAudit, when set, is called after each committed batch that
	// recorded audit events, with their types.
	OnAudit func(types []string)

	auditOff atomic.Bool // SetAuditForBenchmark

	// OnDiskFull, when set, hears each commit refused for want of space
	// (true) and the commit that succeeds after (false): the node's metric
	// and log. It must not block.
	OnDiskFull func(full bool, err error)
	// OnSnapshot, when set, hears how long each snapshot took to build
	// and stream (Persist): the cluster spaces snapshots by it. It runs
	// on raft's snapshot goroutine and must not wait for raft.
	OnSnapshot   func(took time.Duration)
	snapshotCost atomic.Int64 // nanoseconds of the last Persist
	accessCache  atomic.Pointer[accessGen]
	closing      chan struct{} // closed by Close: a waiting apply gives up

	// format is the state format the state holds (StateFormat), kept
	// beside the file so CheckFormat reads no transaction.
	format atomic.Uint32
	// halted holds the NewerFormatError that stopped this replica: a
	// log entry or snapshot of a format it does not apply. From then on
	// nothing is applied, nor snapshotted, and OnHalt has been told.
	halted atomic.Pointer[NewerFormatError]
	// OnHalt, when set, hears once that the replica stopped (halted): the
	// node stops with the error's message. It must not block.
	OnHalt    func(error)
	closeOnce sync.Once

	// tr is the local audit trail and its mover (audit_trail.go).
	tr *trailState
}

// SetAuditForBenchmark turns the writing of audit events off (false) or
// on again, so a benchmark can measure what the trail costs in one run.
// Nothing else calls it: a node always keeps its trail, and a replica
// that skipped events would no longer match the others.
func (f *FSM) SetAuditForBenchmark(on bool) { f.auditOff.Store(!on) }

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// resultRing is how many recent apply results are kept for ResultAt.
const resultRing = 8192

type indexedResult struct {
	index uint64
	res   Result
}

// ResultAt returns the Result this FSM computed for the entry at index, if
// it is among the last 8192 applied. A follower that forwarded a write to
// the leader reads its outcome here once it has applied the entry itself:
// apply is deterministic, so it is the leader's outcome too, and no Value
// ever has to cross the network.
func (f *FSM) ResultAt(index uint64) (Result, bool) {
	f.appliedMu.Lock()
	defer f.appliedMu.Unlock()
	r := f.results[index%resultRing]
	return r.res, r.index == index && index != 0
}

// Open opens or creates the state file at path.
func Open(path string) (*FSM, error) {
	removeCompactLeftovers(path)
	db, err := openDB(path)
	if err != nil {
		return nil, err
	}
	f := &FSM{path: path, db: db, appliedCh: make(chan struct{}), closing: make(chan struct{})}
	f.applied = readApplied(db)
	f.loadFormat(db)
	if err := f.openTrail(); err != nil {
		db.Close()
		return nil, err
	}
	return f, nil
}

func openDB(path string) (*bolt.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	db, err := OpenBolt(path, &bolt.Options{Timeout: holdWait})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, held(path)
	}
	if err != nil {
		return nil, fmt.Errorf("fsm: open %s: %w", path, err)
	}
	if err := db.Update(initSchema); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Close closes the database.
func (f *FSM) Close() error {
	f.StopWaiting()
	f.closeTrail()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.db.Close()
}

// StopWaiting makes an apply that waits for disk space give up (nothing
// of it is applied; the next start replays it), and every later one too:
// the node is closing.
func (f *FSM) StopWaiting() { f.closeOnce.Do(func() { close(f.closing) }) }

// Applied is the index of the last raft entry reflected in the state.
func (f *FSM) Applied() uint64 {
	f.appliedMu.Lock()
	defer f.appliedMu.Unlock()
	return f.applied
}

// WaitApplied blocks until the state reflects index, or ctx ends.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		f.appliedMu.Lock()
		applied, ch := f.applied, f.appliedCh
		f.appliedMu.Unlock()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *FSM) setApplied(index uint64) {
	f.appliedMu.Lock()
	f.applied = index
	close(f.appliedCh)
	f.appliedCh = make(chan struct{})
	f.appliedMu.Unlock()
}

// Apply applies one raft log entry.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in one bbolt transaction (group
// commit: one fsync for the batch). Entries at or below the stored applied
// index were applied before a restart and are skipped.
//
// A commit refused for want of space (ENOSPC, EDQUOT) is tried again,
// with a growing pause, until it succeeds: the entries are committed in
// raft and must be applied in order, so the replica waits rather than
// skip or crash. Reads, discovery and the JWKS go on meanwhile; writes
// wait and time out (503). When space returns the node carries on by
// itself. If the node closes while waiting, nothing is applied and the
// stored applied index stays, so the next start replays the entries.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	var out []any
	var types []Type
	var events []string
	var last uint64
	f.mu.RLock()
	defer f.mu.RUnlock()
	if h := f.halted.Load(); h != nil {
		return haltedResults(len(logs), h)
	}
	pause := 100 * time.Millisecond
	for full := false; ; {
		out, types, events, last = make([]any, len(logs)), nil, nil, 0
		err := f.applyTx(logs, out, &types, &events, &last)
		if err == nil {
			if full && f.OnDiskFull != nil {
				f.OnDiskFull(false, nil)
			}
			break
		}
		var newer *NewerFormatError
		if errors.As(err, &newer) {
			// Nothing of the batch was committed: the stored applied
			// index stays before it, and the next start (of a build that
			// applies the format) replays it.
			f.halt(newer)
			return haltedResults(len(logs), newer)
		}
		if !DiskFull(err) {
			// Any other failed commit (an I/O error) leaves this replica
			// behind the log; continuing would diverge silently.
			panic(fmt.Sprintf("fsm: commit: %v", err))
		}
		full = true
		if f.OnDiskFull != nil {
			f.OnDiskFull(true, err)
		}
		select {
		case <-f.closing:
			for i := range out {
				out[i] = Result{Err: ErrClosed}
			}
			return out
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
	if last != 0 {
		f.appliedMu.Lock()
		for i, l := range logs {
			if r, ok := out[i].(Result); ok && l.Type == raft.LogCommand {
				f.results[l.Index%resultRing] = indexedResult{index: l.Index, res: r}
			}
		}
		f.appliedMu.Unlock()
		for _, t := range types {
			if t == TypeSetBranding || t == TypeUpdateOrg || t == TypeDeleteOrg {
				f.brandingGen.Add(1)
				break
			}
		}
		before := f.stateFormat()
		if slices.Contains(types, TypeSetStateFormat) {
			f.loadFormat(f.db)
			if before < FormatTrail && f.stateFormat() >= FormatTrail && f.tr != nil {
				f.tr.reconcile.Store(true)
				f.wakeMover()
			}
		}
		if f.stateFormat() >= FormatTrail && (len(events) > 0 || slices.Contains(types, TypeReap)) {
			f.wakeMover()
		}
		f.setApplied(last)
		if f.OnApply != nil && len(types) > 0 {
			f.OnApply(types)
		}
		if f.OnAudit != nil && len(events) > 0 {
			f.OnAudit(events)
		}
	}
	return out
}

// applyTx applies logs in one transaction, filling out, types, events
// and last.
func (f *FSM) applyTx(logs []*raft.Log, out []any, types *[]Type, events *[]string, last *uint64) error {
	var moved uint64
	if f.tr != nil {
		moved, _ = f.tr.store.Last()
	}
	return f.db.Update(func(tx *bolt.Tx) error {
		done := getApplied(tx)
		for i, l := range logs {
			if l.Index <= done {
				out[i] = Result{}
				continue
			}
			*last = l.Index
			if l.Type != raft.LogCommand {
				continue
			}
			cmd, err := Decode(l.Data)
			if err != nil {
				panic(fmt.Sprintf("fsm: entry %d: %v", l.Index, err))
			}
			if err := peekNewerFormat(cmd, l.Index); err != nil {
				return err // the whole batch rolls back
			}
			h, ok := handlers[cmd.Type]
			if !ok {
				if cmd.Flags&FlagIgnorable != 0 {
					out[i] = Result{}
					continue
				}
				// A newer node wrote a command this version does not know.
				// Skipping it would leave this replica apart from the
				// others for good: stop, and say what to do.
				panic(fmt.Sprintf("fsm: entry %d: unknown command %s: a node of a newer version wrote it; "+
					"upgrade this node (it stops rather than diverge from the others)", l.Index, cmd.Type))
			}
			res := h(tx, l.Index, cmd.Payload)
			out[i] = res
			*types = append(*types, cmd.Type)
			if !f.auditOff.Load() {
				*events = append(*events, auditApply(tx, cmd, res)...)
			}
		}
		if *last == 0 {
			return nil
		}
		if f.tr != nil && trailLayout(tx) {
			trimStaged(tx, moved)
		}
		return putApplied(tx, *last)
	})
}

// Snapshot starts a read transaction; Persist streams it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if h := f.halted.Load(); h != nil {
		// raft would record the snapshot at its own last index, beyond
		// what this state holds, and compact the entries it skipped.
		return nil, h
	}
	tx, err := f.db.Begin(false)
	if err != nil {
		return nil, err
	}
	return &snapshot{tx: tx, f: f, restores: f.restores.Load()}, nil
}

type snapshot struct {
	tx       *bolt.Tx
	f        *FSM
	restores uint64 // f.Restores() when the snapshot began
}

// errRestoredSince fails a snapshot that a restore overtook.
var errRestoredSince = errors.New("fsm: the state was replaced by a restore since this snapshot began")

// Persist streams the state as it was when Snapshot was called, unless a
// restore replaced the state since. raft asks for the FSM's snapshot,
// then waits for its main loop before persisting it; when that loop was
// busy installing a snapshot (InstallSnapshot, Raft.Restore), the one
// persisted afterwards is older than the installed one, yet raft would
// record it as its latest snapshot (raft v1.7.3 takeSnapshot calls
// setLastSnapshot unconditionally; hashicorp/raft#248). After a user
// restore, which leaves a hole in the log at the restored index, the
// leader then finds neither the entry nor the snapshot before the next
// entry it sends, and sends the restored snapshot to every follower again,
// for ever. Failing the stale snapshot keeps raft's record on the
// installed one; the next snapshot is taken as usual.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if s.f.restores.Load() != s.restores {
		sink.Cancel()
		return errRestoredSince
	}
	start := time.Now()
	if _, err := s.f.writeCompact(s.tx, sink); err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	took := time.Since(start)
	s.f.snapshotCost.Store(int64(took))
	if s.f.OnSnapshot != nil {
		s.f.OnSnapshot(took)
	}
	return nil
}

// SnapshotCost is how long the last snapshot this node took lasted, from
// the start of its compacted copy to the file's close; zero before the
// first.
func (f *FSM) SnapshotCost() time.Duration { return time.Duration(f.snapshotCost.Load()) }

// Release ends the snapshot's read transaction unless Persist has.
func (s *snapshot) Release() { _ = s.tx.Rollback() }

// WriteTo streams a consistent, compacted copy of the state (live data
// only: writeCompact) to w (for backups).
func (f *FSM) WriteTo(w io.Writer) (int64, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	tx, err := f.db.Begin(false)
	if err != nil {
		return 0, err
	}
	return f.writeCompactFill(tx, w, f.backupFill(tx))
}

// ExpectRestore tells the FSM the raft index of the snapshot that the next
// Restore reads. Restore records that index as the applied index of the
// new state, whatever index the streamed file holds: a backup taken on
// another cluster, or at an index this cluster's log has not reached,
// would otherwise make ApplyBatch skip new entries at or below its stale
// index, silently. The raft snapshot store of package cluster calls it
// from Open, through which raft reads every snapshot it restores.
//
// Without a call, Restore keeps the file's own index (tests, tools).
func (f *FSM) ExpectRestore(index uint64) {
	f.expectMu.Lock()
	f.expect, f.expectSet = index, true
	f.expectMu.Unlock()
}

// takeExpected returns and clears the index set by ExpectRestore.
func (f *FSM) takeExpected() (uint64, bool) {
	f.expectMu.Lock()
	defer f.expectMu.Unlock()
	index, ok := f.expect, f.expectSet
	f.expect, f.expectSet = 0, false
	return index, ok
}

// Restores counts the snapshots installed by Restore since Open.
func (f *FSM) Restores() uint64 { return f.restores.Load() }

// Restore replaces the state with a streamed bbolt file. The stream is
// written to a temporary file, checked, stamped with the applied index
// given to ExpectRestore, and renamed over the live file, so a failed
// restore leaves the old state untouched.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	index, stamp := f.takeExpected()
	tmp := f.path + ".restore"
	n, err := writeFile(tmp, rc)
	if err == nil && n == 0 {
		// bbolt would turn an empty file into a fresh, empty database.
		err = errors.New("fsm: restore: empty snapshot")
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	check, err := openDB(tmp)
	if err != nil {
		os.Remove(tmp)
		var newer *NewerFormatError
		if errors.As(err, &newer) {
			newer.Where = "a snapshot sent to this node"
			f.halt(newer)
		}
		return fmt.Errorf("fsm: restore: %w", err)
	}
	if stamp {
		err = check.Update(func(tx *bolt.Tx) error { return putApplied(tx, index) })
	}
	if cerr := check.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fsm: restore: %w", err)
	}

	// The old database is not closed here: bbolt's Close waits for every
	// read transaction, and raft may hold one for a snapshot it is taking
	// (FSM.Snapshot), a snapshot that waits for raft's main loop, which in
	// turn waits for this restore. The new file is renamed over the old
	// one while it is open (POSIX: the old inode lives on for its readers),
	// the new one is opened and swapped in, and the old one is closed once
	// its last reader is done.
	if f.tr != nil {
		// The trail's writer (the mover, an import) waits until the
		// trail is held against the restored state.
		f.tr.mu.Lock()
		defer f.tr.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := os.Rename(tmp, f.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fsm: restore: %w", err)
	}
	// The rename must be durable before raft counts the snapshot as
	// applied: a state file that came back older after a crash would sit
	// below the snapshot raft resumes from.
	syncErr := syncDir(filepath.Dir(f.path))
	db, err := openDB(f.path)
	if err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	old := f.db
	f.db = db
	go old.Close()
	f.setApplied(readApplied(db))
	f.loadFormat(db)
	if f.tr != nil {
		// Keep what matches, cut what is beyond, forget another
		// history; what it lacks is TrailGap's.
		// The state is in place whatever the trail says: a failure is
		// the mover's to retry, and TrailStatus shows it.
		if err := f.reconcileTrail(db); err != nil {
			f.tr.reconcile.Store(true)
			f.tr.err.Store(&err)
		}
		f.wakeMover()
	}
	f.restores.Add(1)
	f.brandingGen.Add(1)
	if f.OnApply != nil {
		f.OnApply([]Type{TypeAddKey})
	}
	if syncErr != nil {
		return fmt.Errorf("fsm: restore: sync %s: %w", filepath.Dir(f.path), syncErr)
	}
	return nil
}

// CheckFile reports whether path holds a state file that this build can
// restore: a bbolt file, complete (not truncated), whose pages pass
// bbolt's consistency check and whose meta bucket carries a schema
// version this build reads (SchemaVersion, or an earlier one it migrates).
// It opens the file read-only and changes nothing. Errors wrap ErrSchema
// for a sound file of another layout.
//
// bbolt trusts the page references inside a file; a file damaged in a way
// that keeps its meta pages valid but points a branch outside the file can
// still crash the process while it is checked. A backup that was cut short
// or is not a bbolt file at all, the likely accidents, is refused cleanly.
func CheckFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return errors.New("fsm: empty file")
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("fsm: not a state file: %w", err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if tx.Size() > fi.Size() {
			return fmt.Errorf("fsm: truncated state file: %d bytes of %d", fi.Size(), tx.Size())
		}
		var errs []error
		for cerr := range tx.Check() { // drain: Check's goroutine holds the transaction
			if len(errs) < 3 {
				errs = append(errs, cerr)
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("fsm: corrupt state file: %w", errors.Join(errs...))
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: no %s bucket", ErrSchema, bucketMeta)
		}
		if v, err := strconv.Atoi(string(meta.Get(keySchema))); err != nil || v < 1 || v > SchemaVersion {
			return fmt.Errorf("%w: file has %q, this build reads 1 to %d", ErrSchema, meta.Get(keySchema), SchemaVersion)
		}
		return checkFormat(tx, "the backup")
	})
}

func writeFile(path string, r io.Reader) (int64, error) {
	// #nosec G304 -- path is a temporary file beside the state file, named by the node
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(fh, r)
	if err != nil {
		fh.Close()
		return n, err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return n, err
	}
	return n, fh.Close()
}

func syncDir(dir string) error {
	// #nosec G304 -- dir is the directory of the state file, which the node names from --data-dir
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// view runs fn in a read transaction on the current database.
func (f *FSM) view(fn func(tx *bolt.Tx) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.db.View(fn)
}

func readApplied(db *bolt.DB) uint64 {
	var n uint64
	db.View(func(tx *bolt.Tx) error { n = getApplied(tx); return nil })
	return n
}

func getApplied(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketMeta).Get(keyApplied)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func putApplied(tx *bolt.Tx, index uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], index)
	return tx.Bucket(bucketMeta).Put(keyApplied, b[:])
}
