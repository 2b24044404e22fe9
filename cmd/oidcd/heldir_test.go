package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecondServeOnAHeldDataDir: a second `oidcd serve` on a data
// directory that a running node holds stops within a few seconds and says
// that another oidcd process holds that directory (on Linux, with its
// pid), not bbolt's "timeout".
func TestSecondServeOnAHeldDataDir(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	first := newKillableIn(t, dataDir)
	ports := freePorts(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, first.bin, "serve", "--issuer", "http://"+ports[0], "--http-addr", ports[0],
		"--raft-addr", ports[1], "--gossip-addr", ports[2], "--data-dir", dataDir)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second serve: got %v, want exit status 1\n%s", err, stderr.String())
	}
	if took > 5*time.Second {
		t.Errorf("second serve took %s to stop, want at most 5 s", took)
	}
	want := "oidcd serve: another oidcd process holds the data directory " + dataDir + " "
	if runtime.GOOS == "linux" {
		want = "oidcd serve: another oidcd process (pid " + strconv.Itoa(first.cmd.Process.Pid) + ") holds the data directory " + dataDir + " "
	}
	if got := stderr.String(); !strings.Contains(got, want) || strings.Contains(got, "timeout") {
		t.Errorf("got stderr %q, want it to contain %q", got, want)
	}
}
