package cli_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// noTemp fails when dir holds anything but want.
func noTemp(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("files in %s: got %q, want %q", dir, got, want)
	}
}

func TestSnapshotSaveAndRestore(t *testing.T) {
	c := newCLI(t)
	c.run(cli.ExitOK, "", "org", "create", "--slug", "acme", "--name", "Acme")
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.db")

	out, errOut := c.run(cli.ExitOK, "", "snapshot", "save", file)
	contains(t, "snapshot save", out, "saved a snapshot of ", " bytes to "+file)
	contains(t, "snapshot save stderr", errOut, "every secret")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("mode: got %o, want 600", got)
	}
	noTemp(t, dir, "backup.db")
	if err := fsm.CheckFile(file); err != nil {
		t.Fatalf("saved file: %v", err)
	}
	saved, _ := os.ReadFile(file)

	out, errOut = c.run(cli.ExitOK, "", "snapshot", "restore", file)
	contains(t, "snapshot restore", out, "restored the cluster state from "+file)
	contains(t, "snapshot restore stderr", errOut, "admin token is the backup's")
	if !bytes.Equal(c.cluster.restored, saved) {
		t.Fatalf("restore sent %d bytes, want the %d of the file", len(c.cluster.restored), len(saved))
	}

	// --json keeps stdout for JSON: nothing to print here.
	out, _ = c.run(cli.ExitOK, "", "snapshot", "save", file, "--json")
	if out != "" {
		t.Fatalf("save --json stdout: got %q, want nothing", out)
	}
}

func TestSnapshotFailures(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.db")

	_, errOut := c.run(cli.ExitUsage, "", "snapshot", "restore", filepath.Join(dir, "missing.db"))
	contains(t, "restore of a missing file", errOut, "no such file")
	_, errOut = c.run(cli.ExitUsage, "", "snapshot", "save", filepath.Join(dir, "no", "such", "dir.db"))
	contains(t, "save into a missing directory", errOut, "no such file")
	_, errOut = c.run(cli.ExitUsage, "", "snapshot", "save", dir)
	contains(t, "save onto a directory", errOut, "is a directory")
	_, errOut = c.run(cli.ExitUsage, "", "snapshot", "save")
	contains(t, "save without FILE", errOut, "needs FILE")
	if c.cluster.restored != nil {
		t.Fatal("a usage error sent a restore")
	}

	c.cluster.backupErr = errors.New("no quorum")
	_, errOut = c.run(cli.ExitServerError, "", "snapshot", "save", file)
	contains(t, "save without quorum", errOut, "SERVICE_UNAVAILABLE")
	noTemp(t, dir)

	if err := os.WriteFile(file, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.cluster.restoreErr = &admin.ClusterError{Status: http.StatusBadRequest, Code: httpx.CodeBadRequest, Message: "not a state file"}
	_, errOut = c.run(cli.ExitServerError, "", "snapshot", "restore", file)
	contains(t, "restore of garbage", errOut, "error: BAD_REQUEST: not a state file")
}

// TestSnapshotSaveCutShort: a download that ends early leaves no file.
func TestSnapshotSaveCutShort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		w.Write(bytes.Repeat([]byte("x"), 100<<10))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"--addr", srv.URL, "--token", "t", "snapshot", "save", filepath.Join(dir, "b.db")},
		nil, nil, &out, &errb)
	if code != cli.ExitUnreachable {
		t.Fatalf("exit: got %d, want %d; stderr %s", code, cli.ExitUnreachable, errb.String())
	}
	contains(t, "stderr", errb.String(), "cut short", "was not written")
	noTemp(t, dir)
}

func TestSnapshotHelpNamesTheToken(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cli.Run(context.Background(), []string{"snapshot", "restore", "-h"}, nil, nil, &out, &errb); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	contains(t, "restore help", out.String(), "oidcd admin snapshot restore FILE", "admin token", "leader", "default is 10m")
}
