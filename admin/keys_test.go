package admin

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/internal/httpx"
)

func TestRotateKey(t *testing.T) {
	e := newEnv(t)
	const path = "/admin/v1/keys/rotate"
	e.run(t, []tc{
		{name: "no body", method: "POST", path: path, status: 201},
		{name: "empty object", method: "POST", path: path, body: `{}`, status: 201},
		{name: "immediate", method: "POST", path: path, body: `{"immediate":true}`, status: 201},
		{name: "immediate string", method: "POST", path: path, body: `{"immediate":"yes"}`, status: 400, code: httpx.CodeValidation, field: "immediate", dcode: "invalid_type"},
	})
	if want := []bool{false, false, true}; !reflect.DeepEqual(e.keys.immediate, want) {
		t.Errorf("got %v, want %v", e.keys.immediate, want)
	}
	w := e.must(201, "POST", path, `{"immediate":true}`)
	got := decodeAs[KeyInfo](t, w)
	if got.Kid != "kid-new" || got.State != "active" || got.ActivatesAt == nil {
		t.Errorf("got %+v, want kid-new active with activates_at", got)
	}
	if strings.Contains(w.Body.String(), "retired_at") {
		t.Errorf("got %s, want no retired_at", w.Body)
	}
	e.keys.err = errors.New("not leader")
	checkEnvelope(t, e.do("POST", path, `{}`), 503, httpx.CodeUnavailable)
}

func TestListKeys(t *testing.T) {
	e := newEnv(t)
	w := e.must(200, "GET", "/admin/v1/keys", "")
	if got := w.Body.String(); got != `{"data":[]}` {
		t.Errorf("got %s, want %s", got, `{"data":[]}`)
	}
	e.must(201, "POST", "/admin/v1/keys/rotate", "")
	list := decodeAs[struct{ Data []KeyInfo }](t, e.must(200, "GET", "/admin/v1/keys", ""))
	if len(list.Data) != 1 || list.Data[0].State != "next" {
		t.Errorf("got %+v, want one next key", list)
	}
	e.keys.err = errors.New("boom")
	checkEnvelope(t, e.do("GET", "/admin/v1/keys", ""), 503, httpx.CodeUnavailable)
}

func TestCluster(t *testing.T) {
	e := newEnv(t)
	e.cluster.status = ClusterStatus{Leader: "n1", Members: []ClusterMember{
		{ID: "n1", RaftAddr: "127.0.0.1:8300", GossipAddr: "127.0.0.1:8301", HTTPAddr: "127.0.0.1:8080", State: "leader", Voter: true, AppliedIndex: 42},
	}}
	w := e.must(200, "GET", "/admin/v1/cluster", "")
	// A Cluster that says nothing of formats: the cluster's is the one
	// the state holds, a member's that of a release before the gate.
	want := `{"leader":"n1","members":[{"id":"n1","raft_addr":"127.0.0.1:8300","gossip_addr":"127.0.0.1:8301","http_addr":"127.0.0.1:8080","state":"leader","voter":true,"applied_index":42,"applied_lag":0,"last_contact_ms":0,"version":"","state_format":1}],"state_format":1,"mixed":false}`
	if got := w.Body.String(); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := e.cluster.status.Members[0].StateFormat; got != 0 {
		t.Errorf("the Cluster's own status: state_format got %d, want it left 0", got)
	}
	e.cluster.status = ClusterStatus{Leader: "n1", StateFormat: 1, Mixed: true, Members: []ClusterMember{
		{ID: "n1", State: "leader", Voter: true, Version: "0.4.0", StateFormat: 2},
		{ID: "n2", State: "follower", Voter: true, Version: "0.3.0", StateFormat: 1},
	}}
	mixed := decodeAs[ClusterStatus](t, e.must(200, "GET", "/admin/v1/cluster", ""))
	if !mixed.Mixed || mixed.StateFormat != 1 || mixed.Members[0].Version != "0.4.0" || mixed.Members[0].StateFormat != 2 ||
		mixed.Members[1].Version != "0.3.0" || mixed.Members[1].StateFormat != 1 {
		t.Errorf("mixed: got %+v, want the Cluster's versions and formats", mixed)
	}
	e.cluster.status = ClusterStatus{}
	if got := e.must(200, "GET", "/admin/v1/cluster", "").Body.String(); got != `{"leader":"","members":[],"state_format":1,"mixed":false}` {
		t.Errorf("got %s, want %s", got, `{"leader":"","members":[],"state_format":1,"mixed":false}`)
	}
	e.cluster.err = errors.New("no raft")
	checkEnvelope(t, e.do("GET", "/admin/v1/cluster", ""), 503, httpx.CodeUnavailable)
}

func TestNotWired(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Keys, c.Cluster = nil, nil })
	for _, r := range []struct{ method, path string }{
		{"GET", "/admin/v1/keys"}, {"POST", "/admin/v1/keys/rotate"}, {"GET", "/admin/v1/cluster"},
	} {
		checkEnvelope(t, e.do(r.method, r.path, ""), 503, httpx.CodeUnavailable)
	}
}

func TestRemoveNode(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
	}{
		{"removed", nil, 204, ""},
		{"unknown", &ClusterError{Status: 404, Code: httpx.CodeNotFound, Message: "no such node"}, 404, httpx.CodeNotFound},
		{"alive", &ClusterError{Status: 409, Code: httpx.CodeConflict, Message: "alive"}, 409, httpx.CodeConflict},
		{"no quorum", errors.New("no leader"), 503, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.cluster.removeErr = c.err
			rec := e.do("DELETE", Prefix+"/cluster/nodes/node-2", "")
			if rec.Code != c.wantStatus {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, c.wantStatus)
			}
			if c.wantCode != "" && !strings.Contains(rec.Body.String(), c.wantCode) {
				t.Fatalf("body %s lacks %s", rec.Body, c.wantCode)
			}
			if c.err == nil && (len(e.cluster.removed) != 1 || e.cluster.removed[0] != "node-2") {
				t.Fatalf("removed: got %v, want [node-2]", e.cluster.removed)
			}
		})
	}
}

func TestPromoteAndDemote(t *testing.T) {
	cases := []struct {
		name       string
		path       string
		err        error
		wantStatus int
		wantVoter  bool
	}{
		{"promote", "/cluster/members/edge-1/promote", nil, 204, true},
		{"demote", "/cluster/members/edge-1/demote", nil, 204, false},
		{"unknown", "/cluster/members/edge-1/promote", &ClusterError{Status: 404, Code: httpx.CodeNotFound, Message: "no such node"}, 404, false},
		{"the leader", "/cluster/members/edge-1/demote", &ClusterError{Status: 409, Code: httpx.CodeConflict, Message: "leads"}, 409, false},
		{"no quorum", "/cluster/members/edge-1/promote", errors.New("no leader"), 503, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.cluster.roleErr = c.err
			rec := e.do("POST", Prefix+c.path, "")
			if rec.Code != c.wantStatus {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, c.wantStatus)
			}
			if c.err != nil {
				return
			}
			if voter, ok := e.cluster.roles["edge-1"]; !ok || voter != c.wantVoter {
				t.Fatalf("SetVoter: got %v (called %v), want %v", voter, ok, c.wantVoter)
			}
		})
	}
	e := newEnv(t)
	if rec := e.do("GET", Prefix+"/cluster/members/edge-1/promote", ""); rec.Code != 405 {
		t.Fatalf("GET promote: got %d, want 405", rec.Code)
	}
}
