// Package freeport picks loopback ports for listeners a test cannot open
// itself before it starts them: a process it runs (HAProxy, slapd, Exim,
// a node binary) or a library that binds its own (memberlist).
//
// Asking the kernel for port 0 and closing the listener, the usual trick,
// hands out a port from the ephemeral range, which the kernel gives the
// next port-0 listener of any test running beside this one: between the
// close and the process's bind, another test's server could take it, and
// the process then fails to start or, worse, a test talks to the wrong
// server. The ports here come from below that range (above it when there
// is no room below), where only tests that pick ports this way look, and
// each is checked free before it is returned.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
)

// TCP returns a port free for TCP on 127.0.0.1.
func TCP(t testing.TB) int {
	t.Helper()
	return pick(t, false)
}

// TCPAndUDP returns a port free for both TCP and UDP on 127.0.0.1.
func TCPAndUDP(t testing.TB) int {
	t.Helper()
	return pick(t, true)
}

// Addr is "127.0.0.1:<TCP(t)>".
func Addr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", TCP(t))
}

var (
	mu     sync.Mutex
	given  = map[int]bool{} // handed out by this process: never twice
	lo, hi = candidates()
)

// candidates is the range ports are drawn from: 10000 up to the start of
// the kernel's ephemeral range, or from its end up to 65535 when that is
// the larger room.
func candidates() (int, int) {
	start, end := 32768, 60999 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &start, &end)
	}
	if start-10000 >= 65535-end {
		return 10000, start - 1
	}
	return end + 1, 65535
}

func pick(t testing.TB, udp bool) int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		p := lo + rand.IntN(hi-lo+1)
		if given[p] || !free(p, udp) {
			continue
		}
		given[p] = true
		return p
	}
	t.Fatalf("freeport: no free port in %d-%d after 200 tries", lo, hi)
	return 0
}

func free(port int, udp bool) bool {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	if udp {
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		u.Close()
	}
	return true
}
