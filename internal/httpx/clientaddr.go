package httpx

import (
	"context"
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
// address must come from the Forwarded (RFC 7239) or X-Forwarded-For
// header, but only when the connection itself comes from a proxy the
// operator trusts (--trusted-proxies): anyone else could write the header.
// The client is then the right-most address of the chain that is not a
// trusted proxy (each proxy appends the address it saw; only the entries
// added by trusted proxies can be believed).

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

// TrustedProxies decides each request's client address (ClientAddr): from
// its Forwarded header, else its X-Forwarded-For header, when the
// connection comes from one of trusted; from the connection otherwise. A
// header that does not parse is ignored (the proxy itself is then the
// client). With no trusted proxies it changes nothing.
func TrustedProxies(trusted []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if len(trusted) == 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a := clientFromHeaders(r, trusted); a != "" {
				r = r.WithContext(context.WithValue(r.Context(), clientAddrKey{}, a))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// clientFromHeaders is the client address the headers of r name, or ""
// when the peer is not trusted or the headers name none.
func clientFromHeaders(r *http.Request, trusted []netip.Prefix) string {
	peer, ok := addrOf(r.RemoteAddr)
	if !ok || !isTrusted(peer, trusted) {
		return ""
	}
	var chain []string
	var valid bool
	if f := r.Header.Values("Forwarded"); len(f) > 0 {
		chain, valid = forwardedFor(strings.Join(f, ","))
	} else if x := r.Header.Values("X-Forwarded-For"); len(x) > 0 {
		chain, valid = xForwardedFor(strings.Join(x, ","))
	}
	if !valid || len(chain) == 0 {
		return ""
	}
	// Right to left: the first address that is not a trusted proxy.
	for i := len(chain) - 1; i >= 0; i-- {
		a, ok := addrOf(chain[i])
		if !ok {
			return "" // an obfuscated or unknown hop: believe nothing left of it
		}
		if i == 0 || !isTrusted(a, trusted) {
			return netip.AddrPortFrom(a, 0).String()
		}
	}
	return ""
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

// xForwardedFor splits "client, proxy1, proxy2".
func xForwardedFor(h string) ([]string, bool) {
	var out []string
	for part := range strings.SplitSeq(h, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, false
		}
		out = append(out, part)
	}
	return out, len(out) > 0
}

// forwardedFor returns the for= value of each element of an RFC 7239
// Forwarded header ("for=192.0.2.60;proto=http, for=\"[2001:db8::1]:47\"").
// An element without for= makes the chain unusable.
func forwardedFor(h string) ([]string, bool) {
	var out []string
	for elem := range strings.SplitSeq(h, ",") {
		found := ""
		for pair := range strings.SplitSeq(elem, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok {
				if strings.TrimSpace(pair) == "" {
					continue
				}
				return nil, false
			}
			if strings.EqualFold(k, "for") {
				if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
					v = v[1 : len(v)-1]
				}
				found = v
			}
		}
		if found == "" {
			return nil, false
		}
		out = append(out, found)
	}
	return out, len(out) > 0
}
