package cluster

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
)

// reconcileLoop runs on the leader (registered with OnLeader): it brings
// the raft configuration in line with gossip on every membership event and
// every ReconcileInterval.
func (g *gossiper) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(g.cfg.ReconcileInterval)
	defer t.Stop()
	// missing: raft servers that gossip has never shown this leader, and
	// since when; a new leader gives them a full ReapAfter.
	missing := map[raft.ServerID]time.Time{}
	for {
		g.reconcile(ctx, missing)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.reconcileCh:
		}
	}
}

// reconcile makes one pass:
//   - a member alive in gossip but not in the configuration (or at another
//     raft address) is added: as a voter, or as a non-voter when it asks
//     to be one (an edge replica); a server already there keeps its role
//     (SetVoter changes it), also when only its address changed; a failed
//     server holding its raft address is removed first, so a replacement
//     can take a dead node's address; a member that announces a state
//     format below the cluster's is not added (admits);
//   - a member that announced it is leaving (Cluster.Leave) is removed;
//   - a server failed or left in gossip, or unknown to it, for ReapAfter
//     is removed; a voter only while the failed voters are a minority of
//     the voters: when gossip calls most servers dead while raft still
//     has a quorum, gossip is the one that is wrong.
//
// The leader never removes itself.
func (g *gossiper) reconcile(ctx context.Context, missing map[raft.ServerID]time.Time) {
	c := g.c
	servers, err := c.Members()
	if err != nil || ctx.Err() != nil {
		return
	}
	members := g.snapshot()
	self := raft.ServerID(c.cfg.NodeID)
	now := time.Now()

	servers, ok := g.addAlive(ctx, servers, members)
	if !ok {
		return
	}

	voters, failed := 0, 0 // failed: voters only; non-voters do not make a quorum
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if m, ok := members[string(s.ID)]; s.ID != self && (!ok || !m.alive()) {
			failed++
		}
	}
	for _, s := range servers {
		if s.ID == self {
			continue
		}
		m, seen := members[string(s.ID)]
		switch {
		case seen && m.meta.Leaving:
			if !g.remove(ctx, s.ID, "left the cluster") {
				return
			}
			continue
		case seen && m.alive():
			delete(missing, s.ID)
			continue
		}
		since := m.since
		if !seen {
			if _, ok := missing[s.ID]; !ok {
				missing[s.ID] = now
			}
			since = missing[s.ID]
		}
		if now.Sub(since) < g.cfg.ReapAfter {
			continue
		}
		isVoter := s.Suffrage == raft.Voter
		if isVoter && 2*failed >= voters {
			g.log.Warn("not reaping: failed voters are not a minority", "id", s.ID, "failed", failed, "voters", voters)
			continue
		}
		state := "unseen in gossip"
		if seen {
			state = stateName(m.state)
		}
		if !g.remove(ctx, s.ID, "reaped: "+state+" for "+now.Sub(since).Round(time.Millisecond).String()) {
			return
		}
		delete(missing, s.ID)
		if isVoter {
			failed--
			voters--
		}
	}
	for id := range missing {
		if !slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == id }) {
			delete(missing, id)
		}
	}
}

// addAlive adds the members alive in gossip that the configuration lacks
// (or has at another raft address), as reconcile describes, and returns
// the configuration after; false when a change failed (reconcile stops
// its pass). It holds formatMu, as raiseFormat does: a member is added
// only if its format is not below the cluster's (admits), and the format
// is raised only over the members added.
func (g *gossiper) addAlive(ctx context.Context, servers []raft.Server, members map[string]member) ([]raft.Server, bool) {
	c := g.c
	c.formatMu.Lock()
	defer c.formatMu.Unlock()
	self := raft.ServerID(c.cfg.NodeID)
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		m := members[id]
		// Self too: a leader restarted on a new raft address corrects its
		// own entry.
		if !m.alive() || m.meta.Leaving || m.meta.Stopping {
			continue
		}
		addr := raft.ServerAddress(m.meta.RaftAddr)
		i := slices.IndexFunc(servers, func(s raft.Server) bool { return string(s.ID) == id })
		if i >= 0 && servers[i].Address == addr {
			continue
		}
		if !g.admits(id, m.meta) {
			continue
		}
		voter := !m.meta.NonVoter
		if i >= 0 {
			voter = servers[i].Suffrage == raft.Voter
		}
		if j := slices.IndexFunc(servers, func(s raft.Server) bool { return s.Address == addr && string(s.ID) != id }); j >= 0 {
			old := servers[j]
			if o, ok := members[string(old.ID)]; (ok && o.alive()) || old.ID == self {
				g.log.Warn("two nodes claim one raft address; not adding", "id", id, "other", old.ID, "raft_addr", addr)
				continue
			}
			if !g.remove(ctx, old.ID, "replaced by a node at its raft address") {
				return servers, false
			}
		}
		add, role := c.raft.AddVoter, "voter"
		if !voter {
			add, role = c.raft.AddNonvoter, "non-voter"
		}
		if err := c.await(ctx, add(raft.ServerID(id), addr, 0, c.cfg.ApplyTimeout)); err != nil {
			g.log.Warn("adding "+role, "id", id, "raft_addr", addr, "error", err)
			return servers, false
		}
		g.log.Info("added "+role, "id", id, "raft_addr", addr)
		var err error
		if servers, err = c.Members(); err != nil {
			return servers, false
		}
	}
	return servers, true
}

// admits reports whether the member id may join the raft configuration
// (or move to another raft address): a member announcing a format below
// the cluster's would be sent entries it cannot apply. A refusal is
// logged once per member and announcement. The caller holds formatMu.
func (g *gossiper) admits(id string, meta nodeMeta) bool {
	have, f := g.c.state.StateFormat(), meta.format()
	if f >= have {
		delete(g.refused, id)
		return true
	}
	key := meta.Version + "/" + strconv.Itoa(int(f))
	if g.refused[id] != key {
		g.refused[id] = key
		version := meta.Version
		if version == "" {
			version = "none announced"
		}
		g.log.Warn("not adding a node of an older release to the cluster; upgrade it", "id", id, "version", version, "format", int(f),
			"state_format", int(have), "needs", "oidcd "+fsm.FormatRelease(have)+" or newer")
	}
	return false
}

func (g *gossiper) remove(ctx context.Context, id raft.ServerID, why string) bool {
	if ctx.Err() != nil {
		return false
	}
	if err := g.c.await(ctx, g.c.raft.RemoveServer(id, 0, g.c.cfg.ApplyTimeout)); err != nil {
		g.log.Warn("removing server", "id", id, "reason", why, "error", err)
		return false
	}
	g.log.Info("removed server", "id", id, "reason", why)
	return true
}
