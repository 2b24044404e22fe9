package node

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/oidcd/oidcd/cluster"
	"github.com/oidcd/oidcd/internal/httpx"
)

// readyCheck is one condition of readiness, as /readyz?verbose lists it.
type readyCheck struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Why  string `json:"why,omitempty"`
}

// readiness lists what /readyz waits for: the node can serve the whole
// surface only when a leader is known, an active signing key is applied
// here (a fresh node's first key comes from the leader's loop a moment
// after the election), and this node has caught up with every write
// committed when it started (a read index succeeded since).
func (n *Node) readiness() []readyCheck {
	checks := []readyCheck{
		{Name: "leader", OK: n.cluster.Ready(), Why: "no leader known"},
		{Name: "signing_key", OK: n.keys.CanSign(), Why: "no active signing key applied here yet"},
		{Name: "caught_up", OK: n.caughtUp.Load(), Why: "not yet caught up with the writes committed before this node started"},
		{Name: "not_draining", OK: !n.draining.Load(), Why: "stopping: draining before it closes"},
		{Name: "state_writable", OK: n.diskFull.since.Load() == 0, Why: "the data directory's disk is full: writes wait until space returns"},
		{Name: "clock", OK: !n.cluster.ClockSkewed(), Why: fmt.Sprintf("this node's clock is %s off the cluster's (more than %s): synchronise it",
			n.cluster.ClockSkew().Round(time.Second), cluster.MaxClockSkew)},
	}
	for i := range checks {
		if checks[i].OK {
			checks[i].Why = ""
		}
	}
	return checks
}

// keysReadiness lists what /readyz?scope=keys waits for: discovery and
// the JWKS need only an active signing key applied here, leader or not,
// so a balancer that checks it for those two routes keeps them served
// while the cluster has no quorum. A draining node leaves this pool too.
func (n *Node) keysReadiness() []readyCheck {
	checks := []readyCheck{
		{Name: "signing_key", OK: n.keys.CanSign(), Why: "no active signing key applied here yet"},
		{Name: "not_draining", OK: !n.draining.Load(), Why: "stopping: draining before it closes"},
	}
	for i := range checks {
		if checks[i].OK {
			checks[i].Why = ""
		}
	}
	return checks
}

// handleReadyz is GET /readyz: 200 while every check passes, else 503,
// with the checks listed in the 503 body and, with ?verbose, in the 200
// one too; ?scope=keys asks only what discovery and the JWKS need
// (keysReadiness). /healthz stays liveness only.
func (n *Node) handleReadyz(w http.ResponseWriter, r *http.Request) {
	var checks []readyCheck
	switch scope := r.URL.Query().Get("scope"); scope {
	case "":
		checks = n.readiness()
	case "keys":
		checks = n.keysReadiness()
	default:
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeBadRequest, "unknown scope "+strconv.Quote(httpx.LogValue(scope))+"; the one there is: keys")
		return
	}
	ready := true
	for _, c := range checks {
		ready = ready && c.OK
	}
	body := map[string]any{"status": "ready"}
	status := http.StatusOK
	if !ready {
		body["status"], status = "not ready", http.StatusServiceUnavailable
	}
	if !ready || r.URL.Query().Has("verbose") {
		body["checks"] = checks
		if r.URL.Query().Get("scope") == "" {
			// Not a check: a node that lacks older audit events (a
			// snapshot installed, the rest being fetched) serves
			// sign-ins all the same.
			body["audit_trail"] = n.trailReadiness()
		}
	}
	httpx.WriteJSON(w, status, body)
}

// catchUpOnce waits (from Start) until a read index succeeds: the local
// state then holds every write committed before this node started, which
// is what a load balancer's readiness check needs to know. It gives up
// when the node stops.
func (n *Node) catchUpOnce() {
	for {
		select {
		case <-n.closing:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), readIndexTimeout)
		err := n.cluster.ReadIndex(ctx)
		cancel()
		if err == nil {
			n.caughtUp.Store(true)
			return
		}
		select {
		case <-n.closing:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
