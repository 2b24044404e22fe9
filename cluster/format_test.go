package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/testkit/promtest"
)

func TestAnnouncedFormat(t *testing.T) {
	for _, tc := range []struct {
		meta string
		want fsm.Format
	}{
		{`{"id":"n1","raft_addr":"a","version":"0.3.0"}`, fsm.FormatBase}, // a release before the gate
		{`{"id":"n1","raft_addr":"a","format":1}`, fsm.FormatBase},
		{`{"id":"n1","raft_addr":"a","format":2}`, fsm.FormatGate},
		{`{"id":"n1","raft_addr":"a","format":-3}`, fsm.FormatBase},
		{`{"id":"n1","raft_addr":"a","format":70000}`, 65535},
	} {
		m, err := parseMeta(&memberlist.Node{Name: "n1", Meta: []byte(tc.meta)})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.format(); got != tc.want {
			t.Errorf("%s: got format %d, want %d", tc.meta, got, tc.want)
		}
	}
	// This build announces its format; one with the default omits nothing.
	b, _ := json.Marshal(nodeMeta{ID: "n1", RaftAddr: "a", Format: int(fsm.CurrentFormat)})
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil || back["format"] != float64(fsm.CurrentFormat) {
		t.Fatalf("metadata %s does not carry format %d", b, fsm.CurrentFormat)
	}
}

// TestCountedMembers: what each server of the configuration counts as for
// the raise, the gate and the join check, and what Status shows.
func TestCountedMembers(t *testing.T) {
	c := &Cluster{cfg: Config{NodeID: "self", Gossip: GossipConfig{Version: "0.4.0"}}}
	alive := func(v string, f int) member {
		return member{state: memberlist.StateAlive, meta: nodeMeta{Version: v, Format: f}}
	}
	gossip := map[string]member{
		"new":      alive("0.4.0", int(fsm.CurrentFormat)),
		"old":      alive("0.3.0", 0),
		"bare":     alive("", 0),
		"stopping": {state: memberlist.StateAlive, meta: nodeMeta{Version: "0.4.0", Format: int(fsm.CurrentFormat), Stopping: true}},
		"dead":     {state: memberlist.StateDead, meta: nodeMeta{Version: "0.4.0", Format: int(fsm.CurrentFormat)}},
		"self":     alive("wrong", 1), // this node's own view wins
	}
	// What the members gossip has no entry for answered an ask
	// (announce.go); gossip's view, where it has one, wins.
	now := time.Now()
	c.asked.record("asked", true, "0.4.0", fsm.CurrentFormat, now)
	c.asked.record("asked-old", true, "", fsm.FormatBase, now) // a release that does not know the ask
	c.asked.record("asked-gone", true, "0.4.0", fsm.CurrentFormat, now)
	c.asked.record("asked-gone", false, "", 0, now) // answered once, not lately
	c.asked.record("asked-stale", true, "0.4.0", fsm.CurrentFormat, now.Add(-askFresh-time.Second))
	c.asked.record("never-answered", false, "", 0, now)
	c.asked.record("old", true, "0.4.0", 2, now)
	var servers []raft.Server
	for _, id := range []string{"self", "new", "old", "bare", "stopping", "dead", "unseen",
		"asked", "asked-old", "asked-gone", "asked-stale", "never-answered"} {
		servers = append(servers, raft.Server{ID: raft.ServerID(id)})
	}
	got := c.counted(servers, gossip)
	want := []announcement{
		{id: "self", version: "0.4.0", format: fsm.CurrentFormat}, // this build's
		{id: "new", version: "0.4.0", format: fsm.CurrentFormat},
		{id: "old", version: "0.3.0", format: 1},
		{id: "bare", format: 1},
		{id: "stopping", version: "0.4.0", format: 1, state: "down"},
		{id: "dead", version: "0.4.0", format: 1, state: "down"},
		{id: "unseen", format: 1, state: "not seen"},
		{id: "asked", version: "0.4.0", format: fsm.CurrentFormat},
		{id: "asked-old", format: 1},
		{id: "asked-gone", version: "0.4.0", format: 1, state: "down"},
		{id: "asked-stale", version: "0.4.0", format: 1, state: "down"},
		{id: "never-answered", format: 1, state: "not seen"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if low, v := lowest(got); low != fsm.FormatBase || v != "0.3.0" {
		t.Fatalf("lowest: got %d %q, want 1 0.3.0", low, v)
	}
	if low, v := lowest(got[:2]); low != fsm.CurrentFormat || v != "0.4.0" {
		t.Fatalf("lowest of the upgraded: got %d %q, want %d 0.4.0", low, v, fsm.CurrentFormat)
	}
	if low, _ := lowest([]announcement{got[0], got[7]}); low != fsm.CurrentFormat {
		t.Fatalf("lowest with a member that answered this build's format: got %d, want %d", low, fsm.CurrentFormat)
	}
	wantBehind := []string{"old (0.3.0)", "bare (no version announced)", "stopping (down, last announced 0.4.0)",
		"dead (down, last announced 0.4.0)", "unseen (not seen)", "asked-old (no version announced)",
		"asked-gone (down, last announced 0.4.0)", "asked-stale (down, last announced 0.4.0)", "never-answered (not seen)"}
	if b := behind(got, fsm.FormatGate); !slices.Equal(b, wantBehind) {
		t.Fatalf("behind: got %q, want %q", b, wantBehind)
	}
	if b := behind(got, fsm.FormatBase); len(b) != 0 {
		t.Fatalf("behind format 1: got %q, want none", b)
	}

	for _, tc := range []struct {
		name    string
		servers []string
		want    bool
	}{
		{"alone", []string{"self"}, false},
		{"same release", []string{"self", "new"}, false},
		{"down but last announced the same", []string{"self", "new", "dead"}, false},
		{"an older release", []string{"self", "old"}, true},
		{"never seen", []string{"self", "unseen"}, true},
		{"a stopping member shows what it announced", []string{"self", "new", "stopping"}, false},
		{"asked, the same release", []string{"self", "new", "asked"}, false},
		{"asked, gone, last answered the same", []string{"self", "asked-gone", "asked-stale"}, false},
		{"asked, a release that does not know the ask", []string{"self", "asked-old"}, true},
		{"asked, never answered", []string{"self", "never-answered"}, true},
	} {
		var ss []raft.Server
		for _, id := range tc.servers {
			ss = append(ss, raft.Server{ID: raft.ServerID(id)})
		}
		if got := c.mixed(ss, gossip); got != tc.want {
			t.Errorf("%s: mixed got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestVersionLess(t *testing.T) {
	ordered := []string{"0.2.0+git.5.1a2b3c4", "0.3.0-rc.1", "0.3.0", "v0.3.1", "0.4", "0.10.0", "1.0.0", "dev", "test"}
	for i, a := range ordered {
		for j, b := range ordered {
			if got, want := versionLess(a, b), i < j; got != want {
				t.Errorf("versionLess(%q, %q): got %v, want %v", a, b, got, want)
			}
		}
	}
}

// raiseTo is the command that raises the cluster's format to f: the one
// command of format 2, so the one the gate can refuse today.
func raiseTo(f fsm.Format) fsm.Command {
	return fsm.MustCommand(fsm.TypeSetStateFormat, fsm.SetStateFormat{Format: f, Version: "0.4.0"})
}

func metric(t *testing.T, c *Cluster, name string) float64 {
	t.Helper()
	return promtest.Gather(t, c.cfg.Registerer.(prometheus.Gatherer))[name]
}

// versioned makes every node announce version 0.4.0 (a node's own mods,
// after it, may play another release).
func versioned(c *Config) { c.Gossip.Version = "0.4.0" }

// oldN3 is a static cluster's n3 playing 0.3.0: it announces format 1.
var oldN3 = on("n3", announcing("0.3.0", fsm.FormatBase))

// upgraded is what Status shows of a member that versioned left as it is.
var upgraded = "0.4.0/" + strconv.Itoa(int(fsm.CurrentFormat))

// shownBy is what n's Status shows of each member ("version/format"),
// the cluster's format and whether it is mixed. Status must answer at
// once: it reads what the asks found, and never waits for one.
func shownBy(t *testing.T, n *mnode) (map[string]string, int, bool) {
	t.Helper()
	begin := time.Now()
	st, err := n.c.Status(t.Context())
	if err != nil {
		t.Fatalf("%s: status: %v", n.id, err)
	}
	if d := time.Since(begin); d > askTimeout/2 {
		t.Fatalf("%s: status took %v", n.id, d)
	}
	shown := map[string]string{}
	for _, m := range st.Members {
		shown[m.ID] = m.Version + "/" + strconv.Itoa(m.StateFormat)
	}
	return shown, st.StateFormat, st.Mixed
}

// waitShown waits until every node's Status shows want of the members.
func waitShown(t *testing.T, mc *mcluster, want map[string]string) {
	t.Helper()
	for _, n := range mc.nodes {
		waitFor(t, 10*time.Second, n.id+" to show "+fmt.Sprint(want), func() bool {
			shown, _, _ := shownBy(t, n)
			return maps.Equal(shown, want)
		})
	}
}

// holdsAtM checks, for a while, that no node's state leaves format f.
func holdsAtM(t *testing.T, mc *mcluster, f fsm.Format, why string) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, n := range mc.nodes {
			if got := n.f.State().StateFormat(); got != f {
				t.Fatalf("%s: %s runs format %d, want %d", why, n.id, got, f)
			}
		}
	}
}

// refusedOn applies a format-2 command on n and checks that the gate
// refuses it, before anything is proposed, naming exactly members.
func refusedOn(t *testing.T, n *mnode, members ...string) {
	t.Helper()
	_, err := n.c.Apply(withTimeout(t, 5*time.Second), raiseTo(fsm.FormatGate))
	var fe *fsm.FormatError
	if !errors.As(err, &fe) || !errors.Is(err, fsm.ErrFormat) {
		t.Fatalf("%s: got %v, want a *fsm.FormatError", n.id, err)
	}
	if errors.Is(err, ErrNoLeader) || errors.Is(err, fsm.ErrMaybeApplied) {
		t.Fatalf("%s: a refusal reads as a failure: %v", n.id, err)
	}
	if fe.Need != fsm.FormatGate || fe.Have != fsm.FormatBase || !slices.Equal(fe.Members, members) {
		t.Fatalf("%s: got %+v, want need 2, have 1, members %q", n.id, fe, members)
	}
}

// TestStaticClusterRaisesItsFormat: a cluster formed from static peers
// has no gossip; every node asks the others what they run (opAnnounce),
// so the leader raises the state format within a few seconds
// (newMCluster waits for it) and every node's Status shows each member's
// version and format, not mixed. The raise records the members' version
// and the gate lets format 2 through everywhere.
func TestStaticClusterRaisesItsFormat(t *testing.T) {
	mc := newMCluster(t, 3, nil, versioned)
	if mc.nodes[0].c.gossip != nil {
		t.Fatal("a static cluster started gossip")
	}
	for _, n := range mc.nodes {
		if v := n.f.State().StateFormatVersion(); v != "0.4.0" {
			t.Fatalf("%s: the raise records version %q, want 0.4.0", n.id, v)
		}
	}
	want := map[string]string{"n1": upgraded, "n2": upgraded, "n3": upgraded}
	waitShown(t, mc, want)
	for _, n := range mc.nodes {
		if _, f, mixed := shownBy(t, n); mixed || f != int(fsm.CurrentFormat) {
			t.Fatalf("%s: status: mixed %v, format %d; want not mixed, format %d", n.id, mixed, f, fsm.CurrentFormat)
		}
		if m := metric(t, n.c, "oidcd_cluster_mixed_versions"); m != 0 {
			t.Fatalf("%s: mixed gauge %v, want 0", n.id, m)
		}
	}
	_, fs := mc.roles()
	if _, err := fs[0].c.Apply(withTimeout(t, 5*time.Second), raiseTo(fsm.FormatGate)); err != nil {
		t.Fatalf("format 2 on a follower after the raise: %v", err)
	}
}

// TestGateRefusesANewerCommand: in a static cluster where n3 plays 0.3.0
// (it announces format 1 when asked), the leader never raises the
// format, and every node's Status shows the cluster mixed. A format-2
// command is refused on every node before anything is proposed, with a
// *fsm.FormatError naming n3, counted as a refusal and not as a failed
// write; the leader refuses one sent past a proposer's gate the same way.
// Once n3 stops, it holds the format back still, as down.
func TestGateRefusesANewerCommand(t *testing.T) {
	mc := newMCluster(t, 3, nil, versioned, oldN3)
	want := map[string]string{"n1": upgraded, "n2": upgraded, "n3": "0.3.0/1"}
	waitShown(t, mc, want)
	holdsAtM(t, mc, fsm.FormatBase, "n3 announces format 1")
	for _, n := range mc.nodes {
		if _, f, mixed := shownBy(t, n); !mixed || f != 1 {
			t.Fatalf("%s: status: mixed %v, format %d; want mixed, format 1", n.id, mixed, f)
		}
	}
	leader, fs := mc.roles()
	mustApply(t, fs[0], org("o1", "one"))
	applied := leader.f.Applied()
	for _, n := range mc.nodes {
		refusedOn(t, n, "n3 (0.3.0)")
		if got := metric(t, n.c, "oidcd_write_format_refusals_total"); got != 1 {
			t.Fatalf("%s: %v refusals counted, want 1", n.id, got)
		}
		if got := metric(t, n.c, "oidcd_raft_apply_errors_total"); got != 0 {
			t.Fatalf("%s: the refusal counted as %v failed writes", n.id, got)
		}
	}
	// Past the proposer's gate, the leader refuses it, and the refusal
	// comes back as the same error.
	_, err := fs[0].c.forwardApply(withTimeout(t, 5*time.Second), raiseTo(fsm.FormatGate))
	var fe *fsm.FormatError
	if !errors.As(err, &fe) || fe.Need != fsm.FormatGate || !slices.Equal(fe.Members, []string{"n3 (0.3.0)"}) {
		t.Fatalf("forwarded past the gate: got %v (%+v), want the leader's *fsm.FormatError naming n3", err, fe)
	}
	readIndex(t, leader)
	if got := leader.f.Applied(); got != applied {
		t.Fatalf("applied index moved from %d to %d: a refused command was proposed", applied, got)
	}

	// n3 stops: it no longer answers, and counts as down, shown as what it
	// last answered.
	n1 := mc.nodes[0]
	mc.nodes[2].stop()
	mc.nodes = mc.nodes[:2]
	waitFor(t, 10*time.Second, "n3 counted as down", func() bool {
		_, err := n1.c.Apply(withTimeout(t, 5*time.Second), raiseTo(fsm.FormatGate))
		var fe *fsm.FormatError
		return errors.As(err, &fe) && slices.Equal(fe.Members, []string{"n3 (down, last announced 0.3.0)"})
	})
	if shown, _, mixed := shownBy(t, n1); !mixed || shown["n3"] != "0.3.0/1" {
		t.Fatalf("status with n3 down: %v, mixed %v; want n3 0.3.0/1, mixed", shown, mixed)
	}
	holdsAtM(t, mc, fsm.FormatBase, "n3 is down")
}

// TestAMemberThatDoesNotKnowTheAskCountsAsFormat1: a member of 0.3.0
// does not know opAnnounce. Its server answers what it answers any
// unknown op, a message of class classOther on a connection it keeps
// open (cluster/forward.go's serveOp at the commit of VERSION 0.3.0,
// 5dc23dba), and the asker takes that for format 1 and no version: the
// cluster is held at format 1, shown mixed, and the gate names the
// member as announcing no version.
func TestAMemberThatDoesNotKnowTheAskCountsAsFormat1(t *testing.T) {
	mc := newMCluster(t, 3, nil, versioned, oldN3, on("n3", knowsNoAsk))
	n1, n3 := mc.nodes[0], mc.nodes[2]

	ctx := withTimeout(t, 5*time.Second)
	cl, err := n1.c.fwd.asks.get(ctx, n3.addr)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the connection stays usable after the answer
		r, err := cl.call(ctx, opAnnounce, nil)
		if err != nil || r.class != classOther || string(r.body) != "cluster: unknown operation 5" {
			t.Fatalf("got %v, class %d, %q; want class %d, \"cluster: unknown operation 5\"", err, r.class, r.body, classOther)
		}
		if !cl.usable() {
			t.Fatal("the connection was closed after the answer")
		}
	}
	if v, f, err := n1.c.ask(ctx, raft.Server{ID: "n3", Address: raft.ServerAddress(n3.addr)}); err != nil || v != "" || f != fsm.FormatBase {
		t.Fatalf("ask: got %q, %d, %v; want no version, format 1", v, f, err)
	}

	want := map[string]string{"n1": upgraded, "n2": upgraded, "n3": "/1"}
	waitShown(t, &mcluster{nodes: mc.nodes[:2]}, want)
	holdsAtM(t, mc, fsm.FormatBase, "n3 does not know the ask")
	for _, n := range mc.nodes[:2] {
		if _, f, mixed := shownBy(t, n); !mixed || f != 1 {
			t.Fatalf("%s: status: mixed %v, format %d; want mixed, format 1", n.id, mixed, f)
		}
		refusedOn(t, n, "n3 (no version announced)")
	}
}

// TestAMemberThatDoesNotAnswerCountsAsFormat1: a member that never
// answers an ask in time (frozen, as far as asks go) counts as format 1,
// never seen, and Status does not wait for it. (n3 plays 0.3.0 too, so
// that it holds the format back should it lead: it asks the others, who
// answer.)
func TestAMemberThatDoesNotAnswerCountsAsFormat1(t *testing.T) {
	mc := newMCluster(t, 3, nil, versioned, oldN3, on("n3", answersNoAsk))
	others := &mcluster{nodes: mc.nodes[:2]}
	waitShown(t, others, map[string]string{"n1": upgraded, "n2": upgraded, "n3": "/1"})
	time.Sleep(askEvery + askTimeout) // an ask of n3 has timed out
	holdsAtM(t, mc, fsm.FormatBase, "n3 does not answer")
	for _, n := range others.nodes {
		if _, f, mixed := shownBy(t, n); !mixed || f != 1 {
			t.Fatalf("%s: status: mixed %v, format %d; want mixed, format 1", n.id, mixed, f)
		}
		refusedOn(t, n, "n3 (not seen)")
	}
}

// formWith forms a gossip cluster of n1, n2, n3 as formCluster does, each
// adjusted by mods[id].
func formWith(t *testing.T, mods map[string]func(*Config)) []*gnode {
	t.Helper()
	n1 := startGossipNode(t, "n1", t.TempDir(), mods["n1"])
	nodes := []*gnode{n1}
	for _, id := range []string{"n2", "n3"} {
		nodes = append(nodes, startGossipNode(t, id, t.TempDir(), func(c *Config) {
			c.Gossip.Join = []string{n1.c.GossipAddr()}
			if mods[id] != nil {
				mods[id](c)
			}
		}))
	}
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.id+" to have the three voters", func() bool { return slices.Equal(serverIDs(n.c), []string{"n1", "n2", "n3"}) })
	}
	return nodes
}

// stateFormats is the format each node's state holds.
func stateFormats(nodes ...*gnode) []fsm.Format {
	var out []fsm.Format
	for _, n := range nodes {
		out = append(out, n.f.State().StateFormat())
	}
	return out
}

// holdsAt checks, for a while, that no node's state leaves format f.
func holdsAt(t *testing.T, f fsm.Format, why string, nodes ...*gnode) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, n := range nodes {
			if got := n.f.State().StateFormat(); got != f {
				t.Fatalf("%s: %s runs format %d, want %d", why, n.id, got, f)
			}
		}
	}
}

// refusedNaming applies a format-2 command on n and checks that the gate
// refuses it naming exactly members (in any order).
func refusedNaming(t *testing.T, n *gnode, members ...string) {
	t.Helper()
	_, err := n.c.Apply(withTimeout(t, 5*time.Second), raiseTo(fsm.FormatGate))
	var fe *fsm.FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("%s: got %v, want a *fsm.FormatError", n.id, err)
	}
	got := slices.Sorted(slices.Values(fe.Members))
	slices.Sort(members)
	if !slices.Equal(got, members) {
		t.Fatalf("%s: refusal names %q, want %q", n.id, got, members)
	}
}

// TestStateFormatRaisedOnceEveryMemberAnnouncesIt walks a rolling upgrade:
// n3 and an edge replica (a non-voter) play 0.3.0, which announces format
// 1. The leader does not raise the cluster's format while any member of
// the configuration counts as lower: n3, then the non-voter alone, then
// the non-voter while it is down. Once all of them announce format 2 it
// is raised, once. Status and the gauges show the mixed cluster, then the
// upgraded one.
func TestStateFormatRaisedOnceEveryMemberAnnouncesIt(t *testing.T) {
	old := announcing("0.3.0", fsm.FormatBase)
	nodes := formWith(t, map[string]func(*Config){"n3": old})
	edgeDir := t.TempDir()
	edgeCfg := func(c *Config) {
		c.NonVoter, c.BootstrapExpect, c.Gossip.Join = true, 0, []string{nodes[0].c.GossipAddr()}
	}
	edge := startGossipNode(t, "e1", edgeDir, func(c *Config) { edgeCfg(c); old(c) })
	isEdge := func(s raft.Server) bool { return s.ID == "e1" && s.Suffrage == raft.Nonvoter }
	waitFor(t, 10*time.Second, "the edge replica added", func() bool {
		servers, _ := leaderOf(t, nodes...).c.Members()
		return slices.ContainsFunc(servers, isEdge)
	})
	all := append(slices.Clone(nodes), edge)
	holdsAt(t, fsm.FormatBase, "n3 and e1 announce format 1", all...)

	n1 := nodes[0]
	st, err := n1.c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mixed || st.StateFormat != 1 {
		t.Fatalf("status: mixed %v, format %d; want mixed, format 1", st.Mixed, st.StateFormat)
	}
	shown := map[string]string{}
	for _, m := range st.Members {
		shown[m.ID] = m.Version + "/" + strconv.Itoa(m.StateFormat)
	}
	now := "test/" + strconv.Itoa(int(fsm.CurrentFormat))
	want := map[string]string{"n1": now, "n2": now, "n3": "0.3.0/1", "e1": "0.3.0/1"}
	if !maps.Equal(shown, want) {
		t.Fatalf("status shows %v, want %v", shown, want)
	}
	if m, f := metric(t, n1.c, "oidcd_cluster_mixed_versions"), metric(t, n1.c, "oidcd_state_format"); m != 1 || f != 1 {
		t.Fatalf("gauges: mixed %v, format %v; want 1 and 1", m, f)
	}
	refusedNaming(t, n1, "n3 (0.3.0)", "e1 (0.3.0)")

	// n3 is upgraded: the edge replica, a non-voter, still holds it back.
	if err := nodes[2].c.reannounce("test", fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "n1 to see n3 upgraded", func() bool {
		st, err := n1.c.Status(t.Context())
		return err == nil && slices.ContainsFunc(st.Members, func(m Member) bool { return m.ID == "n3" && m.StateFormat == int(fsm.CurrentFormat) })
	})
	holdsAt(t, fsm.FormatBase, "the non-voter announces format 1", all...)
	refusedNaming(t, nodes[1], "e1 (0.3.0)")

	// n3, upgraded in place, leads from here: the raise below is its own,
	// so it must count itself as what it announces now, not as the
	// release it started as (a leader that did once never raised).
	n3 := nodes[2]
	if l := leaderOf(t, nodes...); l != n3 {
		if err := l.c.raft.LeadershipTransferToServer(raft.ServerID(n3.id), raft.ServerAddress(n3.c.RaftAddr())).Error(); err != nil {
			t.Fatalf("leadership to n3: %v", err)
		}
	}
	waitFor(t, 10*time.Second, "n3 to lead", n3.c.IsLeader)

	// The edge replica stops for its upgrade: down, it holds the format
	// back too (it may come back on any release).
	edge.stop()
	waitFor(t, 5*time.Second, "the edge replica seen down", func() bool {
		m, ok := n1.c.gossip.snapshot()["e1"]
		return ok && !m.alive()
	})
	holdsAt(t, fsm.FormatBase, "the non-voter is down", nodes...)
	refusedNaming(t, n1, "e1 (down, last announced 0.3.0)")

	// It comes back upgraded: every member announces this build's format. The wait
	// covers a gossip rejoin and the leader's next announce round on a
	// loaded machine (10 s ran out once in a clean-clone run of the whole
	// suite); it bounds the wait, and the assertion is the same.
	edge = startGossipNode(t, "e1", edgeDir, edgeCfg)
	all = append(slices.Clone(nodes), edge)
	waitFor(t, 30*time.Second, "the current format on every node", func() bool {
		return slices.Equal(stateFormats(all...), []fsm.Format{fsm.CurrentFormat, fsm.CurrentFormat, fsm.CurrentFormat, fsm.CurrentFormat})
	})
	for _, n := range all {
		if v := n.f.State().StateFormatVersion(); v != "test" {
			t.Fatalf("%s: the raise records version %q, want the members' lowest, test", n.id, v)
		}
	}
	waitFor(t, 5*time.Second, "status no longer mixed", func() bool {
		st, err := n1.c.Status(t.Context())
		return err == nil && !st.Mixed && st.StateFormat == int(fsm.CurrentFormat)
	})
	if m, f := metric(t, n1.c, "oidcd_cluster_mixed_versions"), metric(t, n1.c, "oidcd_state_format"); m != 0 || f != float64(fsm.CurrentFormat) {
		t.Fatalf("gauges: mixed %v, format %v; want 0 and %d", m, f, fsm.CurrentFormat)
	}
	// The gate lets format 2 through now (raising to 2 below the current
	// format changes nothing).
	leader := applyOnLeader(t, raiseTo(fsm.FormatGate), all...)
	if _, err := edge.c.Apply(withTimeout(t, 5*time.Second), raiseTo(fsm.FormatGate)); err != nil {
		t.Fatalf("format 2 on the edge replica after the raise: %v", err)
	}
	if got := leader.f.State().StateFormat(); got != fsm.CurrentFormat {
		t.Fatalf("format %d after a raise to 2, want %d", got, fsm.CurrentFormat)
	}
}

// TestNodeOfAnOlderFormatIsNotAdded: once the cluster runs format 2, a
// node that announces format 1 (0.3.0) is not added to the raft
// configuration, which it would follow without being able to apply, and
// the leader says so once, not at every pass. Upgraded, it is added.
func TestNodeOfAnOlderFormatIsNotAdded(t *testing.T) {
	var warned atomic.Int32
	counting := func(c *Config) {
		c.Logger = slog.New(countingHandler{msg: "not adding a node of an older release to the cluster; upgrade it", n: &warned})
	}
	nodes := formWith(t, map[string]func(*Config){"n1": counting, "n2": counting, "n3": counting})
	waitFor(t, 30*time.Second, "the current format on every node", func() bool {
		return slices.Equal(stateFormats(nodes...), []fsm.Format{fsm.CurrentFormat, fsm.CurrentFormat, fsm.CurrentFormat})
	})
	n4 := startGossipNode(t, "n4", t.TempDir(), func(c *Config) {
		c.Gossip.Join = []string{nodes[1].c.GossipAddr()}
		announcing("0.3.0", fsm.FormatBase)(c)
	})
	waitFor(t, 5*time.Second, "the leader to refuse n4", func() bool { return warned.Load() > 0 })
	time.Sleep(time.Second) // ten reconcile passes
	if got := serverIDs(leaderOf(t, nodes...).c); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("voters: got %v, want n4 left out", got)
	}
	// Once per leader: a leadership change on a loaded machine may add one.
	if n := warned.Load(); n > 3 {
		t.Fatalf("the refusal was logged %d times, want once per leader", n)
	}
	if err := n4.c.reannounce("test", fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "upgraded n4 to become a voter", func() bool {
		return slices.Equal(serverIDs(leaderOf(t, nodes...).c), []string{"n1", "n2", "n3", "n4"})
	})
}

// TestSingleNodeRaisesItsFormat: alone, a node is every member of its
// configuration, so it raises the format as soon as it leads, recording
// its own version.
func TestSingleNodeRaisesItsFormat(t *testing.T) {
	n := start(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.Gossip.Version = "0.4.0" })
	waitFor(t, 5*time.Second, "the format raised", func() bool { return n.f.State().StateFormat() == fsm.CurrentFormat })
	if v := n.f.State().StateFormatVersion(); v != "0.4.0" {
		t.Fatalf("recorded version %q, want 0.4.0", v)
	}
	if _, err := n.c.Apply(withTimeout(t, 5*time.Second), raiseTo(fsm.FormatGate)); err != nil {
		t.Fatalf("format 2 after the raise: %v", err)
	}
}

// TestAnyNodeAnswersWhatItRuns: opAnnounce is answered by a follower as
// by the leader, with the node's id, version and format; an op the server
// does not know is answered class other, on a connection that serves on.
func TestAnyNodeAnswersWhatItRuns(t *testing.T) {
	mc := newMCluster(t, 3, nil, func(c *Config) { c.Gossip.Version = "0.4.0" })
	leader, fs := mc.roles()
	for _, n := range append([]*mnode{leader}, fs...) {
		asker := mc.nodes[0]
		if asker == n {
			asker = mc.nodes[1]
		}
		ctx := withTimeout(t, 5*time.Second)
		body, err := asker.c.callNode(ctx, n.addr, n.id, opAnnounce, nil)
		var a announceReply
		if err != nil || json.Unmarshal(body, &a) != nil {
			t.Fatalf("%s asks %s: %v %q", asker.id, n.id, err, body)
		}
		if want := (announceReply{ID: n.id, Version: "0.4.0", Format: int(fsm.CurrentFormat)}); a != want {
			t.Fatalf("%s answers %+v, want %+v", n.id, a, want)
		}
		cl, err := asker.c.fwd.pool.get(ctx, n.addr)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cl.call(ctx, 99, nil)
		if err != nil || r.class != classOther || string(r.body) != "cluster: unknown operation 99" {
			t.Fatalf("op 99 on %s: got %v, class %d, %q", n.id, err, r.class, r.body)
		}
		if _, err := asker.c.callNode(ctx, n.addr, n.id, opAnnounce, nil); err != nil {
			t.Fatalf("%s after an unknown op: %v", n.id, err)
		}
	}
}
