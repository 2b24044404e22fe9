package cluster

import "github.com/oidcd/oidcd/fsm"

// Hooks for the tests of this package: a node that plays an older
// release.

// announcing makes a node announce version and state format f in gossip,
// as a release of that format would, instead of its own.
func announcing(version string, f fsm.Format) func(*Config) {
	return func(c *Config) { c.Gossip.Version, c.announceFormat = version, f }
}

// reannounce changes what a running node announces, as if it had been
// upgraded (or downgraded) in place; 0 announces no format at all.
func (c *Cluster) reannounce(version string, f fsm.Format) error {
	g := c.gossip
	g.mu.Lock()
	g.meta.Version, g.meta.Format = version, int(f)
	g.mu.Unlock()
	return g.ml.UpdateNode(metaUpdateTimeout)
}
