package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Dialer opens a connection to another node's raft address. Every outgoing
// node-to-node connection (raft and forwarding) is made through it, before
// TLS; tests swap it to cut links.
type Dialer func(ctx context.Context, addr string) (net.Conn, error)

// streamLayer owns the node's one listener. Every accepted connection is
// secured (TLS when configured), then its first byte says what it carries:
// raft connections are handed to raft's NetworkTransport through Accept,
// forwarding connections to the RPC server (forward.go).
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	dial      Dialer
	tls       *nodeTLS // nil: plaintext
	log       *slog.Logger
	conns     connSet
	// trail serves the audit trail fetches (protoTrail, trail.go); set
	// before serve.
	trail func(net.Conn)

	raftCh    chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // accept loop and connection handshakes
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// Accept returns the next raft connection.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.raftCh:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Close closes the listener and every node-to-node connection of this
// node. raft's transport calls it on shutdown.
func (s *streamLayer) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.closeErr = s.ln.Close()
		s.conns.closeAll()
	})
	return s.closeErr
}

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dialNode(ctx, string(addr), protoRaft)
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func defaultDialer(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// newStreamLayer listens (or takes cfg.RaftListener) for node-to-node
// traffic. Nothing is accepted until serve.
func newStreamLayer(cfg *Config) (*streamLayer, error) {
	nt, err := newNodeTLS(cfg.Transport, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	ln := cfg.RaftListener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.RaftAddr); err != nil {
			return nil, fmt.Errorf("cluster: raft listener: %w", err)
		}
	}
	dial := cfg.Dial
	if dial == nil {
		dial = defaultDialer
	}
	return &streamLayer{
		ln: ln, advertise: ln.Addr(), dial: dial, tls: nt, log: cfg.Logger,
		raftCh: make(chan net.Conn), closed: make(chan struct{}),
	}, nil
}

// serve accepts connections until Close; forwarding connections are handed
// to rpc, which returns when the connection ends.
func (s *streamLayer) serve(rpc func(net.Conn)) {
	s.wg.Add(1)
	go s.acceptLoop(rpc)
}

// wait returns when the accept loop and every connection it handed to rpc
// have finished; call after Close.
func (s *streamLayer) wait() { s.wg.Wait() }

func (s *streamLayer) acceptLoop(rpc func(net.Conn)) {
	defer s.wg.Done()
	var delay time.Duration
	for {
		raw, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				s.log.Warn("cluster listener closed", "error", err)
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accepting node connection", "error", err)
			select {
			case <-s.closed:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.route(raw, rpc)
		}()
	}
}

// route secures an accepted connection and hands it to raft or rpc.
func (s *streamLayer) route(raw net.Conn, rpc func(net.Conn)) {
	tracked, err := s.conns.track(raw)
	if err != nil {
		return
	}
	conn, proto, err := s.accept(tracked)
	if err != nil {
		// A peer without the cluster key, or a port scanner: both are
		// refused here and never reach raft.
		s.log.Warn("refused node connection", "error", err)
		tracked.Close()
		return
	}
	switch proto {
	case protoRaft:
		select {
		case s.raftCh <- conn:
		case <-s.closed:
			conn.Close()
		}
	case protoForward:
		rpc(conn)
	case protoTrail:
		if s.trail == nil {
			conn.Close()
			return
		}
		s.trail(conn)
	default:
		s.log.Warn("refused node connection", "remote", raw.RemoteAddr().String(), "protocol", proto)
		conn.Close()
	}
}
