package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// serving makes a node serve trail fetches with export instead of its
// state machine's ExportTrail.
func serving(id string, export func(w io.Writer, from, to uint64) error) func(*Config) {
	return on(id, func(c *Config) { c.exportTrail = export })
}

func refusing(calls *atomic.Int32, why string) func(io.Writer, uint64, uint64) error {
	return func(io.Writer, uint64, uint64) error {
		calls.Add(1)
		return errors.New(why)
	}
}

func streaming(calls *atomic.Int32, body string) func(io.Writer, uint64, uint64) error {
	return func(w io.Writer, from, to uint64) error {
		calls.Add(1)
		_, err := fmt.Fprintf(w, "%s %d-%d", body, from, to)
		return err
	}
}

func readAllInto(got *string) func(io.Reader) error {
	return func(r io.Reader) error {
		b, err := io.ReadAll(r)
		*got = string(b)
		return err
	}
}

// TestTrailFetchBounds: a request out of bounds (from 0, from past to, a
// span past MaxTrailSpan) is refused by the client before it dials, and
// by the server when a client sends it anyway, with ErrTrailRefused and
// without the export being asked.
func TestTrailFetchBounds(t *testing.T) {
	var calls atomic.Int32
	mc := newMCluster(t, 2, nil, serving("n1", streaming(&calls, "n1")), serving("n2", streaming(&calls, "n2")))
	a, b := mc.nodes[0], mc.nodes[1]
	bad := [][2]uint64{{0, 5}, {6, 5}, {1, MaxTrailSpan + 1}, {10, 10 + MaxTrailSpan}}
	for _, r := range bad {
		if err := a.c.FetchTrail(withTimeout(t, 5*time.Second), r[0], r[1], func(io.Reader) error {
			t.Fatal("into called")
			return nil
		}); err == nil {
			t.Fatalf("FetchTrail(%d, %d) asked", r[0], r[1])
		}
		err := a.c.fetchTrailFrom(withTimeout(t, 5*time.Second), raft.Server{ID: raft.ServerID(b.id), Address: raft.ServerAddress(b.addr)}, r[0], r[1],
			func(io.Reader) error {
				t.Fatal("into called")
				return nil
			})
		if !errors.Is(err, ErrTrailRefused) {
			t.Fatalf("server's answer to %d-%d: %v, want ErrTrailRefused", r[0], r[1], err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the export was asked %d times for requests out of bounds", n)
	}
	// The largest span allowed is served.
	var got string
	if err := a.c.FetchTrail(withTimeout(t, 5*time.Second), 1, MaxTrailSpan, readAllInto(&got)); err != nil || got != fmt.Sprintf("n2 1-%d", MaxTrailSpan) {
		t.Fatalf("fetch of the largest span: %q, %v", got, err)
	}
}

// TestTrailFetchFallsBack: the leader is asked first; a refusal (the
// range not held there) and a stream the importer refuses each send the
// client to the next peer; when every peer refuses, the error wraps
// ErrTrailRefused and names each.
func TestTrailFetchFallsBack(t *testing.T) {
	var c1, c2, c3 atomic.Int32
	var leaderServes, n3Refuses atomic.Bool
	export3 := func(w io.Writer, from, to uint64) error {
		if n3Refuses.Load() {
			return refusing(&c3, "no trail either")(w, from, to)
		}
		return streaming(&c3, "n3")(w, from, to)
	}
	export1 := func(w io.Writer, from, to uint64) error {
		if leaderServes.Load() {
			return streaming(&c1, "n1")(w, from, to)
		}
		return refusing(&c1, "this replica keeps 9-20")(w, from, to)
	}
	mc := newMCluster(t, 3, nil,
		on("n1", func(c *Config) { c.exportTrail = export1 }),
		serving("n2", refusing(&c2, "no trail")),
		serving("n3", export3),
		// n1 leads: the others never stand first.
		on("n2", func(c *Config) { c.ElectionTimeout, c.HeartbeatTimeout = 5*time.Second, 5*time.Second }),
		on("n3", func(c *Config) { c.ElectionTimeout, c.HeartbeatTimeout = 5*time.Second, 5*time.Second }),
	)
	leader, _ := mc.roles()
	var asker *mnode
	for _, n := range mc.nodes {
		if n != leader && n.id != "n3" {
			asker = n
		}
	}
	if asker == nil {
		asker = mc.nodes[2] // n2 leads: n3 asks n2 (refuses), then n1 (refuses unless asked to serve)
	}
	t.Logf("leader %s, asker %s", leader.id, asker.id)

	var got string
	err := asker.c.FetchTrail(withTimeout(t, 10*time.Second), 1, 8, readAllInto(&got))
	switch asker.id {
	case "n2", "n1":
		if err != nil || got != "n3 1-8" {
			t.Fatalf("fetch: %q, %v; want n3's stream", got, err)
		}
	case "n3":
		if err == nil || !errors.Is(err, ErrTrailRefused) {
			t.Fatalf("fetch from n1 and n2, both refusing: %v", err)
		}
	}
	if leader.id == "n1" && c1.Load() != 1 {
		t.Fatalf("the leader n1 was asked %d times, want once, first", c1.Load())
	}

	// An importer that refuses the stream (another history): the next
	// peer is asked.
	leaderServes.Store(true)
	c1.Store(0)
	c2.Store(0)
	c3.Store(0)
	var tries []string
	err = asker.c.FetchTrail(withTimeout(t, 10*time.Second), 3, 4, func(r io.Reader) error {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		tries = append(tries, string(b))
		if len(tries) == 1 {
			return errors.New("import: another history")
		}
		return nil
	})
	if err != nil || len(tries) != 2 {
		t.Fatalf("fetch after a refused stream: %v, tries %q", err, tries)
	}
	if !strings.HasPrefix(tries[0], leader.id+" ") {
		t.Fatalf("first stream from %q, want the leader %s", tries[0], leader.id)
	}

	// Every peer refuses: the error says so and names them.
	leaderServes.Store(false)
	n3Refuses.Store(true)
	err = asker.c.FetchTrail(withTimeout(t, 10*time.Second), 1, 2, readAllInto(&got))
	if !errors.Is(err, ErrTrailRefused) {
		t.Fatalf("every peer refusing: %v, want ErrTrailRefused", err)
	}
	for _, n := range mc.nodes {
		if n != asker && !strings.Contains(err.Error(), n.id+":") {
			t.Fatalf("the error does not name %s: %v", n.id, err)
		}
	}
}

// TestTrailFetchNeedsTheClusterKey: a fetch without the cluster's TLS
// (plain TCP, or TLS with a certificate of another key) is refused on
// the handshake: nothing is exported and nothing comes back.
func TestTrailFetchNeedsTheClusterKey(t *testing.T) {
	var calls atomic.Int32
	mc := newMCluster(t, 1, nil, serving("n1", streaming(&calls, "secret")))
	n := mc.nodes[0]
	req := append([]byte{protoTrail}, []byte(trailMagic)...)
	req = append(req, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9)

	// Plain TCP: the protocol byte and request are not TLS.
	conn, err := net.DialTimeout("tcp", n.addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write(req)
	conn.SetReadDeadline(time.Now().Add(handshakeTimeout + 5*time.Second))
	b, _ := io.ReadAll(conn)
	conn.Close()
	if bytes.Contains(b, []byte("secret")) {
		t.Fatalf("plain TCP got the stream: %q", b)
	}

	// TLS with another key's certificate.
	sl, err := newStreamLayer(&Config{NodeID: "intruder", RaftAddr: "127.0.0.1:0", Transport: TransportConfig{ClusterKey: wrongKey}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	bad := &Cluster{stream: sl, log: slog.New(slog.DiscardHandler), cfg: Config{NodeID: "intruder"}}
	err = bad.fetchTrailFrom(withTimeout(t, 5*time.Second), raft.Server{ID: "n1", Address: raft.ServerAddress(n.addr)}, 1, 9, func(r io.Reader) error {
		b, _ := io.ReadAll(r)
		return fmt.Errorf("into called with %q", b)
	})
	if err == nil || strings.Contains(err.Error(), "into called") {
		t.Fatalf("fetch with another key: %v", err)
	}
	if c := calls.Load(); c != 0 {
		t.Fatalf("the export ran %d times for unauthenticated askers", c)
	}

	// The node itself still serves its cluster: a single node has no
	// peer to ask.
	if err := n.c.FetchTrail(context.Background(), 1, 9, readAllInto(new(string))); !errors.Is(err, ErrNoTrailPeer) {
		t.Fatalf("a single node's fetch: %v, want ErrNoTrailPeer", err)
	}
}
