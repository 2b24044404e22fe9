package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// rpcPair is an rpcServer on a loopback listener and a client of it.
type rpcPair struct {
	server *rpcServer
	client *rpcClient
	ln     net.Listener
	wg     sync.WaitGroup
}

func newRPCPair(t *testing.T, handle func(ctx context.Context, op byte, body []byte) ([]byte, error)) *rpcPair {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &rpcPair{server: &rpcServer{handle: handle, base: context.Background()}, ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.server.serveConn(conn)
			}()
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p.client = newRPCClient(conn)
	t.Cleanup(func() {
		p.client.fail(errors.New("test over"))
		ln.Close()
		p.wg.Wait()
		p.server.wg.Wait()
	})
	return p
}

func TestRPCMultiplexesConcurrentCalls(t *testing.T) {
	p := newRPCPair(t, func(ctx context.Context, op byte, body []byte) ([]byte, error) {
		// Later requests finish first: replies are matched by id.
		n := binary.BigEndian.Uint64(body)
		time.Sleep(time.Duration(50-n) * time.Millisecond)
		return append([]byte{op}, body...), nil
	})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			r, err := p.client.call(withTimeout(t, 5*time.Second), opApply, u64(uint64(i)))
			if err != nil || r.class != classOK || r.body[0] != opApply || binary.BigEndian.Uint64(r.body[1:]) != uint64(i) {
				t.Errorf("call %d: got %v %v", i, r, err)
			}
		})
	}
	wg.Wait()
}

func TestRPCErrorClassesRoundTrip(t *testing.T) {
	cases := []struct {
		handler error
		want    error
		retry   bool // leaderDo may send it again
		maybe   bool // a write's fate is open: fsm.ErrMaybeApplied
	}{
		{fmt.Errorf("%w: refused", ErrNotLeader), ErrNotLeader, true, false},
		{fmt.Errorf("%w: write outcome unknown", ErrNoLeader), ErrNoLeader, false, true},
		{fmt.Errorf("%w: stopping", ErrShutdown), ErrNoLeader, false, true}, // the leader stops, not us
		{context.DeadlineExceeded, ErrNoLeader, false, true},
		{maybeApplied(errors.New("committed, result lost")), ErrNoLeader, false, true},
		{ErrNoRateLimiter, nil, false, false},
		{&fsm.FormatError{Feature: "set_state_format", Need: 2, Have: 1, Members: []string{"n3 (0.3.0)"}}, fsm.ErrFormat, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.handler.Error(), func(t *testing.T) {
			p := newRPCPair(t, func(context.Context, byte, []byte) ([]byte, error) { return nil, tc.handler })
			r, err := p.client.call(withTimeout(t, 5*time.Second), opApply, []byte{1, 0})
			if err != nil {
				t.Fatal(err)
			}
			got := replyError(opApply, r, "n9")
			if maybe := errors.Is(got, fsm.ErrMaybeApplied); maybe != tc.maybe {
				t.Fatalf("write %v: maybe applied %v, want %v", got, maybe, tc.maybe)
			}
			if read := replyError(opReadIndex, r, "n9"); errors.Is(read, fsm.ErrMaybeApplied) {
				t.Fatalf("a read's failure says a write may be applied: %v", read)
			}
			if tc.want != nil && !errors.Is(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if tc.want == nil && (errors.Is(got, ErrNoLeader) || errors.Is(got, ErrNotLeader)) {
				t.Fatalf("got %v, want a plain error", got)
			}
			if retry := errors.Is(got, ErrNotLeader); retry != tc.retry {
				t.Fatalf("retry: got %v, want %v", retry, tc.retry)
			}
			if want, ok := tc.handler.(*fsm.FormatError); ok {
				var fe *fsm.FormatError
				if !errors.As(got, &fe) || fe.Error() != want.Error() {
					t.Fatalf("got %v, want the leader's %v", got, want)
				}
			}
		})
	}
}

func TestRPCDrainSendsGoaway(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	p := newRPCPair(t, func(ctx context.Context, op byte, body []byte) ([]byte, error) {
		started.Add(1)
		<-release
		return []byte("done"), nil
	})
	// One request read and running when the server drains.
	first := make(chan error, 1)
	go func() {
		r, err := p.client.call(withTimeout(t, 5*time.Second), opApply, nil)
		if err == nil && string(r.body) != "done" {
			err = fmt.Errorf("reply %q", r.body)
		}
		first <- err
	}()
	for started.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.server.drain()
	// The client learns of the goaway; a call after it was never read.
	deadline := time.Now().Add(2 * time.Second)
	for p.client.usable() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := p.client.call(withTimeout(t, time.Second), opApply, nil); !errors.Is(err, errNotSent) {
		t.Fatalf("call after goaway: got %v, want errNotSent", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("request read before the drain: %v, want its reply", err)
	}
	if got := started.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want once", got)
	}
}

func TestRPCGoawayFailsUnreadRequestsAsNotSent(t *testing.T) {
	// A hand-written server reads request 1, then says goaway(1) and closes
	// without reading request 2.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	second := make(chan struct{})
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
		readFrame(r) // request 1
		<-second     // request 2 is on its way
		head := make([]byte, replHeader)
		binary.BigEndian.PutUint64(head, 1)
		head[8] = classGoaway
		writeFrame(w, head, nil)
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newRPCClient(conn)
	defer c.fail(errors.New("test over"))
	errs := make(chan error, 2)
	go func() { _, err := c.call(withTimeout(t, 5*time.Second), opApply, nil); errs <- err }()
	time.Sleep(50 * time.Millisecond)
	go func() { _, err := c.call(withTimeout(t, 5*time.Second), opApply, nil); errs <- err }()
	time.Sleep(50 * time.Millisecond)
	close(second)
	var notSent, unknown int
	for range 2 {
		switch err := <-errs; {
		case errors.Is(err, errNotSent):
			notSent++
		case err != nil:
			unknown++
		}
	}
	if notSent != 1 || unknown != 1 {
		t.Fatalf("got %d not sent and %d unknown, want one each", notSent, unknown)
	}
}

// gatedConn holds the client's reader back until open is closed, so that a
// test can make a write fail before the reader has seen what came in.
type gatedConn struct {
	net.Conn
	open chan struct{}
}

func (g *gatedConn) Read(b []byte) (int, error) {
	<-g.open
	return g.Conn.Read(b)
}

// A server that stops reading sends a goaway and closes with requests
// unread, which resets the connection: a later write can fail before the
// client's reader has taken in the goaway. The request that was sent but
// never read must still come back "not sent" (the sender tries the next
// leader), not "outcome unknown".
func TestRPCWriteFailureStillReadsTheGoaway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sent2, gone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(gone)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
		readFrame(r) // request 1, then goaway(1); request 2 stays unread
		head := make([]byte, replHeader)
		binary.BigEndian.PutUint64(head, 1)
		head[8] = classGoaway
		writeFrame(w, head, nil)
		<-sent2
		time.Sleep(20 * time.Millisecond) // request 2 is in the socket: closing resets
		conn.Close()
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedConn{Conn: conn, open: make(chan struct{})}
	c := newRPCClient(g)
	defer c.fail(errors.New("test over"))
	first := make(chan error, 1)
	go func() { _, err := c.call(withTimeout(t, 5*time.Second), opApply, nil); first <- err }()
	time.Sleep(20 * time.Millisecond)
	second := make(chan error, 1)
	go func() { _, err := c.call(withTimeout(t, 5*time.Second), opApply, nil); second <- err }()
	time.Sleep(20 * time.Millisecond)
	close(sent2)
	<-gone
	time.Sleep(20 * time.Millisecond) // the reset has come back
	if _, err := c.call(withTimeout(t, time.Second), opApply, nil); !errors.Is(err, errNotSent) {
		t.Fatalf("a call after the reset: %v, want errNotSent", err)
	}
	if c.usable() {
		t.Fatal("the connection is still used after a write failed")
	}
	close(g.open)
	if err := <-first; err == nil || errors.Is(err, errNotSent) {
		t.Fatalf("request 1 (read by the server): %v, want its fate unknown", err)
	}
	if err := <-second; !errors.Is(err, errNotSent) {
		t.Fatalf("request 2 (never read): %v, want errNotSent", err)
	}
}

func TestRPCSilentConnectionIsDropped(t *testing.T) {
	p := newRPCPair(t, func(ctx context.Context, op byte, body []byte) ([]byte, error) {
		time.Sleep(500 * time.Millisecond) // longer than the caller waits
		return nil, nil
	})
	_, err := p.client.call(withTimeout(t, 100*time.Millisecond), opReadIndex, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
	if p.client.usable() {
		t.Fatal("a connection that answered nothing is still used")
	}
}

func TestRPCRefusesOversizedFrames(t *testing.T) {
	var buf [4]byte
	binary.BigEndian.PutUint32(buf[:], maxFrame+1)
	r := bufio.NewReader(&fakeReader{data: buf[:]})
	if _, err := readFrame(r); err == nil {
		t.Fatal("oversized frame accepted")
	}
}

type fakeReader struct{ data []byte }

func (f *fakeReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, errors.New("eof")
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestReadIndexOnLeaderOnly(t *testing.T) {
	mc := newMCluster(t, 3, nil)
	_, fs := mc.roles()
	if _, err := fs[0].c.leaderReadIndex(t.Context()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("read index asked of a follower: got %v, want ErrNotLeader", err)
	}
	if _, err := fs[0].c.leaderApply(t.Context(), []byte{byte(1)}); err == nil {
		t.Fatal("a malformed command was proposed")
	}
}
