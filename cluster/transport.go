package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"
)

// TransportConfig secures node-to-node traffic (raft and forwarded writes).
type TransportConfig struct {
	// ClusterKey is the 32-byte shared secret. Every node-to-node
	// connection is mutual TLS 1.3 with certificates from a CA derived
	// from the key (tls.go); without a key (or CAFile...) a node does not
	// start (ErrNoClusterKey).
	ClusterKey []byte
	// CAFile, CertFile and KeyFile (PEM), when set, replace the derived CA
	// with one the operator provides: peers must present a certificate
	// that chains to CAFile.
	CAFile   string
	CertFile string
	KeyFile  string
}

// Protocol bytes: the first byte a dialer writes on a node-to-node
// connection (inside TLS when TLS is on) says what the connection carries.
const (
	protoRaft    byte = 'R'
	protoForward byte = 'F'
)

// handshakeTimeout bounds the TLS handshake and protocol byte of an
// accepted connection, so a silent peer cannot hold a goroutine.
const handshakeTimeout = 10 * time.Second

// dialNode opens a node-to-node connection through cfg.Dial (the one hook
// for every outgoing connection), secures it and announces proto.
func (s *streamLayer) dialNode(ctx context.Context, addr string, proto byte) (net.Conn, error) {
	raw, err := s.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	conn, err := s.conns.track(raw)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(conn, s.tls.client)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("cluster: TLS to %s: %w", addr, err)
	}
	conn = tc
	if dl, ok := ctx.Deadline(); ok {
		conn.SetWriteDeadline(dl)
	}
	if _, err := conn.Write([]byte{proto}); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// accept finishes an accepted connection: TLS handshake, protocol byte.
func (s *streamLayer) accept(raw net.Conn) (net.Conn, byte, error) {
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	conn := tls.Server(raw, s.tls.server)
	if err := conn.Handshake(); err != nil {
		return nil, 0, fmt.Errorf("TLS from %s: %w", raw.RemoteAddr(), err)
	}
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		return nil, 0, fmt.Errorf("protocol byte from %s: %w", raw.RemoteAddr(), err)
	}
	raw.SetDeadline(time.Time{})
	return conn, b[0], nil
}

// connSet tracks open node-to-node connections so that closing the stream
// layer closes them all, as the end of the process would: peers notice at
// once instead of writing into a half-dead node.
type connSet struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}

// track registers conn; if the set is already closed, conn is closed and
// net.ErrClosed returned.
func (s *connSet) track(conn net.Conn) (net.Conn, error) {
	tc := &trackedConn{Conn: conn, set: s}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return nil, net.ErrClosed
	}
	if s.conns == nil {
		s.conns = make(map[*trackedConn]struct{})
	}
	s.conns[tc] = struct{}{}
	s.mu.Unlock()
	return tc, nil
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}
