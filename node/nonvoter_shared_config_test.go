package node_test

import (
	"testing"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestEdgeSharesTheCoresConfig: an edge replica started with the core's
// --bootstrap-expect and static peers (one config file for every node of a
// site) starts, and the leader adds it as a non-voter.
func TestEdgeSharesTheCoresConfig(t *testing.T) {
	const voters = 2
	var core node.Config
	c := testcluster.New(t, testcluster.Options{Size: voters + 1, NonVoters: 1,
		Configure: func(i int, cfg *node.Config) {
			if i == 0 {
				core = *cfg
			}
			if i == voters {
				cfg.BootstrapExpect, cfg.StaticPeers = core.BootstrapExpect, core.StaticPeers
				if cfg.BootstrapExpect != voters || len(cfg.StaticPeers) != voters {
					t.Fatalf("the core's config: bootstrap-expect %d, %d static peers; want %d and %d", cfg.BootstrapExpect, len(cfg.StaticPeers), voters, voters)
				}
			}
		},
	})
	for i := range c.Size() {
		wantRoles(t, c, i, 0, 1)
	}
}
