package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

func applyOn(t *testing.T, n *testNode, cmd fsm.Command) {
	t.Helper()
	res, err := n.c.Apply(t.Context(), cmd)
	if err != nil || res.Err != nil {
		t.Fatalf("apply: %v %v", err, res.Err)
	}
}

func hasOrg(n *testNode, id string) bool {
	_, err := n.f.State().Org(id)
	return err == nil
}

// noTransferFiles fails if a backup or restore left a temporary file.
func noTransferFiles(t *testing.T, dir string) {
	t.Helper()
	for _, p := range []string{"backup-*.tmp", "restore-*.tmp"} {
		if m, _ := filepath.Glob(filepath.Join(dir, p)); len(m) > 0 {
			t.Fatalf("left behind: %v", m)
		}
	}
}

func TestBackupAndRestoreFrom(t *testing.T) {
	n := start(t, t.TempDir(), "127.0.0.1:0", nil)
	applyOn(t, n, org("before", "before"))
	var backup bytes.Buffer
	if err := n.c.Backup(t.Context(), &backup); err != nil {
		t.Fatal(err)
	}
	applyOn(t, n, org("after", "after"))

	if err := n.c.RestoreFrom(t.Context(), bytes.NewReader(backup.Bytes())); err != nil {
		t.Fatal(err)
	}
	if !hasOrg(n, "before") || hasOrg(n, "after") {
		t.Fatalf("after restore: before %v after %v, want true false", hasOrg(n, "before"), hasOrg(n, "after"))
	}
	applyOn(t, n, org("later", "later"))
	if !hasOrg(n, "later") {
		t.Fatal("a write after the restore was skipped")
	}
	noTransferFiles(t, n.dir)
}

// TestRestoreOfABackupAheadOfTheLog is the applied-index hazard: a backup
// whose stored applied index is far above the restoring cluster's log must
// not make the FSM skip the cluster's next entries.
func TestRestoreOfABackupAheadOfTheLog(t *testing.T) {
	a := start(t, t.TempDir(), "127.0.0.1:0", nil)
	for i := range 40 {
		applyOn(t, a, org(fmt.Sprint("a", i), fmt.Sprint("a", i)))
	}
	var backup bytes.Buffer
	if err := a.c.Backup(t.Context(), &backup); err != nil {
		t.Fatal(err)
	}

	b := start(t, t.TempDir(), "127.0.0.1:0", nil)
	if err := b.c.RestoreFrom(t.Context(), &backup); err != nil {
		t.Fatal(err)
	}
	applied, last := b.f.Applied(), b.c.raft.LastIndex()
	applyOn(t, b, org("b", "b"))
	if !hasOrg(b, "b") {
		t.Fatalf("the first write after the restore was skipped (applied index %d after the restore, raft's last index %d)", applied, last)
	}
	if !hasOrg(b, "a39") {
		t.Fatal("the backup's data is missing")
	}
	if applied >= last || applied < last-1 {
		t.Fatalf("applied after restore: got %d, want the snapshot's index (raft's last index %d less the no-op)", applied, last)
	}
}

func TestRestoreFromRefusesGarbage(t *testing.T) {
	n := start(t, t.TempDir(), "127.0.0.1:0", nil)
	applyOn(t, n, org("kept", "kept"))
	applied := n.f.Applied()
	for name, body := range map[string][]byte{
		"empty":   nil,
		"garbage": bytes.Repeat([]byte("garbage!"), 2048),
	} {
		err := n.c.RestoreFrom(t.Context(), bytes.NewReader(body))
		if !errors.Is(err, ErrInvalidBackup) {
			t.Fatalf("%s: got %v, want ErrInvalidBackup", name, err)
		}
	}
	if !hasOrg(n, "kept") || n.f.Applied() != applied || n.f.Restores() != 0 {
		t.Fatal("a refused restore changed the state")
	}
	noTransferFiles(t, n.dir)
}

// TestStartRestoresAStateFileBehindTheSnapshot: raft resumes after its
// newest snapshot without restoring it; a state file older than that
// snapshot (a crash between raft storing an installed snapshot and the FSM
// taking it, here a deleted file) is brought up to it first.
func TestStartRestoresAStateFileBehindTheSnapshot(t *testing.T) {
	dir := t.TempDir()
	n := start(t, dir, "127.0.0.1:0", nil)
	addr := n.c.RaftAddr()
	applyOn(t, n, org("o1", "one"))
	if err := n.c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	applyOn(t, n, org("o2", "two")) // after the snapshot, still in the log
	n.stop()
	if err := os.Remove(filepath.Join(dir, "state.db")); err != nil {
		t.Fatal(err)
	}

	n2 := start(t, dir, addr, nil)
	if got := n2.f.Restores(); got != 1 {
		t.Fatalf("restores at start: got %d, want 1", got)
	}
	if err := n2.f.WaitApplied(t.Context(), n.f.Applied()); err != nil {
		t.Fatal(err)
	}
	if !hasOrg(n2, "o1") || !hasOrg(n2, "o2") {
		t.Fatalf("after start: o1 %v o2 %v, want both", hasOrg(n2, "o1"), hasOrg(n2, "o2"))
	}
}

func TestBackupOffTheLeaderAndRestoreRefused(t *testing.T) {
	mc := newMCluster(t, 3, nil)
	leader, followers := mc.roles()
	mustApply(t, leader, org("x", "x"))
	var backup bytes.Buffer
	retry(t, "backup on a follower", func(ctx context.Context) error {
		backup.Reset()
		return followers[0].c.Backup(ctx, &backup)
	})
	if err := fsmCheckBytes(t, backup.Bytes()); err != nil {
		t.Fatal(err)
	}
	err := followers[0].c.RestoreFrom(t.Context(), &backup)
	if !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), leader.id) {
		t.Fatalf("restore on a follower: got %v, want ErrNotLeader naming %s", err, leader.id)
	}
}

func fsmCheckBytes(t *testing.T, b []byte) error {
	t.Helper()
	p := filepath.Join(t.TempDir(), "b.db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return fsm.CheckFile(p)
}

func TestSnapshotInterval(t *testing.T) {
	for _, tc := range []struct {
		took, want time.Duration
	}{
		{0, minSnapshotInterval},
		{5 * time.Millisecond, minSnapshotInterval},
		{minSnapshotInterval / snapshotSpacing, minSnapshotInterval},
		{3 * time.Second, 3 * time.Second * snapshotSpacing},
		{27 * time.Second, 27 * time.Second * snapshotSpacing},
		{maxSnapshotInterval / snapshotSpacing, maxSnapshotInterval},
		{time.Hour, maxSnapshotInterval},
	} {
		if got := snapshotInterval(tc.took); got != tc.want {
			t.Errorf("snapshotInterval(%v) = %v, want %v", tc.took, got, tc.want)
		}
	}
}

// TestSnapshotsArePacedByTheirCost: unless the operator fixed the
// interval, each snapshot sets raft's next interval from its own cost
// (and reports it); a fixed interval stays as given.
func TestSnapshotsArePacedByTheirCost(t *testing.T) {
	for _, fixed := range []time.Duration{0, 3 * time.Second} {
		n := start(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.SnapshotInterval = fixed })
		first := fixed
		if fixed == 0 {
			first = minSnapshotInterval
		}
		if got := n.c.raft.ReloadableConfig().SnapshotInterval; got != first {
			t.Fatalf("interval %v before any snapshot, want %v", got, first)
		}
		// A slow snapshot, as a large state makes, as raft's goroutine
		// reports it.
		if fixed == 0 {
			n.f.OnSnapshot(3 * time.Second)
			if got, want := n.c.raft.ReloadableConfig().SnapshotInterval, 3*time.Second*snapshotSpacing; got != want {
				t.Fatalf("after a 3 s snapshot: interval %v, want %v", got, want)
			}
		} else if n.f.OnSnapshot != nil {
			t.Fatal("a fixed interval is paced")
		}
		// A real one: cheap, so back to the floor; its cost is recorded.
		applyOn(t, n, org("00000000-0000-4000-8000-0000000000a1", "paced"))
		if err := n.c.Snapshot(); err != nil {
			t.Fatal(err)
		}
		took := n.f.SnapshotCost()
		if took <= 0 {
			t.Fatalf("snapshot cost %v after a snapshot", took)
		}
		want := snapshotInterval(took)
		if fixed > 0 {
			want = fixed
		}
		if got := n.c.raft.ReloadableConfig().SnapshotInterval; got != want {
			t.Errorf("fixed %v: interval %v after a %v snapshot, want %v", fixed, got, took, want)
		}
	}
}
