package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/testcluster"
)

// firstReady polls /readyz until its first 200 and returns the checks the
// last 503 listed.
func firstReady(t testing.TB, c *testcluster.Cluster, i int) []string {
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

// TestRestartedFollowerIsReadyOnlyWhenCaughtUp: a follower that was down
// while the cluster took writes answers /readyz 200 only once it holds
// them: right after its first 200, a person created while it was down
// reads back from it, and its JWKS serves.
func TestRestartedFollowerIsReadyOnlyWhenCaughtUp(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	f := c.Followers()[0]
	if f == 0 { // do() writes through node 0
		f = c.Followers()[1]
	}
	c.Kill(f)
	var ids []string
	for i := range 30 {
		var u map[string]any
		if resp := do(t, c, "POST", "/admin/v1/users", testcluster.AdminToken,
			map[string]any{"email": fmt.Sprintf("p%d@example.com", i)}, &u); resp.StatusCode != 201 {
			t.Fatalf("write %d while the follower is down: %d", i, resp.StatusCode)
		}
		ids = append(ids, u["id"].(string))
	}
	c.Restart(f)
	firstReady(t, c, f)
	for _, id := range []string{ids[0], ids[len(ids)-1]} {
		req, _ := http.NewRequest("GET", c.URL(f)+"/admin/v1/users/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the restarted follower right after ready: person %s: %d", id, resp.StatusCode)
		}
	}
	if get(t, c, f, "/.well-known/jwks.json") != http.StatusOK {
		t.Fatal("the restarted follower's JWKS right after ready")
	}
}
