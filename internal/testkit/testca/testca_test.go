package testca

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

// TestServerCertificateVerifiesAgainstTheCA: the pair loads, and its
// certificate verifies for 127.0.0.1 and localhost against the CA alone,
// not against another CA.
func TestServerCertificateVerifiesAgainstTheCA(t *testing.T) {
	ca := New(t, "test CA")
	pair, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool, DNSName: host}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: New(t, "other CA").Pool, DNSName: "localhost"}); err == nil {
		t.Error("verified against another CA")
	}
}
