package node_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/testcluster"
)

// firstReady polls /readyz until its first 200 and returns the checks the
// last 503 listed.
func firstReady(t *testing.T, c *testcluster.Cluster, i int) []string {
	t.Helper()
	var lastNotReady []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Client().Get(c.URL(i) + "/readyz")
		if err == nil {
			var body struct {
				Status string
				Checks []struct {
					Name string
					OK   bool
				}
			}
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return lastNotReady
			}
			lastNotReady = nil
			for _, ch := range body.Checks {
				if !ch.OK {
					lastNotReady = append(lastNotReady, ch.Name)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: /readyz not 200 within 20 s (last not ready: %v)", i, lastNotReady)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestReadyzVerboseListsItsChecks: ?verbose names each check with its
// state on a 200 too.
func TestReadyzVerboseListsItsChecks(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	firstReady(t, c, 0)
	resp, err := c.Client().Get(c.URL(0) + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	for _, want := range []string{`"leader"`, `"signing_key"`, `"caught_up"`, `"ok":true`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("/readyz?verbose: got %s, want %s in it", b.String(), want)
		}
	}
}
