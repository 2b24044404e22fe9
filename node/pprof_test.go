package node_test

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

func TestPprofAddrMustBeLoopback(t *testing.T) {
	cases := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:6060", true},
		{"127.0.0.2:0", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{":6060", false},           // every interface
		{"0.0.0.0:6060", false},    // every interface
		{"[::]:6060", false},       // every interface
		{"192.0.2.10:6060", false}, // another machine's address
		{"example.com:6060", false},
		{"127.0.0.1", false}, // no port
	}
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			dir := t.TempDir()
			// Validate reports every problem of this mostly empty config;
			// only --pprof-addr's matters here.
			cfg := node.Config{PprofAddr: c.addr}
			err := cfg.Validate()
			switch {
			case c.ok && err != nil && strings.Contains(err.Error(), "--pprof-addr"):
				t.Fatalf("got %v, want accepted", err)
			case !c.ok && (err == nil || !strings.Contains(err.Error(), "--pprof-addr")):
				t.Fatalf("got %v, want an error about --pprof-addr", err)
			}
			if !c.ok {
				// node.New refuses it before anything starts.
				if n, err := node.New(node.Config{DataDir: filepath.Join(dir, "n"), PprofAddr: c.addr}); err == nil {
					n.Close()
					t.Fatal("node.New accepted it")
				}
			}
		})
	}
}

func TestPprofAnswersOnLoopback(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.PprofAddr = "127.0.0.1:0" }})
	addr := c.Node(0).PprofAddr()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("pprof bound to %q, want 127.0.0.1:port", addr)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/heap?debug=1"} {
		resp, err := c.Client().Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") && !strings.Contains(string(body), "heap") {
			t.Errorf("GET %s: status %d, body %.80q; want 200 and a profile", path, resp.StatusCode, body)
		}
	}
	// The OIDC listener does not serve the profiles.
	resp, err := c.Client().Get(c.URL(0) + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ on the OIDC listener: status %d, want 404", resp.StatusCode)
	}
	// Closing the node closes the pprof listener.
	c.Kill(0)
	if _, err := c.Client().Get("http://" + addr + "/debug/pprof/"); err == nil {
		t.Error("the pprof listener still answers after the node closed")
	}
}
