package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/testcluster"
)

// TestReadyMeansReady: the measurement as a test. A fresh single
// node is started from the built binary 20 times with both cores kept
// busy beside it; /readyz is polled from the moment of exec, and right
// after its first 200 the JWKS must hold a key and a whole go-oidc
// sign-in must succeed on the first try. Before readiness waited for the
// first signing key, most such starts answered the JWKS with 503.
func TestReadyMeansReady(t *testing.T) {
	bin := builtBinary(t)
	hogStop := make(chan struct{})
	var hog sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		hog.Add(1)
		go func() {
			defer hog.Done()
			x := 0
			for {
				select {
				case <-hogStop:
					return
				default:
					for i := range 100000 {
						x += i
					}
				}
			}
		}()
	}
	defer func() { close(hogStop); hog.Wait() }()
	notReadyFirst := 0
	var readyTimes []time.Duration
	for run := range 20 {
		dir := t.TempDir()
		ports := freePorts(t, 3)
		n := &liveNode{issuer: "http://" + ports[0], token: strings.Repeat("r1", 24), dir: dir, raftAddr: ports[1]}
		n.cmd = exec.Command(bin, "serve", "--issuer", n.issuer, "--http-addr", ports[0], "--raft-addr", ports[1],
			"--gossip-addr", ports[2], "--data-dir", filepath.Join(dir, "data"))
		n.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "OIDCD_ADMIN_TOKEN=" + n.token}
		started := time.Now()
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sawNotReady := false
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get(n.issuer + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				sawNotReady = true
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d: not ready within 30 s", run)
			}
			time.Sleep(2 * time.Millisecond)
		}
		readyTimes = append(readyTimes, time.Since(started).Round(time.Millisecond))
		if sawNotReady {
			notReadyFirst++
		}
		resp, err := http.Get(n.issuer + "/.well-known/jwks.json")
		if err != nil {
			t.Fatal(err)
		}
		var jwks struct{ Keys []any }
		json.NewDecoder(resp.Body).Decode(&jwks)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(jwks.Keys) == 0 {
			t.Fatalf("run %d: JWKS right after the first /readyz 200: %d, %d keys", run, resp.StatusCode, len(jwks.Keys))
		}
		s := provisionSite(t, n)
		if acr, _ := s.tokenClaims(t, s.authorize(t, testcluster.NewBrowser(t), "")); acr == "" {
			t.Fatalf("run %d: no acr in the ID token", run)
		}
		if code := stop(t, n.cmd); code != 0 {
			t.Fatalf("run %d: exit %d", run, code)
		}
	}
	t.Logf("%d of 20 starts answered /readyz 503 before 200; exec to ready: %s", notReadyFirst, readyTimes)
}
