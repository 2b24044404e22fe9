package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

type rotateBody struct {
	Immediate bool `json:"immediate"`
}

// rotateKey adds a signing key. The body is optional: none means
// {"immediate": false}.
func (a *api) rotateKey(w http.ResponseWriter, r *http.Request) {
	if a.Keys == nil {
		a.unavailable(w, r, "rotate key", errNotWired)
		return
	}
	var b rotateBody
	if r.ContentLength != 0 && !decode(w, r, &b) {
		return
	}
	k, err := a.Keys.Rotate(withAdminEvent(r), b.Immediate)
	if err != nil {
		a.applyFailed(w, r, "rotate key", err)
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, k)
}

func (a *api) listKeys(w http.ResponseWriter, r *http.Request) {
	if a.Keys == nil {
		a.unavailable(w, r, "list keys", errNotWired)
		return
	}
	ks, err := a.Keys.List()
	if err != nil {
		a.unavailable(w, r, "list keys", err)
		return
	}
	if ks == nil {
		ks = []KeyInfo{}
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		Data []KeyInfo `json:"data"`
	}{ks})
}

func (a *api) clusterStatus(w http.ResponseWriter, r *http.Request) {
	if a.Cluster == nil {
		a.unavailable(w, r, "cluster status", errNotWired)
		return
	}
	s, err := a.Cluster.Status(r.Context())
	if err != nil {
		a.unavailable(w, r, "cluster status", err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, a.clusterFormats(s))
}

// clusterFormats fills what a Cluster left unsaid in s: no members is an
// empty list, the cluster's state format (0) is the one this node's state
// holds, and a member's (0) is fsm.FormatBase, that of a release before
// the gate, which announces none.
func (a *api) clusterFormats(s ClusterStatus) ClusterStatus {
	if s.Members == nil {
		s.Members = []ClusterMember{}
	}
	if s.StateFormat == 0 {
		s.StateFormat = int(a.State.StateFormat())
	}
	s.Members = slices.Clone(s.Members) // the Cluster's own slice stays as it is
	for i := range s.Members {
		if s.Members[i].StateFormat == 0 {
			s.Members[i].StateFormat = int(fsm.FormatBase)
		}
	}
	return s
}

// removeNode answers DELETE /cluster/nodes/{id}.
func (a *api) removeNode(w http.ResponseWriter, r *http.Request) {
	a.memberChange(w, r, "remove node", a.Cluster.RemoveNode)
}

// setVoter answers POST /cluster/members/{id}/promote (voter) and
// /demote: 204 once the raft configuration has the member in that role.
func (a *api) setVoter(voter bool) http.HandlerFunc {
	what := "demote"
	if voter {
		what = "promote"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		a.memberChange(w, r, what, func(ctx context.Context, id string) error { return a.Cluster.SetVoter(ctx, id, voter) })
	}
}

// memberChange runs a change of the member named in the path: 204 when
// done, the *ClusterError's answer when refused, else 503.
func (a *api) memberChange(w http.ResponseWriter, r *http.Request, what string, change func(context.Context, string) error) {
	if a.Cluster == nil {
		a.unavailable(w, r, what, errNotWired)
		return
	}
	id := r.PathValue("id")
	if id == "" || len(id) > 256 {
		writeInvalid(w, r, []httpx.Detail{{Field: "id", Message: "must be a node id", Code: "invalid"}})
		return
	}
	err := change(r.Context(), id)
	var ce *ClusterError
	switch {
	case err == nil:
		a.recordAdmin(r)
		w.WriteHeader(http.StatusNoContent)
	case errors.As(err, &ce):
		httpx.WriteError(w, r, ce.Status, ce.Code, ce.Message)
	default:
		a.unavailable(w, r, what, err)
	}
}
