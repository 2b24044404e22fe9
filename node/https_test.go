package node_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestTLSOnTheNodeReloadsWithoutDroppingConnections: a node with
// --tls-cert and --tls-key serves discovery over HTTPS with HTTP/2 to a
// client that verifies it; the files are replaced while clients keep
// requesting over their open connections; no request fails, and new
// handshakes get the new certificate.
func TestTLSOnTheNodeReloadsWithoutDroppingConnections(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, cert1 := node.WritePair(t, dir, "one", 30*24*time.Hour)
	_, _, cert2 := node.WritePair(t, dir, "two", 60*24*time.Hour)
	c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) {
		cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	}})
	url := "https://" + c.Node(0).Addr() + "/.well-known/openid-configuration"
	roots := x509.NewCertPool()
	roots.AddCert(cert1)
	roots.AddCert(cert2)
	client := func() *http.Client {
		tr := testcluster.LoopbackTransport()
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		tr.ForceAttemptHTTP2 = true
		return &http.Client{Transport: tr, Timeout: 5 * time.Second}
	}
	served := func(cl *http.Client) (string, string) {
		t.Helper()
		resp, err := cl.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.TLS == nil {
			t.Fatalf("discovery over HTTPS: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].Subject.CommonName, resp.Proto
	}
	if cn, proto := served(client()); cn != "one" || proto != "HTTP/2.0" {
		t.Fatalf("before: certificate %q over %s, want one over HTTP/2.0", cn, proto)
	}

	// Clients keep requesting over their connections while the files change.
	var failures atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := client()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := cl.Get(url)
				if err != nil || resp.StatusCode != 200 {
					failures.Add(1)
				}
				if err == nil {
					resp.Body.Close()
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	twoCert, _ := os.ReadFile(dir + "/two.crt")
	twoKey, _ := os.ReadFile(dir + "/two.key")
	os.WriteFile(keyFile, twoKey, 0o600)
	os.WriteFile(certFile, twoCert, 0o600)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if cn, _ := served(client()); cn == "two" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("new handshakes still get the old certificate 10 s after the files changed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d requests failed while the certificate was replaced", n)
	}
	if err := c.Node(0).ReloadTLS(); err != nil {
		t.Fatalf("SIGHUP's reload: %v", err)
	}
}
