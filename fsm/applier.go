package fsm

import "context"

// Applier replicates a command and returns once this node has applied
// it, with the command's Result. A non-nil error means the write may not
// have happened (or its outcome is unknown): the caller answers
// "temporarily unavailable". It is the one write path of every package
// that must not import cluster (oidc, logout, keys, the admin API): each
// names it as its own Applier, and cluster.Cluster implements it.
type Applier interface {
	Apply(ctx context.Context, cmd Command) (Result, error)
}
