package node_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// trailReadyz is node i's /readyz?verbose: its status and the audit
// trail's line.
func trailReadyz(t *testing.T, c *testcluster.Cluster, i int) (int, string) {
	t.Helper()
	resp, err := c.Client().Get(c.URL(i) + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		AuditTrail string `json:"audit_trail"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.AuditTrail
}

// trailMissingMetric is node i's oidcd_audit_trail_missing_events.
func trailMissingMetric(t testing.TB, c *testcluster.Cluster, i int) int {
	t.Helper()
	req, _ := http.NewRequest("GET", c.URL(i)+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "oidcd_audit_trail_missing_events "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	t.Fatalf("node %d: no oidcd_audit_trail_missing_events in /metrics (%d)", i, resp.StatusCode)
	return 0
}

// trailVerify is GET /admin/v1/audit/verify on node i.
func trailVerify(t *testing.T, c *testcluster.Cluster, i int) fsm.AuditVerification {
	t.Helper()
	var v fsm.AuditVerification
	if resp := snapAdmin(t, c, i, "GET", "/admin/v1/audit/verify", nil, &v); resp.StatusCode != http.StatusOK {
		t.Fatalf("verify on node %d: %d", i, resp.StatusCode)
	}
	return v
}

// trailSame: every node verifies its trail, with the same count, last
// seq and head hash, and pages the same events.
func trailSame(t *testing.T, c *testcluster.Cluster) []auditEvent {
	t.Helper()
	var first fsm.AuditVerification
	var events []auditEvent
	for i := range c.Size() {
		v := trailVerify(t, c, i)
		if !v.OK {
			t.Fatalf("node %d: verify %+v", i, v)
		}
		es, _ := auditOn(t, c, i)
		if i == 0 {
			first, events = v, es
			continue
		}
		if v.Count != first.Count || v.LastSeq != first.LastSeq || v.HeadHash != first.HeadHash {
			t.Fatalf("verify: node %d %+v, node 0 %+v", i, v, first)
		}
		if !reflect.DeepEqual(es, events) {
			t.Fatalf("audit pages: node %d has %d events, node 0 %d, or they differ", i, len(es), len(events))
		}
	}
	if uint64(len(events)) != first.Count {
		t.Fatalf("the pages hold %d events, verify counts %d", len(events), first.Count)
	}
	return events
}

// trailWrite creates organizations through node i (any node when i < 0,
// through the balancer) from workers goroutines, until total are made or
// d passes, and returns the ids of those answered 201.
func trailWrite(t *testing.T, c *testcluster.Cluster, i func() int, workers, total int, d time.Duration, prefix string) []string {
	t.Helper()
	var (
		mu   sync.Mutex
		ids  []string
		next atomic.Int64
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				k := next.Add(1)
				if k > int64(total) {
					return
				}
				body := fmt.Sprintf(`{"slug":"%s-%d-%d","name":"O"}`, prefix, w, k)
				req, _ := http.NewRequest("POST", c.URL(i())+"/admin/v1/organizations", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Client().Do(req)
				if err != nil {
					continue // a node killed under the request
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					continue
				}
				var org struct {
					ID string `json:"id"`
				}
				if json.Unmarshal(b, &org) == nil && org.ID != "" {
					mu.Lock()
					ids = append(ids, org.ID)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return ids
}

// TestWipedFollowerFetchesTheAuditTrail: a follower whose data directory
// was wiped takes a snapshot of format 3, which holds only the events
// not yet moved into its sender's trail. It stays ready, says in
// /readyz?verbose (and its gauge) which seqs it lacks, fetches them from
// a peer, and then every node verifies the same trail (count, last seq,
// head hash) and pages the same events.
func TestWipedFollowerFetchesTheAuditTrail(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(i int, cfg *node.Config) {
		compacting(i, cfg)
		node.HoldTrailFetch(cfg, release)
	}})
	leader := c.WaitNewLeader()
	for i := range c.Size() {
		snapWait(t, fmt.Sprintf("node %d at format 3", i), func() (bool, string) {
			f := c.Node(i).FSM().State().StateFormat()
			return f == fsm.FormatTrail, fmt.Sprintf("format %d", f)
		})
	}
	victim := c.Followers()[0]

	start := time.Now()
	ids := trailWrite(t, c, func() int { return leader }, 8, 2000, 90*time.Second, "o")
	t.Logf("%d writes in %v", len(ids), time.Since(start).Round(time.Millisecond))
	if len(ids) < 1000 {
		t.Fatalf("only %d writes", len(ids))
	}
	dir := c.Node(victim).DataDir()
	had := c.Node(victim).FSM().Applied()
	c.Kill(victim)
	trailWrite(t, c, func() int { return leader }, 4, 40, 20*time.Second, "down")
	snapWait(t, "leader snapshot", func() (bool, string) {
		s := snapStat(c, c.WaitNewLeader(), "last_snapshot_index")
		return s > had, fmt.Sprintf("last_snapshot_index %d, the victim had %d", s, had)
	})
	snapWipe(t, dir)
	c.Restart(victim)
	n := c.Node(victim)
	snapWait(t, "snapshot installed", func() (bool, string) {
		return n.FSM().Restores() > 0, "no restore"
	})

	// Held: the node is ready and says what it lacks (a later snapshot
	// may move the gap's end: each reading is of one gap).
	var from, to uint64
	snapWait(t, "ready while catching up", func() (bool, string) {
		f1, t1, ok := n.FSM().TrailGap()
		code, line := trailReadyz(t, c, victim)
		missing := trailMissingMetric(t, c, victim)
		f2, t2, _ := n.FSM().TrailGap()
		want := fmt.Sprintf("audit trail: catching up, missing seq %d to %d", f1, t1)
		from, to = f1, t1
		return ok && f1 == 1 && t1 >= uint64(len(ids))/2 && f1 == f2 && t1 == t2 && code == http.StatusOK && line == want && missing == int(t1-f1+1),
			fmt.Sprintf("gap %d-%d %v, readyz %d %q, gauge %d", f1, t1, ok, code, line, missing)
	})
	if v := trailVerify(t, c, victim); v.OK {
		t.Fatalf("verify on the node lacking %d-%d: %+v", from, to, v)
	}

	// Released: it fetches the gap.
	began := time.Now()
	free()
	snapWait(t, "trail complete", func() (bool, string) {
		st := n.FSM().TrailStatus()
		return !st.Gap, fmt.Sprintf("%+v", st)
	})
	took := time.Since(began)
	t.Logf("fetched %d events in %v: %.0f events/s", to-from+1, took.Round(time.Millisecond), float64(to-from+1)/took.Seconds())
	if _, line := trailReadyz(t, c, victim); line != "audit trail: complete" {
		t.Fatalf("readyz after the fetch: %q", line)
	}
	if got := trailMissingMetric(t, c, victim); got != 0 {
		t.Fatalf("oidcd_audit_trail_missing_events after the fetch: %d", got)
	}
	for i := range c.Size() {
		if err := c.Node(i).Cluster().ReadIndex(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	snapWait(t, "heads equal", func() (bool, string) {
		a, b := trailVerify(t, c, victim), trailVerify(t, c, c.WaitNewLeader())
		return a.LastSeq == b.LastSeq, fmt.Sprintf("%d vs %d", a.LastSeq, b.LastSeq)
	})
	events := trailSame(t, c)
	if len(events) < len(ids) {
		t.Fatalf("%d events for %d writes", len(events), len(ids))
	}
}

// TestLeaderKilledWhileAuditing: the leader is killed while writes go on
// through the other nodes; afterwards (the old leader back, catching up
// by log or snapshot and fetching what its trail lacks) no acknowledged
// write's event is missing on any node, and every node verifies the
// same trail.
func TestLeaderKilledWhileAuditing(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: compacting})
	leader := c.WaitNewLeader()
	fs := c.Followers()
	var turn atomic.Int64
	pick := func() int { return fs[int(turn.Add(1))%len(fs)] }

	var ids []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ids = trailWrite(t, c, pick, 6, 1500, 30*time.Second, "k")
	}()
	time.Sleep(time.Second)
	if err := c.KillErr(leader); err != nil {
		t.Error(err)
	}
	wg.Wait()
	t.Logf("%d writes acknowledged", len(ids))
	if len(ids) < 100 {
		t.Fatalf("only %d writes acknowledged", len(ids))
	}
	c.Restart(leader)
	for i := range c.Size() {
		snapWait(t, fmt.Sprintf("node %d trail complete", i), func() (bool, string) {
			if err := c.Node(i).Cluster().ReadIndex(t.Context()); err != nil {
				return false, err.Error()
			}
			st := c.Node(i).FSM().TrailStatus()
			return !st.Gap && st.Staged == 0, fmt.Sprintf("%+v", st)
		})
	}
	snapWait(t, "heads equal", func() (bool, string) {
		var last []uint64
		for i := range c.Size() {
			last = append(last, trailVerify(t, c, i).LastSeq)
		}
		return last[0] == last[1] && last[1] == last[2], fmt.Sprint(last)
	})
	events := trailSame(t, c)
	seen := map[string]bool{}
	for _, e := range events {
		seen[e.Subject], seen[e.OrgID] = true, true
		for _, v := range e.Detail {
			seen[fmt.Sprint(v)] = true
		}
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("the event of acknowledged organization %s is missing", id)
		}
	}
}
