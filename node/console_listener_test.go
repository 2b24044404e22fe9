package node_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestConsoleOnAPlainAdminListenerOfAnHTTPSIssuer: the operator guide's
// management-network set-up, --admin-addr over plain HTTP on a node whose
// issuer is https (TLS ends at the balancer in front of --http-addr): a
// browser there signs in to the console and stays signed in, because the
// console's cookies on that listener are not Secure.
func TestConsoleOnAPlainAdminListenerOfAnHTTPSIssuer(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) {
		cfg.AdminAddr, cfg.Issuer = "127.0.0.1:0", "https://id.example"
	}})
	// The browser reaches the admin listener by a name on the management
	// network: a cookie jar, like a browser, takes a loopback address for
	// a secure origin even over plain HTTP.
	addr := c.Node(0).AdminAddr()
	_, port, _ := net.SplitHostPort(addr)
	base := "http://node1.mgmt.example:" + port
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dial},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	_, page := do("GET", "/console/signin", nil)
	m := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf_token on the sign-in page:\n%s", page)
	}
	if status, body := do("POST", "/console/signin", url.Values{"token": {testcluster.AdminToken}, "csrf_token": {m[1]}}); status != http.StatusSeeOther {
		t.Fatalf("console sign-in: got %d, want 303\n%s", status, body)
	}
	if status, body := do("GET", "/console/organizations", nil); status != http.StatusOK {
		t.Fatalf("a console page after sign-in: got %d, want 200\n%s", status, body)
	}
}
