package httpx

import (
	"net"
	"net/netip"
	"time"

	"github.com/pires/go-proxyproto"
)

// ProxyHeaderTimeout bounds how long a new connection may take to send
// its PROXY header (or, from anyone else, its first bytes, which the
// listener reads to refuse a PROXY header there) before it is closed.
const ProxyHeaderTimeout = 5 * time.Second

// ProxyProtocolListener wraps ln for --proxy-header proxy-protocol: a
// connection from one of trusted must begin with a PROXY protocol v1 or v2
// header, and its RemoteAddr is then the client the header names; a
// connection from anyone else must not have one. Either mistake closes the
// connection before any HTTP is read, so neither a client that writes its
// own PROXY header nor a balancer configured without send-proxy can
// decide an address. A header with the LOCAL command (a balancer's own
// health check, or v1's UNKNOWN) leaves the balancer's address. Headers
// are parsed by go-proxyproto; TLS, when the node has it, starts after
// the header, so a balancer in TCP mode passes TLS through to the node.
func ProxyProtocolListener(ln net.Listener, trusted []netip.Prefix) net.Listener {
	return &proxyproto.Listener{
		Listener:          ln,
		ReadHeaderTimeout: ProxyHeaderTimeout,
		ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
			if a, ok := addrOf(o.Upstream.String()); ok && isTrusted(a, trusted) {
				return proxyproto.REQUIRE, nil
			}
			return proxyproto.REJECT, nil
		},
	}
}
