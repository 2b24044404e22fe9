package node

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// ClusterKeyFile is where a node without --cluster-key keeps the key it
// generated at first start.
const ClusterKeyFile = "cluster-key"

// operatorKeyReason says why this configuration needs an operator-given
// --cluster-key ("" when a key kept in the data directory will do): more
// than one node, or a transport address beyond loopback, where another
// host could reach it.
func (c *Config) operatorKeyReason() string {
	raftAddr := c.RaftAddr
	if c.RaftListener != nil {
		raftAddr = c.RaftListener.Addr().String()
	}
	switch {
	case c.BootstrapExpect > 1 || len(c.Join) > 0 || len(c.StaticPeers) > 1:
		return "--bootstrap-expect is above 1 or --join is set"
	case beyondLoopback(raftAddr):
		return fmt.Sprintf("--raft-addr %q is not a loopback address", raftAddr)
	case beyondLoopback(c.GossipAddr):
		return fmt.Sprintf("--gossip-addr %q is not a loopback address", c.GossipAddr)
	}
	return ""
}

// beyondLoopback reports whether addr is a well-formed address that other
// hosts may reach (an empty host listens on every interface). A malformed
// address is reported by its own check.
func beyondLoopback(addr string) bool {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return false
	}
	return checkLoopbackAddr(addr) != nil
}

// nodeClusterKey returns the key of node-to-node traffic, which is always
// mutual TLS: the operator's --cluster-key, else the one kept in
// <data-dir>/cluster-key, generated (mode 0600) at the first start of a
// single loopback node. A data directory from before this file existed
// gets one on its next start.
func nodeClusterKey(cfg *Config) ([]byte, error) {
	if cfg.ClusterKey != "" {
		return cfg.clusterKey()
	}
	path := filepath.Join(cfg.DataDir, ClusterKeyFile)
	// #nosec G304 -- path is <data-dir>/cluster-key; the operator names the data directory
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("%s: mode %04o lets others read the cluster key; chmod 600 it", path, fi.Mode().Perm())
		}
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(k) != 32 {
			return nil, fmt.Errorf("%s: want base64 of 32 bytes (delete it to have a new one made)", path)
		}
		return k, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("cluster key: %w", err)
	}
	return k, nil
}
