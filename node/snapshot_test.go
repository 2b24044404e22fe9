package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// compacting makes every node snapshot after a few entries and keep a
// short log, so that a node that lags catches up from a snapshot.
func compacting(_ int, cfg *node.Config) {
	cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 8, 4, 100*time.Millisecond
}

// snapAdmin sends an admin API request to node i; body is JSON, or raw
// bytes sent as application/octet-stream.
func snapAdmin(t testing.TB, c *testcluster.Cluster, i int, method, path string, body any, out any) *http.Response {
	t.Helper()
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		rd, ct = bytes.NewReader(b), "application/octet-stream"
	default:
		j, _ := json.Marshal(b)
		rd, ct = bytes.NewReader(j), "application/json"
	}
	req, _ := http.NewRequest(method, c.URL(i)+path, rd)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s on node %d: %d %q: %v", method, path, i, resp.StatusCode, b, err)
		}
	}
	return resp
}

// snapCreateOrgs creates organizations slug-0 .. slug-(n-1) through node i.
func snapCreateOrgs(t testing.TB, c *testcluster.Cluster, i int, prefix string, n int) {
	t.Helper()
	for k := range n {
		slug := prefix + "-" + strconv.Itoa(k)
		var out map[string]any
		resp := snapAdmin(t, c, i, "POST", "/admin/v1/organizations", map[string]any{"slug": slug, "name": slug}, &out)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create org %s: %d %v", slug, resp.StatusCode, out)
		}
	}
}

// snapSlugs is node i's local view of the organizations, sorted by slug.
func snapSlugs(t testing.TB, c *testcluster.Cluster, i int) []string {
	t.Helper()
	orgs, _, err := c.Node(i).FSM().State().Orgs(fsm.Page{Page: 1, PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range orgs {
		out = append(out, o.Slug)
	}
	slices.Sort(out)
	return out
}

// snapWait polls cond for up to 20s.
func snapWait(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after 20s", what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// snapWipe empties a stopped node's data directory, as an operator who
// moves it aside and starts the node again does.
func snapWipe(t testing.TB, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func snapStat(c *testcluster.Cluster, i int, key string) uint64 {
	v, _ := strconv.ParseUint(c.Node(i).Cluster().Stats()[key], 10, 64)
	return v
}

// snapConverged waits until every running node holds exactly want.
func snapConverged(t testing.TB, c *testcluster.Cluster, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	for i := range c.Size() {
		snapWait(t, fmt.Sprintf("node %d state", i), func() (bool, string) {
			got := snapSlugs(t, c, i)
			return slices.Equal(got, want), fmt.Sprintf("%v, want %v", got, want)
		})
	}
}

// TestWipedNodeCatchesUpFromSnapshot: a node whose data directory is wiped
// comes back with the same id and address, is not a new cluster, and takes
// the leader's snapshot, since the leader's log no longer reaches back to
// where the wiped node starts.
//
// With static peers the wiped node finds no raft state and bootstraps the
// same three-voter configuration the cluster was formed with (entry 1,
// term 1), as every node did at formation: that entry is what the others
// hold at index 1, so it conflicts with nothing, and the leader replaces
// the node's log with its snapshot. With gossip a wiped node sees
// bootstrapped members and never bootstraps at all.
func TestWipedNodeCatchesUpFromSnapshot(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: compacting})
	leader := c.WaitNewLeader()
	victim := c.Followers()[0]
	snapCreateOrgs(t, c, leader, "before", 10)

	dir := c.Node(victim).DataDir()
	had := c.Node(victim).FSM().Applied()
	c.Kill(victim)
	snapCreateOrgs(t, c, leader, "while-down", 10)
	// The leader compacts on its own (thresholds above) past what the
	// victim had: its log starts after that snapshot less the trailing 4
	// entries, far past entry 1.
	snapWait(t, "leader snapshot", func() (bool, string) {
		l := c.WaitNewLeader()
		if l < 0 {
			return false, "no leader"
		}
		s := snapStat(c, l, "last_snapshot_index")
		return s > had, fmt.Sprintf("last_snapshot_index %d, the victim had %d", s, had)
	})
	snapWipe(t, dir)

	start := time.Now()
	c.Restart(victim) // waits until it knows the leader and holds the keys
	n := c.Node(victim)
	want := snapSlugs(t, c, c.WaitNewLeader())
	snapWait(t, "wiped node state", func() (bool, string) {
		got := snapSlugs(t, c, victim)
		return slices.Equal(got, want), fmt.Sprintf("%d orgs, want %d", len(got), len(want))
	})
	t.Logf("wiped node caught up in %v", time.Since(start).Round(time.Millisecond))
	if got := n.FSM().Restores(); got < 1 {
		t.Fatalf("wiped node restores: got %d, want a snapshot install", got)
	}
	// raft records the installed snapshot just after the FSM restored it.
	snapWait(t, "wiped node snapshot recorded", func() (bool, string) {
		got := snapStat(c, victim, "last_snapshot_index")
		return got > had, fmt.Sprintf("last_snapshot_index %d, want the leader's (above %d)", got, had)
	})

	// The configuration is the cluster's: same three voters, no new cluster.
	members, err := n.Cluster().Members()
	if err != nil {
		t.Fatal(err)
	}
	lm, err := c.Node(c.WaitNewLeader()).Cluster().Members()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(members) != fmt.Sprint(lm) || len(members) != 3 {
		t.Fatalf("wiped node's configuration: got %v, want the leader's %v", members, lm)
	}

	// It serves reads and takes writes.
	var org map[string]any
	if resp := snapAdmin(t, c, victim, "GET", "/admin/v1/organizations?page_size=100", nil, &org); resp.StatusCode != http.StatusOK {
		t.Fatalf("list on the wiped node: %d", resp.StatusCode)
	}
	snapCreateOrgs(t, c, victim, "after", 1)
	snapConverged(t, c, append(want, "after-0"))

	// The audit trail came with the snapshot: the wiped node holds the
	// same events, with the same seqs and hashes, as the leader.
	l := c.WaitNewLeader()
	if err := n.Cluster().ReadIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	mine, _ := auditOn(t, c, victim)
	theirs, _ := auditOn(t, c, l)
	if len(mine) == 0 || len(mine) != len(theirs) {
		t.Fatalf("audit events: the wiped node %d, the leader %d", len(mine), len(theirs))
	}
	for i := range mine {
		if mine[i].Seq != theirs[i].Seq || mine[i].Hash != theirs[i].Hash {
			t.Fatalf("audit event %d: the wiped node %d/%s, the leader %d/%s", i, mine[i].Seq, mine[i].Hash, theirs[i].Seq, theirs[i].Hash)
		}
	}
}

// TestBackupAndRestoreRollTheClusterBack: a backup saved with the CLI from
// a follower, restored with the CLI on the leader, takes every node back
// to the backup's state; writes after the restore reach every node.
func TestBackupAndRestoreRollTheClusterBack(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: compacting})
	snapCreateOrgs(t, c, 0, "kept", 3)
	file := filepath.Join(t.TempDir(), "backup.db")
	follower := c.Followers()[0]
	start := time.Now()
	if code, _, errOut := snapCLI(t, c, follower, "snapshot", "save", file); code != cli.ExitOK {
		t.Fatalf("snapshot save: exit %d: %s", code, errOut)
	}
	t.Logf("backup saved in %v", time.Since(start).Round(time.Millisecond))
	want := snapSlugs(t, c, follower)
	snapCreateOrgs(t, c, 1, "later", 12) // enough for every node to snapshot past the backup

	// From a follower: refused, naming the leader.
	if code, _, errOut := snapCLI(t, c, c.Followers()[0], "snapshot", "restore", file); code != cli.ExitServerError || !strings.Contains(errOut, "CONFLICT") || !strings.Contains(errOut, "leader") {
		t.Fatalf("restore on a follower: exit %d %q, want %d and a CONFLICT naming the leader", code, errOut, cli.ExitServerError)
	}

	start = time.Now()
	snapRestoreOnLeader(t, c, file)
	snapConverged(t, c, want)
	t.Logf("restore reached every node in %v", time.Since(start).Round(time.Millisecond))

	snapCreateOrgs(t, c, 2, "after", 2)
	snapConverged(t, c, append(slices.Clone(want), "after-0", "after-1"))
}

// TestRestoreOnAnotherCluster is the applied-index hazard end to end: the
// backup's state file records an applied index (dozens of entries) far
// above the log of the fresh cluster it is restored on. The nodes must
// record the restoring cluster's index, or they would skip its next
// writes.
func TestRestoreOnAnotherCluster(t *testing.T) {
	a := testcluster.New(t, testcluster.Options{Size: 1})
	snapCreateOrgs(t, a, 0, "from-a", 40)
	req, _ := http.NewRequest("GET", a.URL(0)+"/admin/v1/snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	resp, err := a.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	backup, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment;") {
		t.Fatalf("GET /snapshot: %d %v %v", resp.StatusCode, resp.Header, err)
	}
	want := snapSlugs(t, a, 0)
	aApplied := a.Node(0).FSM().Applied()

	b := testcluster.New(t, testcluster.Options{Size: 3})
	if l := b.Node(b.WaitNewLeader()).FSM().Applied(); l >= aApplied {
		t.Fatalf("cluster b is at %d, want below the backup's %d for this test", l, aApplied)
	}
	snapRestoreBytes(t, b, backup)
	snapConverged(t, b, want)
	for i := range b.Size() {
		if got := b.Node(i).FSM().Applied(); got >= aApplied {
			t.Errorf("node %d applied index: got %d, the backup's own %d", i, got, aApplied)
		}
	}
	snapCreateOrgs(t, b, 0, "on-b", 1)
	snapConverged(t, b, append(slices.Clone(want), "on-b-0"))
}

// TestRestoreRefusesWhatIsNotAStateFile: garbage, and a bbolt file that is
// not ours, are refused with 400 before anything changes.
func TestRestoreRefusesWhatIsNotAStateFile(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	snapCreateOrgs(t, c, 0, "kept", 2)
	want := snapSlugs(t, c, 0)
	snapConverged(t, c, want)
	var valid bytes.Buffer
	if _, err := c.Node(0).FSM().WriteTo(&valid); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"garbage": bytes.Repeat([]byte("not a state file "), 4096),
		// Both meta pages and one more: the state's buckets alone take
		// more (half the stream is not enough: WriteTo pads the copy, so
		// its first half may hold every page in use).
		"truncated": valid.Bytes()[:12<<10],
		"empty":     {},
	} {
		leader := c.WaitNewLeader()
		var env httpx.Envelope
		resp := snapAdmin(t, c, leader, "POST", "/admin/v1/snapshot", body, &env)
		if resp.StatusCode != http.StatusBadRequest || env.Error.Code != httpx.CodeBadRequest {
			t.Fatalf("%s: got %d %+v, want 400 %s", name, resp.StatusCode, env.Error, httpx.CodeBadRequest)
		}
	}
	for i := range c.Size() {
		if got := snapSlugs(t, c, i); !slices.Equal(got, want) {
			t.Errorf("node %d: got %v, want %v", i, got, want)
		}
		if got := c.Node(i).FSM().Restores(); got != 0 {
			t.Errorf("node %d restores: got %d, want 0", i, got)
		}
	}
}

// snapCLI runs `oidcd admin` against node i.
func snapCLI(t testing.TB, c *testcluster.Cluster, i int, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"--addr", c.URL(i), "--token", testcluster.AdminToken}, args...)
	code := cli.Run(context.Background(), args, nil, nil, &out, &errb)
	return code, out.String(), errb.String()
}

// snapRestoreOnLeader restores file with the CLI on the leader, asking the
// new leader if leadership moved in between.
func snapRestoreOnLeader(t testing.TB, c *testcluster.Cluster, file string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		code, _, errOut := snapCLI(t, c, c.WaitNewLeader(), "snapshot", "restore", file)
		if code == cli.ExitOK {
			if !strings.Contains(errOut, "admin token is the backup's") {
				t.Errorf("restore note: got %q, want the admin token warning", errOut)
			}
			return
		}
		if attempt == 3 || !strings.Contains(errOut, "CONFLICT") {
			t.Fatalf("snapshot restore: exit %d: %s", code, errOut)
		}
	}
}

// snapRestoreBytes posts a backup to the leader's API.
func snapRestoreBytes(t testing.TB, c *testcluster.Cluster, backup []byte) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		leader := c.WaitNewLeader()
		req, _ := http.NewRequest("POST", c.URL(leader)+"/admin/v1/snapshot", bytes.NewReader(backup))
		req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
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

// TestDamagedFileIsRefusedAndTheNodeRebuilt: a follower's state file
// (bytes flipped, as a bad disk does), then its raft log (both meta pages
// wiped), damaged while it was down: the node refuses to start, naming the file and the way back; the
// operator moves the data directory aside and starts it again, and it
// catches up from the others.
func TestDamagedFileIsRefusedAndTheNodeRebuilt(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: compacting})
	leader := c.WaitNewLeader()
	snapCreateOrgs(t, c, leader, "before", 30)
	for _, file := range []string{"state.db", filepath.Join("raft", "raft.db")} {
		victim := c.Followers()[0]
		dir := c.DataDir(victim)
		c.Kill(victim)
		path := filepath.Join(dir, file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if file == "state.db" {
			// A byte flipped in every page past the meta pages, the first
			// of its header, where the page's own id is: every page then
			// fails bbolt's check when read. (Bytes flipped anywhere, as
			// this test did, sometimes made a child pointer that sends
			// bbolt past its memory map: the node refuses that too
			// (fsm.TestDamagedStateFileIsRefused), but under -race the
			// checkptr instrumentation of bbolt's pointer arithmetic is a
			// fatal error first, which no recover can catch.)
			for i := 2 * 4096; i < len(b); i += 4096 {
				b[i] ^= 0xff
			}
		} else {
			clear(b[:8192]) // both meta pages: what a crash mid-write of a bad disk leaves
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		httpLn, raftLn := listenLocal(t), listenLocal(t)
		n, err := node.New(node.Config{DataDir: dir, NodeID: fmt.Sprintf("node-%d", victim), AdminToken: testcluster.AdminToken,
			HTTPListener: httpLn, RaftListener: raftLn, Issuer: "http://" + httpLn.Addr().String()})
		if err == nil {
			n.Close()
			t.Fatalf("%s damaged: the node started", file)
		}
		httpLn.Close()
		raftLn.Close()
		for _, want := range []string{path, "move " + dir + " aside", "--join"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s damaged: error %q does not name %q", file, err, want)
			}
		}
		// The way back, as the message says.
		snapWipe(t, dir)
		c.Restart(victim)
		snapCreateOrgs(t, c, c.WaitNewLeader(), "after-"+strings.TrimSuffix(filepath.Base(file), ".db"), 1)
		snapConverged(t, c, snapSlugs(t, c, c.WaitNewLeader()))
	}
}
