package node

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOperatorKeyReason(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string // a substring; "" = none needed
	}{
		{"the defaults", Config{BootstrapExpect: 1, RaftAddr: DefaultRaftAddr, GossipAddr: DefaultGossipAddr}, ""},
		{"localhost and ::1", Config{BootstrapExpect: 1, RaftAddr: "localhost:1", GossipAddr: "[::1]:2"}, ""},
		{"three nodes", Config{BootstrapExpect: 3, RaftAddr: DefaultRaftAddr, GossipAddr: DefaultGossipAddr}, "--bootstrap-expect"},
		{"join", Config{BootstrapExpect: 1, Join: []string{"127.0.0.1:9"}, RaftAddr: DefaultRaftAddr, GossipAddr: DefaultGossipAddr}, "--join"},
		{"raft on every interface", Config{BootstrapExpect: 1, RaftAddr: ":8300", GossipAddr: DefaultGossipAddr}, "--raft-addr"},
		{"gossip on a LAN address", Config{BootstrapExpect: 1, RaftAddr: DefaultRaftAddr, GossipAddr: "10.1.2.3:8301"}, "--gossip-addr"},
		{"a malformed address is its own check's", Config{BootstrapExpect: 1, RaftAddr: "x", GossipAddr: DefaultGossipAddr}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.cfg.operatorKeyReason()
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestClusterKeyKeptInTheDataDir: a node without --cluster-key makes one
// at first start (0600), reuses it later, refuses one others can read,
// and an operator's key wins over the file.
func TestClusterKeyKeptInTheDataDir(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{DataDir: dir}
	k1, err := nodeClusterKey(cfg)
	if err != nil || len(k1) != 32 {
		t.Fatalf("first start: %v, %d bytes", err, len(k1))
	}
	path := filepath.Join(dir, ClusterKeyFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", err, fi)
	}
	if k2, err := nodeClusterKey(cfg); err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second start: got another key (%v)", err)
	}
	op := bytes.Repeat([]byte{7}, 32)
	if k, err := nodeClusterKey(&Config{DataDir: dir, ClusterKey: base64.StdEncoding.EncodeToString(op)}); err != nil || !bytes.Equal(k, op) {
		t.Fatalf("operator key: got %x %v", k, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := nodeClusterKey(cfg); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key file: got %v", err)
	}
	os.Chmod(path, 0o600)
	os.WriteFile(path, []byte("short\n"), 0o600)
	if _, err := nodeClusterKey(cfg); err == nil {
		t.Fatal("a malformed key file was accepted")
	}
}
