package httpx

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// serveClientAddr serves ClientAddr of every request on a PROXY protocol
// listener on 127.0.0.1 trusting trusted, until the test ends.
func serveClientAddr(t *testing.T, trusted string) string {
	t.Helper()
	prefixes, err := ParseTrustedProxies(trusted)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, ClientAddr(r))
	})}
	go srv.Serve(ProxyProtocolListener(ln, prefixes))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// askWith sends preamble, then one HTTP request, on a new connection to
// addr, and returns the body, or "" when the server closed the
// connection without answering.
func askWith(t *testing.T, addr string, preamble []byte) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append(preamble, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"...)); err != nil {
		return ""
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func proxyHeader(t *testing.T, version byte, cmd proxyproto.ProtocolVersionAndCommand, src string) []byte {
	t.Helper()
	h := &proxyproto.Header{Version: version, Command: cmd, TransportProtocol: proxyproto.TCPv4,
		SourceAddr:      &net.TCPAddr{IP: net.ParseIP(src), Port: 40000},
		DestinationAddr: &net.TCPAddr{IP: net.ParseIP("203.0.113.1"), Port: 443}}
	if cmd == proxyproto.LOCAL {
		h.TransportProtocol = proxyproto.UNSPEC
	}
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProxyProtocolListener: a trusted proxy must send a PROXY header and
// is believed; anyone else must not send one; a LOCAL header (a health
// check) leaves the proxy's own address.
func TestProxyProtocolListener(t *testing.T) {
	trustedAddr := serveClientAddr(t, "127.0.0.1/32") // our dialer leaves from 127.0.0.1
	untrustedAddr := serveClientAddr(t, "192.0.2.0/24")
	cases := []struct {
		name     string
		addr     string
		preamble []byte
		want     string // the body; "" for a connection closed unanswered
		prefix   bool   // want is the start of the body (a port follows)
	}{
		{"trusted, v2", trustedAddr, proxyHeader(t, 2, proxyproto.PROXY, "198.51.100.7"), "198.51.100.7:40000", false},
		{"trusted, v1", trustedAddr, proxyHeader(t, 1, proxyproto.PROXY, "198.51.100.8"), "198.51.100.8:40000", false},
		{"trusted, v2 LOCAL (health check): the proxy itself", trustedAddr, proxyHeader(t, 2, proxyproto.LOCAL, ""), "127.0.0.1:", true},
		{"trusted without a header: refused", trustedAddr, nil, "", false},
		{"trusted, a garbled header: refused", trustedAddr, []byte("PROXY TCP4 1.2.3\r\n"), "", false},
		{"untrusted with a v2 header: refused", untrustedAddr, proxyHeader(t, 2, proxyproto.PROXY, "198.51.100.9"), "", false},
		{"untrusted with a v1 header: refused", untrustedAddr, proxyHeader(t, 1, proxyproto.PROXY, "198.51.100.9"), "", false},
		{"untrusted without a header: its own address", untrustedAddr, nil, "127.0.0.1:", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := askWith(t, c.addr, c.preamble)
			if c.prefix && strings.HasPrefix(got, c.want) && c.want != "" || got == c.want {
				return
			}
			t.Fatalf("got %q, want %q", got, c.want)
		})
	}
}
