package node

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/oidcd/oidcd/cluster"
	"github.com/oidcd/oidcd/fsm"
)

// Recover makes the stopped node whose data directory is dataDir, with the
// nodes named in voters (server ids; empty: this node alone), the voters of
// a new configuration (cluster.Recover): how an operator brings a cluster
// back after its quorum of voters is lost for good, for example by
// promoting an edge replica. It returns the voters written, as "id address".
func Recover(dataDir string, voters []string, log *slog.Logger) ([]string, error) {
	// #nosec G304 -- <data-dir>/node-id; the operator names the data directory
	b, err := os.ReadFile(filepath.Join(dataDir, "node-id"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is not the data directory of a node (no node-id)", dataDir)
	}
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(string(b))
	f, err := fsm.Open(filepath.Join(dataDir, "state.db"))
	if errors.Is(err, fsm.ErrHeld) || errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%s is in use: stop the node first (%w)", dataDir, err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	servers, err := cluster.Recover(dataDir, id, f, voters, log)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range servers {
		out = append(out, string(s.ID)+" "+string(s.Address))
	}
	return out, nil
}
