package node

import (
	"context"

	"github.com/oidcd/oidcd/internal/admin"
	"github.com/oidcd/oidcd/keys"
)

// adminKeys adapts keys.Manager to the admin API's Keys interface.
type adminKeys struct{ m *keys.Manager }

var _ admin.Keys = adminKeys{}

func (a adminKeys) Rotate(ctx context.Context, immediate bool) (admin.KeyInfo, error) {
	k, err := a.m.Rotate(ctx, immediate)
	return admin.KeyInfo(k), err
}

func (a adminKeys) List() ([]admin.KeyInfo, error) {
	ks, err := a.m.List()
	out := make([]admin.KeyInfo, len(ks))
	for i, k := range ks {
		out[i] = admin.KeyInfo(k)
	}
	return out, err
}

// adminCluster adapts the raft view to the admin API's Cluster interface.
type adminCluster struct{ n *Node }

var _ admin.Cluster = adminCluster{}

func (a adminCluster) Status(ctx context.Context) (admin.ClusterStatus, error) {
	servers, err := a.n.cluster.Members()
	if err != nil {
		return admin.ClusterStatus{}, err
	}
	_, leaderID := a.n.cluster.Leader()
	st := admin.ClusterStatus{Leader: leaderID}
	for _, s := range servers {
		m := admin.ClusterMember{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage.String() == "Voter", State: "follower"}
		if string(s.ID) == leaderID {
			m.State = "leader"
		}
		if string(s.ID) == a.n.ID() {
			m.HTTPAddr = a.n.Addr()
			m.GossipAddr = a.n.cfg.GossipAddr
		}
		st.Members = append(st.Members, m)
	}
	return st, nil
}
