package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// TestPeersFile: raft's peers.json in a stopped node's raft directory
// replaces its configuration at the next start, and only a well-formed
// file that names the node as a voter does; a fresh node refuses one.
func TestPeersFile(t *testing.T) {
	dir := t.TempDir()
	n := start(t, dir, "127.0.0.1:0", nil)
	if _, err := n.c.Apply(t.Context(), org("o1", "one")); err != nil {
		t.Fatal(err)
	}
	// The log ends with an entry the FSM never sees: RecoverCluster's
	// snapshot then lies above the FSM's last command.
	if err := n.c.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	addr := n.c.RaftAddr()
	n.stop()

	peers := filepath.Join(dir, "raft", peersFile)
	for _, tt := range []struct {
		name, file, wantErr string
	}{
		{"malformed", `[{"id": "n1", "address": `, "peers.json"},
		{"another node", `[{"id": "n2", "address": "127.0.0.1:1", "non_voter": false}]`, "does not name this node"},
		{"this node as a non-voter", `[{"id": "n1", "address": "` + addr + `", "non_voter": true}]`, "voter"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(peers, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := newOn(t, dir)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}

	if err := os.WriteFile(peers, []byte(`[{"id": "n1", "address": "`+addr+`", "non_voter": false}, {"id": "n2", "address": "127.0.0.1:1", "non_voter": false}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := newOn(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(peers); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("peers.json after the start: %v, want it removed", err)
	}
	// The FSM reaches the snapshot the recovery wrote: raft resumes after
	// it, and a read index from another voter can name it (a follower
	// recovered this way once waited for it for 40 s).
	if snaps, err := c.snaps.List(); err != nil || len(snaps) == 0 || c.fsm.Applied() != snaps[0].Index {
		t.Fatalf("applied %d after the recovery, snapshots %v %v: want the newest snapshot's index", c.fsm.Applied(), snaps, err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	servers, err := c.Members()
	if err != nil || len(servers) != 2 || servers[1].ID != "n2" {
		t.Fatalf("members after the recovery: %v %v, want n1 and n2", servers, err)
	}
	if _, err := c.fsm.State().Org("o1"); err != nil {
		t.Fatalf("the state before the recovery: %v", err)
	}

	fresh := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fresh, "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fresh, "raft", peersFile), []byte(`[]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newOn(t, fresh); !errors.Is(err, ErrNoRaftState) {
		t.Fatalf("peers.json on a fresh node: %v, want ErrNoRaftState", err)
	}
}

// newOn is New for node n1 on dir; the test's clean-up closes it.
func newOn(t *testing.T, dir string) (*Cluster, error) {
	t.Helper()
	f, err := fsm.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	var c *Cluster
	t.Cleanup(func() {
		if c != nil {
			c.Shutdown()
		}
		f.Close()
	})
	c, err = New(Config{NodeID: "n1", DataDir: dir, RaftAddr: "127.0.0.1:0", BootstrapExpect: 1, FSM: f,
		Transport: TransportConfig{ClusterKey: testClusterKey}})
	return c, err
}
