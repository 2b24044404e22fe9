package node

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/oidcd/oidcd/cluster"
	"github.com/oidcd/oidcd/internal/httpx"

	"github.com/oidcd/oidcd/admin"
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
	st, err := a.n.cluster.Status(ctx)
	if err != nil {
		return admin.ClusterStatus{}, err
	}
	out := admin.ClusterStatus{Leader: st.Leader, Members: make([]admin.ClusterMember, len(st.Members)), StateFormat: st.StateFormat, Mixed: st.Mixed}
	for i, m := range st.Members {
		out.Members[i] = admin.ClusterMember(m)
	}
	return out, nil
}

func (a adminCluster) RemoveNode(ctx context.Context, id string) error {
	err := a.n.cluster.RemoveNode(ctx, id)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrUnknownNode):
		return &admin.ClusterError{Status: http.StatusNotFound, Code: httpx.CodeNotFound, Message: "no such node: " + id}
	case errors.Is(err, cluster.ErrNodeAlive):
		return &admin.ClusterError{Status: http.StatusConflict, Code: httpx.CodeConflict, Message: "the node is alive; stop it first, or let it leave"}
	case errors.Is(err, cluster.ErrRemoveLeader):
		return &admin.ClusterError{Status: http.StatusConflict, Code: httpx.CodeConflict, Message: "the node leads; remove it after leadership moves"}
	case errors.Is(err, cluster.ErrNotLeader):
		_, leader := a.n.cluster.Leader()
		return &admin.ClusterError{Status: http.StatusConflict, Code: httpx.CodeConflict, Message: "run this against the leader (" + leader + ")"}
	}
	return err
}

func (a adminCluster) SetVoter(ctx context.Context, id string, voter bool) error {
	err := a.n.cluster.SetVoter(ctx, id, voter)
	switch {
	case errors.Is(err, cluster.ErrUnknownNode):
		return &admin.ClusterError{Status: http.StatusNotFound, Code: httpx.CodeNotFound, Message: "no such member: " + id}
	case errors.Is(err, cluster.ErrDemoteLeader):
		return &admin.ClusterError{Status: http.StatusConflict, Code: httpx.CodeConflict, Message: "the member leads; demote it after leadership moves"}
	}
	return err
}

// Backup serves GET /admin/v1/snapshot from this node's state, after a
// read index.
func (a adminCluster) Backup(ctx context.Context, w io.Writer) error {
	return a.n.cluster.Backup(ctx, w)
}

// Restore serves POST /admin/v1/snapshot on the leader. The backup brings
// back its own admin token hash (and browser key): afterwards the admin
// token is the one of the backup, on every node, whatever their
// --admin-token (the break-glass token lives in the replicated state, see
// docs/operators/node.md). A backup that holds no hash (saved by a version
// that did not replicate --admin-token) gets one at once, as a new cluster
// does (ensureAdminToken): this leader's --admin-token, or a generated token
// in its token file.
func (a adminCluster) Restore(ctx context.Context, r io.Reader) error {
	err := a.n.cluster.RestoreFrom(ctx, r)
	switch {
	case err == nil:
		if err := a.n.ensureAdminToken(ctx); err != nil {
			a.n.log.Warn("admin token: not seeded after the restore; the next leader will", "error", err)
		}
		return nil
	case errors.Is(err, cluster.ErrInvalidBackup):
		return &admin.ClusterError{Status: http.StatusBadRequest, Code: httpx.CodeBadRequest, Message: err.Error()}
	case errors.Is(err, cluster.ErrNotLeader) && !a.n.cluster.IsLeader():
		return &admin.ClusterError{Status: http.StatusConflict, Code: httpx.CodeConflict, Message: "run restore against the leader (" + a.leaderHTTP(ctx) + ")"}
	}
	return err
}

// leaderHTTP names the leader for an operator: its HTTP address when
// gossip advertises one, else its id and raft address.
func (a adminCluster) leaderHTTP(ctx context.Context) string {
	addr, id := a.n.cluster.Leader()
	if id == "" {
		return "no leader is known right now"
	}
	if st, err := a.n.cluster.Status(ctx); err == nil {
		for _, m := range st.Members {
			if m.ID == id && m.HTTPAddr != "" {
				return m.HTTPAddr
			}
		}
	}
	return "node " + id + ", raft address " + addr
}
