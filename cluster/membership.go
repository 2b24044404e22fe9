package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Sentinel errors of RemoveNode.
var (
	// ErrUnknownNode: no raft server has this id.
	ErrUnknownNode = errors.New("cluster: no such node")
	// ErrNodeAlive: the node is alive in gossip; stop it first (or let it
	// Leave), else the leader would add it straight back.
	ErrNodeAlive = errors.New("cluster: node is alive")
	// ErrRemoveLeader: the leader does not remove itself; transfer
	// leadership (or stop it) first.
	ErrRemoveLeader = errors.New("cluster: cannot remove the leader")
	// ErrDemoteLeader: the leader does not demote itself; transfer
	// leadership first.
	ErrDemoteLeader = errors.New("cluster: cannot demote the leader")
)

// nodeMeta is what each node advertises in gossip (memberlist NodeMeta,
// at most 512 bytes of JSON).
type nodeMeta struct {
	ID       string `json:"id"` // raft server id, equal to the memberlist name
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Version  string `json:"version,omitempty"`
	// Format is the newest state format the node applies
	// (fsm.CurrentFormat of its build). Releases before the gate announce
	// none: a member without it counts as fsm.FormatBase (format.go).
	Format int `json:"format,omitempty"`
	// Expect is BootstrapExpect while the node waits to form a cluster;
	// zero once it has a raft configuration or when it only joins.
	Expect int `json:"expect,omitempty"`
	// Bootstrapped: the node has a raft configuration (it formed a cluster
	// or was added to one). Seeing one such member stops bootstrap-expect.
	Bootstrapped bool `json:"bootstrapped,omitempty"`
	// Leaving: the node leaves the cluster for good (Cluster.Leave); the
	// leader removes it from raft at once.
	Leaving bool `json:"leaving,omitempty"`
	// Stopping: the node shuts down (and will probably come back); when it
	// then disappears, it has left rather than failed. Its place is kept.
	Stopping bool `json:"stopping,omitempty"`
	// NonVoter: the node asks to be added as a raft non-voter (an edge
	// replica). It counts only when the node is first added: a promotion
	// or demotion (SetVoter) then stands across restarts.
	NonVoter bool `json:"non_voter,omitempty"`
	// Applied and ContactMs are the node's progress, advertised every
	// progressEvery: the last raft index it applied, and how long before
	// the advertisement it last heard from the leader (0 on the leader).
	Applied   uint64 `json:"applied,omitempty"`
	ContactMs int64  `json:"contact_ms,omitempty"`
}

func parseMeta(n *memberlist.Node) (nodeMeta, error) {
	var m nodeMeta
	if err := json.Unmarshal(n.Meta, &m); err != nil {
		return m, fmt.Errorf("node %q: metadata: %v", n.Name, err)
	}
	if m.ID != n.Name || m.RaftAddr == "" {
		return m, fmt.Errorf("node %q: metadata names %q at %q", n.Name, m.ID, m.RaftAddr)
	}
	return m, nil
}

// member is the gossip table's view of one node. State is alive, dead or
// left (suspect counts as alive); since is when it took that state.
type member struct {
	name  string
	addr  string // gossip host:port
	meta  nodeMeta
	state memberlist.NodeStateType
	since time.Time
}

func (m member) alive() bool { return m.state == memberlist.StateAlive }

func stateName(s memberlist.NodeStateType) string {
	switch s {
	case memberlist.StateAlive, memberlist.StateSuspect:
		return "alive"
	case memberlist.StateLeft:
		return "left"
	default:
		return "failed"
	}
}

// snapshot copies the gossip table (nil without gossip).
func (g *gossiper) snapshot() map[string]member {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]member, len(g.members))
	for id, m := range g.members {
		out[id] = *m
	}
	return out
}

// Status is the cluster as this node sees it (GET /admin/v1/cluster).
type Status struct {
	Leader  string   `json:"leader"` // leader's id, "" when none is known
	Members []Member `json:"members"`
	// StateFormat is the format this node's state holds (the cluster's);
	// Mixed: the members announce different versions or formats.
	StateFormat int  `json:"state_format"`
	Mixed       bool `json:"mixed"`
}

// Member is one node: every raft server, plus nodes alive in gossip that
// the leader has not added yet.
type Member struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	GossipAddr string `json:"gossip_addr"`
	HTTPAddr   string `json:"http_addr"`
	// State is leader, follower or candidate for this node and the known
	// leader; for other raft servers follower while gossip sees them
	// alive, else failed or left; alive for a node not yet in raft.
	State string `json:"state"`
	Voter bool   `json:"voter"`
	// AppliedIndex is the last raft index the member applied; AppliedLag
	// how far that is behind the leader's; LastContactMs how long before
	// it reported them the member last heard from the leader (0 for the
	// leader). This node's own are exact; the others' come from gossip,
	// refreshed every couple of seconds. -1: unknown.
	AppliedIndex  int64 `json:"applied_index"`
	AppliedLag    int64 `json:"applied_lag"`
	LastContactMs int64 `json:"last_contact_ms"`
	// Version and StateFormat are what the member announces in gossip,
	// or, when gossip does not see it (static peers), what it last
	// answered when asked (announce.go): its oidcd version and the newest
	// state format it applies. A member that announces no format (a
	// release before the gate), or is neither seen nor ever answered,
	// counts as fsm.FormatBase, and its version as "".
	Version     string `json:"version"`
	StateFormat int    `json:"state_format"`
}

// Status joins the raft configuration with gossip metadata. Without gossip
// (a single node, static peers) only this node's gossip and HTTP addresses
// are known, and the members' versions and formats are what they last
// answered this node's asks (announce.go, refreshed in the background:
// Status never waits for a member).
func (c *Cluster) Status(ctx context.Context) (Status, error) {
	if err := ctx.Err(); err != nil {
		return Status{}, err
	}
	servers, err := c.Members()
	if err != nil {
		return Status{}, mapRaftError(err)
	}
	_, leader := c.Leader()
	gossip := c.gossip.snapshot()
	st := Status{Leader: leader, Members: []Member{}}
	inRaft := map[string]bool{}
	for _, s := range servers {
		id := string(s.ID)
		inRaft[id] = true
		m := Member{ID: id, RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter}
		g, seen := gossip[id]
		if seen {
			m.GossipAddr, m.HTTPAddr = g.addr, g.meta.HTTPAddr
		}
		switch {
		case id == c.cfg.NodeID:
			m.State = strings.ToLower(c.raft.State().String())
		case id == leader:
			m.State = "leader"
		case c.gossip == nil || (seen && g.alive()):
			m.State = "follower" // without gossip, raft's view is all we have
		case seen:
			m.State = stateName(g.state)
		default:
			m.State = "failed" // never seen, or forgotten long ago
		}
		st.Members = append(st.Members, m)
	}
	for id, g := range gossip {
		if !inRaft[id] && g.alive() {
			st.Members = append(st.Members, Member{ID: id, RaftAddr: g.meta.RaftAddr, GossipAddr: g.addr, HTTPAddr: g.meta.HTTPAddr, State: "alive"})
		}
	}
	selfApplied, selfContact := c.progress()
	leaderApplied := int64(-1)
	if leader == c.cfg.NodeID {
		leaderApplied = int64(selfApplied) // #nosec G115 -- a raft index
	} else if g, ok := gossip[leader]; ok && g.meta.Applied > 0 {
		leaderApplied = int64(g.meta.Applied) // #nosec G115 -- a raft index
	}
	for i := range st.Members {
		m := &st.Members[i]
		m.AppliedIndex, m.AppliedLag, m.LastContactMs = -1, -1, -1
		if m.ID == c.cfg.NodeID {
			m.GossipAddr, m.HTTPAddr = c.GossipAddr(), c.cfg.Gossip.HTTPAddr
			if m.GossipAddr == "" {
				m.GossipAddr = c.cfg.Gossip.Addr
			}
			m.AppliedIndex, m.LastContactMs = int64(selfApplied), selfContact // #nosec G115 -- a raft index
		} else if g, ok := gossip[m.ID]; ok && g.meta.Applied > 0 {
			m.AppliedIndex, m.LastContactMs = int64(g.meta.Applied), g.meta.ContactMs // #nosec G115 -- a raft index
		}
		if m.AppliedIndex >= 0 && leaderApplied >= 0 {
			m.AppliedLag = max(leaderApplied-m.AppliedIndex, 0)
		}
	}
	for i := range st.Members {
		m := &st.Members[i]
		m.Version, m.StateFormat = c.shown(m.ID, gossip)
	}
	st.StateFormat = int(c.state.StateFormat())
	st.Mixed = c.mixed(servers, gossip)
	slices.SortFunc(st.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return st, nil
}

// RemoveNode removes a failed node from the raft configuration, on the
// leader (elsewhere it fails with ErrNotLeader naming the leader). A node
// alive in gossip is refused with ErrNodeAlive, since reconciliation would
// add it back; the leader refuses to remove itself (ErrRemoveLeader).
func (c *Cluster) RemoveNode(ctx context.Context, id string) error {
	if !c.IsLeader() {
		_, leader := c.Leader()
		return fmt.Errorf("%w: run remove-node on the leader (%q)", ErrNotLeader, leader)
	}
	if id == c.cfg.NodeID {
		return ErrRemoveLeader
	}
	servers, err := c.Members()
	if err != nil {
		return mapRaftError(err)
	}
	if !slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == id }) {
		return fmt.Errorf("%w: %q", ErrUnknownNode, id)
	}
	if m, ok := c.gossip.snapshot()[id]; ok && m.alive() && !m.meta.Leaving {
		return fmt.Errorf("%w: %q is alive in gossip; stop it first", ErrNodeAlive, id)
	}
	if err := c.await(ctx, c.raft.RemoveServer(raft.ServerID(id), 0, c.membershipTimeout(ctx))); err != nil {
		return mapRaftError(err)
	}
	c.log.Info("removed node from the cluster", "id", id, "by", "operator")
	return nil
}

// progress is this node's applied index and how long ago it last heard
// from the leader, in milliseconds (0 while it leads; -1 when it never
// has).
func (c *Cluster) progress() (applied uint64, contactMs int64) {
	applied = c.fsm.Applied()
	if c.raft.State() == raft.Leader {
		return applied, 0
	}
	last := c.raft.LastContact()
	if last.IsZero() {
		return applied, -1
	}
	return applied, time.Since(last).Milliseconds()
}

// isVoter reports whether this node is a voter of the configuration it
// knows.
func (c *Cluster) isVoter() bool {
	servers, err := c.Members()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(servers, func(s raft.Server) bool {
		return string(s.ID) == c.cfg.NodeID && s.Suffrage == raft.Voter
	})
}

// Replies of opSuffrage.
const (
	suffrageOK      byte = 0
	suffrageUnknown byte = 1
	suffrageLeader  byte = 2
)

// SetVoter turns member id into a voter (promote) or a non-voter (demote,
// an edge replica), from any node: the leader changes the raft
// configuration. A member already in that role is left as it is. The new
// role stands across restarts and leader changes: reconciliation only
// chooses the role of a node it adds. Errors: ErrUnknownNode, ErrDemoteLeader,
// ErrNoLeader (wrapped) when no leader answers before ctx ends.
func (c *Cluster) SetVoter(ctx context.Context, id string, voter bool) error {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	body := append([]byte{0}, id...)
	if voter {
		body[0] = 1
	}
	reply, err := c.leaderDo(ctx, opSuffrage, body)
	switch {
	case err != nil:
		return err
	case len(reply) != 1:
		return fmt.Errorf("cluster: suffrage reply of %d bytes", len(reply))
	case reply[0] == suffrageUnknown:
		return fmt.Errorf("%w: %q", ErrUnknownNode, id)
	case reply[0] == suffrageLeader:
		return ErrDemoteLeader
	}
	return nil
}

func (c *Cluster) leaderSuffrage(ctx context.Context, body []byte) ([]byte, error) {
	if c.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	if len(body) < 2 {
		return nil, errors.New("cluster: empty suffrage request")
	}
	voter, id := body[0] == 1, raft.ServerID(body[1:])
	servers, err := c.Members()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(servers, func(s raft.Server) bool { return s.ID == id })
	switch {
	case i < 0:
		return []byte{suffrageUnknown}, nil
	case (servers[i].Suffrage == raft.Voter) == voter:
		return []byte{suffrageOK}, nil
	case !voter && id == raft.ServerID(c.cfg.NodeID):
		return []byte{suffrageLeader}, nil
	}
	f := c.raft.DemoteVoter(id, 0, c.membershipTimeout(ctx))
	if voter {
		// AddVoter of a non-voter at its own address makes it a voter.
		f = c.raft.AddVoter(id, servers[i].Address, 0, c.membershipTimeout(ctx))
	}
	if err := c.await(ctx, f); err != nil {
		return nil, mapRaftError(err)
	}
	c.log.Info("changed a member's role", "id", id, "voter", voter, "by", "operator")
	return []byte{suffrageOK}, nil
}

// Leave takes this node out of the cluster for good: it advertises that
// it is leaving, the leader removes it from the raft configuration at once,
// and Leave returns when that change has reached this node (or ctx ends).
// Call Shutdown afterwards. A leader first hands leadership over. A plain
// Shutdown is not a leave: a stopped node keeps its place until reaped.
func (c *Cluster) Leave(ctx context.Context) error {
	g := c.gossip
	if g == nil {
		return errors.New("cluster: leave needs gossip; this node runs alone")
	}
	if c.IsLeader() {
		if err := c.await(ctx, c.raft.LeadershipTransfer()); err != nil {
			return fmt.Errorf("cluster: leave: handing over leadership: %w", err)
		}
	}
	g.mu.Lock()
	g.meta.Leaving = true
	g.mu.Unlock()
	if err := g.ml.UpdateNode(metaUpdateTimeout); err != nil {
		g.log.Warn("leave: advertising", "error", err)
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		servers, err := c.Members()
		if err != nil {
			return mapRaftError(err)
		}
		if !slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == c.cfg.NodeID }) {
			c.log.Info("left the cluster")
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.stopped:
			return ErrShutdown
		case <-t.C:
		}
	}
}

// membershipTimeout is what is left of ctx, or ApplyTimeout without a deadline.
func (c *Cluster) membershipTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return c.cfg.ApplyTimeout
}

// HandOver transfers leadership to another voter when this node leads, so
// that a planned stop does not leave the cluster waiting an election
// timeout before its next write. It returns when the transfer is done,
// ctx ends, or there is nothing to do (not the leader, or alone).
func (c *Cluster) HandOver(ctx context.Context) error {
	if !c.IsLeader() {
		return nil
	}
	servers, err := c.Members()
	if err != nil {
		return err
	}
	voters := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters < 2 {
		return nil
	}
	return c.await(ctx, c.raft.LeadershipTransfer())
}
