// Package redirect holds the rules every room must agree on for where a
// client's browser may be sent and which browser origins may call the
// provider from script: what a registration may name (Check, CheckOrigin),
// what an authorization request's redirect_uri must be to match one
// (Match), and the origins a public client gets when it names none
// (DefaultOrigins). The admin API checks registrations with it, the
// authorization and token endpoints match with it, and the CORS answers
// read its origins, so the three never drift apart.
//
// A web application's redirect URIs are absolute http or https URIs,
// plain http only at a loopback host, and match exactly. A native
// application (RFC 8252) may also register a private-use scheme whose
// name holds a dot (com.example.app:/callback, 7.1), matched exactly, and
// a loopback redirect at the IP literal 127.0.0.1 or [::1] (never the
// name localhost, 8.3), which matches on any port with the same path and
// query (7.3): a desktop app picks a free port each time.
//
// Invariants:
//   - redirect is a leaf: the standard library only.
//   - Match never widens exact matching but for a native client's
//     loopback port; a URI with a fragment, user info or a port that is
//     not a number from 1 to 65535 matches nothing.
package redirect

import (
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The application types of a client registration.
const (
	Web    = "web"    // a server-side or single-page application in the browser (the default)
	Native = "native" // a desktop or mobile app (RFC 8252)
)

// MaxURI is the longest redirect URI or origin a registration may hold,
// in bytes.
const MaxURI = 2048

// Problem is why a registration's URI or origin is refused: Code is the
// admin API's detail code ("invalid_uri", "too_long"), Message its text.
type Problem struct {
	Code    string
	Message string
}

func (p *Problem) Error() string { return p.Message }

func invalid(msg string) *Problem { return &Problem{Code: "invalid_uri", Message: msg} }

// Check returns nil when uri may be a redirect URI of a client of
// application type appType ("" is Web), else the Problem.
func Check(appType, uri string) *Problem {
	if len(uri) > MaxURI {
		return &Problem{Code: "too_long", Message: "must be at most " + strconv.Itoa(MaxURI) + " bytes"}
	}
	if strings.Contains(uri, "#") {
		return invalid("must not have a fragment")
	}
	u, err := url.Parse(uri)
	if err != nil || !u.IsAbs() {
		return invalid("must be an absolute URI")
	}
	if appType == Native && u.Scheme != "http" && u.Scheme != "https" {
		return checkPrivateUse(u)
	}
	switch {
	case u.Opaque != "":
		return invalid("must be an absolute URI")
	case u.Scheme != "https" && u.Scheme != "http":
		if appType == Native {
			return invalid("must use https, http at 127.0.0.1 or [::1], or a private-use scheme holding a dot (com.example.app:/callback)")
		}
		return invalid("must use http or https (a private-use scheme such as com.example.app:/callback needs application_type native)")
	case u.Host == "" || u.Hostname() == "":
		return invalid("must name a host")
	case u.User != nil:
		return invalid("must not hold user info")
	case !validPort(u.Port()):
		return invalid("must have a port from 1 to 65535, if any")
	}
	if u.Scheme == "http" {
		if appType == Native && !loopbackIP(u.Hostname()) {
			return invalid("must use https (http only for 127.0.0.1 or [::1]: a native app's loopback redirect names the address, never localhost)")
		}
		if appType != Native && !loopbackIP(u.Hostname()) && !strings.EqualFold(u.Hostname(), "localhost") {
			return invalid("must use https (http only for 127.0.0.1, [::1] or localhost)")
		}
	}
	return nil
}

// checkPrivateUse checks a native app's private-use scheme redirect
// (RFC 8252 7.1): a scheme of RFC 3986's syntax holding a dot, such as a
// reverse domain name the app's maker controls.
func checkPrivateUse(u *url.URL) *Problem {
	if !strings.Contains(u.Scheme, ".") {
		return invalid("a private-use scheme must hold a dot, as a reverse domain name does (com.example.app:/callback)")
	}
	switch strings.ToLower(u.Scheme) {
	case "javascript", "data", "file", "vbscript", "blob", "about":
		return invalid("must not use that scheme")
	}
	if u.User != nil {
		return invalid("must not hold user info")
	}
	if u.Opaque == "" && u.Host == "" && u.Path == "" {
		return invalid("must have a path (com.example.app:/callback)")
	}
	return nil
}

// Match reports whether got, an authorization or token request's
// redirect_uri, matches one of the registered URIs of a client of
// application type appType: byte for byte, or for a native client a
// loopback redirect at the same address, path and query on any port.
func Match(appType string, registered []string, got string) bool {
	if slices.Contains(registered, got) {
		return true
	}
	if appType != Native {
		return false
	}
	g, ok := loopback(got)
	if !ok {
		return false
	}
	return slices.ContainsFunc(registered, func(r string) bool {
		w, ok := loopback(r)
		return ok && w.Hostname() == g.Hostname() && w.EscapedPath() == g.EscapedPath() &&
			w.RawQuery == g.RawQuery && w.ForceQuery == g.ForceQuery
	})
}

// loopback parses s as an http loopback redirect at an IP literal with
// no fragment, no user info and a valid port, if any, its scheme written
// in lower case (url.Parse folds "HTTP:" to "http", and an any-port
// match is only for the one plain spelling).
func loopback(s string) (*url.URL, bool) {
	if !strings.HasPrefix(s, "http://") || strings.Contains(s, "#") {
		return nil, false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Opaque != "" || u.User != nil || !loopbackIP(u.Hostname()) || !validPort(u.Port()) {
		return nil, false
	}
	if h := u.Host; strings.HasSuffix(h, ":") {
		return nil, false // "127.0.0.1:" names no port
	}
	return u, true
}

// loopbackIP reports whether host is 127.0.0.1 or ::1 written plainly.
func loopbackIP(host string) bool {
	return host == "127.0.0.1" || host == "::1"
}

func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && p[0] != '0' && p[0] != '+'
}

// ErrOrigin is the reason CheckOrigin gives for what is not an origin.
var ErrOrigin = errors.New("must be an origin: scheme://host[:port], https (http only for 127.0.0.1, [::1] or localhost), with no path, query or fragment")

// CheckOrigin returns s as a browser writes it in an Origin header
// (lower case, no default port) when it is a web origin a registration
// may list, else ErrOrigin.
func CheckOrigin(s string) (string, error) {
	if len(s) > MaxURI || strings.ContainsAny(s, "#?@ \t") {
		return "", ErrOrigin
	}
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Hostname() == "" || !validPort(u.Port()) {
		return "", ErrOrigin
	}
	o, ok := origin(u)
	if !ok {
		return "", ErrOrigin
	}
	return o, nil
}

// origin is u's origin as a browser serializes it, ok only for https,
// or http at a loopback host.
func origin(u *url.URL) (string, bool) {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	switch {
	case scheme == "https":
		if port == "443" {
			port = ""
		}
	case scheme == "http" && (loopbackIP(host) || host == "localhost"):
		if port == "80" {
			port = ""
		}
	default:
		return "", false
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, true
}

// DefaultOrigins is what a client's web_origins is when its registration
// names none: for a public client the origins of its https and loopback
// http redirect URIs, in order, each once; for a confidential one none
// (its code exchange carries a secret no page should hold).
func DefaultOrigins(public bool, redirectURIs []string) []string {
	out := []string{}
	if !public {
		return out
	}
	for _, r := range redirectURIs {
		u, err := url.Parse(r)
		if err != nil || u.Opaque != "" || u.Hostname() == "" {
			continue
		}
		if o, ok := origin(u); ok && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// Origins are the web origins in force for a client: those its
// registration names when set is true (none when it names none), each as
// a browser writes it (what CheckOrigin refuses is dropped), else
// DefaultOrigins. The admin API shows them and the CORS answers grant
// them, so both read this one rule.
func Origins(public, set bool, origins, redirectURIs []string) []string {
	if !set {
		return DefaultOrigins(public, redirectURIs)
	}
	out := make([]string, 0, len(origins))
	for _, o := range origins {
		if n, err := CheckOrigin(o); err == nil && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
