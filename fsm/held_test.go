package fsm

import (
	"bufio"
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

// TestHeldStateFileHelper is the other process of TestHeldStateFile: it
// holds the state file open until its stdin closes.
func TestHeldStateFileHelper(t *testing.T) {
	path := os.Getenv("FSM_HELD_PATH")
	if path == "" {
		t.Skip("the other process of TestHeldStateFile")
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.Stdout.WriteString("holding\n")
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
}

// TestHeldStateFile: opening a state file that another process holds
// fails within a few seconds with ErrHeld, naming the data directory and,
// on Linux, the holder's pid; the same process opening it twice is told
// so too.
func TestHeldStateFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHeldStateFileHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FSM_HELD_PATH="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "holding" {
			t.Fatalf("helper: got %q, want holding", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the helper did not open the state file within 30 s")
	}

	start := time.Now()
	f, err := Open(path)
	if err == nil {
		f.Close()
		t.Fatal("opened a state file another process holds")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s to refuse, want at most 3 s", took)
	}
	if !errors.Is(err, ErrHeld) {
		t.Errorf("got %v, want ErrHeld", err)
	}
	want := "another oidcd process holds the data directory " + dir + " "
	if runtime.GOOS == "linux" {
		want = "another oidcd process (pid " + strconv.Itoa(cmd.Process.Pid) + ") holds the data directory " + dir + " "
	}
	if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "timeout") {
		t.Errorf("got %q, want it to contain %q", err, want)
	}

	// Let go: the file opens again.
	stdin.Close()
	cmd.Wait()
	f, err = Open(path)
	if err != nil {
		t.Fatalf("after the holder exited: %v", err)
	}
	defer f.Close()
	if _, err := Open(path); !errors.Is(err, ErrHeld) || (runtime.GOOS == "linux" && !strings.Contains(err.Error(), "this process holds the data directory")) {
		t.Errorf("opened twice in one process: got %v, want ErrHeld naming this process", err)
	}
}
