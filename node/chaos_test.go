package node_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

var (
	chaosSeed     = flag.Uint64("chaos.seed", 0, "TestChaos: seed of every random decision (0: from the clock; always logged)")
	chaosDuration = flag.Duration("chaos.duration", 8*time.Second, "TestChaos: how long faults are injected (make chaos: minutes)")
	chaosSizes    = flag.String("chaos.sizes", "", "TestChaos: cluster sizes, comma-separated (default 3, and 5 too when -chaos.duration >= 30s)")
)

// chaosWorkers is the number of concurrent clients of the workload.
const chaosWorkers = 4

// TestChaos runs concurrent sign-ins, code exchanges (some of them double,
// on two nodes at once), revocations, logouts, token checks and admin
// writes while a nemesis kills leaders and cuts nodes off, then heals the
// cluster and checks the history (chaosCheck) and the nodes' state:
//
//   - no acknowledged write lost: every organization whose creation was
//     acknowledged exists on every node, none whose creation was refused
//     does; every code handed to a browser could be redeemed; a token whose
//     sign-in nothing ended is still active on every node;
//   - no code redeemed twice;
//   - no token reported active after its revocation, the logout of its
//     session or the replay of its code was acknowledged, during the run
//     or on any node after it;
//   - the cluster worked: sign-ins completed, about one per 2 s at least.
//
// Every random decision (fault, node, timing, operation) comes from
// -chaos.seed, logged at the start: a failure is rerun with the same
// decisions, though not with the same thread interleaving.
//
// make test runs it for 8 s on 3 nodes; make chaos for minutes, on 3 and 5.
func TestChaos(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d (rerun with -chaos.seed=%d), duration %v", seed, seed, *chaosDuration)
	sizes := []int{3}
	if *chaosDuration >= 30*time.Second {
		sizes = append(sizes, 5)
	}
	if *chaosSizes != "" {
		sizes = nil
		for _, f := range strings.Split(*chaosSizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 3 {
				t.Fatalf("-chaos.sizes %q: want sizes of 3 or more", *chaosSizes)
			}
			sizes = append(sizes, n)
		}
	}
	for _, size := range sizes {
		t.Run(fmt.Sprintf("nodes=%d", size), func(t *testing.T) {
			runChaos(t, size, seed, *chaosDuration)
		})
	}
}

func runChaos(t *testing.T, size int, seed uint64, d time.Duration) {
	c := testcluster.New(t, testcluster.Options{Size: size, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	h := newChaosHistory()
	v := newChaosView()

	// Workers stop at the deadline; stop cuts them short if the test
	// ends early. This cleanup runs before the cluster's (LIFO).
	stop, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	deadline := time.Now().Add(d)
	for i := range chaosWorkers {
		wk := newChaosWorker(i, seed, c, v, w, h)
		wg.Add(1)
		go func() { defer wg.Done(); wk.run(stop, deadline) }()
	}

	// The nemesis runs on the test goroutine: Kill and Restart may call
	// t.Fatal.
	nem := &chaosNemesis{t: t, c: c, v: v, h: h, seed: seed, rng: rand.New(rand.NewPCG(seed, 0)), counts: map[string]int{}}
	nem.run(deadline)
	h.fault("healed")

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(chaosScenarioTimeout + 10*time.Second):
		cancel()
		<-done
		t.Errorf("workers still busy %v after the deadline (seed %d)", chaosScenarioTimeout+10*time.Second, seed)
	}

	chaosCatchUp(t, c, h, seed)
	chaosCheckOrgs(t, c, h, seed)
	chaosCheckAudit(t, c, h, seed)
	chaosFinalChecks(t, c, w, h, seed)

	ops, faults, tokens := h.snapshot()
	violations := chaosCheck(ops, tokens)
	for i, viol := range violations {
		if i == 20 {
			t.Errorf("... and %d more violations", len(violations)-i)
			break
		}
		t.Errorf("%s: %s (seed %d)\nhistory:\n%s", viol.What, h.describe(viol.Op), seed, h.excerpt(viol, ops, faults, tokens))
	}

	checked := chaosLinearizable(t, ops, tokens, seed, size)
	t.Logf("porcupine: %d operations of %d in the history checked for linearizability (codes, token liveness, admin writes)", checked, len(ops))

	complete := 0
	for _, op := range ops {
		if op.Kind == opExchange && op.Outcome == chaosOK {
			complete++
		}
	}
	if want := max(3, int(d/(2*time.Second))); complete < want {
		t.Errorf("only %d sign-ins completed in %v, want at least %d: the cluster hardly worked (seed %d)", complete, d, want, seed)
	}
	t.Logf("%d nodes, %v, seed %d: %s; faults: %s", size, d, seed, chaosSummary(ops), nem.summary())
	var lines []string
	for _, f := range faults {
		lines = append(lines, fmt.Sprintf("  %s %s", h.rel(f.At), f.What))
	}
	t.Logf("faults (seconds from the start):\n%s", strings.Join(lines, "\n"))
}

// chaosNemesis injects one fault at a time, so that a majority of the
// nodes is always up and connected: kill the leader, kill any node, cut
// the leader off, cut a random minority off; each undone (restart, heal)
// after a random hold.
type chaosNemesis struct {
	t      *testing.T
	c      *testcluster.Cluster
	v      *chaosView
	h      *chaosHistory
	seed   uint64
	rng    *rand.Rand
	counts map[string]int
}

func (n *chaosNemesis) run(deadline time.Time) {
	for {
		gap := n.between(500*time.Millisecond, 2*time.Second)
		if time.Until(deadline) < gap {
			time.Sleep(time.Until(deadline))
			return
		}
		time.Sleep(gap)
		hold := min(n.between(300*time.Millisecond, 2*time.Second), max(time.Until(deadline), 200*time.Millisecond))
		n.inject(hold)
	}
}

func (n *chaosNemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)))
}

func (n *chaosNemesis) inject(hold time.Duration) {
	size := n.c.Size()
	// Draw every decision up front so that the sequence of draws does not
	// depend on what the cluster did.
	kind, victim, minority := n.rng.IntN(4), n.rng.IntN(size), 1+n.rng.IntN((size-1)/2)
	perm := n.rng.Perm(size)
	leader := n.c.Leader()
	switch kind {
	case 0, 1: // kill the leader, or any node
		what := "kill leader"
		if kind == 1 || leader < 0 {
			what, leader = "kill", victim
		}
		n.counts[what]++
		n.h.fault(fmt.Sprintf("%s node %d for %v", what, leader, hold.Round(time.Millisecond)))
		n.v.down.Store(int32(leader))
		n.kill(leader)
		time.Sleep(hold)
		n.h.fault(fmt.Sprintf("restart node %d", leader))
		func() { // unlocked even if Restart calls t.Fatal
			n.v.restart.Lock()
			defer n.v.restart.Unlock()
			n.c.Restart(leader)
		}()
		n.v.down.Store(-1)
		n.h.fault(fmt.Sprintf("node %d up", leader))
	case 2, 3: // cut the leader off, or a random minority
		group := perm[:minority]
		what := "partition"
		if kind == 2 && leader >= 0 {
			what, group = "partition leader", []int{leader}
		}
		n.counts[what]++
		n.h.fault(fmt.Sprintf("%s %v for %v", what, group, hold.Round(time.Millisecond)))
		n.c.Partition(group...)
		time.Sleep(hold)
		n.c.Heal()
		n.h.fault("heal")
	}
}

// kill is c.Kill that reports on the test goroutine: KillErr is bounded
// (node.CloseBound), and a node that did not close in time is a bug to
// report with the goroutines of cluster and raft.
func (n *chaosNemesis) kill(i int) {
	start := time.Now()
	if err := n.c.KillErr(i); err != nil && !errors.Is(err, testcluster.ErrCloseFailed) {
		n.t.Fatalf("Kill(%d) after %s (seed %d): %v; goroutines in cluster and raft:\n%s",
			i, time.Since(start).Round(time.Millisecond), n.seed, firstLine(err), chaosStacks("oidcd/cluster.", "hashicorp/raft."))
	}
}

// firstLine is the first line of err's message (KillErr appends stacks).
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// chaosStacks returns the stacks of the goroutines with a frame from the
// packages, those of the first package first (at most 20 goroutines).
func chaosStacks(pkgs ...string) string {
	buf := make([]byte, 8<<20)
	all := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	var out []string
	seen := map[int]bool{}
	for _, p := range pkgs {
		for i, g := range all {
			if !seen[i] && strings.Contains(g, p) && len(out) < 20 {
				seen[i] = true
				out = append(out, g)
			}
		}
	}
	return strings.Join(out, "\n\n")
}

func (n *chaosNemesis) summary() string {
	var parts []string
	for k, v := range n.counts {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// chaosCatchUp waits (20 s at most) until a leader has acknowledged a new
// write and every node has applied the log up to it: from then on each
// node's state holds every write acknowledged during the run.
func chaosCatchUp(t *testing.T, c *testcluster.Cluster, h *chaosHistory, seed uint64) {
	t.Helper()
	c.WaitLeader()
	deadline := time.Now().Add(20 * time.Second)
	hc := &http.Client{Timeout: chaosHTTPTimeout}
	var target uint64
	for attempt := 1; ; attempt++ {
		l := c.WaitNewLeader()
		ctx, cancel := context.WithTimeout(context.Background(), chaosHTTPTimeout)
		status, _, err := chaosAdminPost(ctx, hc, c.URL(l), "/admin/v1/organizations",
			map[string]any{"slug": fmt.Sprintf("chaos-barrier-%d", attempt), "name": "Barrier"})
		cancel()
		if n := c.Node(l); status == http.StatusCreated && n != nil {
			target = n.FSM().State().Applied()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write acknowledged within 20 s of the heal: last %d %v (seed %d)", status, err, seed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range c.Size() {
		for {
			applied := c.Node(i).FSM().State().Applied()
			if applied >= target {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d applied %d, the leader %d: not caught up 20 s after the heal (seed %d)", i, applied, target, seed)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	h.fault(fmt.Sprintf("every node applied index %d", target))
}

// chaosCheckOrgs: every organization whose creation was acknowledged is
// on every node, with its id; none whose creation was refused is.
func chaosCheckOrgs(t *testing.T, c *testcluster.Cluster, h *chaosHistory, seed uint64) {
	t.Helper()
	ops, _, _ := h.snapshot()
	for i := range c.Size() {
		orgs, _, err := c.Node(i).FSM().State().Orgs(fsm.Page{Page: 1, PageSize: math.MaxInt32})
		if err != nil {
			t.Fatalf("node %d: list organizations: %v", i, err)
		}
		bySlug := map[string]string{}
		for _, o := range orgs {
			bySlug[o.Slug] = o.ID
		}
		for _, op := range ops {
			if op.Kind != opCreateOrg {
				continue
			}
			id, ok := bySlug[op.Slug]
			switch {
			case op.Outcome == chaosOK && id != op.OrgID:
				t.Errorf("acknowledged write lost: organization %s (id %s) is not on node %d (found %q): %s (seed %d)",
					op.Slug, op.OrgID, i, id, h.describe(op), seed)
			case op.Outcome == chaosFail && ok:
				t.Errorf("refused write applied: organization %s is on node %d: %s (seed %d)", op.Slug, i, h.describe(op), seed)
			}
		}
	}
}

// chaosFinalChecks asks every node, after the catch-up, about every token
// whose end was acknowledged (chaosCheck then flags an active answer) and
// every token nothing tried to end, which must still be active: its
// sign-in and exchange were acknowledged.
func chaosFinalChecks(t *testing.T, c *testcluster.Cluster, w world, h *chaosHistory, seed uint64) {
	t.Helper()
	ops, _, tokens := h.snapshot()
	ended := chaosEnds(ops, tokens)
	// What may have ended a token: a revocation or a logout of any
	// outcome, or a second exchange of its code.
	touched, sessions, doubled := map[int]bool{}, map[int]bool{}, map[int]bool{}
	for _, op := range ops {
		switch {
		case op.Kind == opRevoke:
			touched[op.Token] = true
		case op.Kind == opLogout:
			sessions[op.Session] = true
		case op.Kind == opExchange && op.Double:
			doubled[op.Code] = true
		}
	}
	type job struct{ token, node int }
	var jobs []job
	wantActive := map[int]bool{}
	for _, tok := range tokens {
		_, isEnded := ended[tok.ID]
		untouched := !touched[tok.ID] && !sessions[tok.Session] && !doubled[tok.Code] &&
			time.Since(tok.IssuedAt) < 8*time.Minute // well within the 10 min access token lifetime
		if !isEnded && !untouched {
			continue
		}
		wantActive[tok.ID] = untouched
		for i := range c.Size() {
			jobs = append(jobs, job{tok.ID, i})
		}
	}
	wk := newChaosWorker(-1, seed, c, newChaosView(), w, h)
	defer wk.tr.CloseIdleConnections()
	results := make([]chaosOp, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for k, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for attempt := 0; ; attempt++ { // the cluster is healed: retry what it could not answer
				ctx, cancel := context.WithTimeout(context.Background(), chaosHTTPTimeout)
				results[k] = wk.checkOnce(ctx, j.token, j.node, true)
				cancel()
				if results[k].Outcome != chaosUnknown || attempt == 4 {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for _, op := range results {
		op.Final = true
		h.record(op)
		switch {
		case op.Outcome == chaosUnknown:
			t.Errorf("node %d cannot answer userinfo after the heal: %s (seed %d)", op.Node, h.describe(op), seed)
		case wantActive[op.Token] && !op.Active:
			t.Errorf("acknowledged sign-in lost: a token nothing ended is inactive: %s (seed %d)", h.describe(op), seed)
		}
	}
}

// chaosSummary counts operations by kind and outcome; checks by answer.
func chaosSummary(ops []chaosOp) string {
	counts := map[chaosKind]*[3]int{}
	var kinds []string
	for _, op := range ops {
		if op.Final {
			continue
		}
		if counts[op.Kind] == nil {
			counts[op.Kind] = new([3]int)
			kinds = append(kinds, string(op.Kind))
		}
		counts[op.Kind][op.Outcome]++
		if op.Outcome == chaosOK && !op.Active && (op.Kind == opUserinfo || op.Kind == opIntrospect) {
			counts[op.Kind][chaosOK]--
			counts[op.Kind][chaosFail]++ // an introspection's active:false
		}
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		n := counts[chaosKind(k)]
		labels := [3]string{"ok", "fail", "unknown"}
		if k == string(opUserinfo) || k == string(opIntrospect) {
			labels = [3]string{"active", "inactive", "unknown"}
		}
		parts = append(parts, fmt.Sprintf("%s %d %s/%d %s/%d %s", k, n[chaosOK], labels[0], n[chaosFail], labels[1], n[chaosUnknown], labels[2]))
	}
	return strings.Join(parts, ", ")
}

// chaosCheckAudit: after the catch-up every node holds the same audit
// trail, which verifies; every acknowledged action has its event (an
// organization created, a code exchanged, a token revoked: found by the
// organization's id and the access token's jti), and every organization
// an event says was created exists (no event without its action).
func chaosCheckAudit(t *testing.T, c *testcluster.Cluster, h *chaosHistory, seed uint64) {
	t.Helper()
	var first []fsm.Event
	for i := range c.Size() {
		st := c.Node(i).FSM().State()
		v, err := st.VerifyAudit()
		if err != nil || !v.OK {
			t.Errorf("node %d: the audit trail does not verify: %+v %v (seed %d)", i, v, err, seed)
		}
		var all []fsm.Event
		for after := uint64(0); ; {
			page, err := st.AuditEvents(fsm.AuditQuery{After: after, Limit: fsm.MaxAuditPage})
			if err != nil {
				t.Fatalf("node %d: audit: %v", i, err)
			}
			if len(page) == 0 {
				break
			}
			all = append(all, page...)
			after = page[len(page)-1].Seq
		}
		if i == 0 {
			first = all
			continue
		}
		if len(all) != len(first) || (len(all) > 0 && all[len(all)-1].Hash != first[len(first)-1].Hash) {
			t.Errorf("node %d holds %d audit events, node 0 %d, or their heads differ (seed %d)", i, len(all), len(first), seed)
		}
	}
	orgEvents, tokenJTIs, revokedJTIs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, e := range first {
		switch {
		case e.Type == fsm.EventAdmin && e.Detail["action"] == "POST /organizations":
			orgEvents[e.Detail["target"]] = true
		case e.Type == fsm.EventToken && e.Outcome == fsm.OutcomeSuccess:
			tokenJTIs[e.Detail["jti"]] = true
		case e.Type == fsm.EventRevocation:
			revokedJTIs[e.Detail["jti"]] = true
		case e.Type == fsm.EventToken && e.Detail["revoked_jti"] != "":
			// A replay revoked it first; a revocation after that finds it
			// revoked and writes nothing.
			revokedJTIs[e.Detail["revoked_jti"]] = true
		}
	}
	ops, _, tokens := h.snapshot()
	jti := func(token int) string {
		tok, err := jwt.ParseInsecure([]byte(tokens[token-1].Raw))
		if err != nil {
			return ""
		}
		return tok.JwtID()
	}
	for _, op := range ops {
		if op.Outcome != chaosOK || op.Final {
			continue
		}
		switch {
		case op.Kind == opCreateOrg && !orgEvents[op.OrgID]:
			t.Errorf("acknowledged without its audit event: %s (seed %d)", h.describe(op), seed)
		case op.Kind == opExchange && op.Token > 0 && !tokenJTIs[jti(op.Token)]:
			t.Errorf("acknowledged exchange without its token event: %s (seed %d)", h.describe(op), seed)
		case op.Kind == opRevoke && !revokedJTIs[jti(op.Token)] && !tokenRevokedBefore(ops, op):
			t.Errorf("acknowledged revocation without its event: %s (seed %d)", h.describe(op), seed)
		}
	}
	st := c.Node(0).FSM().State()
	for id := range orgEvents {
		if _, err := st.Org(id); err != nil {
			t.Errorf("an audit event records organization %s created, which does not exist: %v (seed %d)", id, err, seed)
		}
	}
}

// tokenRevokedBefore: an earlier revocation of op's token was
// acknowledged, so op's found it revoked and wrote nothing (no event).
func tokenRevokedBefore(ops []chaosOp, op chaosOp) bool {
	for _, o := range ops {
		if o.Kind == opRevoke && o.Token == op.Token && o.Outcome != chaosFail && o.Start.Before(op.Start) {
			return true
		}
	}
	return false
}
