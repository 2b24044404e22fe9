// Package noderp runs a whole sign-in against real oidcd nodes with the
// relying-party libraries of another ecosystem: openid-client v6,
// oauth4webapi and jose, under Node (rp.mjs). A misreading of the
// protocol that our Go tests share with our Go clients shows here.
//
// scripts/ensure-node.sh installs Node (Debian's nodejs) and the locked
// packages (npm ci); without them the tests are skipped, or fail when CI
// is "true".
package noderp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/testkit/freeport"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

func need(t *testing.T) string {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("node_modules", "openid-client", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or the npm packages are missing (run scripts/ensure-node.sh): %v", err)
		}
		t.Skipf("node or the npm packages are missing; run scripts/ensure-node.sh (%v)", err)
	}
	return nodeBin
}

// admin calls the admin API of node 0.
func admin(t *testing.T, c *testcluster.Cluster, method, path string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.URL(0)+"/admin/v1"+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
	}
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
}

// TestNodeRelyingParties signs a person in with each client
// authentication the node offers, through openid-client, and once through
// oauth4webapi; the confidential app also receives its back-channel
// logout token, checked with jose.
func TestNodeRelyingParties(t *testing.T) {
	nodeBin := need(t)
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	const email, password, cb = "ann@example.com", "correct horse battery", "http://127.0.0.1:9/callback"
	var org, user map[string]any
	admin(t, c, "POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &org)
	admin(t, c, "POST", "/users", map[string]any{"email": email, "email_verified": true, "password": password}, &user)
	admin(t, c, "POST", "/memberships", map[string]any{"user_id": user["id"], "org_id": org["id"]}, nil)
	var conf, spa map[string]any
	bcPort := freeport.TCP(t)
	admin(t, c, "POST", "/clients", map[string]any{"name": "Server App", "redirect_uris": []string{cb}, "scopes": []string{"openid", "email", "profile"},
		"organization_id": org["id"], "backchannel_logout_uri": "http://127.0.0.1:" + strconv.Itoa(bcPort) + "/bc"}, &conf)
	admin(t, c, "POST", "/clients", map[string]any{"name": "SPA", "type": "public", "redirect_uris": []string{cb}, "scopes": []string{"openid", "email"},
		"organization_id": org["id"], "skip_consent": true}, &spa)

	for _, tc := range []struct {
		auth, clientID, secret string
		bc                     bool
		want                   []string
	}{
		{"basic", conf["client_id"].(string), conf["client_secret"].(string), true,
			[]string{"discovery", "code grant and ID token (basic)", "userinfo", "introspection", "revocation", "end-session", "back-channel logout token (jose)", "signed out"}},
		{"post", conf["client_id"].(string), conf["client_secret"].(string), false,
			[]string{"discovery", "code grant and ID token (post)", "userinfo", "introspection", "revocation", "end-session", "signed out"}},
		{"public", spa["client_id"].(string), "", false,
			[]string{"discovery", "code grant and ID token (public)", "userinfo", "end-session", "signed out"}},
		{"oauth4webapi", conf["client_id"].(string), conf["client_secret"].(string), false,
			[]string{"discovery", "code grant and ID token (oauth4webapi)", "userinfo", "introspection", "revocation"}},
	} {
		t.Run(tc.auth, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, nodeBin, "rp.mjs")
			cmd.Env = append(os.Environ(), "OIDCD_ISSUER="+c.Issuer(), "OIDCD_CLIENT_ID="+tc.clientID, "OIDCD_CLIENT_SECRET="+tc.secret,
				"OIDCD_AUTH="+tc.auth, "OIDCD_REDIRECT_URI="+cb, "OIDCD_EMAIL="+email, "OIDCD_PASSWORD="+password)
			if tc.bc {
				cmd.Env = append(cmd.Env, "OIDCD_BC_PORT="+strconv.Itoa(bcPort))
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("rp.mjs (%s): %v\n%s", tc.auth, err, out)
			}
			t.Logf("rp.mjs (%s):\n%s", tc.auth, out)
			for _, w := range append(tc.want, "done") {
				if !strings.Contains(string(out), "ok "+w+"\n") && !(w == "done" && strings.Contains(string(out), "done\n")) {
					t.Errorf("rp.mjs (%s): no %q in its output:\n%s", tc.auth, w, out)
				}
			}
		})
	}
}
