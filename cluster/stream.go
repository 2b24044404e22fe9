package cluster

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Dialer opens a connection to another node's raft address. Tests swap it to
// cut links; the cluster issue wraps it in TLS.
type Dialer func(ctx context.Context, addr string) (net.Conn, error)

// streamLayer is raft's transport over a listener we own, so tests can hand
// in a listener already bound to a free port and later layers can wrap
// connections.
type streamLayer struct {
	net.Listener
	advertise net.Addr
	dial      Dialer
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dial(ctx, string(addr))
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func defaultDialer(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// newStreamLayer listens (or takes cfg.RaftListener) for raft traffic.
func newStreamLayer(cfg *Config) (*streamLayer, error) {
	ln := cfg.RaftListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.RaftAddr); err != nil {
			return nil, fmt.Errorf("cluster: raft listener: %w", err)
		}
	}
	dial := cfg.Dial
	if dial == nil {
		dial = defaultDialer
	}
	return &streamLayer{Listener: ln, advertise: ln.Addr(), dial: dial}, nil
}
