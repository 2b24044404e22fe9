package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/oidcd/oidcd/fsm"
)

// TestServeRefusesADataDirOfANewerFormat: a node downgraded below the
// state format its cluster raised will not start: serve exits with
// ExitNeedsUpgrade (which the package's unit does not restart on), names
// the release it needs, and leaves the state file as it was.
func TestServeRefusesADataDirOfANewerFormat(t *testing.T) {
	bin := builtBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	f, err := fsm.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	db, err := bolt.Open(state, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		tx.Bucket([]byte("meta")).Put([]byte("state_format"), []byte("42"))
		return tx.Bucket([]byte("meta")).Put([]byte("state_format_version"), []byte("5.2.0"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, _ := os.ReadFile(state)
	ports := freePorts(t, 2)
	out := oidcd(t, bin, ExitNeedsUpgrade, "serve", "--data-dir", dir, "--http-addr", ports[0], "--raft-addr", ports[1],
		"--issuer", "http://"+ports[0])
	for _, want := range []string{"state format 42", "5.2.0", "run oidcd 5.2.0 or newer"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve's refusal does not say %q:\n%s", want, out)
		}
	}
	if after, _ := os.ReadFile(state); string(after) != string(before) {
		t.Error("the refused start changed the state file")
	}
}
