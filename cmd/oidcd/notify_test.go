package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNotifyAndDrain runs the built binary as systemd would run the
// .deb's Type=notify unit, with $NOTIFY_SOCKET on a socket the test
// opens: READY=1 comes once /readyz answers 200, WATCHDOG=1 follows at
// half of WATCHDOG_USEC, and SIGTERM sends STOPPING=1, turns /readyz to
// 503 while discovery is still served for --shutdown-drain, and then
// stops the process cleanly.
func TestNotifyAndDrain(t *testing.T) {
	bin := builtBinary(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	ports := freePorts(t, 3)
	issuer := "http://" + ports[0]
	cmd := exec.Command(bin, "serve", "--issuer", issuer, "--http-addr", ports[0], "--raft-addr", ports[1],
		"--gossip-addr", ports[2], "--data-dir", filepath.Join(dir, "data"), "--shutdown-drain", "1500ms")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=400000"}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("node output:\n%s", out.String())
		}
	})
	status := func(path string) int {
		resp, err := http.Get(issuer + path)
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	want := func(msg string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case m := <-msgs:
				if strings.Contains(m, msg) {
					return
				}
			case <-deadline:
				t.Fatalf("no %s on the notify socket within 20 s", msg)
			}
		}
	}
	want("READY=1")
	if got := status("/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz after READY=1: got %d, want 200", got)
	}
	want("WATCHDOG=1")
	cmd.Process.Signal(syscall.SIGTERM)
	want("STOPPING=1")
	if r, d := status("/readyz"), status("/.well-known/openid-configuration"); r != http.StatusServiceUnavailable || d != http.StatusOK {
		t.Fatalf("while draining: /readyz %d, discovery %d; want 503 and 200", r, d)
	}
	if code := stop(t, cmd); code != 0 { // stop waits for the exit after the drain
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}
