package cluster

import (
	"context"

	"github.com/oidcd/oidcd/fsm"
)

// forwarder carries writes from followers to the leader.
type forwarder struct{}

func (c *Cluster) startForwarding() error { return nil }

func (c *Cluster) stopForwarding() {}

// forwardApply sends cmd to the leader and waits until this node has
// applied it.
func (c *Cluster) forwardApply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	return fsm.Result{}, ErrNoLeader
}
