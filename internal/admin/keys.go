package admin

import (
	"errors"
	"net/http"

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
	k, err := a.Keys.Rotate(r.Context(), b.Immediate)
	if err != nil {
		a.unavailable(w, r, "rotate key", err)
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
	if s.Members == nil {
		s.Members = []ClusterMember{}
	}
	httpx.WriteJSON(w, http.StatusOK, s)
}

// removeNode answers DELETE /cluster/nodes/{id}.
func (a *api) removeNode(w http.ResponseWriter, r *http.Request) {
	if a.Cluster == nil {
		a.unavailable(w, r, "remove node", errNotWired)
		return
	}
	id := r.PathValue("id")
	if id == "" || len(id) > 256 {
		writeInvalid(w, r, []httpx.Detail{{Field: "id", Message: "must be a node id", Code: "invalid"}})
		return
	}
	err := a.Cluster.RemoveNode(r.Context(), id)
	var ce *ClusterError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.As(err, &ce):
		httpx.WriteError(w, r, ce.Status, ce.Code, ce.Message)
	default:
		a.unavailable(w, r, "remove node", err)
	}
}
