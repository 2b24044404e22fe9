package cluster

import (
	"context"

	"github.com/oidcd/oidcd/fsm"
)

// Hooks for the tests of this package: a node that plays an older
// release, or does not answer what it runs.

// announcing makes a node announce version and state format f in gossip,
// as a release of that format would, instead of its own.
func announcing(version string, f fsm.Format) func(*Config) {
	return func(c *Config) { c.Gossip.Version, c.announceFormat = version, f }
}

// reannounce changes what a running node announces, as if it had been
// upgraded (or downgraded) in place; 0 announces no format at all.
func (c *Cluster) reannounce(version string, f fsm.Format) error {
	// What the node counts itself as (selfAnnounced: the leader's raise
	// and its answer to opAnnounce) changes with what gossip carries.
	c.reannounced.Store(&selfAnnouncement{version: version, format: announcedFormat(int(f))})
	g := c.gossip
	g.mu.Lock()
	g.meta.Version, g.meta.Format = version, int(f)
	g.mu.Unlock()
	return g.ml.UpdateNode(metaUpdateTimeout)
}

// on adjusts node id's config alone: newMCluster's mods adjust every
// node's.
func on(id string, mod func(*Config)) func(*Config) {
	return func(c *Config) {
		if c.NodeID == id {
			mod(c)
		}
	}
}

// knowsNoAsk makes a node answer opAnnounce as 0.3.0 does, which does
// not know it: serveOp's answer to an unknown op.
func knowsNoAsk(c *Config) {
	c.onAnnounce = func(context.Context) error { return unknownOp(opAnnounce) }
}

// answersNoAsk makes a node hold every opAnnounce until the asker's
// deadline: a frozen node, as far as the asks go.
func answersNoAsk(c *Config) {
	c.onAnnounce = func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
}
