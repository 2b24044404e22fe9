package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Fetching the audit trail from a peer (fsm/DESIGN.md, "The audit trail",
// from format 3). A node that installs a format-3 snapshot lacks the
// events its sender had already moved out of the state into its own
// trail (fsm.FSM.TrailGap); it asks a peer for them with FetchTrail, and
// the peer streams its fsm.FSM.ExportTrail.
//
// A fetch has a connection of its own on the node-to-node listener
// (protocol byte protoTrail, inside the same mutual TLS as raft and the
// RPC, so a peer without the cluster key never reaches it), as a stream
// of any length must not share the multiplexed RPC's connections or its
// 16 MiB frames, and is never buffered whole. On the connection:
//
//	request: "TRL1" | from uint64 | to uint64 (big-endian)
//	answer:  trailOK, then the trail stream until the server closes;
//	         or trailRefused | length uint16 | message, then close.
//
// The answer comes with the first bytes of the stream (the export
// buffers them), so a refusal found before any was written (the range is
// not held here, no trail, out of bounds) is told apart from a stream cut
// short; a cut stream fails the importer's check of its end.
//
// A release before it reads the protocol byte, refuses the connection
// and closes it: the asker sees an error and asks the next peer.

// protoTrail: a connection that carries one trail fetch.
const protoTrail byte = 'T'

const (
	trailMagic = "TRL1"
	trailReq   = len(trailMagic) + 8 + 8

	trailOK      byte = 0
	trailRefused byte = 1

	// MaxTrailSpan bounds the events one fetch may ask for: the gap of a
	// node is the events its peer's trail holds below the snapshot's
	// staging, at most the retention's (90 days of a busy site is a few
	// tens of millions); a request past it is refused.
	MaxTrailSpan = 1 << 27
	// trailIdle bounds how long a fetch waits for the next bytes (or a
	// server for the asker to read them): a frozen peer costs no more.
	trailIdle = 30 * time.Second
	// trailFetchTimeout bounds one fetch from one peer, whatever its pace.
	trailFetchTimeout = 30 * time.Minute
	// trailServing bounds the exports a node serves at once; more are
	// refused (the asker tries another peer, or again later).
	trailServing = 2
)

// ErrTrailRefused: the peer asked answered that it does not serve the
// range (it does not hold all of it, keeps no trail, is stopping or
// busy), or it does not know the fetch (an older release). The asker may
// ask another peer. FetchTrail's error wraps it when every peer refused.
var ErrTrailRefused = errors.New("cluster: the peer does not serve that audit trail range")

// ErrNoTrailPeer: no other member to ask (a single node).
var ErrNoTrailPeer = errors.New("cluster: no peer to fetch the audit trail from")

// checkTrailRange is the bound on what a fetch may ask.
func checkTrailRange(from, to uint64) error {
	switch {
	case from == 0:
		return errors.New("the first seq is 1")
	case from > to:
		return fmt.Errorf("from %d is past to %d", from, to)
	case to-from >= MaxTrailSpan:
		return fmt.Errorf("%d events are more than one fetch may ask (%d)", to-from+1, MaxTrailSpan)
	}
	return nil
}

// trailServer is the serving side's state.
type trailServer struct {
	busy atomic.Int32
}

// deadlineConn sets the deadline of its direction before each read or
// write: trailIdle from now.
type deadlineConn struct{ net.Conn }

func (d deadlineConn) Write(p []byte) (int, error) {
	d.SetWriteDeadline(time.Now().Add(trailIdle))
	return d.Conn.Write(p)
}

func (d deadlineConn) Read(p []byte) (int, error) {
	d.SetReadDeadline(time.Now().Add(trailIdle))
	return d.Conn.Read(p)
}

// lazyOK writes trailOK before the first byte of the stream.
type lazyOK struct {
	w     io.Writer
	wrote bool
}

func (l *lazyOK) Write(p []byte) (int, error) {
	if !l.wrote {
		l.wrote = true
		if _, err := l.w.Write([]byte{trailOK}); err != nil {
			return 0, err
		}
	}
	return l.w.Write(p)
}

// serveTrail answers one fetch on conn (protoTrail) and closes it.
func (c *Cluster) serveTrail(conn net.Conn) {
	defer conn.Close()
	dc := deadlineConn{conn}
	var req [trailReq]byte
	conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	if _, err := io.ReadFull(conn, req[:]); err != nil || string(req[:4]) != trailMagic {
		c.log.Warn("refused an audit trail fetch", "remote", conn.RemoteAddr().String(), "error", "not a fetch request")
		return
	}
	from, to := binary.BigEndian.Uint64(req[4:12]), binary.BigEndian.Uint64(req[12:20])
	refuse := func(why string) {
		c.log.Debug("refused an audit trail fetch", "remote", conn.RemoteAddr().String(), "from", from, "to", to, "reason", why)
		if len(why) > 1000 {
			why = why[:1000]
		}
		msg := append([]byte{trailRefused}, binary.BigEndian.AppendUint16(nil, uint16(len(why)))...) // #nosec G115 -- at most 1000
		dc.Write(append(msg, why...))
	}
	if err := checkTrailRange(from, to); err != nil {
		refuse(err.Error())
		return
	}
	select {
	case <-c.stopped:
		refuse(c.cfg.NodeID + " is stopping")
		return
	default:
	}
	if n := c.trail.busy.Add(1); n > trailServing {
		c.trail.busy.Add(-1)
		refuse(fmt.Sprintf("%s serves %d fetches already", c.cfg.NodeID, trailServing))
		return
	}
	defer c.trail.busy.Add(-1)
	export := c.cfg.exportTrail
	if export == nil {
		if c.fsm == nil {
			refuse("no state")
			return
		}
		export = c.fsm.ExportTrail
	}
	lw := &lazyOK{w: dc}
	start := time.Now()
	err := export(lw, from, to)
	switch {
	case err != nil && !lw.wrote:
		refuse(err.Error())
	case err != nil:
		// Cut short: the asker's import finds no end and keeps nothing.
		c.log.Warn("an audit trail fetch failed midway", "remote", conn.RemoteAddr().String(), "from", from, "to", to, "error", err)
	case !lw.wrote:
		refuse("empty export") // never: a stream has its magic and end
	default:
		c.log.Debug("served an audit trail fetch", "remote", conn.RemoteAddr().String(), "from", from, "to", to, "took", time.Since(start))
	}
}

// FetchTrail asks a peer for the events from seq from to seq to (both
// included) of the audit trail, and hands the stream to into (which reads
// it to its end, fsm.FSM.ImportTrail): the leader first, then the other
// voters, then the non-voters, each in turn until into returns nil. A
// peer that refuses (ErrTrailRefused), cannot be reached, or whose
// stream into refuses is passed over for the next. The error names every
// peer's failure, and wraps ErrTrailRefused when every peer refused,
// ErrNoTrailPeer when there was none to ask.
func (c *Cluster) FetchTrail(ctx context.Context, from, to uint64, into func(io.Reader) error) error {
	if err := checkTrailRange(from, to); err != nil {
		return fmt.Errorf("cluster: fetch audit trail: %w", err)
	}
	peers, err := c.trailPeers()
	if err != nil {
		return err
	}
	if len(peers) == 0 {
		return ErrNoTrailPeer
	}
	var errs []error
	refused := true
	for _, p := range peers {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := c.fetchTrailFrom(ctx, p, from, to, into)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrTrailRefused) {
			refused = false
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.ID, err))
	}
	err = errors.Join(errs...)
	if refused {
		return fmt.Errorf("cluster: fetch audit trail %d-%d: %w", from, to, err)
	}
	return fmt.Errorf("cluster: fetch audit trail %d-%d: %v", from, to, err)
}

// trailPeers are the members to ask, in order: the leader, the voters,
// the non-voters; never this node.
func (c *Cluster) trailPeers() ([]raft.Server, error) {
	servers, err := c.Members()
	if err != nil {
		return nil, err
	}
	_, leader := c.Leader()
	var first, voters, others []raft.Server
	for _, s := range servers {
		switch {
		case string(s.ID) == c.cfg.NodeID:
		case string(s.ID) == leader:
			first = append(first, s)
		case s.Suffrage == raft.Voter:
			voters = append(voters, s)
		default:
			others = append(others, s)
		}
	}
	return append(append(first, voters...), others...), nil
}

// fetchTrailFrom is one fetch from s.
func (c *Cluster) fetchTrailFrom(ctx context.Context, s raft.Server, from, to uint64, into func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, trailFetchTimeout)
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, handshakeTimeout)
	conn, err := c.stream.dialNode(dctx, string(s.Address), protoTrail)
	dcancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	dc := deadlineConn{conn}
	req := append([]byte(trailMagic), binary.BigEndian.AppendUint64(nil, from)...)
	req = binary.BigEndian.AppendUint64(req, to)
	if _, err := dc.Write(req); err != nil {
		return err
	}
	br := bufio.NewReaderSize(dc, 64<<10)
	class, err := br.ReadByte()
	if err != nil {
		// An older release closes a connection it does not know.
		return fmt.Errorf("%w: no answer (%v)", ErrTrailRefused, err)
	}
	switch class {
	case trailOK:
	case trailRefused:
		var n [2]byte
		if _, err := io.ReadFull(br, n[:]); err != nil {
			return fmt.Errorf("%w: %v", ErrTrailRefused, err)
		}
		msg := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(br, msg); err != nil {
			return fmt.Errorf("%w: %v", ErrTrailRefused, err)
		}
		return fmt.Errorf("%w: %s", ErrTrailRefused, msg)
	default:
		return fmt.Errorf("cluster: fetch audit trail: answer %d", class)
	}
	n := &countReader{r: br}
	err = into(n)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, ctx.Err())
	}
	if err == nil {
		c.log.Debug("fetched the audit trail", "from", from, "to", to, "peer", string(s.ID), "bytes", n.n)
	}
	return err
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
