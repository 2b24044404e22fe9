package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsAreFreeOutsideTheEphemeralRangeAndNeverRepeated(t *testing.T) {
	seen := map[int]bool{}
	for i := range 50 {
		p := TCP(t)
		if i%2 == 1 {
			p = TCPAndUDP(t)
		}
		if p < lo || p > hi {
			t.Fatalf("port %d outside %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

// TestPortInUseIsSkipped: a port something listens on is never given.
func TestPortInUseIsSkipped(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	taken := map[int]bool{}
	for p := lo; p <= min(lo+1000, hi); p++ {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			held = append(held, l)
			taken[p] = true
		}
	}
	old := hi
	hi = min(lo+1100, old) // mostly taken: the pick must go past them
	defer func() { hi = old }()
	for range 20 {
		if p := TCP(t); taken[p] {
			t.Fatalf("port %d was in use", p)
		}
	}
}
