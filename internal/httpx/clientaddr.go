package httpx

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The client's address is decided in one place: ClientAddr. Every per-IP
// rule (rate limits, lockouts, text-message limits, the admin token guard)
// and every log line that names a client uses it.
//
// Behind a load balancer every connection comes from the balancer, so the
// address must come from what the balancer says, but only when the
// connection itself comes from a proxy the operator trusts
// (--trusted-proxies): anyone else could say it. And only in the one way
// the operator names (--proxy-header, ProxyHeader): a balancer writes one
// header and passes the others through untouched, so a client could write
// a header the balancer does not (a Forwarded header through HAProxy's
// option forwardfor) and name itself. With a header, the client is the
// right-most address of the chain that is not a trusted proxy (each proxy
// appends the address it saw; only the entries added by trusted proxies
// can be believed). With the PROXY protocol the balancer names the client
// before the first byte of HTTP (ProxyProtocolListener) and headers name
// nothing.

// ProxyHeader is how a trusted proxy names the client (--proxy-header).
type ProxyHeader string

// The ways a trusted proxy may name the client.
const (
	// ProxyXForwardedFor: the X-Forwarded-For header (HAProxy's option
	// forwardfor, nginx's $proxy_add_x_forwarded_for); the default.
	ProxyXForwardedFor ProxyHeader = "x-forwarded-for"
	// ProxyForwarded: the for= parameters of RFC 7239's Forwarded header.
	ProxyForwarded ProxyHeader = "forwarded"
	// ProxyProtocol: a PROXY protocol v1 or v2 header at the start of each
	// connection (ProxyProtocolListener); HTTP headers name nothing.
	ProxyProtocol ProxyHeader = "proxy-protocol"
)

// ParseProxyHeader parses a --proxy-header value; empty is the default,
// ProxyXForwardedFor.
func ParseProxyHeader(s string) (ProxyHeader, error) {
	switch h := ProxyHeader(strings.ToLower(strings.TrimSpace(s))); h {
	case "":
		return ProxyXForwardedFor, nil
	case ProxyXForwardedFor, ProxyForwarded, ProxyProtocol:
		return h, nil
	}
	return "", fmt.Errorf("unknown way %q (want %s, %s or %s)", s, ProxyXForwardedFor, ProxyForwarded, ProxyProtocol)
}

type clientAddrKey struct{}

// ClientAddr is the address of the client that sent r, as "host:port"
// or a bare host: what TrustedProxies decided, else the connection's peer.
func ClientAddr(r *http.Request) string {
	if a, ok := r.Context().Value(clientAddrKey{}).(string); ok {
		return a
	}
	return r.RemoteAddr
}

// ParseTrustedProxies parses comma-separated CIDRs or addresses (a bare
// address is its own /32 or /128).
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, err
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, err
		}
		out = append(out, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked())
	}
	return out, nil
}

// TrustedProxies decides each request's client address (ClientAddr) when
// its connection comes from one of trusted: from the header way names
// (ProxyXForwardedFor or ProxyForwarded; the other header is ignored),
// or, when that header is absent, the proxy itself (a balancer's own
// health check). A chain that does not name a client (malformed, or an
// unknown or obfuscated hop where the client should be) is refused with
// 400: mapping it to the balancer's address would put every such client
// in one shared bucket. With ProxyProtocol, or no trusted proxies, it
// changes nothing: the connection's address is the client's (the
// listener has already replaced it with the PROXY header's).
func TrustedProxies(trusted []netip.Prefix, way ProxyHeader) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if len(trusted) == 0 || way == ProxyProtocol {
			return next
		}
		header := "X-Forwarded-For"
		if way == ProxyForwarded {
			header = "Forwarded"
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a, err := clientFromHeader(r, trusted, header)
			if err != nil {
				WriteError(w, r, http.StatusBadRequest, CodeBadRequest, err.Error())
				return
			}
			if a != "" {
				r = r.WithContext(context.WithValue(r.Context(), clientAddrKey{}, a))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// clientFromHeader is the client address that header of r names: "" when
// the peer is not trusted or sent no such header (the peer is then the
// client), an error when a trusted peer's header names no client.
func clientFromHeader(r *http.Request, trusted []netip.Prefix, header string) (string, error) {
	peer, ok := addrOf(r.RemoteAddr)
	if !ok || !isTrusted(peer, trusted) {
		return "", nil
	}
	values := r.Header.Values(header)
	if len(values) == 0 {
		return "", nil
	}
	var chain []string
	if header == "Forwarded" {
		chain = forwardedFor(strings.Join(values, ","))
	} else {
		chain = xForwardedFor(strings.Join(values, ","))
	}
	// Right to left: the first address that is not a trusted proxy.
	for i := len(chain) - 1; i >= 0; i-- {
		a, ok := addrOf(chain[i])
		if !ok {
			// A hop that names no address (malformed, obfuscated,
			// unknown) where the client should be: nothing left of it
			// can be believed, and the client is not known. (What the
			// client wrote left of its own address is never reached.)
			return "", fmt.Errorf("the %s header from the load balancer names no client address", header)
		}
		if i == 0 || !isTrusted(a, trusted) {
			return netip.AddrPortFrom(a, 0).String(), nil
		}
	}
	return "", nil // unreachable: i == 0 returns
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// addrOf parses "ip", "ip:port", "[ipv6]" or "[ipv6]:port".
func addrOf(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// xForwardedFor splits "client, proxy1, proxy2"; an empty element is
// kept as "" (a hop that names nothing).
func xForwardedFor(h string) []string {
	var out []string
	for part := range strings.SplitSeq(h, ",") {
		out = append(out, strings.TrimSpace(part))
	}
	return out
}

// forwardedFor returns the for= value of each element of an RFC 7239
// Forwarded header ("for=192.0.2.60;proto=http, for=\"[2001:db8::1]:47\""),
// "" for an element that has none or does not parse.
func forwardedFor(h string) []string {
	var out []string
	for elem := range strings.SplitSeq(h, ",") {
		found := ""
		for pair := range strings.SplitSeq(elem, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok {
				if strings.TrimSpace(pair) == "" {
					continue
				}
				found = ""
				break
			}
			if strings.EqualFold(k, "for") {
				if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
					v = v[1 : len(v)-1]
				}
				found = v
			}
		}
		out = append(out, found)
	}
	return out
}
