package main

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/fsm"
)

// forwardFrame is the forwarding protocol's request to apply cmd, as
// cluster/rpc.go lays it out: the protocol byte 'F', then a frame of
// length | id | op (1 = apply) | timeout | body.
func forwardFrame(cmd fsm.Command) []byte {
	body := cmd.Encode()
	frame := make([]byte, 4+8+1+8, 4+8+1+8+len(body))
	binary.BigEndian.PutUint32(frame[0:4], uint32(8+1+8+len(body)))
	binary.BigEndian.PutUint64(frame[4:12], 1)
	frame[12] = 1
	binary.BigEndian.PutUint64(frame[13:21], uint64(5*time.Second))
	return append([]byte{'F'}, append(frame, body...)...)
}

// TestRaftPortTakesNoUnauthenticatedInput: the review's attack on a node
// started with the defaults (no --cluster-key): one forwarding frame to
// the raft port that replaces the admin token's hash. Sent in plain TCP,
// and again over TLS with a certificate of no cluster, it changes
// nothing: the real token still works and the attacker's gets 401. The
// node generated its cluster key at first start, mode 0600.
func TestRaftPortTakesNoUnauthenticatedInput(t *testing.T) {
	n := startDefaultNode(t)
	if n.token == "" {
		t.Fatal("no generated admin token")
	}
	fi, err := os.Stat(filepath.Join(n.dir, "data", "cluster-key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated cluster key: %v, mode %v; want a 0600 file", err, fi)
	}
	attacker := "attacker-token-attacker-token-attacker-token"
	frame := forwardFrame(fsm.MustCommand(fsm.TypeSetAdminToken, fsm.SetAdminToken{Hash: admin.HashToken(attacker)}))

	send := func(t *testing.T, wrap func(net.Conn) net.Conn) {
		t.Helper()
		raw, err := net.Dial("tcp", n.raftAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		conn := wrap(raw)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write(frame)
		// Whatever comes back, it is not a reply frame: the node closes.
		b, _ := bufio.NewReader(conn).Peek(13)
		if len(b) >= 13 && b[12] == 0 {
			t.Fatalf("the node answered the frame with an OK reply: % x", b)
		}
	}
	t.Run("plaintext", func(t *testing.T) { send(t, func(c net.Conn) net.Conn { return c }) })
	t.Run("TLS without the cluster key", func(t *testing.T) {
		send(t, func(c net.Conn) net.Conn {
			// #nosec G402 -- the attacker does not verify the node; the node must verify the attacker
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
			tc.Handshake()
			return tc
		})
	})
	time.Sleep(500 * time.Millisecond) // an applied write would be visible by now
	if got := n.adminCodeWith(t, n.token); got != 200 {
		t.Fatalf("the real admin token: got %d, want 200", got)
	}
	if got := n.adminCodeWith(t, attacker); got != 401 {
		t.Fatalf("the attacker's token: got %d, want 401", got)
	}
}
