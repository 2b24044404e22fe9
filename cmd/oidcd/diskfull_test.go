package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFullDisk: the data directory is a 24 MiB tmpfs the test mounts
// (skipped where it cannot mount: it needs root). People are imported until
// the disk is full. Then writes answer 503 within the write time-out,
// discovery, the JWKS and reads keep serving, /readyz says why it is not
// ready, and the node stays up; nothing acknowledged is lost. When the
// file system grows, writes go on by themselves, and the node is ready
// again.
func TestFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a disk")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for the full-disk test (needs root): %v: %s", err, bytes.TrimSpace(out))
	}
	k := newKillableIn(t, filepath.Join(mnt, "data"))
	t.Cleanup(func() {
		if k.cmd != nil && k.cmd.ProcessState == nil {
			k.kill()
		}
		exec.Command("umount", mnt).Run()
	})

	acknowledged := 0
	full := false
	for b := 0; b < 200 && !full; b++ {
		var users []map[string]string
		for i := range 1000 {
			users = append(users, map[string]string{"email": fmt.Sprintf("p%d-%d@example.com", b, i)})
		}
		body, _ := json.Marshal(map[string]any{"users": users})
		start := time.Now()
		status, answer := k.admin("POST", "/users/import", bytes.NewReader(body), "application/json")
		switch {
		case status == http.StatusOK:
			acknowledged += 1000
		case status == http.StatusServiceUnavailable:
			full = true
			if d := time.Since(start); d > 8*time.Second {
				t.Fatalf("the refused write took %v", d)
			}
		default:
			t.Fatalf("batch %d: %d %s", b, status, answer)
		}
	}
	if !full {
		t.Fatal("the disk never filled")
	}
	t.Logf("disk full after %d people", acknowledged)
	// Another batch as large as the one refused finds no room either. (A
	// small write may still fit in what the refused batch left, and is
	// then rightly acknowledged: the disk is full for what does not fit.)
	var users []map[string]string
	for i := range 1000 {
		users = append(users, map[string]string{"email": fmt.Sprintf("while-full-%d@example.com", i)})
	}
	body, _ := json.Marshal(map[string]any{"users": users})
	start := time.Now()
	if status, answer := k.admin("POST", "/users/import", bytes.NewReader(body), "application/json"); status != http.StatusServiceUnavailable {
		t.Fatalf("a write the full disk has no room for: %d %s, want 503", status, answer)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("the refused write took %v", d)
	}
	for _, p := range []string{"/.well-known/openid-configuration", "/.well-known/jwks.json", "/healthz"} {
		if resp, err := http.Get(k.issuer + p); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s on a full disk: %v %v", p, resp, err)
		}
	}
	resp, err := http.Get(k.issuer + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready bytes.Buffer
	ready.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(ready.String(), "disk is full") {
		t.Fatalf("/readyz on a full disk: %d %s", resp.StatusCode, ready.String())
	}
	// Admin reads are linearizable, and on a full disk a committed write
	// may wait to be applied: the node's own copy is still readable.
	if n, _ := k.stateWith("&stale=true"); n < acknowledged {
		t.Fatalf("%d people readable, %d acknowledged", n, acknowledged)
	}

	if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, _ := k.admin("POST", "/organizations", strings.NewReader(`{"slug":"space-back","name":"X"}`), "application/json")
		if status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes did not resume within 20 s of the space returning (last %d)", status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if resp, err := http.Get(k.issuer + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/readyz after the space returned: %v %v", resp, err)
	}
	if n, _ := k.state(); n < acknowledged {
		t.Fatalf("after: %d people, %d acknowledged", n, acknowledged)
	}
	if k.cmd.ProcessState != nil {
		t.Fatal("the node exited")
	}
}
