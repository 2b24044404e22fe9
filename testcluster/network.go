package testcluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// network is the fault-injecting fabric between a cluster's nodes: every
// node-to-node connection is dialed through it, so tests can cut and heal
// links. Traffic from clients (HTTP) is untouched.
type network struct {
	mu    sync.Mutex
	addrs map[string]int  // raft address -> node index
	cut   map[[2]int]bool // directed links that fail
	conns map[[2]int][]net.Conn
	// latency, when set, is the one-way delay of the link from a node to
	// another (Options.LinkLatency); connections dialed over it carry it
	// both ways.
	latency func(from, to int) time.Duration
}

func newNetwork() *network {
	return &network{addrs: map[string]int{}, cut: map[[2]int]bool{}, conns: map[[2]int][]net.Conn{}}
}

var errLinkCut = errors.New("testcluster: link cut")

// dialer returns node from's dial function.
func (n *network) dialer(from int) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		n.mu.Lock()
		to, known := n.addrs[addr]
		blocked := known && n.cut[[2]int{from, to}]
		n.mu.Unlock()
		if blocked {
			return nil, errLinkCut
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil || !known {
			return c, err
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cut[[2]int{from, to}] { // cut while dialing
			c.Close()
			return nil, errLinkCut
		}
		n.conns[[2]int{from, to}] = append(n.conns[[2]int{from, to}], c)
		if n.latency != nil {
			if d := n.latency(from, to); d > 0 {
				return newDelayConn(c, d), nil
			}
		}
		return c, nil
	}
}

// partition cuts every link between group and the other nodes, both ways,
// and closes the connections already open across the cut.
func (n *network) partition(size int, group []int) {
	in := map[int]bool{}
	for _, g := range group {
		in[g] = true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for a := 0; a < size; a++ {
		for b := 0; b < size; b++ {
			if a != b && in[a] != in[b] {
				n.cut[[2]int{a, b}] = true
				for _, c := range n.conns[[2]int{a, b}] {
					c.Close()
				}
				delete(n.conns, [2]int{a, b})
			}
		}
	}
}

// cutLink cuts the links between a and b, both ways, and closes the
// connections already open over them; every other link stays.
func (n *network) cutLink(a, b int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range [][2]int{{a, b}, {b, a}} {
		n.cut[l] = true
		for _, c := range n.conns[l] {
			c.Close()
		}
		delete(n.conns, l)
	}
}

// heal restores every link.
func (n *network) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = map[[2]int]bool{}
}
