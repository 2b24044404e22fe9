package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writePair writes a self-signed certificate for 127.0.0.1 valid for
// life, and its key, into dir under name, and returns the two paths.
func writePair(t testing.TB, dir, name string, life time.Duration) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(life).Truncate(time.Second),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// TestCertReloader: a bad pair at start refuses; a good one is served; a
// reload with broken files keeps the current pair; new files are picked
// up by the watch without a signal.
func TestCertReloader(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	c1, k1, cert1 := writePair(t, dir, "one", 30*24*time.Hour)
	c2, k2, cert2 := writePair(t, dir, "two", 60*24*time.Hour)
	if _, err := newCertReloader(c1, k2, log); err == nil {
		t.Fatal("a certificate with another key's file was accepted at start")
	}
	r, err := newCertReloader(c1, k1, log)
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		c, _ := r.GetCertificate(nil)
		return c.Leaf.Subject.CommonName
	}
	if served() != "one" || !r.NotAfter().Equal(cert1.NotAfter) {
		t.Fatalf("served %q until %v", served(), r.NotAfter())
	}
	os.WriteFile(c1, []byte("not a certificate"), 0o600)
	if err := r.Reload(); err == nil || served() != "one" {
		t.Fatalf("a broken file: err %v, serving %q; want an error and the old pair", err, served())
	}
	// Replace both files (as a renewal tool would) and let the watch see it.
	b2, _ := os.ReadFile(c2)
	bk2, _ := os.ReadFile(k2)
	os.WriteFile(k1, bk2, 0o600)
	os.WriteFile(c1, b2, 0o600)
	ctx, cancel := contextWithCancel()
	defer cancel()
	go r.watch(ctx)
	deadline := time.Now().Add(3 * certWatchEvery)
	for served() != "two" {
		if time.Now().After(deadline) {
			t.Fatalf("still serving %q after the files changed", served())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !r.NotAfter().Equal(cert2.NotAfter) {
		t.Fatalf("not after: got %v, want %v", r.NotAfter(), cert2.NotAfter)
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
