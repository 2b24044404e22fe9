package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// Sites of the edge tests: the core's three voters share a site; each
// edge replica is a site of its own, siteLatency away (one way).
const (
	coreSize    = 3
	edgeA       = 3
	edgeB       = 4
	siteLatency = 40 * time.Millisecond
)

func siteOf(i int) int {
	if i < coreSize {
		return 0
	}
	return i
}

// newEdgeCluster is 3 voters and 2 edge replicas, 40 ms one way between
// sites, with compaction often enough that a replica cut off for a while
// catches up from a snapshot.
func newEdgeCluster(t *testing.T) *testcluster.Cluster {
	return testcluster.New(t, testcluster.Options{Size: coreSize + 2, NonVoters: 2,
		LinkLatency: func(from, to int) time.Duration {
			if siteOf(from) != siteOf(to) {
				return siteLatency
			}
			return 0
		},
		Configure: func(_ int, cfg *node.Config) {
			cfg.RateLimit = "off"
			cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 16, 200*time.Millisecond
		},
	})
}

// pinned is an HTTP client that sends every request to the cluster's
// issuer to node i (through the balancer, under the one issuer origin).
func pinned(c *testcluster.Cluster, i int) *http.Client {
	base := c.Client()
	return &http.Client{Timeout: 10 * time.Second, Transport: pinTransport{base: base.Transport, node: strconv.Itoa(i)}}
}

type pinTransport struct {
	base http.RoundTripper
	node string
}

func (p pinTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(testcluster.PinHeader, p.node)
	return p.base.RoundTrip(r)
}

// clusterStatus is GET /admin/v1/cluster on node i: the members by id.
func clusterStatus(t *testing.T, c *testcluster.Cluster, i int) map[string]map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", c.URL(i)+"/admin/v1/cluster", nil)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	status, body := decodeResp(t, c, req)
	if status != 200 {
		t.Fatalf("cluster status on node %d: %d %v", i, status, body)
	}
	out := map[string]map[string]any{}
	for _, m := range body["members"].([]any) {
		m := m.(map[string]any)
		out[m["id"].(string)] = m
	}
	return out
}

// clusterMembers is GET /admin/v1/cluster on node i: id -> voter.
func clusterMembers(t *testing.T, c *testcluster.Cluster, i int) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for id, m := range clusterStatus(t, c, i) {
		out[id] = m["voter"].(bool)
	}
	return out
}

// wantRoles waits up to 5 s until node on lists every node, voters among
// them as voters and the others as non-voters (a configuration change
// reaches a node with the leader's next append).
func wantRoles(t *testing.T, c *testcluster.Cluster, on int, voters ...int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, bad := clusterMembers(t, c, on), ""
		for i := range c.Size() {
			id := "node-" + strconv.Itoa(i)
			if voter, ok := got[id]; !ok || voter != slices.Contains(voters, i) {
				bad = fmt.Sprintf("members seen by node %d: %v; want %s listed with voter %v", on, got, id, slices.Contains(voters, i))
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEdgeReplicas: two edge replicas at remote sites serve the whole
// surface with the core's guarantees, never lead, and are not needed for
// the core's quorum.
func TestEdgeReplicas(t *testing.T) {
	c := newEdgeCluster(t)
	w := provision(t, c)
	ctx := context.Background()

	// Every node lists the edges as non-voters.
	for i := range c.Size() {
		wantRoles(t, c, i, 0, 1, 2)
	}

	// A sign-in entirely through edge A, with go-oidc: discovery, JWKS,
	// the pages, the code exchange, userinfo.
	client := pinned(c, edgeA)
	edgeCtx := gooidc.ClientContext(ctx, client)
	p, err := gooidc.NewProvider(edgeCtx, c.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	r := &rp{provider: p, verifier: p.Verifier(&gooidc.Config{ClientID: w.confID}), oauth: oauth2.Config{
		ClientID: w.confID, ClientSecret: w.confSecret, RedirectURL: w.cb, Scopes: []string{gooidc.ScopeOpenID, "email"},
		Endpoint: oauth2.Endpoint{AuthURL: c.URL(edgeA) + "/authorize", TokenURL: c.URL(edgeA) + "/oauth2/token"},
	}}
	b := testcluster.NewBrowser(t)
	pkce := oauth2.GenerateVerifier()
	q := signIn(t, c, b, r, w, pkce, "nonce-0123456789")
	tok, err := r.oauth.Exchange(edgeCtx, q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("code exchange on the edge: %v", err)
	}
	idt, err := r.verifier.Verify(edgeCtx, tok.Extra("id_token").(string))
	if err != nil {
		t.Fatalf("id token from the edge: %v", err)
	}
	if info, err := p.UserInfo(edgeCtx, oauth2.StaticTokenSource(tok)); err != nil || info.Subject != idt.Subject {
		t.Fatalf("userinfo on the edge: %v %v", info, err)
	}

	// Revoked through the core: inactive on both edges at once.
	if status, _ := clientPostOn(t, c, 0, "/oauth2/revoke", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}}); status != 200 {
		t.Fatalf("revoke on the core: %d", status)
	}
	for _, e := range []int{edgeA, edgeB} {
		if status, body := clientPostOn(t, c, e, "/oauth2/introspect", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}}); status != 200 || body["active"] != false {
			t.Fatalf("introspection on edge %d right after the revocation on the core: %d %v, want active false", e, status, body)
		}
	}

	// A logout on the edge ends the session the core sees, at once.
	q = signIn(t, c, b, r, w, pkce, "nonce-0123456789")
	tok, err = r.oauth.Exchange(edgeCtx, q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := bearerGetOn(t, c, 0, "/userinfo", tok.AccessToken); status != 200 {
		t.Fatalf("userinfo on the core before the logout: %d", status)
	}
	resp, err := b.Client.PostForm(c.URL(edgeA)+"/logout", url.Values{"id_token_hint": {tok.Extra("id_token").(string)}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		t.Fatalf("logout on the edge: %d", resp.StatusCode)
	}
	for i := range coreSize {
		if status, _ := bearerGetOn(t, c, i, "/userinfo", tok.AccessToken); status != 401 {
			t.Fatalf("userinfo on core node %d right after the logout on the edge: got %d, want 401", i, status)
		}
	}

	// Edge B cut off from everyone: local discovery and JWKS, 503 for what
	// needs the leader, /readyz 503 with a reason.
	q = signIn(t, c, b, r, w, pkce, "nonce-0123456789")
	tok, err = r.oauth.Exchange(edgeCtx, q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatal(err)
	}
	c.Partition(edgeB)
	snapWait(t, "the cut-off edge", func() (bool, string) {
		status, _ := bearerGetOn(t, c, edgeB, "/userinfo", tok.AccessToken)
		ready := get(t, c, edgeB, "/readyz")
		return status == 503 && ready == 503, fmt.Sprintf("userinfo %d and readyz %d, want 503 for both (never a stale answer)", status, ready)
	})
	for _, path := range []string{"/.well-known/openid-configuration", "/.well-known/jwks.json"} {
		if got := get(t, c, edgeB, path); got != 200 {
			t.Fatalf("cut-off edge %s: got %d, want 200 from local state", path, got)
		}
	}
	// It says so: its last contact with the leader grows.
	snapWait(t, "the cut-off edge's last contact", func() (bool, string) {
		ms := clusterStatus(t, c, edgeB)["node-4"]["last_contact_ms"].(float64)
		return ms > 1000, fmt.Sprintf("last_contact_ms %v, want above 1000", ms)
	})
	if status, body := clientPostOn(t, c, edgeB, "/oauth2/introspect", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}}); status != 503 {
		t.Fatalf("introspection on the cut-off edge: %d %v, want 503", status, body)
	}
	// Meanwhile the core revokes, and writes enough for the log to move on
	// past what the edge holds: it must catch up from a snapshot.
	if status, _ := clientPostOn(t, c, 0, "/oauth2/revoke", w.confID, w.confSecret, url.Values{"token": {tok.AccessToken}}); status != 200 {
		t.Fatalf("revoke on the core: %d", status)
	}
	restores := c.Node(edgeB).FSM().Restores()
	for i := range 150 {
		if resp := do(t, c, "POST", "/admin/v1/organizations", testcluster.AdminToken,
			map[string]any{"slug": "filler-" + strconv.Itoa(i), "name": "Filler"}, nil); resp.StatusCode != 201 {
			t.Fatalf("filler organization %d: %d", i, resp.StatusCode)
		}
	}
	waitSnapshotPast(t, c, c.Node(edgeB).FSM().Applied())
	c.Heal()
	snapWait(t, "the healed edge", func() (bool, string) {
		// Caught up: it knows of the revocation made while it was cut off.
		status, _ := bearerGetOn(t, c, edgeB, "/userinfo", tok.AccessToken)
		ready := get(t, c, edgeB, "/readyz")
		return status == 401 && ready == 200, fmt.Sprintf("userinfo %d and readyz %d, want 401 and 200", status, ready)
	})
	if got := c.Node(edgeB).FSM().Restores(); got <= restores {
		t.Fatalf("healed edge restored %d snapshots, want more than %d: the log had moved on", got, restores)
	}
	// The core sees it caught up: a small lag, a recent contact (gossip
	// brings both every couple of seconds).
	snapWait(t, "the core's view of the healed edge", func() (bool, string) {
		m := clusterStatus(t, c, 0)["node-4"]
		lag, ms := m["applied_lag"].(float64), m["last_contact_ms"].(float64)
		return lag >= 0 && lag < 50 && ms >= 0 && ms < 5000, fmt.Sprintf("applied_lag %v, last_contact_ms %v", lag, ms)
	})

	// Leaders come and go among the voters only.
	for range 2 {
		old := c.WaitNewLeader()
		c.Kill(old)
		l := c.WaitNewLeader()
		if l >= coreSize {
			t.Fatalf("edge replica %d became the leader", l)
		}
		c.Restart(old)
	}

	// The core keeps its quorum with both edges dead.
	c.Kill(edgeA)
	c.Kill(edgeB)
	if resp := do(t, c, "POST", "/admin/v1/organizations", testcluster.AdminToken, map[string]any{"slug": "edges-down", "name": "Edges down"}, nil); resp.StatusCode != 201 {
		t.Fatalf("a write with both edges dead: %d", resp.StatusCode)
	}
	c.Restart(edgeA)
	c.Restart(edgeB)
	c.WaitLeader()
	wantRoles(t, c, edgeA, 0, 1, 2) // restarted, still non-voters

	// Promote and demote, through a core node's admin API.
	for _, step := range []struct {
		verb   string
		voters []int
	}{{"promote", []int{0, 1, 2, edgeA}}, {"demote", []int{0, 1, 2}}} {
		req, _ := http.NewRequest("POST", c.URL(1)+"/admin/v1/cluster/members/node-"+strconv.Itoa(edgeA)+"/"+step.verb, nil)
		req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 204 {
			t.Fatalf("%s: %d", step.verb, resp.StatusCode)
		}
		wantRoles(t, c, 0, step.voters...)
		wantRoles(t, c, edgeA, step.voters...)
	}
	req, _ := http.NewRequest("POST", c.URL(0)+"/admin/v1/cluster/members/node-9/promote", nil)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	if status, _ := decodeResp(t, c, req); status != 404 {
		t.Fatalf("promote of an unknown member: %d, want 404", status)
	}
}

// waitSnapshotPast waits until the leader's last snapshot is more than
// TrailingLogs (16) entries past index: its log has then been compacted
// past index, and a node that stopped at index can only catch up from a
// snapshot.
func waitSnapshotPast(t *testing.T, c *testcluster.Cluster, index uint64) {
	t.Helper()
	snapWait(t, "leader's snapshot", func() (bool, string) {
		l := c.WaitNewLeader()
		if l < 0 {
			return false, "no leader"
		}
		got := snapStat(c, l, "last_snapshot_index")
		return got > index+16, fmt.Sprintf("at index %d, want past %d", got, index+16)
	})
}

// TestEdgeBecomesTheCoreAfterTheCoreIsLost: the three voters are lost for
// good; the operator makes the two stopped edge replicas the new voters,
// one with oidcd recover and the other with raft's peers.json, and starts
// them: they elect a leader, hold everything acknowledged before the loss
// (a revocation among it) and sign people in.
func TestEdgeBecomesTheCoreAfterTheCoreIsLost(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: coreSize + 2, NonVoters: 2,
		Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	revoked, live := benchTokenT(t, c, w), benchTokenT(t, c, w)
	if status, _ := clientPostOn(t, c, 0, "/oauth2/revoke", w.confID, w.confSecret, url.Values{"token": {revoked}}); status != 200 {
		t.Fatalf("revoke on the core: %d", status)
	}
	if resp := do(t, c, "POST", "/admin/v1/organizations", testcluster.AdminToken, map[string]any{"slug": "before-loss", "name": "Before"}, nil); resp.StatusCode != 201 {
		t.Fatalf("write before the loss: %d", resp.StatusCode)
	}
	// The edges have it all: a read index on each waits until it applied it.
	for _, e := range []int{edgeA, edgeB} {
		if err := c.Node(e).Cluster().ReadIndex(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := node.Recover(c.DataDir(edgeA), nil, nil); err == nil || !strings.Contains(err.Error(), "stop the node first") {
		t.Fatalf("recover of a running node: %v, want it refused", err)
	}
	for i := range c.Size() {
		c.Kill(i)
	}
	if _, err := node.Recover(t.TempDir(), nil, nil); err == nil {
		t.Fatal("recover of a directory that is no node's: no error")
	}
	for _, voters := range [][]string{{"node-3", "no-such-node"}, {"node-4"}} {
		if _, err := node.Recover(c.DataDir(edgeA), voters, nil); err == nil {
			t.Fatalf("recover of node-3 with voters %q: no error", voters)
		}
	}
	written, err := node.Recover(c.DataDir(edgeA), []string{"node-3", "node-4"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 2 || !strings.HasPrefix(written[0], "node-3 ") || !strings.HasPrefix(written[1], "node-4 ") {
		t.Fatalf("voters written: %q, want node-3 and node-4", written)
	}
	// The same configuration for edge B, as an operator writes peers.json.
	var peers []map[string]any
	for _, v := range written {
		id, addr, _ := strings.Cut(v, " ")
		peers = append(peers, map[string]any{"id": id, "address": addr, "non_voter": false})
	}
	b, _ := json.Marshal(peers)
	peersPath := filepath.Join(c.DataDir(edgeB), "raft", "peers.json")
	if err := os.WriteFile(peersPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c.RestartTogether(edgeA, edgeB)
	if _, err := os.Stat(peersPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("peers.json after it was applied: %v, want it removed", err)
	}
	newCore := c.WaitNewLeader()
	if newCore != edgeA && newCore != edgeB {
		t.Fatalf("leader after the recovery: node %d", newCore)
	}
	wantVoters := map[string]bool{"node-3": true, "node-4": true}
	for _, e := range []int{edgeA, edgeB} {
		if got := clusterMembers(t, c, e); !maps.Equal(got, wantVoters) {
			t.Fatalf("members seen by node %d after the recovery: %v, want %v", e, got, wantVoters)
		}
		// Right after the election a node may not get a read index yet:
		// 503 "try again shortly" then, never a stale active:true. Two
		// voters fresh from peers.json may need more than one election
		// round, and with raft's 300 ms test timings a two-voter cluster
		// starved of CPU (make test runs packages side by side on two
		// cores, under the race detector) can go on electing: one full
		// run saw 503 for 15 s on node 4, while the test alone passes in
		// well under a second. The failure message says what raft saw.
		began := time.Now()
		for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			status, body := clientPostOn(t, c, e, "/oauth2/introspect", w.confID, w.confSecret, url.Values{"token": {revoked}})
			if status == 200 && body["active"] == false {
				t.Logf("node %d: first read index after the recovery in %v", e, time.Since(began).Round(time.Millisecond))
				break
			}
			if status != 503 || time.Now().After(deadline) {
				// What the node's raft saw, for whoever reads a failure.
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				rerr := c.Node(e).Cluster().ReadIndex(ctx)
				cancel()
				st := c.Node(e).Cluster().Stats()
				_, leader := c.Node(e).Cluster().Leader()
				t.Fatalf("node %d: the token revoked before the loss: %d %v, want active false (read index: %v; leader %q, state %s, term %s, commit %s, raft applied %s, state applied %d, last contact %s)",
					e, status, body, rerr, leader, st["state"], st["term"], st["commit_index"], st["applied_index"], c.Node(e).FSM().Applied(), st["last_contact"])
			}
		}
		if status, _ := bearerGetOn(t, c, e, "/userinfo", live); status != 200 {
			t.Fatalf("node %d: userinfo with a live token: %d", e, status)
		}
	}
	if resp := do2(t, c, edgeB, "POST", "/admin/v1/organizations", map[string]any{"slug": "after-loss", "name": "After"}); resp != 201 {
		t.Fatalf("a write on the recovered core: %d", resp)
	}
	if err := trySignIn(t, c, edgeA, edgeB, w); err != nil {
		t.Fatalf("sign-in on the recovered core: %v", err)
	}
}

// do2 is an admin API call on node i; it returns the status.
func do2(t *testing.T, c *testcluster.Cluster, i int, method, path string, body any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.URL(i)+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func benchTokenT(t *testing.T, c *testcluster.Cluster, w world) string {
	t.Helper()
	r := rpOn(t, c, 0, 0, w.confID, w.confSecret, w.cb)
	pkce := oauth2.GenerateVerifier()
	q := signIn(t, c, testcluster.NewBrowser(t), r, w, pkce, "nonce-0123456789")
	tok, err := r.oauth.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}
