package admin

import (
	"net/http"
	"time"

	"github.com/oidcd/oidcd/internal/httpx"
)

// NodeInfo describes the node that answers GET /status (filled by package
// node; AppliedIndex comes from the local state).
type NodeInfo struct {
	ID           string `json:"id"`
	Version      string `json:"version,omitempty"`
	State        string `json:"state"` // leader, follower, candidate or shutdown
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
}

// Status is the answer of GET /status: everything `oidcd admin status`
// shows at a glance, read from the answering node without a write.
type Status struct {
	Node    NodeInfo        `json:"node"`
	Leader  string          `json:"leader"`
	Members []ClusterMember `json:"members"`
	// StateFormat and Mixed are ClusterStatus's: the format the cluster
	// runs, and whether its members run different versions (a rolling
	// upgrade under way).
	StateFormat int            `json:"state_format"`
	Mixed       bool           `json:"mixed"`
	Keys        []KeyInfo      `json:"keys"`
	Deliveries  DeliveryStatus `json:"deliveries"`
}

// DeliveryStatus summarises the back-channel logout deliveries still owed.
type DeliveryStatus struct {
	// Pending counts them, up to MaxPendingCount; More says there are
	// more than that.
	Pending int  `json:"pending"`
	More    bool `json:"more"`
	// Oldest are the first few (StatusOldestDeliveries), oldest first.
	Oldest []PendingDelivery `json:"oldest"`
}

// PendingDelivery is one back-channel logout delivery still owed.
type PendingDelivery struct {
	ID            string    `json:"id"`
	ClientID      string    `json:"client_id"`
	URI           string    `json:"uri"`
	Cause         string    `json:"cause"`
	CreatedAt     time.Time `json:"created_at"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	LastError     string    `json:"last_error,omitempty"`
}

// Bounds of GET /status: the pending deliveries are counted up to
// MaxPendingCount (like the oidcd_backchannel_pending gauge) and the
// oldest StatusOldestDeliveries are listed.
const (
	MaxPendingCount        = 10000
	StatusOldestDeliveries = 10
)

// status answers GET /status. Every part is a local read (raft's
// configuration, the state file), so a node without a leader still
// answers, with leader "".
func (a *api) status(w http.ResponseWriter, r *http.Request) {
	var st Status
	if a.Node != nil {
		st.Node = a.Node()
	}
	st.Node.AppliedIndex = a.State.Applied()
	st.Members = []ClusterMember{}
	st.StateFormat = int(a.State.StateFormat())
	if a.Cluster != nil {
		cs, err := a.Cluster.Status(r.Context())
		if err != nil {
			a.unavailable(w, r, "status: cluster", err)
			return
		}
		cs = a.clusterFormats(cs)
		st.Leader, st.Members, st.StateFormat, st.Mixed = cs.Leader, cs.Members, cs.StateFormat, cs.Mixed
	}
	st.Keys = []KeyInfo{}
	if a.Keys != nil {
		ks, err := a.Keys.List()
		if err != nil {
			a.unavailable(w, r, "status: keys", err)
			return
		}
		if ks != nil {
			st.Keys = ks
		}
	}
	ds, err := a.State.PendingDeliveries(MaxPendingCount + 1)
	if err != nil {
		a.unavailable(w, r, "status: deliveries", err)
		return
	}
	st.Deliveries.Pending = min(len(ds), MaxPendingCount)
	st.Deliveries.More = len(ds) > MaxPendingCount
	st.Deliveries.Oldest = make([]PendingDelivery, 0, StatusOldestDeliveries)
	for _, d := range ds[:min(len(ds), StatusOldestDeliveries)] {
		st.Deliveries.Oldest = append(st.Deliveries.Oldest, PendingDelivery{
			ID: d.ID, ClientID: d.ClientID, URI: d.URI, Cause: d.Cause, CreatedAt: d.CreatedAt,
			Attempts: d.Attempts, NextAttemptAt: d.NextAttemptAt, LastError: d.LastError,
		})
	}
	httpx.WriteJSON(w, http.StatusOK, st)
}
