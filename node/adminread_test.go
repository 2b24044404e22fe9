package node_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/oidcd/oidcd/testcluster"
)

// TestAdminReadOnFollowerSeesAcknowledgedWrite: an operator's script
// behind a balancer creates an organization through one node and reads it
// at once through another. The read is linearizable: it sees every write
// acknowledged before it began, so it never answers 404 (a follower that
// read its own copy answered 404 until it had applied the entry).
func TestAdminReadOnFollowerSeesAcknowledgedWrite(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	reader := -1
	for _, f := range c.Followers() {
		if f != 0 {
			reader = f
			break
		}
	}
	const rounds = 150
	deadline := time.Now().Add(60 * time.Second)
	var missed []int
	for i := range rounds {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d rounds in 60 s", i, rounds)
		}
		var org struct {
			ID string `json:"id"`
		}
		if resp := doOn(t, c, 0, "POST", "/admin/v1/organizations", testcluster.AdminToken,
			map[string]any{"slug": fmt.Sprintf("read-after-write-%d", i), "name": "R"}, &org); resp.StatusCode != http.StatusCreated {
			t.Fatalf("round %d: create through node 0: got %d, want 201", i, resp.StatusCode)
		}
		switch resp := doOn(t, c, reader, "GET", "/admin/v1/organizations/"+org.ID, testcluster.AdminToken, nil, nil); resp.StatusCode {
		case http.StatusOK:
		case http.StatusNotFound:
			missed = append(missed, i)
		default:
			t.Fatalf("round %d: read through node %d: got %d, want 200", i, reader, resp.StatusCode)
		}
	}
	if len(missed) > 0 {
		t.Fatalf("%d of %d reads through follower %d answered 404 for an organization acknowledged before the read (rounds %v)",
			len(missed), rounds, reader, missed)
	}
}

// TestStaleAdminReadOnCutOffFollower: a follower cut off from the leader
// answers ?stale=true from its own copy (200), and the default,
// linearizable read with 503 SERVICE_UNAVAILABLE within its deadline
// (node.readIndexTimeout, 3 s) rather than an answer that may be stale.
// GET /status, /cluster and /audit/verify describe the node itself and
// answer either way.
func TestStaleAdminReadOnCutOffFollower(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	leader := c.WaitNewLeader()
	f := c.Followers()[0]
	var org struct {
		ID string `json:"id"`
	}
	if resp := doOn(t, c, leader, "POST", "/admin/v1/organizations", testcluster.AdminToken,
		map[string]any{"slug": "cut-off", "name": "Cut off"}, &org); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: got %d, want 201", resp.StatusCode)
	}
	path := "/admin/v1/organizations/" + org.ID
	// Wait until the follower's own copy holds the organization.
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		resp := doOn(t, c, f, "GET", path+"?stale=true", testcluster.AdminToken, nil, nil)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("follower %d has not applied the organization 10 s after it was acknowledged: %d", f, resp.StatusCode)
		}
	}
	c.Partition(f)
	t.Cleanup(c.Heal)

	if resp := doOn(t, c, f, "GET", path+"?stale=true", testcluster.AdminToken, nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("stale read on the cut-off follower: got %d, want 200 from its own copy", resp.StatusCode)
	}
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	start := time.Now()
	resp := doOn(t, c, f, "GET", path, testcluster.AdminToken, nil, &env)
	took := time.Since(start)
	if resp.StatusCode != http.StatusServiceUnavailable || env.Error.Code != "SERVICE_UNAVAILABLE" {
		t.Fatalf("linearizable read on the cut-off follower: got %d %q, want 503 SERVICE_UNAVAILABLE", resp.StatusCode, env.Error.Code)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	if took > 5*time.Second {
		t.Errorf("503 after %v, want within the 3 s read-index deadline (and some slack)", took)
	}
	t.Logf("linearizable read refused after %v", took)
	// Still cut off: the stale read keeps answering, and so does the
	// node's own status.
	if resp := doOn(t, c, f, "GET", path+"?stale=true", testcluster.AdminToken, nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("stale read after the 503: got %d, want 200", resp.StatusCode)
	}
	for _, p := range []string{"/admin/v1/status", "/admin/v1/cluster", "/admin/v1/audit/verify"} {
		if resp := doOn(t, c, f, "GET", p, testcluster.AdminToken, nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s on the cut-off follower: got %d, want 200 (it describes the node)", p, resp.StatusCode)
		}
	}
}

// BenchmarkAdminRead: one GET /admin/v1/organizations/{id} over HTTP on a
// three-node cluster, through the leader and through a follower, with the
// default linearizable read (a read index: one heartbeat round, plus the
// forward to the leader on a follower) and with ?stale=true (the node's
// own copy): the difference is what a read index costs an admin GET.
func BenchmarkAdminRead(b *testing.B) {
	c := testcluster.New(b, testcluster.Options{Size: 3})
	var org struct {
		ID string `json:"id"`
	}
	if resp := doOn(b, c, c.Leader(), "POST", "/admin/v1/organizations", testcluster.AdminToken,
		map[string]any{"slug": "bench", "name": "Bench"}, &org); resp.StatusCode != http.StatusCreated {
		b.Fatalf("create: got %d, want 201", resp.StatusCode)
	}
	hc := c.Client()
	for _, role := range []string{"leader", "follower"} {
		i := c.WaitNewLeader()
		if role == "follower" {
			i = c.Followers()[0]
		}
		for _, query := range []string{"", "?stale=true"} {
			b.Run(role+"/"+map[string]string{"": "linearizable", "?stale=true": "stale"}[query], func(b *testing.B) {
				req, _ := http.NewRequest("GET", c.URL(i)+"/admin/v1/organizations/"+org.ID+query, nil)
				req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
				for b.Loop() {
					resp, err := hc.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("got %d, want 200", resp.StatusCode)
					}
				}
			})
		}
	}
}
