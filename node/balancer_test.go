package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestBalancerConfigsAreClean: each configuration in deploy/haproxy is
// accepted by `haproxy -c` without a warning, and takes a node out (inter
// × fall, plus one inter for the check in flight) before the node stops
// serving at the end of its default drain.
func TestBalancerConfigsAreClean(t *testing.T) {
	needHAProxy(t)
	certFile, keyFile, _, _ := site(t)
	cert, _ := os.ReadFile(certFile)
	key, _ := os.ReadFile(keyFile)
	pem := filepath.Join(t.TempDir(), "site.pem")
	if err := os.WriteFile(pem, append(cert, key...), 0o600); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("..", "deploy", "haproxy", "*.cfg"))
	if len(files) < 2 {
		t.Fatalf("deploy/haproxy holds %d configurations, want the HTTP and the TCP one", len(files))
	}
	interRe := regexp.MustCompile(`(?m)^\s*default-server\b.*\binter (\d+)(ms|s)\b.*\bfall (\d+)\b`)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cfg := strings.ReplaceAll(string(b), "/etc/haproxy/site.pem", pem)
			checked := filepath.Join(t.TempDir(), "haproxy.cfg")
			if err := os.WriteFile(checked, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(haproxyPath, "-c", "-f", checked).CombinedOutput()
			if err != nil || strings.Contains(string(out), "WARNING") || strings.Contains(string(out), "ALERT") {
				t.Fatalf("haproxy -c: %v\n%s", err, out)
			}
			m := interRe.FindStringSubmatch(string(b))
			if m == nil {
				t.Fatal("no default-server line with inter and fall")
			}
			n, _ := strconv.Atoi(m[1])
			inter := time.Duration(n) * time.Second
			if m[2] == "ms" {
				inter = time.Duration(n) * time.Millisecond
			}
			fall, _ := strconv.Atoi(m[3])
			if detect := inter * time.Duration(fall+1); detect >= node.DefaultShutdownDrain {
				t.Fatalf("a draining node is taken out after up to %s (inter %s × fall %d, plus the check in flight), not within the default drain of %s",
					detect, inter, fall, node.DefaultShutdownDrain)
			}
		})
	}
}

// TestDiscoveryAndJWKSOutliveTheQuorumBehindHAProxy: three nodes behind
// deploy/haproxy/haproxy.cfg; two die. The survivor has no quorum, so it
// fails /readyz and the balancer has no server for the rest of the
// surface, but it passes /readyz?scope=keys, and discovery and the JWKS
// stay served through the balancer: a relying party that starts now can
// still verify the tokens it holds.
func TestDiscoveryAndJWKSOutliveTheQuorumBehindHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts haproxy")
	}
	certFile, keyFile, roots, port := site(t)
	issuer := "https://127.0.0.1:" + port
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) {
		cfg.Issuer = issuer
		cfg.TrustedProxies = "127.0.0.1/32"
	}})
	var backends []string
	for i := range c.Size() {
		backends = append(backends, strings.TrimPrefix(c.URL(i), "http://"))
	}
	haproxy(t, port, certFile, keyFile, backends)
	hc := from("127.0.0.2", roots)
	waitThrough(t, hc, issuer+"/.well-known/jwks.json")

	survivor := c.WaitNewLeader()
	for i := range c.Size() {
		if i != survivor {
			c.Kill(i)
		}
	}
	// The survivor steps down and fails /readyz; the balancer sees it
	// within inter × fall.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := hc.Get(issuer + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rest of the surface still served 20 s after the quorum was lost (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status := getStatus(t, c.Client(), c.URL(survivor)+"/readyz?scope=keys"); status != http.StatusOK {
		t.Fatalf("the survivor's /readyz?scope=keys: %d, want 200", status)
	}
	for _, path := range []string{"/.well-known/openid-configuration", "/.well-known/jwks.json"} {
		for range 10 { // every server the balancer might pick
			if status := getStatus(t, hc, issuer+path); status != http.StatusOK {
				t.Fatalf("%s through the balancer without a quorum: %d, want 200", path, status)
			}
		}
	}
	// A relying party library starting now still finds the provider, and
	// its key set holds the signing keys.
	ctx := gooidc.ClientContext(context.Background(), hc)
	p, err := gooidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatalf("go-oidc discovery without a quorum: %v", err)
	}
	var claims struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(claims.JWKSURI)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct{ Keys []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("the JWKS without a quorum: %v, %d keys", err, len(set.Keys))
	}
}

func getStatus(t *testing.T, hc *http.Client, url string) int {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestReadyzScope: ?scope=keys asks only what discovery and the JWKS need;
// another scope is a 400.
func TestReadyzScope(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	firstReady(t, c, 0)
	for _, tc := range []struct {
		query string
		want  int
	}{{"", 200}, {"?scope=keys", 200}, {"?scope=keys&verbose", 200}, {"?scope=everything", 400}} {
		if got := getStatus(t, c.Client(), c.URL(0)+"/readyz"+tc.query); got != tc.want {
			t.Errorf("/readyz%s: %d, want %d", tc.query, got, tc.want)
		}
	}
	c.Node(0).Drain(context.Background())
	if got := getStatus(t, c.Client(), c.URL(0)+"/readyz?scope=keys"); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz?scope=keys while draining: %d, want 503", got)
	}
}
