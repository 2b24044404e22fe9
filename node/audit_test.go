package node_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

type auditEvent struct {
	Seq      uint64          `json:"seq"`
	Time     time.Time       `json:"time"`
	Type     string          `json:"type"`
	Outcome  string          `json:"outcome"`
	Actor    string          `json:"actor"`
	Subject  string          `json:"subject"`
	ClientID string          `json:"client_id"`
	OrgID    string          `json:"organization_id"`
	SID      string          `json:"sid"`
	IP       string          `json:"ip"`
	Node     string          `json:"node"`
	Detail   fsm.EventDetail `json:"detail"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// auditOn reads node i's whole trail (GET /admin/v1/audit, page by page),
// and its raw answers, for the secret scan.
func auditOn(t *testing.T, c *testcluster.Cluster, i int) ([]auditEvent, []byte) {
	t.Helper()
	var all []auditEvent
	var raw []byte
	after := uint64(0)
	for range 100 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/admin/v1/audit?after=%d&limit=1000", c.URL(i), after), nil)
		req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("audit on node %d: %d %s", i, resp.StatusCode, buf.String())
		}
		raw = append(raw, buf.Bytes()...)
		var page struct {
			Data      []auditEvent `json:"data"`
			NextAfter uint64       `json:"next_after"`
		}
		if err := json.Unmarshal(buf.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Data) == 0 {
			return all, raw
		}
		all = append(all, page.Data...)
		after = page.NextAfter
	}
	t.Fatal("more than 100 pages")
	return nil, nil
}

func findEvent(es []auditEvent, match func(e auditEvent) bool) *auditEvent {
	for i := range es {
		if match(es[i]) {
			return &es[i]
		}
	}
	return nil
}

// TestAuditTrailOnThreeNodes drives the audited actions
// (docs/operators/audit.md) through the product with go-oidc and x/oauth2, and reads the
// trail back from every node: each action left its event with the fields
// an event holds, the three nodes answer the same seq and hash, no secret
// is in any event, a leader kill loses nothing and the chain goes on,
// bad queries get VALIDATION_ERROR, and `oidcd admin audit verify`
// agrees.
func TestAuditTrailOnThreeNodes(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)

	// A wrong password.
	r := rpOn(t, c, 1, 2, w.confID, w.confSecret, w.cb)
	b := testcluster.NewBrowser(t)
	pkce := oauth2.GenerateVerifier()
	page := b.Follow(b.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce))), r.authBase())
	if p := b.Submit(page, map[string]string{"email": w.email, "password": "not the password"}, "method", "password"); p.Status != 400 {
		t.Fatalf("wrong password: %d", p.Status)
	}
	// A sign-in, an exchange and a replay of its code.
	q := signIn(t, c, b, r, w, pkce, "nonce-0123456789")
	tok, err := r.oauth.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.oauth.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(pkce)); err == nil {
		t.Fatal("a replayed code was exchanged")
	}
	// A revocation of another token, and a logout.
	other := benchTokenT(t, c, w)
	if status, _ := clientPostOn(t, c, 2, "/oauth2/revoke", w.confID, w.confSecret, url.Values{"token": {other}}); status != 200 {
		t.Fatalf("revoke: %d", status)
	}
	resp, err := b.Client.PostForm(c.URL(0)+"/logout", url.Values{"id_token_hint": {tok.Extra("id_token").(string)}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	es, raw := auditOn(t, c, 0)
	checks := []struct {
		what  string
		match func(e auditEvent) bool
	}{
		{"admin: the client created", func(e auditEvent) bool {
			return e.Type == "admin" && e.Actor == "admin" && e.Detail["action"] == "POST /clients" && e.Detail["target"] == w.confID && e.IP == "127.0.0.1"
		}},
		{"signin failure: the wrong password", func(e auditEvent) bool {
			return e.Type == "signin" && e.Outcome == "failure" && e.Subject == w.user && e.ClientID == w.confID && e.Detail["reason"] == "wrong_password" && e.Node == "node-1"
		}},
		{"signin success", func(e auditEvent) bool {
			return e.Type == "signin" && e.Outcome == "success" && e.Actor == "person" && e.Subject == w.user && e.ClientID == w.confID && e.Detail["acr"] != ""
		}},
		{"token success", func(e auditEvent) bool {
			return e.Type == "token" && e.Outcome == "success" && e.Actor == "client" && e.Subject == w.user && e.SID != "" && e.OrgID != "" && e.Node == "node-2"
		}},
		{"token replay", func(e auditEvent) bool {
			return e.Type == "token" && e.Outcome == "failure" && e.Detail["reason"] == "replay" && e.SID != ""
		}},
		{"revocation", func(e auditEvent) bool {
			return e.Type == "revocation" && e.Actor == "client" && e.ClientID == w.confID && e.Node == "node-2"
		}},
		{"logout", func(e auditEvent) bool {
			return e.Type == "logout" && e.Detail["cause"] != "" && e.Subject == w.user && e.SID != "" && e.Node == "node-0"
		}},
		{"key created", func(e auditEvent) bool { return e.Type == "key" && e.Actor == "system" && e.Detail["kid"] != "" }},
	}
	for _, ch := range checks {
		if findEvent(es, ch.match) == nil {
			t.Errorf("no event for %s in %d events", ch.what, len(es))
		}
	}
	for i, e := range es {
		if e.Seq != uint64(i+1) || (i > 0 && e.PrevHash != es[i-1].Hash) || e.Time.IsZero() || e.Node == "" || (e.Outcome != "success" && e.Outcome != "failure") {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	for _, secret := range []string{w.password, "not the password", w.confSecret, tok.AccessToken, tok.Extra("id_token").(string), q.Get("code"), other, testcluster.AdminToken} {
		if secret != "" && bytes.Contains(raw, []byte(secret)) {
			t.Errorf("a secret is in the trail: %.12s...", secret)
		}
	}
	// Every node holds the same trail.
	for i := 1; i < 3; i++ {
		c.Node(i).Cluster().ReadIndex(context.Background())
		other, _ := auditOn(t, c, i)
		if len(other) < len(es) || other[len(es)-1].Hash != es[len(es)-1].Hash {
			t.Fatalf("node %d: %d events, want the %d of node 0 with the same hashes", i, len(other), len(es))
		}
	}

	// A leader kill: the acknowledged event is kept, the chain goes on.
	if resp := do(t, c, "POST", "/admin/v1/organizations", testcluster.AdminToken, map[string]any{"slug": "before-kill", "name": "B"}, nil); resp.StatusCode != 201 {
		t.Fatalf("write: %d", resp.StatusCode)
	}
	leader := c.WaitNewLeader()
	c.Kill(leader)
	survivor := (leader + 1) % 3
	c.WaitNewLeader()
	if resp := do2(t, c, survivor, "POST", "/admin/v1/organizations", map[string]any{"slug": "after-kill", "name": "A"}); resp != 201 {
		t.Fatalf("write after the kill: %d", resp)
	}
	after, _ := auditOn(t, c, survivor)
	before := findEvent(after, func(e auditEvent) bool {
		return e.Type == "admin" && e.Detail["action"] == "POST /organizations" && e.Seq > es[len(es)-1].Seq
	})
	if before == nil || after[len(after)-1].Detail["action"] != "POST /organizations" || after[len(after)-1].Seq <= before.Seq {
		t.Fatalf("after the leader kill: %d events, the write before the kill %+v", len(after), before)
	}
	c.Restart(leader)

	// Bad queries.
	for _, bad := range []string{"after=-1", "limit=0", "limit=1001", "type=nope", "after=x", "bogus=1", "wait=61", "order=up"} {
		req, _ := http.NewRequest("GET", c.URL(0)+"/admin/v1/audit?"+bad, nil)
		req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != 400 || body.Error.Code != "VALIDATION_ERROR" {
			t.Errorf("%s: %d %q, want 400 VALIDATION_ERROR", bad, resp.StatusCode, body.Error.Code)
		}
	}

	// oidcd admin audit verify asks every node and compares them.
	var out, errb bytes.Buffer
	env := func(k string) string {
		if k == cli.EnvToken {
			return testcluster.AdminToken
		}
		return ""
	}
	// testcluster runs without gossip, so members have no http_addr: the
	// nodes are named, as with --admin-addr.
	nodes := c.URL(0) + "," + c.URL(1) + "," + c.URL(2)
	if code := cli.Run(context.Background(), []string{"--addr", c.URL(0), "audit", "verify", "--nodes", nodes}, env, nil, &out, &errb); code != 0 {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "the nodes agree") || strings.Count(out.String(), "  yes  ") != 3 {
		t.Fatalf("audit verify:\n%s", out.String())
	}
}

// TestAuditTamperOnAStoppedNode: one byte of an event in a stopped node's
// state file, changed with bbolt's API; after a restart the node's
// verify names the event's seq, and `oidcd admin audit verify` fails
// for the cluster while the other nodes' chains are fine.
func TestAuditTamperOnAStoppedNode(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	for i := range 4 {
		if resp := do(t, c, "POST", "/admin/v1/organizations", testcluster.AdminToken, map[string]any{"slug": fmt.Sprintf("org-%d", i), "name": "O"}, nil); resp.StatusCode != 201 {
			t.Fatalf("write: %d", resp.StatusCode)
		}
	}
	victim := c.Followers()[0]
	c.Node(victim).Cluster().ReadIndex(context.Background())
	es, _ := auditOn(t, c, victim)
	target := es[len(es)-2]
	// From format 3 the events are in the node's trail (fsm/trail), not
	// in state.db: wait until the mover has moved the target there.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st := c.Node(victim).FSM().TrailStatus(); st.Last >= target.Seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d not moved to the trail: %+v", target.Seq, c.Node(victim).FSM().TrailStatus())
		}
	}
	c.Kill(victim)
	// An operator with a shell alters the event in the trail's active
	// segment as a forger would: its hash changed, the frame's CRC made
	// good again, so the file loads as sound (a bad CRC is a torn tail:
	// cut, and fetched again from a peer).
	if n := forgeTrailHash(t, filepath.Join(c.DataDir(victim), "trail"), target.Hash); n == 0 {
		t.Fatalf("event %d's hash is in no frame of the trail", target.Seq)
	}
	c.Restart(victim)
	var v struct {
		OK       bool    `json:"ok"`
		BrokenAt *uint64 `json:"broken_at"`
	}
	do(t, c, "GET", "/admin/v1/audit/verify", testcluster.AdminToken, nil, nil) // node 0 may be the victim or not
	req, _ := http.NewRequest("GET", c.URL(victim)+"/admin/v1/audit/verify", nil)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if v.OK || v.BrokenAt == nil || *v.BrokenAt != target.Seq {
		t.Fatalf("verify on the tampered node: %+v, want broken_at %d", v, target.Seq)
	}
	var out, errb bytes.Buffer
	env := func(k string) string {
		if k == cli.EnvToken {
			return testcluster.AdminToken
		}
		return ""
	}
	nodes := c.URL(0) + "," + c.URL(1) + "," + c.URL(2)
	if code := cli.Run(context.Background(), []string{"--addr", c.URL((victim + 1) % 3), "audit", "verify", "--nodes", nodes}, env, nil, &out, &errb); code == 0 || !strings.Contains(out.String(), fmt.Sprintf("broken at seq %d", target.Seq)) {
		t.Fatalf("audit verify: exit %d, want a failure naming seq %d\n%s%s", code, target.Seq, out.String(), errb.String())
	}
}

// forgeTrailHash changes, in every frame of the trail's active segments
// under dir that holds it, the raw bytes of hash (the event's hash in
// its block, and the next block's prev_hash when the event ends one),
// and makes each such frame's CRC good again. It returns the frames it
// changed. The layout is fsm/trail's: a 20-byte header, then frames of
// length (uint32 LE), CRC-32C (uint32 LE) and payload.
func forgeTrailHash(t *testing.T, dir, hash string) int {
	t.Helper()
	raw, err := hex.DecodeString(hash)
	if err != nil || len(raw) != 32 {
		t.Fatalf("hash %q", hash)
	}
	forged := bytes.Clone(raw)
	forged[0] ^= 0x20
	paths, _ := filepath.Glob(filepath.Join(dir, "active-*.trail"))
	crc := crc32.MakeTable(crc32.Castagnoli)
	changed := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for off := 20; off+8 <= len(b); {
			n := int(binary.LittleEndian.Uint32(b[off:]))
			if n == 0 || off+8+n > len(b) {
				break
			}
			payload := b[off+8 : off+8+n]
			if bytes.Contains(payload, raw) {
				copy(payload, bytes.ReplaceAll(payload, raw, forged))
				binary.LittleEndian.PutUint32(b[off+4:], crc32.Checksum(payload, crc))
				changed++
			}
			off += 8 + n
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return changed
}

// TestAuditFloodIsBoundedByTheThrottles: a flood of wrong passwords
// records no more failure events than the throttles let guesses through:
// 30 against one account give its 10 (per account and address) and one
// lockout; 60 more against unknown addresses give what is left of the
// address's 50 and one lockout; the refused attempts record nothing.
func TestAuditFloodIsBoundedByTheThrottles(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	r := rpOn(t, c, 0, 0, w.confID, w.confSecret, w.cb)
	b := testcluster.NewBrowser(t)
	page := b.Follow(b.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))), r.authBase())
	statuses := map[int]int{}
	for i := range 90 {
		email := w.email
		if i >= 30 {
			email = fmt.Sprintf("nobody-%d@example.com", i)
		}
		p := b.Submit(page, map[string]string{"email": email, "password": "wrong guess"}, "method", "password")
		statuses[p.Status]++
	}
	if statuses[400] != 50 || statuses[429] != 40 {
		t.Fatalf("answers: %v, want 50 checked (400) and 40 refused (429)", statuses)
	}
	es, _ := auditOn(t, c, 0)
	reasons := map[string]int{}
	for _, e := range es {
		if e.Type == "signin" && e.Outcome == "failure" {
			reasons[e.Detail["reason"]]++
		}
	}
	if want := map[string]int{"wrong_password": 10, "unknown_account": 40, "lockout": 2}; fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("failure events: %v, want %v", reasons, want)
	}
}
