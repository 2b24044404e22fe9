package testcluster

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestDelayConn: a request and its answer over a link of one-way latency
// d take at least 2d, bytes arrive in order, and a read deadline holds.
func TestDelayConn(t *testing.T) {
	const d = 40 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		io.Copy(s, s) // echo
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newDelayConn(raw, d)
	defer c.Close()
	for round := range 3 {
		start := time.Now()
		msg := []byte{byte(round), 1, 2, 3, 4, 5, 6, 7}
		if _, err := c.Write(msg[:3]); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(msg[3:]); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if string(got) != string(msg) {
			t.Fatalf("round %d: got %v, want %v", round, got, msg)
		}
		if took < 2*d || took > 2*d+time.Second {
			t.Fatalf("round %d: round trip %v, want about %v", round, took, 2*d)
		}
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: got %v", err)
	}
}

// BenchmarkLinkRoundTrip is the floor of anything that crosses a 40 ms
// link (make bench-edge): one small request and its answer over the
// delayConn the edge benchmarks use.
func BenchmarkLinkRoundTrip(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		io.Copy(s, s)
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	c := newDelayConn(raw, 40*time.Millisecond)
	defer c.Close()
	buf := make([]byte, 64)
	for b.Loop() {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
}
