package cluster

import (
	"context"
	"encoding/json"
	"fmt"
)

// Announcements over the node-to-node RPC (DESIGN.md, "Versions and the
// state format"). Gossip is where a member says what it runs; any node
// also answers opAnnounce with the same, for a node that does not see it
// in gossip (a cluster formed from static peers has no gossip at all).

// unknownOpPrefix starts the message of a server that does not know the
// op it was sent (unknownOp): serveOp's last line, in this build and in
// 0.3.0, answered with reply class classOther on a connection left open.
const unknownOpPrefix = "cluster: unknown operation"

// unknownOp is serveOp's answer to an op it does not know.
func unknownOp(op byte) error { return fmt.Errorf("%s %d", unknownOpPrefix, op) }

// announceReply is opAnnounce's answer: the node's id (an answer from
// another node at that address counts as none), version and the newest
// state format it applies, as it announces them in gossip.
type announceReply struct {
	ID      string `json:"id"`
	Version string `json:"version,omitempty"`
	Format  int    `json:"format"`
}

// serveAnnounce answers opAnnounce: what this node announces.
func (c *Cluster) serveAnnounce(ctx context.Context) ([]byte, error) {
	if h := c.cfg.onAnnounce; h != nil {
		if err := h(ctx); err != nil {
			return nil, err
		}
	}
	v, f := c.selfAnnounced()
	return json.Marshal(announceReply{ID: c.cfg.NodeID, Version: v, Format: int(f)})
}
