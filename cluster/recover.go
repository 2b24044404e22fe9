package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/oidcd/oidcd/fsm"
)

// ErrNoRaftState: Recover was pointed at a data directory without raft
// state (a typo in the path, or a node that never joined).
var ErrNoRaftState = errors.New("cluster: no raft state in this data directory")

// Recover rewrites the raft configuration of a stopped node so that the
// members named in voters, and only they, form the cluster: the way back
// when the voters that made the quorum are lost for good, for example by
// turning an edge replica into the new core. It is raft's RecoverCluster:
// the node applies everything its log holds (entries it had received but
// may not have known to be committed included), writes a snapshot that
// carries the new configuration and empties its log. voters are server ids
// of the node's last known configuration; empty means this node alone.
// Every node named must be recovered with the same list before any of
// them starts again; the others rejoin with an empty data directory.
// It returns the configuration it wrote.
func Recover(dataDir, nodeID string, f *fsm.FSM, voters []string, log *slog.Logger) ([]raft.Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(dataDir, "raft")
	if _, err := os.Stat(filepath.Join(dir, "raft.db")); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoRaftState, dir, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("cluster: log store: %w", err)
	}
	defer store.Close()
	snaps, err := openSnapshotStore(dir, defaultRetainSnapshots, f, log, newHCLog(log, "snapshot"))
	if err != nil {
		return nil, fmt.Errorf("cluster: snapshot store: %w", err)
	}
	if ok, err := raft.HasExistingState(store, store, snaps); err != nil || !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoRaftState, dir)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(nodeID)
	rc.Logger = newHCLog(log, "raft")
	rc.NoSnapshotRestoreOnStart = true // reading the configuration only
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	last, err := raft.GetConfiguration(rc, f, store, store, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the last configuration: %w", err)
	}
	if len(voters) == 0 {
		voters = []string{nodeID}
	}
	if !slices.Contains(voters, nodeID) {
		return nil, fmt.Errorf("cluster: recover: the voters must include this node (%s)", nodeID)
	}
	var servers []raft.Server
	for _, id := range voters {
		i := slices.IndexFunc(last.Servers, func(s raft.Server) bool { return string(s.ID) == id })
		if i < 0 {
			return nil, fmt.Errorf("%w: %q is not in this node's last configuration", ErrUnknownNode, id)
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: last.Servers[i].ID, Address: last.Servers[i].Address})
	}
	if err := recoverWith(nodeID, f, store, snaps, raft.Configuration{Servers: servers}, log); err != nil {
		return nil, err
	}
	return servers, nil
}

type logAndStable interface {
	raft.LogStore
	raft.StableStore
}

// recoverWith is raft's RecoverCluster on opened stores.
func recoverWith(nodeID string, f *fsm.FSM, store logAndStable, snaps *snapshotStore, conf raft.Configuration, log *slog.Logger) error {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(nodeID)
	rc.Logger = newHCLog(log, "raft")
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	// RecoverCluster persists the FSM's snapshot but never releases it
	// (raft v1.7.3), and ours holds a read transaction: the state file
	// could not close after it.
	rf := &releasingFSM{FSM: f}
	err := raft.RecoverCluster(rc, rf, store, store, snaps, trans, conf)
	rf.release()
	if err != nil {
		return fmt.Errorf("cluster: recover: %w", err)
	}
	if err := snaps.catchUp(log); err != nil {
		return fmt.Errorf("cluster: recover: %w", err)
	}
	log.Warn("raft configuration recovered", "servers", fmt.Sprint(conf.Servers), "applied", f.Applied())
	return nil
}

// peersFile is raft's manual recovery file: placed in <data-dir>/raft of a
// stopped node, it replaces the node's configuration at its next start
// (the format of raft.ReadConfigJSON: id, address, non_voter), and is
// removed once applied.
const peersFile = "peers.json"

// recoverFromPeersFile applies <dir>/peers.json when there is one.
func recoverFromPeersFile(dir, nodeID string, f *fsm.FSM, store logAndStable, snaps *snapshotStore, existing bool, log *slog.Logger) error {
	path := filepath.Join(dir, peersFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if !existing {
		return fmt.Errorf("cluster: %s: %w (a new node joins with --join instead)", path, ErrNoRaftState)
	}
	conf, err := raft.ReadConfigJSON(path)
	if err != nil {
		return fmt.Errorf("cluster: %s: %w", path, err)
	}
	if !slices.ContainsFunc(conf.Servers, func(s raft.Server) bool { return string(s.ID) == nodeID && s.Suffrage == raft.Voter }) {
		return fmt.Errorf("cluster: %s does not name this node (%s) as a voter", path, nodeID)
	}
	if err := recoverWith(nodeID, f, store, snaps, conf, log); err != nil {
		return err
	}
	return os.Remove(path)
}

// releasingFSM keeps the snapshots raft takes so they can be released.
type releasingFSM struct {
	*fsm.FSM
	taken []raft.FSMSnapshot
}

func (r *releasingFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := r.FSM.Snapshot()
	if err == nil {
		r.taken = append(r.taken, s)
	}
	return s, err
}

func (r *releasingFSM) release() {
	for _, s := range r.taken {
		s.Release()
	}
	r.taken = nil
}
