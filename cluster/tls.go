package cluster

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"time"
)

// Names and dates baked into the derived cluster CA. Changing any of them
// changes the CA, so nodes of different versions would no longer trust each
// other: bump caInfo's version instead.
const (
	caInfo          = "oidcd cluster CA v1"
	caCommonName    = "oidcd cluster CA"
	clusterHostname = "oidcd.cluster" // SAN of every leaf; clients verify it
)

var (
	caNotBefore = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	caNotAfter  = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC) // RFC 5280: no expiry
	dnsLabels   = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$`)
)

// nodeTLS holds both ends' TLS settings for node-to-node connections.
type nodeTLS struct {
	server *tls.Config
	client *tls.Config
}

// ErrNoClusterKey: node-to-node traffic is always mutual TLS, so a node
// needs a cluster key (or an operator CA) to run at all.
var ErrNoClusterKey = errors.New("cluster: node-to-node traffic needs a cluster key or an operator CA; there is no plaintext mode")

// newNodeTLS builds the TLS settings of this node. There is no plaintext
// mode: without a key or an operator PKI it refuses.
func newNodeTLS(tc TransportConfig, nodeID string) (*nodeTLS, error) {
	switch {
	case tc.CAFile != "" || tc.CertFile != "" || tc.KeyFile != "":
		return operatorTLS(tc)
	case tc.ClusterKey != nil:
		return derivedTLS(tc.ClusterKey, nodeID)
	}
	return nil, ErrNoClusterKey
}

// deriveCA rebuilds the cluster CA from the cluster key. Every input is
// fixed (Ed25519 signatures are deterministic too), so every node holding
// the key builds the very same certificate, and a leaf signed by any node
// verifies on every node.
func deriveCA(key []byte) (*x509.Certificate, ed25519.PrivateKey, error) {
	if len(key) != 32 {
		return nil, nil, fmt.Errorf("cluster: cluster key must be 32 bytes, got %d", len(key))
	}
	seed, err := hkdf.Key(sha256.New, key, nil, caInfo, ed25519.SeedSize)
	if err != nil {
		return nil, nil, err
	}
	priv := ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: caCommonName},
		NotBefore:             caNotBefore,
		NotAfter:              caNotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, priv, nil
}

// newLeaf makes this process's key and certificate, signed by the CA. The
// key never leaves memory; a restart makes a new one.
func newLeaf(ca *x509.Certificate, caKey ed25519.PrivateKey, nodeID string) (tls.Certificate, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	names := []string{clusterHostname}
	if host := nodeID + "." + clusterHostname; dnsLabels.MatchString(host) {
		names = append(names, host)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: nodeID},
		DNSNames:     names,
		// A day of slack for clock skew between nodes; the leaf lives as
		// long as the process.
		NotBefore:   now.Add(-24 * time.Hour),
		NotAfter:    now.Add(100 * 365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cluster: node certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, nil
}

// derivedTLS is mutual TLS 1.3 from the CA derived from the cluster key.
func derivedTLS(key []byte, nodeID string) (*nodeTLS, error) {
	ca, caKey, err := deriveCA(key)
	if err != nil {
		return nil, err
	}
	leaf, err := newLeaf(ca, caKey, nodeID)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	t := mutualTLS(leaf, pool)
	t.client.RootCAs, t.client.ServerName = pool, clusterHostname
	return t, nil
}

// mutualTLS is TLS 1.3 with leaf on both sides, and the server asking for
// and verifying a client certificate of pool. The client's verification
// of the server is the caller's to set.
func mutualTLS(leaf tls.Certificate, pool *x509.CertPool) *nodeTLS {
	return &nodeTLS{
		server: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{leaf},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
		},
		client: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{leaf},
		},
	}
}

// operatorTLS is mutual TLS 1.3 from a CA the operator provides. Peers'
// certificates must chain to the CA; their names are not checked (the
// operator's certificates need not carry our cluster hostname), so the
// client side verifies the chain itself.
func operatorTLS(tc TransportConfig) (*nodeTLS, error) {
	if tc.CAFile == "" || tc.CertFile == "" || tc.KeyFile == "" {
		return nil, errors.New("cluster: CAFile, CertFile and KeyFile go together")
	}
	caPEM, err := os.ReadFile(tc.CAFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: cluster CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("cluster: no certificate in %s", tc.CAFile)
	}
	leaf, err := tls.LoadX509KeyPair(tc.CertFile, tc.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: node certificate: %w", err)
	}
	verify := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("cluster: peer sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			Roots: pool, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		return err
	}
	t := mutualTLS(leaf, pool)
	// The default verification would also match a host name; the chain is
	// verified in VerifyConnection instead, which always runs, so no
	// unverified peer gets through.
	// #nosec G402 -- the chain is verified in VerifyConnection, against the cluster CA only
	t.client.InsecureSkipVerify = true
	t.client.VerifyConnection = verify
	return t, nil
}
