package cluster

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestDerivedCAIsTheSameOnEveryNode(t *testing.T) {
	a, _, err := deriveCA(fwdKey)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := deriveCA(bytes.Clone(fwdKey))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Raw, b.Raw) {
		t.Fatal("two derivations from one key differ")
	}
	other, _, err := deriveCA(wrongKey)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.PublicKey.(ed25519.PublicKey), other.PublicKey.(ed25519.PublicKey)) {
		t.Fatal("two keys derive the same CA key")
	}
	if !a.IsCA || a.NotBefore.After(time.Now()) || a.NotAfter.Before(time.Now().AddDate(100, 0, 0)) {
		t.Fatalf("CA: IsCA %v, valid %v to %v", a.IsCA, a.NotBefore, a.NotAfter)
	}
	if _, _, err := deriveCA([]byte("short")); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

func TestLeafVerifiesOnlyUnderItsClusterCA(t *testing.T) {
	ca, caKey, _ := deriveCA(fwdKey)
	other, _, _ := deriveCA(wrongKey)
	leaf, err := newLeaf(ca, caKey, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := leaf.Leaf.DNSNames, []string{"oidcd.cluster", "node-1.oidcd.cluster"}; !slices.Equal(got, want) {
		t.Fatalf("SANs: got %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name string
		root *x509.Certificate
		ok   bool
	}{{"own CA", ca, true}, {"other CA", other, false}} {
		t.Run(tc.name, func(t *testing.T) {
			pool := x509.NewCertPool()
			pool.AddCert(tc.root)
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				_, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: clusterHostname, KeyUsages: []x509.ExtKeyUsage{usage}})
				if (err == nil) != tc.ok {
					t.Fatalf("verify for %v: got %v, want ok=%v", usage, err, tc.ok)
				}
			}
		})
	}
	if l, err := newLeaf(ca, caKey, "not a host name!"); err != nil || len(l.Leaf.DNSNames) != 1 {
		t.Fatalf("odd node id: got %v %v, want only the cluster name", l.Leaf, err)
	}
}

// testStream is a stream layer serving on 127.0.0.1; forwarding connections
// are handed to rpc.
type testStream struct {
	*streamLayer
	rpc chan net.Conn
}

func newTestStream(t *testing.T, id string, tc TransportConfig) *testStream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := newStreamLayer(&Config{NodeID: id, RaftListener: ln, Transport: tc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ts := &testStream{streamLayer: s, rpc: make(chan net.Conn, 1)}
	s.serve(func(c net.Conn) {
		ts.rpc <- c
		io.Copy(io.Discard, c) // hold it until closed
	})
	t.Cleanup(func() { s.Close(); s.wait() })
	return ts
}

// roundTrip dials server from client with proto and checks that bytes
// written arrive on the connection the server routed.
func roundTrip(t *testing.T, client, server *testStream, proto byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := client.dialNode(ctx, server.Addr().String(), proto)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		return err
	}
	var got net.Conn
	switch proto {
	case protoRaft:
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := server.Accept()
			if err == nil {
				accepted <- c
			}
		}()
		select {
		case got = <-accepted:
		case <-time.After(2 * time.Second):
		}
	case protoForward:
		select {
		case got = <-server.rpc:
		case <-time.After(2 * time.Second):
		}
	}
	if got == nil {
		// Refused: the client learns it on its next read.
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := conn.Read(make([]byte, 1))
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("refused connection: read got %v, want it closed", err)
		}
		return errors.New("refused")
	}
	defer got.Close()
	if proto == protoForward {
		return nil // the handler drains it
	}
	buf := make([]byte, 4)
	got.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("routed connection: got %q %v, want ping", buf, err)
	}
	return nil
}

func TestStreamRoutesAndSecuresConnections(t *testing.T) {
	good := TransportConfig{ClusterKey: fwdKey}
	pki := writeOperatorPKI(t, "ca1", 2)
	otherPKI := writeOperatorPKI(t, "ca2", 1)
	cases := []struct {
		name           string
		client, server TransportConfig
		ok             bool
	}{
		{"same key", good, good, true},
		{"wrong key", TransportConfig{ClusterKey: wrongKey}, good, false},
		{"operator CA", pki[0], pki[1], true},
		{"operator CA, other CA", otherPKI[0], pki[1], false},
		{"operator CA against the derived CA", pki[0], good, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := newTestStream(t, "server", tc.server)
			client := newTestStream(t, "client", tc.client)
			for _, proto := range []byte{protoRaft, protoForward} {
				err := roundTrip(t, client, server, proto)
				if (err == nil) != tc.ok {
					t.Fatalf("protocol %c: got %v, want ok=%v", proto, err, tc.ok)
				}
			}
		})
	}
}

func TestStreamRefusesUnknownProtocol(t *testing.T) {
	server := newTestStream(t, "server", TransportConfig{ClusterKey: fwdKey})
	client := newTestStream(t, "client", TransportConfig{ClusterKey: fwdKey})
	if err := roundTrip(t, client, server, 'X'); err == nil {
		t.Fatal("unknown protocol byte was routed")
	}
}

func TestStreamCloseEndsConnections(t *testing.T) {
	server := newTestStream(t, "server", TransportConfig{ClusterKey: fwdKey})
	client := newTestStream(t, "client", TransportConfig{ClusterKey: fwdKey})
	conn, err := client.dialNode(t.Context(), server.Addr().String(), protoRaft)
	if err != nil {
		t.Fatal(err)
	}
	in, err := server.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	server.Close()
	if _, err := server.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept after close: got %v, want net.ErrClosed", err)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("peer's connection after close: got %v, want it closed", err)
	}
	if _, err := client.dialNode(t.Context(), server.Addr().String(), protoRaft); err == nil {
		t.Fatal("dial after close succeeded")
	}
}

// writeOperatorPKI writes a CA and n node key pairs signed by it, and
// returns a TransportConfig per node.
func writeOperatorPKI(t *testing.T, name string, n int) []TransportConfig {
	t.Helper()
	dir := t.TempDir()
	caPub, caKey, _ := ed25519.GenerateKey(rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caPub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write := func(file, typ string, der []byte) string {
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", "CERTIFICATE", caDER)
	var out []TransportConfig
	for i := range n {
		pub, key, _ := ed25519.GenerateKey(rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: "node"},
			DNSNames:  []string{"node.example"}, // not our cluster name: only the chain counts
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
		out = append(out, TransportConfig{
			CAFile:   caFile,
			CertFile: write("node"+string(rune('0'+i))+".pem", "CERTIFICATE", der),
			KeyFile:  write("node"+string(rune('0'+i))+".key", "PRIVATE KEY", keyDER),
		})
	}
	return out
}

func TestOperatorPKINeedsAllThreeFiles(t *testing.T) {
	_, err := newNodeTLS(TransportConfig{CAFile: "ca.pem"}, "n1")
	if err == nil {
		t.Fatal("CAFile alone was accepted")
	}
}

// TestNoPlaintextMode: a node cannot be built without a key, and a
// plaintext client (a raw TCP connection writing the forward protocol
// byte and a frame) or a TLS client with a self-signed certificate is
// never routed to raft or to the forwarding server.
func TestNoPlaintextMode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := newStreamLayer(&Config{NodeID: "n", RaftListener: ln, Logger: slog.New(slog.DiscardHandler)}); !errors.Is(err, ErrNoClusterKey) {
		t.Fatalf("a stream layer without a key: got %v, want ErrNoClusterKey", err)
	}

	server := newTestStream(t, "server", TransportConfig{ClusterKey: fwdKey})
	selfSigned := writeOperatorPKI(t, "rogue", 1)[0]
	rogue, err := newNodeTLS(selfSigned, "rogue")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		dial func(net.Conn) net.Conn
	}{
		{"plaintext", func(c net.Conn) net.Conn { return c }},
		{"TLS without the cluster key", func(c net.Conn) net.Conn {
			tc := tls.Client(c, rogue.client)
			tc.Handshake() // fails, or the server drops it right after
			return tc
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := net.Dial("tcp", server.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			conn := tc.dial(raw)
			conn.SetDeadline(time.Now().Add(3 * time.Second))
			conn.Write(append([]byte{protoForward}, make([]byte, 64)...))
			select {
			case <-server.rpc:
				t.Fatal("the connection reached the forwarding server")
			case <-time.After(500 * time.Millisecond):
			}
			// The server closes it: a read ends without data.
			buf := make([]byte, 1)
			if n, err := conn.Read(buf); err == nil && n > 0 {
				t.Fatalf("the server answered %d bytes", n)
			}
		})
	}
}
