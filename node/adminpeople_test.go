package node_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/oidc"
	"github.com/oidcd/oidcd/testcluster"
)

// TestAdminACRIsOneTheProviderIssues: --admin-acr defaults to mfa and
// takes only the three acr values the provider issues.
func TestAdminACRIsOneTheProviderIssues(t *testing.T) {
	if node.DefaultAdminACR != oidc.ACRMFA {
		t.Errorf("default: got %q, want %q", node.DefaultAdminACR, oidc.ACRMFA)
	}
	for _, acr := range []string{"", oidc.ACRPhone, oidc.ACRPwd, oidc.ACRMFA} {
		if err := (node.Config{AdminACR: acr}).Check(); err != nil {
			t.Errorf("--admin-acr %q: %v", acr, err)
		}
	}
	for _, acr := range []string{"mfa", "urn:service:sso:acr:MFA", "urn:other"} {
		err := (node.Config{AdminACR: acr}).Check()
		if err == nil || !strings.Contains(err.Error(), "--admin-acr") {
			t.Errorf("--admin-acr %q: got %v, want an error naming the flag", acr, err)
		}
	}
}

// TestAdminClientCallbacksFollowTheConsole: the built-in client's
// redirect URIs are the console's callback where the console is served:
// under the issuer, and with --admin-addr on the admin listener too;
// another port is refused.
func TestAdminClientCallbacksFollowTheConsole(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) { cfg.AdminAddr = "127.0.0.1:0" }})
	status := func(redirect string) int {
		t.Helper()
		q := url.Values{"client_id": {oidc.AdminClientID}, "redirect_uri": {redirect}, "response_type": {"code"},
			"scope": {"openid"}, "state": {"state-0123456789"},
			"code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}}
		resp, err := c.Client().Get(c.URL(0) + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	adminBase := "http://" + c.Node(0).AdminAddr()
	for _, uri := range []string{c.URL(0) + oidc.AdminCallbackPath, adminBase + oidc.AdminCallbackPath, "http://127.0.0.1:43210/callback"} {
		if got := status(uri); got != http.StatusOK { // the sign-in page
			t.Errorf("%s: got %d, want 200", uri, got)
		}
	}
	if got := status("http://127.0.0.1:1" + oidc.AdminCallbackPath); got != http.StatusBadRequest {
		t.Errorf("another port's console callback: got %d, want 400", got)
	}
}
