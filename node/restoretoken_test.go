package node_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// Log lines of the admin token model (node/bootstrap.go noteAdminToken).
const (
	flagDiffersLog = "--admin-token (or OIDCD_ADMIN_TOKEN) does not match the cluster's admin token"
	fileStaleLog   = "the token in the token file is no longer the cluster's admin token"
)

// otherToken is a fresh cluster's own --admin-token when it differs from
// the backed-up cluster's.
const otherToken = "the-fresh-clusters-own-token-0123456789abcdef"

// TestRestoreBringsBackTheBackupsAdminToken walks every combination of
// where the backed-up cluster's admin token came from (--admin-token, which
// is also where OIDCD_ADMIN_TOKEN lands, or generated into
// <data-dir>/admin-token) and what the fresh cluster restored into was
// started with (no token, the same token, another token by flag). In each,
// right after the restore and with no restart, on every node: the token
// that worked when the backup was saved works, the fresh cluster's own
// token does not, and a node whose flag or token file no longer matches
// says so in its log (and nothing is said when everything matches).
func TestRestoreBringsBackTheBackupsAdminToken(t *testing.T) {
	cases := []struct {
		source string // the backed-up cluster's token: "flag" or "generated"
		fresh  string // the fresh cluster's: "none" (generated), "same" or "different" (by flag)
		size   int    // nodes of the fresh cluster
	}{
		{"flag", "none", 1},
		{"flag", "same", 1},
		{"flag", "different", 3},
		{"generated", "none", 3},
		{"generated", "same", 1},
		{"generated", "different", 1},
	}
	for _, tc := range cases {
		t.Run(tc.source+" into "+tc.fresh, func(t *testing.T) {
			t.Parallel()
			// The backed-up cluster: its token works, and a backup is saved with it.
			a := testcluster.New(t, testcluster.Options{GeneratedAdminToken: tc.source == "generated"})
			saved := testcluster.AdminToken
			if tc.source == "generated" {
				saved = waitTokenFile(t, a, 0)
			}
			kept := createOrg(t, a, saved, "in-backup")
			backup := getBackup(t, a, saved)

			// The fresh cluster, and its own token before the restore.
			logs := make([]*syncBuffer, tc.size)
			b := testcluster.New(t, testcluster.Options{Size: tc.size, GeneratedAdminToken: tc.fresh == "none",
				Configure: func(i int, cfg *node.Config) {
					logs[i] = &syncBuffer{}
					cfg.Logger = slog.New(slog.NewTextHandler(logs[i], nil))
					switch tc.fresh {
					case "same":
						cfg.AdminToken = saved
					case "different":
						cfg.AdminToken = otherToken
					}
				}})
			own := map[string]string{"same": saved, "different": otherToken}[tc.fresh]
			ownFile := -1 // the node whose token file holds the fresh cluster's generated token
			if tc.fresh == "none" {
				ownFile, own = waitAnyTokenFile(t, b)
			}
			for i := range b.Size() {
				mustStatus(t, b, i, "GET", "/admin/v1/organizations", own, nil, http.StatusOK)
			}

			restoreWith(t, b, own, backup)

			for i := range b.Size() {
				waitRestored(t, b, i)
				mustStatus(t, b, i, "GET", "/admin/v1/organizations/"+kept, saved, nil, http.StatusOK)
				if own != saved {
					mustStatus(t, b, i, "GET", "/admin/v1/organizations", own, nil, http.StatusUnauthorized)
				}
				waitLog(t, i, logs[i], flagDiffersLog, tc.fresh == "different")
				waitLog(t, i, logs[i], fileStaleLog, i == ownFile)
			}
			// A write with the backup's token reaches every node: the
			// restored cluster works as any other.
			after := createOrg(t, b, saved, "after-restore")
			for i := range b.Size() {
				waitStatus(t, b, i, "GET", "/admin/v1/organizations/"+after, saved, http.StatusOK)
			}
		})
	}
}

// TestRestoreOfABackupWithoutAdminToken: a backup saved by a version that
// did not replicate --admin-token holds no admin token hash. Restored, it
// gets one at once: the restoring leader's --admin-token, or, on a cluster
// that generated its token, a new generated token in the leader's token
// file (the old one stops working, and nobody is locked out).
func TestRestoreOfABackupWithoutAdminToken(t *testing.T) {
	a := testcluster.New(t, testcluster.Options{})
	kept := createOrg(t, a, testcluster.AdminToken, "in-backup")
	old := withoutAdminToken(t, getBackup(t, a, testcluster.AdminToken))

	t.Run("flag", func(t *testing.T) {
		t.Parallel()
		b := testcluster.New(t, testcluster.Options{})
		restoreWith(t, b, testcluster.AdminToken, old)
		mustStatus(t, b, 0, "GET", "/admin/v1/organizations/"+kept, testcluster.AdminToken, nil, http.StatusOK)
		waitStateHash(t, b, 0, admin.HashToken(testcluster.AdminToken))
	})
	t.Run("generated", func(t *testing.T) {
		t.Parallel()
		b := testcluster.New(t, testcluster.Options{GeneratedAdminToken: true})
		before := waitTokenFile(t, b, 0)
		restoreWith(t, b, before, old)
		deadline := time.Now().Add(10 * time.Second)
		for b.AdminTokenFromFile(0) == before {
			if time.Now().After(deadline) {
				t.Fatal("no new token in the token file within 10 s of the restore")
			}
			time.Sleep(20 * time.Millisecond)
		}
		now := b.AdminTokenFromFile(0)
		mustStatus(t, b, 0, "GET", "/admin/v1/organizations/"+kept, now, nil, http.StatusOK)
		mustStatus(t, b, 0, "GET", "/admin/v1/organizations", before, nil, http.StatusUnauthorized)
	})
}

// TestFlagTokenIsSeededIntoAStateWithout is the rolling upgrade from a
// version that did not replicate --admin-token: every node runs with the
// same --admin-token and the state holds no hash. After the restart the
// token works on every node, and the leader has seeded its hash, so that a
// backup made afterwards carries it. (The mixed cluster itself, old nodes
// beside new ones, is cmd/oidcd TestRollingUpgradeFromThePreviousRelease.)
func TestFlagTokenIsSeededIntoAStateWithout(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	before := createOrg(t, c, testcluster.AdminToken, "before")
	for i := range c.Size() {
		waitStatus(t, c, i, "GET", "/admin/v1/organizations/"+before+"?stale=true", testcluster.AdminToken, http.StatusOK)
	}
	for i := range c.Size() {
		c.Kill(i)
	}
	for i := range c.Size() {
		dropAdminToken(t, filepath.Join(c.DataDir(i), "state.db"))
	}
	c.RestartTogether(0, 1, 2)
	for i := range c.Size() {
		waitStatus(t, c, i, "GET", "/admin/v1/organizations/"+before, testcluster.AdminToken, http.StatusOK)
		waitStateHash(t, c, i, admin.HashToken(testcluster.AdminToken))
	}
}

// syncBuffer is a log destination that tests read while nodes write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitTokenFile waits up to 10 s for node i's generated token.
func waitTokenFile(t *testing.T, c *testcluster.Cluster, i int) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(c.Node(i).AdminTokenFile()); err == nil {
			return c.AdminTokenFromFile(i)
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: no admin token file within 10 s", i)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAnyTokenFile waits up to 10 s for the node (the first leader) that
// generated the cluster's token, and returns it and the token.
func waitAnyTokenFile(t *testing.T, c *testcluster.Cluster) (int, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for i := range c.Size() {
			if _, err := os.Stat(c.Node(i).AdminTokenFile()); err == nil {
				return i, c.AdminTokenFromFile(i)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no admin token file within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createOrg creates an organization through the leader with token and
// returns its id.
func createOrg(t *testing.T, c *testcluster.Cluster, token, slug string) string {
	t.Helper()
	var org struct{ ID string }
	if resp := doOn(t, c, c.WaitNewLeader(), "POST", "/admin/v1/organizations", token, map[string]any{"slug": slug, "name": slug}, &org); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create organization %s: got %d, want 201", slug, resp.StatusCode)
	}
	return org.ID
}

// adminCall sends an admin API request with token to node i and returns
// the status.
func adminCall(t *testing.T, c *testcluster.Cluster, i int, method, path, token string, body any) int {
	t.Helper()
	resp := doOn(t, c, i, method, path, token, body, nil)
	return resp.StatusCode
}

func mustStatus(t *testing.T, c *testcluster.Cluster, i int, method, path, token string, body any, want int) {
	t.Helper()
	if got := adminCall(t, c, i, method, path, token, body); got != want {
		t.Fatalf("node %d: %s %s with token %.12s...: got %d, want %d", i, method, path, token, got, want)
	}
}

// waitRestored waits up to 10 s until node i installed a restored state
// (a follower does so a moment after the leader). Polling the admin API
// instead would count the wrong tokens against the guard.
func waitRestored(t *testing.T, c *testcluster.Cluster, i int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Node(i).FSM().Restores() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("node %d: no restore installed within 10 s", i)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStatus repeats a GET on node i for up to 10 s until it answers want
// (a node restarted a moment ago may answer 503 first).
func waitStatus(t *testing.T, c *testcluster.Cluster, i int, method, path, token string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := adminCall(t, c, i, method, path, token, nil)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: %s %s with token %.12s...: got %d, want %d (for 10 s)", i, method, path, token, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLog waits up to 5 s for line in node i's log when want; when not, it
// checks that the line is absent.
func waitLog(t *testing.T, i int, log *syncBuffer, line string, want bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for want && !strings.Contains(log.String(), line) {
		if time.Now().After(deadline) {
			t.Errorf("node %d: the log does not say %q within 5 s:\n%s", i, line, log.String())
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !want && strings.Contains(log.String(), line) {
		t.Errorf("node %d: the log says %q, but nothing differs:\n%s", i, line, log.String())
	}
}

// waitStateHash waits up to 10 s until node i's state holds hash.
func waitStateHash(t *testing.T, c *testcluster.Cluster, i int, hash string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.Node(i).FSM().State().AdminTokenHash()
		if err == nil && got == hash {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: state admin token hash: got %q (%v), want %q", i, got, err, hash)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getBackup saves a backup from node 0 with token.
func getBackup(t *testing.T, c *testcluster.Cluster, token string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", c.URL(0)+"/admin/v1/snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /snapshot: %d %v", resp.StatusCode, err)
	}
	return b
}

// restoreWith posts backup to the leader with token, asking the new
// leader if leadership moved in between.
func restoreWith(t *testing.T, c *testcluster.Cluster, token string, backup []byte) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequest("POST", c.URL(c.WaitNewLeader())+"/admin/v1/snapshot", bytes.NewReader(backup))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNoContent {
			return
		}
		if attempt == 3 || resp.StatusCode != http.StatusConflict {
			t.Fatalf("POST /snapshot: %d %s", resp.StatusCode, b)
		}
	}
}

// The replicated admin token hash, where fsm keeps it (fsm/schema.go):
// the tests below remove it to make the state of a version that did not
// replicate --admin-token.
var (
	metaBucket    = []byte("meta")
	adminTokenKey = []byte("admin_token_hash")
)

// dropAdminToken removes the admin token hash from a stopped node's state
// file.
func dropAdminToken(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(metaBucket)
		if m == nil || m.Get(adminTokenKey) == nil {
			t.Fatalf("%s holds no admin token hash to drop", path)
		}
		return m.Delete(adminTokenKey)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// withoutAdminToken returns backup with its admin token hash removed.
func withoutAdminToken(t *testing.T, backup []byte) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	dropAdminToken(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
