package console

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/admin"
)

// mixedCluster is a cluster halfway through a rolling upgrade from 0.3.0.
type mixedCluster struct{ fakeCluster }

func (mixedCluster) Status(context.Context) (admin.ClusterStatus, error) {
	return admin.ClusterStatus{Leader: "node-0", StateFormat: 1, Mixed: true, Members: []admin.ClusterMember{
		{ID: "node-0", RaftAddr: "127.0.0.1:8300", State: "alive", Voter: true, Version: "0.4.0", StateFormat: 2},
		{ID: "node-1", RaftAddr: "127.0.0.1:8310", State: "alive", Voter: true, Version: "0.3.0", StateFormat: 1},
		{ID: "node-2", RaftAddr: "127.0.0.1:8320", State: "alive", Voter: true, StateFormat: 1},
	}}, nil
}

// TestClusterPageShowsVersions: the cluster page lists each member's
// version and state format, the cluster's format, and while the versions
// are mixed says so, naming the members to upgrade.
func TestClusterPageShowsVersions(t *testing.T) {
	e := newEnv(t, func(c *admin.Config) { c.Cluster = mixedCluster{} })
	e.signIn()
	r := e.get(Prefix + "cluster")
	wantStatus(t, "cluster page", r, http.StatusOK)
	wantBody(t, "cluster page", r,
		`<th scope="col">Version</th><th scope="col">State format</th>`,
		`<td><code>0.4.0</code></td><td>2</td>`,
		`<td><code>0.3.0</code></td><td>1</td>`,
		`<td>unknown</td><td>1</td>`,
		`<dt>State format</dt><dd><code>1</code>, <strong class="bad">mixed versions</strong></dd>`,
		"Mixed versions: a rolling upgrade is under way. The cluster runs state format 1: writes that need state format 2 wait until every node runs it",
		"upgrade <code>node-1</code>, <code>node-2</code>)")

	// One version everywhere: the format, and no note.
	e = newEnv(t)
	e.signIn()
	r = e.get(Prefix + "cluster")
	wantStatus(t, "cluster page", r, http.StatusOK)
	wantBody(t, "cluster page", r, `<dt>State format</dt><dd><code>1</code></dd>`)
	if strings.Contains(r.Body, "Mixed versions") || strings.Contains(r.Body, "mixed versions") {
		t.Errorf("one version: the page says mixed:\n%s", r.Body)
	}
}
