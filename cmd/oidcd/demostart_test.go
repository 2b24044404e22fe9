package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoStartOutput: what a newcomer sees of `make run` (serve --demo,
// its flags as the Makefile gives them). The terminal holds the start
// line, the admin token and the demo sign-in, not raft's start-up
// narrative; no log line follows the demo block once start-up settles;
// a missing --kek-file is a note in the demo block, not a warning. A
// restart after the demo person changed their password no longer shows
// the demo password. Without --demo the warning stays; with --log-level
// the demo's log says everything again.
func TestDemoStartOutput(t *testing.T) {
	bin := builtBinary(t)
	dir := t.TempDir()
	ports := freePorts(t, 3)
	data := filepath.Join(dir, "data")
	run := func(t *testing.T, extra ...string) (out *syncBuffer, stopIt func()) {
		t.Helper()
		args := append([]string{"serve", "--issuer", "http://" + ports[0], "--http-addr", ports[0],
			"--raft-addr", ports[1], "--gossip-addr", ports[2], "--data-dir", data, "--shutdown-drain", "0s"}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		out = &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out // as a terminal shows both
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stopped := false
		stopIt = func() {
			if !stopped {
				stopped = true
				stop(t, cmd)
			}
		}
		t.Cleanup(stopIt)
		return out, stopIt
	}
	waitFor := func(t *testing.T, out *syncBuffer, want string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), want); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q within 30 s:\n%s", want, out.String())
			}
		}
	}
	demo := []string{"--demo", "--email-outbox", filepath.Join(data, "outbox.jsonl")}

	// The first start.
	out, stopIt := run(t, demo...)
	waitFor(t, out, "Secrets at rest")
	time.Sleep(2 * time.Second) // start-up settles: the first signing key, the leader's loops
	first := out.String()
	stopIt()
	for _, want := range []string{
		"serving http://" + ports[0],
		"Admin API token (shown once; also in " + filepath.Join(data, "admin-token") + "):\n  ",
		"Demo data created:\n  organization \"demo\", person demo@example.com / demo-password\n",
		"  note: demo secrets (signing keys, the browser key) are stored unencrypted in " + data + ";\n" +
			"    fine for a demo; in production give --kek-file: docs/operators/install.md, step 4,\n" +
			"    and SECURITY.md, \"Secrets at rest\"\n",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("first start: no %q in:\n%s", want, first)
		}
	}
	for _, unwanted := range []string{"component=raft", "level=INFO", "no --kek-file"} {
		if strings.Contains(first, unwanted) {
			t.Errorf("first start: %q in:\n%s", unwanted, first)
		}
	}
	if i := strings.Index(first, "Demo data created"); i >= 0 && strings.Contains(first[i:], "level=") {
		t.Errorf("first start: a log line after the demo block:\n%s", first[i:])
	}
	token, err := os.ReadFile(filepath.Join(data, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}

	// A restart: the demo password is shown while it is still the
	// person's; then the person changes it, and the next start does not.
	out, stopIt = run(t, demo...)
	waitFor(t, out, "Demo data (created earlier):\n  organization \"demo\", person demo@example.com / demo-password\n")
	changeDemoPassword(t, "http://"+ports[0], strings.TrimSpace(string(token)))
	stopIt()
	out, stopIt = run(t, demo...)
	waitFor(t, out, "Demo data (created earlier):")
	waitFor(t, out, "Secrets at rest")
	if s := out.String(); strings.Contains(s, "demo-password") || !strings.Contains(s, "person demo@example.com (its password was changed from the demo's)\n") {
		t.Errorf("after a password change: got\n%s\nwant the person without the demo password", s)
	}
	stopIt()

	// --log-level, given, is what the log shows, demo or not.
	out, stopIt = run(t, append(demo, "--log-level", "info")...)
	waitFor(t, out, "leadership acquired")
	waitFor(t, out, "component=raft")
	stopIt()

	// Without --demo the warning about --kek-file stays one.
	out, stopIt = run(t)
	waitFor(t, out, `level=WARN msg="no --kek-file: signing keys and other secrets are stored in the clear`)
	stopIt()
}

// changeDemoPassword sets the demo person's password through the admin
// API, as a person would on /account.
func changeDemoPassword(t *testing.T, base, token string) {
	t.Helper()
	call := func(method, path, body string) []byte {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b json.RawMessage
		json.NewDecoder(resp.Body).Decode(&b)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	var list struct{ Data []struct{ ID string } }
	json.Unmarshal(call("GET", "/admin/v1/users?email="+url.QueryEscape("demo@example.com"), ""), &list)
	if len(list.Data) != 1 {
		t.Fatalf("no demo person: %+v", list)
	}
	call("PATCH", "/admin/v1/users/"+list.Data[0].ID, `{"password":"a new password of mine"}`)
}
