package main

import (
	"flag"

	"bytes"
	"github.com/oidcd/oidcd/node"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStartLine(t *testing.T) {
	cases := []struct{ issuer, addr, want string }{
		{"http://127.0.0.1:8080", "127.0.0.1:8080", "oidcd v1 serving http://127.0.0.1:8080 (data in ./data)"},
		{"https://id.example", "127.0.0.1:8080", "oidcd v1 serving https://id.example, listening on 127.0.0.1:8080 (data in ./data)"},
	}
	for _, c := range cases {
		if got := startLine("v1", c.issuer, c.addr, "./data"); got != c.want {
			t.Errorf("startLine(%q, %q): got %q, want %q", c.issuer, c.addr, got, c.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a process writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecondDemoStartSaysWhereTheTokenIs: `make run` on an existing data
// directory again says where the admin token is and what the demo
// sign-in is, and the start line names the URL once.
func TestSecondDemoStartSaysWhereTheTokenIs(t *testing.T) {
	bin := builtBinary(t)
	dir := t.TempDir()
	ports := freePorts(t, 3)
	start := func(t *testing.T, want ...string) {
		t.Helper()
		var out syncBuffer
		cmd := exec.Command(bin, "serve", "--demo", "--issuer", "http://"+ports[0], "--http-addr", ports[0],
			"--raft-addr", ports[1], "--gossip-addr", ports[2], "--data-dir", filepath.Join(dir, "data"),
			"--email-outbox", filepath.Join(dir, "data", "outbox.jsonl")) // as make run does
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer stop(t, cmd)
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := out.String()
			missing := ""
			for _, w := range want {
				if !strings.Contains(s, w) {
					missing = w
				}
			}
			if missing == "" {
				for _, l := range strings.Split(s, "\n") {
					if strings.HasPrefix(l, "oidcd ") && strings.Count(l, ports[0]) > 1 {
						t.Errorf("the start line names the URL twice: %q", l)
					}
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q within 30 s:\n%s", missing, s)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	start(t, "Admin API token (shown once", "Demo data created", "demo@example.com / demo-password", "serving http://"+ports[0]+" (data in",
		"mail to people (invitations, password resets): "+filepath.Join(dir, "data", "outbox.jsonl"), "/password/forgot")
	start(t, "Admin API token: in "+filepath.Join(dir, "data", "admin-token"), "demo@example.com / demo-password")
}

// TestFlagTableListsEveryFlag: the table of `oidcd serve` flags in the
// operator guide (docs/operators/node.md, "Flags") names every flag the
// binary has, and no flag it does not.
func TestFlagTableListsEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../docs/operators/node.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Flags")
	if i < 0 {
		t.Fatal("docs/operators/node.md has no \"Flags\" section")
	}
	s = s[i:]
	if j := strings.Index(s[3:], "\n## "); j > 0 {
		s = s[:j+3]
	}
	inTable := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "| `--") {
			for _, f := range strings.Split(strings.Split(l, "|")[1], ",") {
				inTable[strings.Trim(strings.TrimSpace(f), "`-")] = true
			}
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var cfg node.Config
	var level, join string
	serveFlags(fs, &cfg, &level, &join)
	fs.VisitAll(func(f *flag.Flag) {
		if !inTable[f.Name] {
			t.Errorf("flag --%s is missing from the table of docs/operators/node.md", f.Name)
		}
		delete(inTable, f.Name)
	})
	delete(inTable, "config") // read by serve before the flag set (config.go)
	for name := range inTable {
		t.Errorf("the table of docs/operators/node.md lists --%s, which oidcd serve does not have", name)
	}
}
