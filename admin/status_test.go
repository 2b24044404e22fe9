package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// signInToBackchannelApps makes user signed in (one SSO session) to n apps
// with a back-channel URI, through the state machine as the sign-in path
// would, so that erasing the user owes n deliveries.
func (e *env) signInToBackchannelApps(user User, org Org, n int) {
	e.t.Helper()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := func(typ fsm.Type, v any) {
		e.t.Helper()
		res, err := e.app.Apply(context.Background(), fsm.MustCommand(typ, v))
		if err != nil || res.Err != nil {
			e.t.Fatalf("%v: %v %v", typ, err, res.Err)
		}
	}
	apply(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: "tok-" + user.ID, Session: fsm.SSOSession{
		ID: "sso-" + user.ID, UserID: user.ID, CreatedAt: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Hour)}})
	for i := range n {
		c := e.createClient(fmt.Sprintf(`{"name":"App %d","redirect_uris":["https://app%d.example/cb"],"organization_id":%q,"backchannel_logout_uri":"https://app%d.example/bc"}`, i, i, org.ID, i))
		apply(fsm.TypeIssueCode, fsm.IssueCode{NewSID: fmt.Sprintf("sid-%s-%d", user.ID, i), IdleExpiresAt: t0.Add(time.Hour), Code: fsm.Code{
			Hash: fmt.Sprintf("code-%s-%d", user.ID, i), ClientID: c.ClientID, UserID: user.ID, OrgID: org.ID, SSOSessionID: "sso-" + user.ID,
			IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}})
	}
}

func TestStatus(t *testing.T) {
	node := NodeInfo{ID: "n1", Version: "v9", State: "leader", CommitIndex: 41}
	e := newEnv(t, func(c *Config) { c.Node = func() NodeInfo { return node } })
	e.cluster.status = ClusterStatus{Leader: "n1", Members: []ClusterMember{
		{ID: "n1", RaftAddr: "127.0.0.1:8300", State: "leader", Voter: true},
		{ID: "n2", RaftAddr: "127.0.0.1:8310", State: "follower", Voter: true},
	}}
	e.must(201, "POST", "/admin/v1/keys/rotate", "")

	st := decodeAs[Status](t, e.must(200, "GET", "/admin/v1/status", ""))
	if st.Node.ID != "n1" || st.Node.Version != "v9" || st.Node.State != "leader" || st.Node.CommitIndex != 41 {
		t.Errorf("node: got %+v", st.Node)
	}
	if got, want := st.Node.AppliedIndex, e.app.FSM.Applied(); got != want || got == 0 {
		t.Errorf("applied_index: got %d, want %d (the state's)", got, want)
	}
	if st.Leader != "n1" || len(st.Members) != 2 || st.Members[1].ID != "n2" {
		t.Errorf("cluster: got leader %q members %+v", st.Leader, st.Members)
	}
	if len(st.Keys) != 1 || st.Keys[0].State != "next" {
		t.Errorf("keys: got %+v, want one next key", st.Keys)
	}
	if st.Deliveries.Pending != 0 || st.Deliveries.More || st.Deliveries.Oldest == nil || len(st.Deliveries.Oldest) != 0 {
		t.Errorf("deliveries: got %+v, want none (and an empty list, not null)", st.Deliveries)
	}

	// Erasing two people signed in to back-channel apps owes deliveries.
	org := e.createOrg("acme")
	for i, apps := range []int{StatusOldestDeliveries, 3} {
		u := e.createUser(fmt.Sprintf(`{"email":"p%d@example.com"}`, i))
		e.signInToBackchannelApps(u, org, apps)
		e.must(204, "DELETE", "/admin/v1/users/"+u.ID, "")
	}
	st = decodeAs[Status](t, e.must(200, "GET", "/admin/v1/status", ""))
	d := st.Deliveries
	if d.Pending != StatusOldestDeliveries+3 || d.More || len(d.Oldest) != StatusOldestDeliveries {
		t.Fatalf("deliveries: got pending %d more %v with %d listed, want %d, false, %d",
			d.Pending, d.More, len(d.Oldest), StatusOldestDeliveries+3, StatusOldestDeliveries)
	}
	for i, o := range d.Oldest {
		if o.ID == "" || o.ClientID == "" || !strings.HasPrefix(o.URI, "https://app") || o.Cause == "" || o.CreatedAt.IsZero() {
			t.Errorf("oldest[%d]: got %+v, want every field", i, o)
		}
		if i > 0 && o.ID < d.Oldest[i-1].ID {
			t.Errorf("oldest: %q listed after %q, want oldest first", o.ID, d.Oldest[i-1].ID)
		}
	}

	if st.StateFormat != int(fsm.FormatBase) || st.Mixed || st.Members[0].StateFormat != int(fsm.FormatBase) {
		t.Errorf("formats: got cluster %d mixed %v member %d, want %d, false, %d (a Cluster that says none)",
			st.StateFormat, st.Mixed, st.Members[0].StateFormat, fsm.FormatBase, fsm.FormatBase)
	}
	e.cluster.status = ClusterStatus{Leader: "n1", StateFormat: 1, Mixed: true, Members: []ClusterMember{
		{ID: "n1", State: "leader", Voter: true, Version: "0.4.0", StateFormat: 2},
		{ID: "n2", State: "follower", Voter: true, Version: "0.3.0", StateFormat: 1},
	}}
	st = decodeAs[Status](t, e.must(200, "GET", "/admin/v1/status", ""))
	if !st.Mixed || st.StateFormat != 1 || st.Members[1].Version != "0.3.0" || st.Members[0].StateFormat != 2 {
		t.Errorf("mixed: got mixed %v format %d members %+v, want the Cluster's", st.Mixed, st.StateFormat, st.Members)
	}

	// Without a leader the answer still comes, with leader "".
	e.cluster.status = ClusterStatus{Members: []ClusterMember{{ID: "n1", State: "candidate", Voter: true}}}
	st = decodeAs[Status](t, e.must(200, "GET", "/admin/v1/status", ""))
	if st.Leader != "" || len(st.Members) != 1 {
		t.Errorf("no leader: got %q %+v", st.Leader, st.Members)
	}
}

func TestStatusFailuresAndWiring(t *testing.T) {
	cases := []struct {
		name   string
		opt    func(*Config)
		setup  func(*env)
		status int
	}{
		{"cluster unreadable", nil, func(e *env) { e.cluster.err = errors.New("raft down") }, 503},
		{"keys unreadable", nil, func(e *env) { e.keys.err = errors.New("boom") }, 503},
		{"nothing optional wired", func(c *Config) { c.Keys, c.Cluster, c.Node = nil, nil, nil }, nil, 200},
		{"method", nil, nil, 405},
		{"no token", nil, nil, 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var opts []func(*Config)
			if c.opt != nil {
				opts = append(opts, c.opt)
			}
			e := newEnv(t, opts...)
			if c.setup != nil {
				c.setup(e)
			}
			method, hdr := "GET", []string(nil)
			switch c.name {
			case "method":
				method = "POST"
			case "no token":
				hdr = []string{"Authorization", ""}
			}
			w := e.do(method, "/admin/v1/status", "", hdr...)
			if w.Code != c.status {
				t.Fatalf("got %d %s, want %d", w.Code, w.Body, c.status)
			}
			switch c.status {
			case 503:
				checkEnvelope(t, w, 503, httpx.CodeUnavailable)
			case 200:
				if got := w.Body.String(); !strings.Contains(got, `"members":[]`) || !strings.Contains(got, `"keys":[]`) || !strings.Contains(got, `"oldest":[]`) {
					t.Errorf("got %s, want empty lists, not null", got)
				}
			}
		})
	}
}
