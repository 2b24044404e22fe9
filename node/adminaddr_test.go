package node_test

import (
	"net/http"
	"testing"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestAdminListenerKeepsTheAdminSurfaceOffThePublicOne: with --admin-addr
// the admin API, the console and /metrics answer there and 404 on the
// public listener, which keeps serving the OIDC surface and health.
func TestAdminListenerKeepsTheAdminSurfaceOffThePublicOne(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) { cfg.AdminAddr = "127.0.0.1:0" }})
	adminBase := "http://" + c.Node(0).AdminAddr()
	get := func(base, path string, token bool) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if token {
			req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
		}
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cases := []struct {
		base, path string
		token      bool
		want       int
	}{
		{c.URL(0), "/admin/v1/status", true, http.StatusNotFound},
		{c.URL(0), "/console/", false, http.StatusNotFound},
		{c.URL(0), "/metrics", false, http.StatusNotFound},
		{c.URL(0), "/.well-known/openid-configuration", false, http.StatusOK},
		{c.URL(0), "/healthz", false, http.StatusOK},
		{adminBase, "/admin/v1/status", true, http.StatusOK},
		{adminBase, "/metrics", false, http.StatusOK},
		{adminBase, "/console/signin", false, http.StatusOK},
		{adminBase, "/healthz", false, http.StatusOK},
		{adminBase, "/.well-known/openid-configuration", false, http.StatusNotFound},
	}
	for _, tc := range cases {
		if got := get(tc.base, tc.path, tc.token); got != tc.want {
			t.Errorf("GET %s%s: got %d, want %d", tc.base, tc.path, got, tc.want)
		}
	}
}
