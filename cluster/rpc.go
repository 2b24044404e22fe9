package cluster

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// The node-to-node RPC protocol, after the protocol byte 'F'. Requests and
// replies are frames: a 4-byte big-endian length, then
//
//	request: id uint64 | op byte    | timeout int64 (ns) | body
//	reply:   id uint64 | class byte | body
//
// One connection carries many calls at once; replies come back in any
// order and are matched by id, so one connection per leader is enough and
// concurrent callers share it.
const (
	opApply     byte = 1 // body: encoded command; reply: raft index uint64
	opReadIndex byte = 2 // body: empty; reply: read index uint64
	opRate      byte = 3 // body: key; reply: allowed byte | retry-after int64 (ns)
	opSuffrage  byte = 4 // body: voter byte | server id; reply: suffrageOK, suffrageUnknown or suffrageLeader
	// opAnnounce asks any node (not only the leader) what it runs. Body:
	// empty; reply: announceReply as JSON (announce.go). A release before
	// it (0.3.0) answers classOther, "cluster: unknown operation 5".
	opAnnounce byte = 5
)

// Reply classes: the outcome of a call, which the caller maps back to the
// package's sentinel errors. The body of a failed reply is a message.
const (
	classOK        byte = 0
	classNotLeader byte = 1 // nothing was done; ask the leader again
	classNoLeader  byte = 2 // no quorum, or leadership lost: a write's outcome is unknown
	classShutdown  byte = 3 // the leader is stopping
	classOther     byte = 4
	// classGoaway is not a reply but the server's last word before it
	// closes the connection: its id is the last request it read.
	classGoaway byte = 5
	// classFormat: the command needs a newer state format than the
	// leader's state holds; nothing was done. The body is the
	// *fsm.FormatError as JSON. A release before the gate reads it as
	// classOther, but never sends a command that could earn it.
	classFormat byte = 6
)

const (
	maxFrame          = 16 << 20
	defaultRPCTimeout = 10 * time.Second
	reqHeader         = 8 + 1 + 8
	replHeader        = 8 + 1
)

// errNotSent marks a failure before the request reached any server (dial
// or TLS failed, connection already known broken, the request's own frame
// not wholly written): repeating it is safe.
var errNotSent = errors.New("cluster: request not sent")

func readFrame(r *bufio.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, fmt.Errorf("cluster: frame of %d bytes", size)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// writeFrame writes one frame made of head and body and flushes it.
func writeFrame(w *bufio.Writer, head, body []byte) error {
	size := len(head) + len(body)
	if size > maxFrame {
		return fmt.Errorf("cluster: frame of %d bytes is larger than %d", size, maxFrame)
	}
	var n [4]byte
	// #nosec G115 -- size is at most maxFrame (16 MiB), checked above
	binary.BigEndian.PutUint32(n[:], uint32(size))
	w.Write(n[:])
	w.Write(head)
	w.Write(body)
	return w.Flush()
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// rpcClient is one multiplexed connection to another node.
type rpcClient struct {
	conn     net.Conn
	wmu      sync.Mutex // serializes frames on w
	w        *bufio.Writer
	lastRecv atomic.Int64 // unix nanos of the last frame received

	mu      sync.Mutex
	pending map[uint64]chan rpcReply
	next    uint64
	goaway  bool   // the server stops: no new calls on this connection
	last    uint64 // with goaway: the last request id the server read
	werr    error  // a request's frame could not be written: no new calls
	err     error  // why the connection broke; set once
	done    chan struct{}
}

type rpcReply struct {
	class byte
	body  []byte
}

func newRPCClient(conn net.Conn) *rpcClient {
	c := &rpcClient{conn: conn, w: bufio.NewWriter(conn), pending: make(map[uint64]chan rpcReply), done: make(chan struct{})}
	go c.readLoop()
	return c
}

func (c *rpcClient) readLoop() {
	r := bufio.NewReader(c.conn)
	for {
		buf, err := readFrame(r)
		if err == nil && len(buf) < replHeader {
			err = errors.New("cluster: short reply frame")
		}
		if err != nil {
			c.fail(err)
			return
		}
		c.lastRecv.Store(time.Now().UnixNano())
		id, class := binary.BigEndian.Uint64(buf), buf[8]
		if class == classGoaway {
			c.markGoaway(id)
			continue
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil { // nil: the caller gave up
			ch <- rpcReply{class: class, body: buf[replHeader:]}
		}
	}
}

// markGoaway records that the server read requests up to last and no more:
// the calls after it were never seen and fail as not sent.
func (c *rpcClient) markGoaway(last uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.goaway, c.last = true, last
	for id, ch := range c.pending {
		if id > last {
			ch <- rpcReply{class: classGoaway}
			delete(c.pending, id)
		}
	}
}

// fail marks the connection broken and closes it; waiting calls return.
func (c *rpcClient) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if c.werr != nil { // the reader timed out after a failed write: say why
		err = c.werr
	}
	c.err = err
	c.pending = nil
	close(c.done)
	c.conn.Close()
}

// writeFailGrace is how long the reader goes on after a write failed, to
// take in what the server sent before the connection broke.
const writeFailGrace = 500 * time.Millisecond

// failWrite ends the connection's use after a request's frame could not be
// written (the stream is broken mid-frame). It is not closed at once:
// what the server sent before it went away (replies, a goaway naming the
// last request it read) may still be waiting to be read, and the calls
// waiting on it learn their fate from that. Closing at once would turn a
// request the server never read into one whose outcome is unknown (a
// server that stops reading closes with requests unread, which resets the
// connection, so a write can fail before the reader has seen the goaway).
// The reader gets writeFailGrace, then the connection fails.
func (c *rpcClient) failWrite(err error) {
	c.mu.Lock()
	first := c.err == nil && c.werr == nil
	if first {
		c.werr = err
	}
	c.mu.Unlock()
	if first {
		c.conn.SetReadDeadline(time.Now().Add(writeFailGrace))
	}
}

// usable reports whether new calls may use the connection.
func (c *rpcClient) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && c.werr == nil && !c.goaway
}

// lost is the error of call id on a broken connection: not sent when the
// server said it stopped reading before id.
func (c *rpcClient) lost(id uint64, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goaway && id > c.last {
		return fmt.Errorf("%w: server stopping", errNotSent)
	}
	return err
}

// call sends one request and waits for its reply or the end of ctx. An
// error wrapping errNotSent means the server never read the request.
func (c *rpcClient) call(ctx context.Context, op byte, body []byte) (rpcReply, error) {
	ch := make(chan rpcReply, 1)
	c.mu.Lock()
	if c.err != nil || c.werr != nil || c.goaway {
		err := cmp.Or(c.err, c.werr)
		c.mu.Unlock()
		return rpcReply{}, fmt.Errorf("%w: connection closing (%v)", errNotSent, err)
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()

	head := make([]byte, reqHeader)
	binary.BigEndian.PutUint64(head, id)
	head[8] = op
	dl, _ := ctx.Deadline() // zero: none, and the server applies its default
	if !dl.IsZero() {
		binary.BigEndian.PutUint64(head[9:], uint64(max(time.Until(dl), time.Millisecond)))
	}
	sent := time.Now()
	c.wmu.Lock()
	c.conn.SetWriteDeadline(dl)
	err := writeFrame(c.w, head, body)
	c.wmu.Unlock()
	if err != nil {
		// Part of the frame may be on the wire, so the stream is lost; but
		// not all of it (a write that fails has not handed the frame's
		// last bytes to the socket, nor TLS its last record), and a server
		// acts only on a whole frame: this request was never read.
		c.failWrite(err)
		return rpcReply{}, fmt.Errorf("%w: %v", errNotSent, err)
	}
	select {
	case r := <-ch:
		return c.reply(r)
	case <-c.done:
		select {
		case r := <-ch: // the reply won the race with the failure
			return c.reply(r)
		default:
		}
		return rpcReply{}, c.lost(id, c.err)
	case <-ctx.Done():
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		// Nothing at all came back while we waited: the connection may be
		// dead without an RST (a partition). Drop it so that the next call
		// dials afresh instead of waiting on it too.
		if c.lastRecv.Load() < sent.UnixNano() {
			c.fail(fmt.Errorf("cluster: no reply within %v", time.Since(sent).Round(time.Millisecond)))
		}
		return rpcReply{}, ctx.Err()
	}
}

func (c *rpcClient) reply(r rpcReply) (rpcReply, error) {
	if r.class == classGoaway {
		return rpcReply{}, fmt.Errorf("%w: server stopping", errNotSent)
	}
	return r, nil
}

// rpcPool keeps one client per node address.
type rpcPool struct {
	dial func(ctx context.Context, addr string) (net.Conn, error)

	mu      sync.Mutex
	clients map[string]*poolSlot
	closed  bool
}

type poolSlot struct {
	ready  chan struct{} // closed when the dial ended
	client *rpcClient
	err    error
}

// get returns a healthy client for addr, dialing one if needed; concurrent
// callers share one dial. Dial failures wrap errNotSent.
func (p *rpcPool) get(ctx context.Context, addr string) (*rpcClient, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", errNotSent, ErrShutdown)
		}
		s := p.clients[addr]
		if s == nil {
			s = &poolSlot{ready: make(chan struct{})}
			if p.clients == nil {
				p.clients = make(map[string]*poolSlot)
			}
			p.clients[addr] = s
			p.mu.Unlock()
			p.connect(ctx, addr, s)
			if s.err != nil {
				return nil, s.err
			}
			return s.client, nil
		}
		p.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", errNotSent, ctx.Err())
		}
		if s.err == nil && s.client.usable() {
			return s.client, nil
		}
		p.drop(addr, s)
		if s.err != nil {
			return nil, s.err
		}
	}
}

func (p *rpcPool) connect(ctx context.Context, addr string, s *poolSlot) {
	conn, err := p.dial(ctx, addr)
	if err != nil {
		s.err = fmt.Errorf("%w: %w", errNotSent, err)
		p.drop(addr, s)
	} else {
		s.client = newRPCClient(conn)
		p.mu.Lock()
		if p.closed {
			s.client.fail(ErrShutdown)
		}
		p.mu.Unlock()
	}
	close(s.ready)
}

func (p *rpcPool) drop(addr string, s *poolSlot) {
	p.mu.Lock()
	if p.clients[addr] == s {
		delete(p.clients, addr)
	}
	p.mu.Unlock()
}

// close breaks every connection; later gets fail. It does not wait for
// dials under way (they end with their callers' contexts).
func (p *rpcPool) close() {
	p.mu.Lock()
	p.closed = true
	slots := p.clients
	p.clients = nil
	p.mu.Unlock()
	for _, s := range slots {
		select {
		case <-s.ready:
			if s.client != nil {
				s.client.fail(ErrShutdown)
			}
		default: // still dialing: connect sees closed and fails it
		}
	}
}

// rpcServer answers requests on accepted forwarding connections. Each
// request runs in its own goroutine, so slow calls (a write waiting for its
// commit) do not hold up the others and raft can batch them.
type rpcServer struct {
	handle func(ctx context.Context, op byte, body []byte) ([]byte, error)
	base   context.Context // cancelled when the node stops
	wg     sync.WaitGroup  // request goroutines

	mu       sync.Mutex
	conns    map[*serverConn]struct{}
	draining bool
}

type serverConn struct {
	conn     net.Conn
	wmu      sync.Mutex
	w        *bufio.Writer
	readDone chan struct{} // the reader stopped, and sent goaway if draining
}

func (sc *serverConn) write(head, body []byte) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	sc.conn.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	return writeFrame(sc.w, head, body)
}

// serveConn reads requests until the connection ends or the server
// drains, then waits for the replies of the requests it read.
func (s *rpcServer) serveConn(conn net.Conn) {
	sc := &serverConn{conn: conn, w: bufio.NewWriter(conn), readDone: make(chan struct{})}
	s.mu.Lock()
	draining := s.draining
	if !draining {
		if s.conns == nil {
			s.conns = make(map[*serverConn]struct{})
		}
		s.conns[sc] = struct{}{}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		conn.Close()
	}()
	var inflight sync.WaitGroup
	var last uint64
	r := bufio.NewReader(conn)
	for !draining {
		buf, err := readFrame(r)
		if err != nil || len(buf) < reqHeader {
			break
		}
		id, op := binary.BigEndian.Uint64(buf), buf[8]
		// #nosec G115 -- a value that wraps negative is caught by timeout <= 0 below; the peer is authenticated (mutual TLS)
		timeout := time.Duration(binary.BigEndian.Uint64(buf[9:]))
		if timeout <= 0 {
			timeout = defaultRPCTimeout
		}
		last = id
		inflight.Add(1)
		s.wg.Add(1) // wait() runs only after every serveConn returned
		go func() {
			defer s.wg.Done()
			defer inflight.Done()
			ctx, cancel := context.WithTimeout(s.base, timeout)
			defer cancel()
			body, err := s.handle(ctx, op, buf[reqHeader:])
			head := make([]byte, replHeader)
			binary.BigEndian.PutUint64(head, id)
			if err != nil {
				head[8], body = errorReply(err)
			}
			if sc.write(head, body) != nil {
				conn.Close() // the reader ends too
			}
		}()
	}
	s.mu.Lock()
	draining = s.draining
	s.mu.Unlock()
	if draining {
		// Tell the client which requests were read: it may send the
		// later ones to another node, as they never ran here.
		head := make([]byte, replHeader)
		binary.BigEndian.PutUint64(head, last)
		head[8] = classGoaway
		sc.write(head, nil)
	}
	close(sc.readDone)
	inflight.Wait()
}

// drain stops reading requests on every connection and tells each client
// the last request read (goaway). Requests already read still get their
// replies while the connections stay open.
func (s *rpcServer) drain() {
	s.mu.Lock()
	s.draining = true
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		sc.conn.SetReadDeadline(time.Now())
	}
	for _, sc := range conns {
		<-sc.readDone
	}
}

// classify maps a handler's error to the reply class.
func classify(err error) byte {
	switch {
	case errors.Is(err, ErrNotLeader):
		return classNotLeader
	case errors.Is(err, ErrShutdown):
		return classShutdown
	case errors.Is(err, ErrNoLeader), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, fsm.ErrMaybeApplied):
		return classNoLeader
	}
	return classOther
}

// errorReply is the class and body of a failed reply: the message, or a
// format refusal as JSON so that the proposer returns the same
// *fsm.FormatError its own gate would.
func errorReply(err error) (byte, []byte) {
	var fe *fsm.FormatError
	if errors.As(err, &fe) {
		if b, jerr := json.Marshal(fe); jerr == nil {
			return classFormat, b
		}
	}
	return classify(err), []byte(err.Error())
}

// replyError maps a failed reply to op from the node id back to an
// error. For a write, classNoLeader and classShutdown are the leader's
// word that its fate is open (leaderApply; a release before the gate
// means the same by them): the error wraps fsm.ErrMaybeApplied.
func replyError(op byte, r rpcReply, id string) error {
	err := classError(r, id)
	if op == opApply && (r.class == classNoLeader || r.class == classShutdown) {
		err = maybeApplied(err)
	}
	return err
}

func classError(r rpcReply, id string) error {
	msg := string(r.body)
	switch r.class {
	case classFormat:
		var fe fsm.FormatError
		if json.Unmarshal(r.body, &fe) == nil {
			return &fe
		}
	case classNotLeader:
		return fmt.Errorf("%w: %s: %s", ErrNotLeader, id, msg)
	case classNoLeader:
		return fmt.Errorf("%w: leader %s: %s", ErrNoLeader, id, msg)
	case classShutdown:
		// The leader is stopping, not this node: for the caller it is a
		// leader that went away.
		return fmt.Errorf("%w: leader %s is shutting down", ErrNoLeader, id)
	}
	return fmt.Errorf("cluster: leader %s: %s", id, msg)
}
