package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin/cli"
)

// killable is one `oidcd serve` process that a test SIGKILLs and starts
// again on the same data directory and ports.
type killable struct {
	t      *testing.T
	bin    string
	args   []string
	issuer string
	token  string
	log    *os.File
	cmd    *exec.Cmd
}

func newKillable(t *testing.T) *killable {
	t.Helper()
	return newKillableIn(t, filepath.Join(t.TempDir(), "data"))
}

// newKillableIn starts the node with its data in dataDir.
func newKillableIn(t *testing.T, dataDir string) *killable {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 3)
	k := &killable{t: t, bin: builtBinary(t), issuer: "http://" + ports[0], token: strings.Repeat("k9", 24)}
	k.args = []string{"serve", "--issuer", k.issuer, "--http-addr", ports[0], "--raft-addr", ports[1],
		"--gossip-addr", ports[2], "--data-dir", dataDir}
	var err error
	if k.log, err = os.Create(filepath.Join(dir, "node.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if k.cmd != nil && k.cmd.ProcessState == nil {
			stop(t, k.cmd)
		}
		k.log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(k.log.Name())
			t.Logf("node log:\n%s", b)
		}
	})
	k.start()
	return k
}

// start starts the process and waits until /readyz answers 200.
func (k *killable) start() {
	k.t.Helper()
	k.cmd = exec.Command(k.bin, k.args...)
	k.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "OIDCD_ADMIN_TOKEN=" + k.token}
	k.cmd.Stdout, k.cmd.Stderr = k.log, k.log
	if err := k.cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(k.issuer + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if k.cmd.ProcessState != nil || time.Now().After(deadline) {
			k.t.Fatalf("the node did not become ready within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to go.
func (k *killable) kill() {
	k.cmd.Process.Kill()
	k.cmd.Wait()
}

func (k *killable) admin(method, path string, body io.Reader, contentType string) (int, []byte) {
	req, _ := http.NewRequest(method, k.issuer+"/admin/v1"+path, body)
	req.Header.Set("Authorization", "Bearer "+k.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// state is what the test checks after every restart: the number of
// people, whether the org "after-backup" is there, and the audit chain.
func (k *killable) state() (people int, afterBackup bool) {
	k.t.Helper()
	return k.stateWith("")
}

// stateWith is state with query parameters added to both reads
// ("&stale=true": the node's own copy, when it cannot confirm it is up to
// date, as on a full disk, where a committed write may wait to be applied).
func (k *killable) stateWith(query string) (people int, afterBackup bool) {
	k.t.Helper()
	status, b := k.admin("GET", "/users?page_size=1"+query, nil, "")
	var page struct {
		Pagination struct {
			TotalItems int `json:"total_items"`
		} `json:"pagination"`
	}
	if status != 200 || json.Unmarshal(b, &page) != nil {
		k.t.Fatalf("GET /users after a restart: %d %s", status, b)
	}
	status, b = k.admin("GET", "/organizations?page_size=100"+query, nil, "")
	if status != 200 {
		k.t.Fatalf("GET /organizations: %d", status)
	}
	status, v := k.admin("GET", "/audit/verify", nil, "")
	if status != 200 || !bytes.Contains(v, []byte(`"ok":true`)) {
		k.t.Fatalf("audit verify after a restart: %d %s", status, v)
	}
	return page.Pagination.TotalItems, bytes.Contains(b, []byte(`"after-backup"`))
}

// TestSIGKILLDuringBackupAndRestore: a node with 20,000 people is killed
// with SIGKILL while it streams a backup, and while it restores one (raft
// writes a snapshot of it and installs it), at several moments. Every
// restart is clean: the node becomes ready, every person is there, the
// state is wholly the old one or wholly the restored one, and the audit
// chain verifies.
func TestSIGKILLDuringBackupAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node a dozen times")
	}
	k := newKillable(t)
	var file bytes.Buffer
	file.WriteString("email\n")
	const people = 20000
	for i := range people {
		fmt.Fprintf(&file, "p%05d@example.com\n", i)
	}
	csv := filepath.Join(t.TempDir(), "people.csv")
	os.WriteFile(csv, file.Bytes(), 0o600)
	var out, errOut bytes.Buffer
	if code := cli.Run(context.Background(), []string{"--addr", k.issuer, "user", "import", csv, "--batch", "1000"},
		func(key string) string { return map[string]string{"OIDCD_ADMIN_TOKEN": k.token}[key] }, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("import: %d %s", code, errOut.String())
	}
	status, backup := k.admin("GET", "/snapshot", nil, "")
	if status != 200 || len(backup) < 1<<20 {
		t.Fatalf("backup: %d, %d bytes", status, len(backup))
	}
	t.Logf("backup of %d people: %d bytes", people, len(backup))
	if status, b := k.admin("POST", "/organizations", strings.NewReader(`{"slug":"after-backup","name":"After"}`), "application/json"); status != 201 {
		t.Fatalf("org: %d %s", status, b)
	}

	// Killed while streaming a backup.
	for _, after := range []time.Duration{time.Millisecond, 10 * time.Millisecond} {
		req, _ := http.NewRequest("GET", k.issuer+"/admin/v1/snapshot", nil)
		req.Header.Set("Authorization", "Bearer "+k.token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.CopyN(io.Discard, resp.Body, 4096)
			time.Sleep(after)
			k.kill()
			resp.Body.Close()
		} else {
			k.kill()
		}
		k.start()
		if n, after := k.state(); n != people || !after {
			t.Fatalf("after a kill during a backup: %d people, after-backup %v", n, after)
		}
	}

	// Killed while restoring, at moments from the upload to the install.
	restored := 0
	for _, after := range []time.Duration{5 * time.Millisecond, 30 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond, 600 * time.Millisecond} {
		done := make(chan int, 1)
		go func() {
			status, _ := k.admin("POST", "/snapshot", bytes.NewReader(backup), "application/octet-stream")
			done <- status
		}()
		time.Sleep(after)
		k.kill()
		status := <-done
		k.start()
		n, afterOrg := k.state()
		if n != people {
			t.Fatalf("killed %v into a restore (answer %d): %d people, want %d", after, status, n, people)
		}
		if status == http.StatusNoContent && afterOrg {
			t.Fatalf("killed %v into a restore that was acknowledged: the state is the old one", after)
		}
		if !afterOrg {
			restored++
			// The restore took: put the marker back for the next round.
			if status, b := k.admin("POST", "/organizations", strings.NewReader(`{"slug":"after-backup","name":"After"}`), "application/json"); status != 201 {
				t.Fatalf("org again: %d %s", status, b)
			}
		}
		t.Logf("killed %v into a restore: answer %d, restored: %v", after, status, !afterOrg)
	}
	t.Logf("%d of 5 killed restores had taken effect", restored)
}
