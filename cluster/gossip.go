package cluster

import "time"

// GossipConfig forms the cluster with memberlist.
type GossipConfig struct {
	Addr      string   // memberlist bind and advertise address
	Join      []string // gossip addresses of existing nodes
	HTTPAddr  string   // advertised to peers (GET /admin/v1/cluster)
	ReapAfter time.Duration
}

// gossiper runs memberlist for this node.
type gossiper struct{}

// startGossip joins the gossip pool when the node is part of a multi-node
// cluster; existing says the node already has raft state.
func (c *Cluster) startGossip(existing bool) error { return nil }

func (c *Cluster) stopGossip() {}
