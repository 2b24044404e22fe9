package cluster

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// maybeBootstrap is bootstrap-expect: a node without raft state waits
// until it sees BootstrapExpect nodes (itself included) that are all
// waiting to form a cluster, and the same set for a settle period; then
// the BootstrapExpect lowest ids bootstrap, each with the same servers
// sorted by id, which raft accepts on every node. It gives up for good as
// soon as any member says it already has a raft configuration: that
// cluster's leader adds this node instead. It reports whether this node
// bootstrapped. Called from the maintain loop only.
func (g *gossiper) maybeBootstrap() bool {
	expect := g.c.cfg.BootstrapExpect
	var cands []member
	for _, m := range g.snapshot() {
		if !m.alive() {
			continue
		}
		if m.meta.Bootstrapped {
			g.pending = false
			g.log.Info("found an existing cluster; waiting to be added by its leader", "via", m.name)
			return false
		}
		if m.meta.Expect > 0 { // nodes that only join do not count
			cands = append(cands, m)
		}
	}
	slices.SortFunc(cands, func(a, b member) int { return strings.Compare(a.name, b.name) })
	ids := make([]string, len(cands))
	for i, m := range cands {
		ids[i] = m.name
	}
	view := strings.Join(ids, ",")
	for _, m := range cands {
		if m.meta.Expect != expect {
			g.once(view, "bootstrap-expect differs between nodes; not bootstrapping", "id", m.name, "theirs", m.meta.Expect, "ours", expect)
			return false
		}
	}
	if len(cands) < expect {
		g.viewKey = ""
		return false
	}
	now := time.Now()
	if view != g.viewKey {
		g.viewKey, g.viewAt = view, now
		return false
	}
	if now.Sub(g.viewAt) < g.settle {
		return false
	}
	chosen := cands[:expect]
	if !slices.ContainsFunc(chosen, func(m member) bool { return m.name == g.c.cfg.NodeID }) {
		g.once(view, "more nodes than bootstrap-expect; waiting for the first ones to form the cluster", "nodes", len(cands), "expect", expect)
		return false
	}
	servers := make([]raft.Server, len(chosen))
	for i, m := range chosen {
		servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.name), Address: raft.ServerAddress(m.meta.RaftAddr)}
	}
	if err := g.c.bootstrap(servers); err != nil {
		g.log.Error("bootstrap-expect", "error", err)
		return false
	}
	g.pending = false
	return true
}

// once logs msg at warn level once per view.
func (g *gossiper) once(view, msg string, args ...any) {
	if g.warnedAt == view {
		return
	}
	g.warnedAt = view
	g.log.Warn(msg, args...)
}
