package node_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestSlowAndHugeRequestsCannotHoldANode: a client that sends its headers
// or its body too slowly is cut off, oversized headers are refused with
// 431, and the node keeps serving others meanwhile.
func TestSlowAndHugeRequestsCannotHoldANode(t *testing.T) {
	const headerTimeout, readTimeout = 300 * time.Millisecond, 600 * time.Millisecond
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) {
		cfg.HTTPReadHeaderTimeout, cfg.HTTPReadTimeout = headerTimeout, readTimeout
	}})
	addr := strings.TrimPrefix(c.URL(0), "http://")

	closedWithin := func(t *testing.T, conn net.Conn, limit time.Duration) {
		t.Helper()
		start := time.Now()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, conn) // returns when the server closes
		if err != nil {
			t.Fatalf("connection not closed by the server: %v", err)
		}
		if took := time.Since(start); took > limit {
			t.Fatalf("closed after %v, want within %v", took, limit)
		}
	}
	cases := []struct {
		name  string
		send  string // what the client sends, then it stalls
		limit time.Duration
	}{
		{"headers never finished", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", headerTimeout + time.Second},
		{"body never finished", "POST /oauth2/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ngrant_type=", readTimeout + time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tc.send); err != nil {
				t.Fatal(err)
			}
			// Others are served while this client stalls.
			resp, err := c.Client().Get(c.URL(0) + "/healthz")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("healthz while a client stalls: %v %v", resp, err)
			}
			resp.Body.Close()
			closedWithin(t, conn, tc.limit)
		})
	}
	t.Run("oversized headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		big := strings.Repeat("a", node.MaxHeaderBytes+4096)
		io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\n\r\n")
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", resp.StatusCode)
		}
	})
}
