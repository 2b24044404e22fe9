package testcluster

import (
	"net"
	"os"
	"sync"
	"time"
)

// delayConn is a connection over a link with one-way latency d: what this
// side writes is handed to the network d later, and what arrives is handed
// to the reader d after it arrived, so a request and its answer take 2d
// more, as between two sites. Order is kept. Writes do not block (up to
// maxQueued chunks); read deadlines are honoured, write deadlines are not
// (nothing waits on a write).
type delayConn struct {
	net.Conn
	d time.Duration

	out  chan chunk
	in   chan chunk
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	werr     error     // the first failed write, returned by the next Write
	rest     []byte    // what the last Read left of its chunk
	deadline time.Time // read deadline
}

type chunk struct {
	at  time.Time
	b   []byte
	err error // the read side's end
}

const maxQueued = 4096

func newDelayConn(c net.Conn, d time.Duration) *delayConn {
	dc := &delayConn{Conn: c, d: d, out: make(chan chunk, maxQueued), in: make(chan chunk, maxQueued), done: make(chan struct{})}
	go dc.sendLoop()
	go dc.recvLoop()
	return dc
}

func (c *delayConn) sendLoop() {
	for {
		select {
		case <-c.done:
			return
		case ch := <-c.out:
			wait(ch.at, c.done)
			if _, err := c.Conn.Write(ch.b); err != nil {
				c.mu.Lock()
				if c.werr == nil {
					c.werr = err
				}
				c.mu.Unlock()
				return
			}
		}
	}
}

func (c *delayConn) recvLoop() {
	for {
		buf := make([]byte, 32<<10)
		n, err := c.Conn.Read(buf)
		now := time.Now()
		if n > 0 {
			select {
			case c.in <- chunk{at: now.Add(c.d), b: buf[:n]}:
			case <-c.done:
				return
			}
		}
		if err != nil {
			select {
			case c.in <- chunk{at: now.Add(c.d), err: err}:
			case <-c.done:
			}
			return
		}
	}
}

// wait sleeps until at, or until done closes.
func wait(at time.Time, done <-chan struct{}) {
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		}
	}
}

func (c *delayConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	err := c.werr
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	select {
	case c.out <- chunk{at: time.Now().Add(c.d), b: append([]byte(nil), p...)}:
		return len(p), nil
	case <-c.done:
		return 0, net.ErrClosed
	}
}

func (c *delayConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.rest) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		c.mu.Unlock()
		return n, nil
	}
	deadline := c.deadline
	c.mu.Unlock()
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case ch := <-c.in:
		wait(ch.at, c.done)
		if ch.err != nil {
			c.in <- ch // every later Read sees the end too
			return 0, ch.err
		}
		n := copy(p, ch.b)
		c.mu.Lock()
		c.rest = ch.b[n:]
		c.mu.Unlock()
		return n, nil
	case <-timeout:
		return 0, os.ErrDeadlineExceeded
	case <-c.done:
		return 0, net.ErrClosed
	}
}

func (c *delayConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *delayConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}

func (c *delayConn) SetWriteDeadline(time.Time) error { return nil }

func (c *delayConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}
