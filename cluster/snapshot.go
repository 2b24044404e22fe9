package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
)

// ErrInvalidBackup: a file handed to RestoreFrom is not a state file this
// build can use (not bbolt, truncated, corrupt, or another schema).
var ErrInvalidBackup = errors.New("cluster: not a state file of this version")

// defaultRetainSnapshots is how many raft snapshots stay on disk unless
// Config.RetainSnapshots says otherwise. One is enough to send a lagging
// or wiped node and to resume from; the state file itself is durable.
const defaultRetainSnapshots = 1

// restoreTimeout bounds the queueing of a restore in raft. raft measures
// it from the start of Restore, so it must also cover copying the backup
// into the snapshot store and the FSM restore on the leader.
const restoreTimeout = 10 * time.Minute

// snapshotStore is raft's file snapshot store, telling the FSM the raft
// index of each snapshot raft opens, so that fsm.Restore records that
// index as the applied one rather than whatever index the streamed file
// holds (see fsm.ExpectRestore).
//
// raft v1.7.3 opens every snapshot it restores through the store, right
// before handing the stream to FSM.Restore on the FSM goroutine:
// runFSM's restore (fsm.go) serves both InstallSnapshot on a lagging
// follower (raft.go installSnapshot) and a user restore on the leader
// (raft.go restoreUserSnapshot, from Raft.Restore); the start-up restore
// (api.go restoreSnapshot) is off with NoSnapshotRestoreOnStart, and
// RecoverCluster is not used. The leader also opens its newest snapshot to
// send it to a follower (replication.go sendLatestSnapshot), which sets the
// expected index without a restore. Every restore is preceded by its own
// Open, so such a value never outlives the next restore. The one race is a
// send that opens between a user restore's Open and its Restore: it opens
// a snapshot no newer than the one being restored, so the index recorded
// can only be lower than the true one, never higher: entries are then
// applied, never skipped, and openSnapshotStore repairs the index at the
// next start.
type snapshotStore struct {
	*raft.FileSnapshotStore
	fsm *fsm.FSM
}

var _ raft.SnapshotStore = (*snapshotStore)(nil)

// Open opens snapshot id and tells the FSM its index.
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err == nil {
		s.fsm.ExpectRestore(meta.Index)
	}
	return meta, rc, err
}

// openSnapshotStore opens the snapshot store under dir and brings the FSM
// up to its newest snapshot when the state file is behind it.
//
// With NoSnapshotRestoreOnStart raft resumes applying after the newest
// snapshot without restoring it, trusting the state file to hold
// everything up to there. That fails when a crash came between raft
// storing a snapshot sent by the leader (or a user restore) and the FSM
// installing it: the state file is older, and the entries in between are
// no longer in the log. The FSM also lags its own snapshot by the raft
// no-ops and barriers at the snapshot's end, which it never sees; a
// restore then reinstalls the same data.
func openSnapshotStore(dir string, retain int, f *fsm.FSM, log *slog.Logger, hlog hclog.Logger) (*snapshotStore, error) {
	fss, err := raft.NewFileSnapshotStoreWithLogger(dir, max(retain, 1), hlog)
	if err != nil {
		return nil, err
	}
	s := &snapshotStore{FileSnapshotStore: fss, fsm: f}
	if err := s.catchUp(log); err != nil {
		return nil, err
	}
	return s, nil
}

// catchUp restores the newest snapshot into the FSM when the state file is
// behind it (see openSnapshotStore). raft's RecoverCluster leaves the FSM
// there too: it applies the log's commands, then writes a snapshot at the
// log's last index, which may be a no-op, barrier or configuration the FSM
// never saw. Raft resumes after the snapshot, so without the repair the
// FSM's applied index would stay below it until the next command, and a
// read index above it would wait for nothing.
func (s *snapshotStore) catchUp(log *slog.Logger) error {
	f := s.fsm
	snaps, err := s.List()
	if err != nil {
		return err
	}
	if len(snaps) == 0 || f.Applied() >= snaps[0].Index {
		return nil
	}
	newest := snaps[0]
	log.Info("state file is behind the newest snapshot; restoring it", "applied", f.Applied(), "snapshot", newest.ID, "index", newest.Index)
	_, rc, err := s.Open(newest.ID)
	if err == nil {
		err = f.Restore(rc) // closes rc
	}
	if err != nil {
		return fmt.Errorf("state file at index %d is behind snapshot %s (index %d), which cannot be restored: %w; "+
			"move the data directory away and start the node again to rejoin", f.Applied(), newest.ID, newest.Index, err)
	}
	return nil
}

// removeTransferFiles deletes the temporary files of backups and restores
// that a crash left in dataDir.
func removeTransferFiles(dataDir string) {
	for _, pattern := range []string{"backup-*.tmp", "restore-*.tmp"} {
		matches, _ := filepath.Glob(filepath.Join(dataDir, pattern))
		for _, m := range matches {
			os.Remove(m)
		}
	}
}

// Backup writes a consistent copy of the state file to w, including every
// write acknowledged anywhere in the cluster before the call (it passes a
// read index first). Any node can serve it. The copy is staged in a
// temporary file, so that the bbolt read transaction lasts as long as a
// local disk copy, not as long as a slow reader: a long read transaction
// blocks writers that need to grow the file.
//
// The copy holds everything, including the admin token hash and the key
// that seals browser state.
func (c *Cluster) Backup(ctx context.Context, w io.Writer) error {
	if err := c.ReadIndex(ctx); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.cfg.DataDir, "backup-*.tmp")
	if err != nil {
		return fmt.Errorf("cluster: backup: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := c.fsm.WriteTo(tmp); err != nil {
		return fmt.Errorf("cluster: backup: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("cluster: backup: %w", err)
	}
	_, err = io.Copy(w, tmp)
	return err
}

// RestoreFrom replaces the state of the whole cluster with a backup made
// by Backup. It runs on the leader only (elsewhere ErrNotLeader, naming
// the leader). The backup is staged in a temporary file and checked
// (fsm.CheckFile) before raft sees it, since raft panics when the FSM
// fails to restore a user snapshot; a file that fails the check is
// refused with ErrInvalidBackup and nothing changes.
//
// raft then stores it as a snapshot at an index above the current log,
// installs it in the leader's FSM, and sends it to the followers with
// InstallSnapshot; RestoreFrom returns once a quorum holds it. The FSM
// records that raft index as its applied index (snapshotStore), not the
// one in the backup. Everything in the backup comes back, including the
// admin token hash: afterwards the admin token is the backup's (unless
// nodes run with a configured --admin-token).
func (c *Cluster) RestoreFrom(ctx context.Context, r io.Reader) error {
	if err := c.leaderOnly(); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.cfg.DataDir, "restore-*.tmp")
	if err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, r)
	if err != nil {
		return fmt.Errorf("cluster: restore: reading the backup: %w", err)
	}
	if err := fsm.CheckFile(tmp.Name()); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidBackup, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.leaderOnly(); err != nil {
		return err
	}
	timeout := restoreTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	// raft refuses a user restore until this leader has applied its
	// configuration entry (a node elected a moment ago has not): a barrier
	// waits until everything committed is applied.
	if err := c.await(ctx, c.raft.Barrier(timeout)); err != nil {
		return mapRaftError(err)
	}
	// Index 0: raft places the snapshot right after its last entry. The
	// configuration is the cluster's current one, not the backup's.
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: n}
	if err := c.raft.Restore(meta, tmp, timeout); err != nil {
		return mapRaftError(err)
	}
	c.log.Warn("restored the cluster state from a backup", "bytes", n, "applied", c.fsm.Applied())
	return nil
}

// leaderOnly fails with ErrNotLeader, naming the leader, off the leader.
func (c *Cluster) leaderOnly() error {
	if c.IsLeader() {
		return nil
	}
	_, leader := c.Leader()
	return fmt.Errorf("%w: run this on the leader (%q)", ErrNotLeader, leader)
}

// registerSnapshotMetrics exports how often this node's state was replaced
// by a snapshot (a follower catching up, a restore, a start-up repair).
func registerSnapshotMetrics(reg prometheus.Registerer, f *fsm.FSM) {
	if reg == nil {
		return
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "oidcd_raft_snapshot_restores_total",
		Help: "Times this node's state was replaced by a raft snapshot since it started.",
	}, func() float64 { return float64(f.Restores()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "oidcd_raft_snapshot_seconds",
		Help: "How long this node's last raft snapshot took to build and write (a compacted copy of the state); the snapshot interval is paced by it.",
	}, func() float64 { return f.SnapshotCost().Seconds() }))
}

// Snapshot pacing. Every snapshot is a compacted copy of the whole state
// (fsm.writeCompact), on every node: about 0.2 s at 10,000 signed-in
// people and 22 s at a million, more under load. Between snapshots the
// raft log keeps every entry, so checking often keeps the log (and the
// data dir) small while the state is small, and would spend most of a
// core copying a large one.
// Unless the operator fixed the interval, each snapshot sets the next
// interval to snapshotSpacing times its own cost: snapshots then take at
// most 1/snapshotSpacing of one core, and the log holds about as many
// entries as that much time brings. (At 50, in the soak's 10 minutes, the
// copies took longer under load, the checks drifted to minutes apart, and
// the log file reached 140 MiB; at 20 it stayed at 77 MiB.)
const (
	minSnapshotInterval = 30 * time.Second
	maxSnapshotInterval = 30 * time.Minute
	snapshotSpacing     = 20
)

// snapshotInterval is the check interval after a snapshot that took took.
func snapshotInterval(took time.Duration) time.Duration {
	return min(max(took*snapshotSpacing, minSnapshotInterval), maxSnapshotInterval)
}

// paceSnapshots sets raft's snapshot interval from the cost of the
// snapshot just taken (fsm.FSM.OnSnapshot). raft reads the interval anew
// before each wait.
func (c *Cluster) paceSnapshots(took time.Duration) {
	r := c.paced.Load()
	if r == nil {
		return
	}
	rc := r.ReloadableConfig()
	want := snapshotInterval(took)
	if rc.SnapshotInterval == want {
		return
	}
	rc.SnapshotInterval = want
	if err := r.ReloadConfig(rc); err != nil {
		c.log.Warn("cannot pace snapshots", "err", err)
		return
	}
	c.log.Debug("snapshot interval", "took", took.Round(time.Millisecond), "interval", want)
}
