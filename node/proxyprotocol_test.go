package node_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// haproxyTCP starts HAProxy with the repository's own TCP-mode
// configuration (deploy/haproxy/haproxy-passthrough.cfg) on
// 127.0.0.1:port in front of backends: it passes TLS through to the
// nodes' own certificates and names each client in a PROXY v2 header.
func haproxyTCP(t *testing.T, port string, backends []string) {
	t.Helper()
	needHAProxy(t)
	startHAProxy(t, port, siteConfig(t, "haproxy-passthrough.cfg", port, "", backends))
}

// adminVia calls the admin API at base with client hc and decodes the
// answer into out.
func adminVia(t *testing.T, hc *http.Client, base, method, path string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, msg)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBehindHAProxyWithProxyProtocol: a node serving TLS itself, behind
// a real HAProxy in TCP mode that passes TLS through and names each
// client in a PROXY v2 header (--proxy-header proxy-protocol). Six
// people at six addresses sign in to one application through go-oidc
// within the minute (the token limit counts them apart); six token
// requests from one address, each naming another client in Forwarded and
// X-Forwarded-For, end in 429; ten wrong passwords from an attacker who
// names the person's address in both headers lock out only the attacker;
// and a PROXY header the client writes itself, through the balancer or
// straight to the node, is refused, as is the balancer's own address
// without one.
func TestBehindHAProxyWithProxyProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("starts haproxy")
	}
	needHAProxy(t)
	certFile, keyFile, roots, port := site(t) // the nodes' own pair: TLS passes through
	issuer := "https://127.0.0.1:" + port
	const balancer = "127.0.0.1" // the address HAProxy connects to the nodes from
	c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) {
		cfg.Issuer = issuer
		cfg.TLSCert, cfg.TLSKey = certFile, keyFile
		cfg.TrustedProxies = balancer + "/32"
		cfg.ProxyHeader = "proxy-protocol"
		cfg.RateLimit = "5/60s"
	}})
	nodeAddr := strings.TrimPrefix(c.URL(0), "http://")
	haproxyTCP(t, port, []string{nodeAddr})

	// Provision through the balancer, as an operator behind it would.
	admin := from("127.0.0.2", roots)
	waitThrough(t, admin, issuer+"/readyz")
	w := world{email: "ann@example.com", password: "correct horse battery", cb: "http://127.0.0.1:9/callback"}
	var o, u, cl map[string]any
	adminVia(t, admin, issuer, "POST", "/admin/v1/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &o)
	w.orgA = o["id"].(string)
	adminVia(t, admin, issuer, "POST", "/admin/v1/users", map[string]any{"email": w.email, "email_verified": true, "password": w.password}, &u)
	w.user = u["id"].(string)
	adminVia(t, admin, issuer, "POST", "/admin/v1/memberships", map[string]any{"user_id": w.user, "org_id": w.orgA}, nil)
	adminVia(t, admin, issuer, "POST", "/admin/v1/clients", map[string]any{"name": "Server App", "redirect_uris": []string{w.cb},
		"scopes": []string{"openid", "email"}, "organization_id": w.orgA, "skip_consent": true}, &cl)
	w.confID, w.confSecret = cl["client_id"].(string), cl["client_secret"].(string)

	ctx := gooidc.ClientContext(context.Background(), from("127.0.0.1", roots))
	p, err := gooidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatalf("discovery through haproxy: %v", err)
	}
	signInFrom := func(t *testing.T, ip string) error {
		t.Helper()
		_, err := signInThrough(t, c, p, w, ip, roots)
		return err
	}
	for i := 2; i <= 7; i++ {
		if err := signInFrom(t, fmt.Sprintf("127.0.0.%d", i)); err != nil {
			t.Fatalf("sign-in %d of one client within the minute: %v", i-1, err)
		}
	}

	perAddressRulesFollowTheClient(t, p, issuer, w, roots, func(ip string) error { return signInFrom(t, ip) })

	// A PROXY header the client writes itself: through the balancer it
	// arrives after the balancer's own, where TLS should begin; straight
	// to the node it comes from an address not trusted. From the
	// balancer's address, a connection without one is refused.
	spoof := []byte("PROXY TCP4 127.0.0.31 127.0.0.1 40000 443\r\n")
	for _, tc := range []struct {
		name, from, to string
		preamble       []byte
	}{
		{"a client's PROXY header through the balancer", "127.0.0.32", "127.0.0.1:" + port, spoof},
		{"a client's PROXY header straight to the node", "127.0.0.32", nodeAddr, spoof},
		{"the balancer's address without a PROXY header", balancer, nodeAddr, nil},
	} {
		if err := tlsGet(tc.from, tc.to, tc.preamble, roots); err == nil {
			t.Errorf("%s: served, want the connection refused", tc.name)
		}
	}
	// The control: the same request, without the preamble, from a client.
	if err := tlsGet("127.0.0.32", "127.0.0.1:"+port, nil, roots); err != nil {
		t.Fatalf("a plain TLS request through the balancer: %v", err)
	}
}

// waitThrough polls url with hc until it answers 200, for at most 15 s
// (the balancer's first health checks).
func waitThrough(t *testing.T, hc *http.Client, url string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no 200 within 15 s (last %v)", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tlsGet connects from source to addr, writes preamble, then asks for
// discovery over TLS; nil when it was served.
func tlsGet(source, addr string, preamble []byte, roots *x509.CertPool) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	raw, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := raw.Write(preamble); err != nil {
		return err
	}
	conn := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	if err := conn.Handshake(); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "GET /.well-known/openid-configuration HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
