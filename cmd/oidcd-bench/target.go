package main

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// checkLoopbackURL accepts an http or https base URL whose host is a
// loopback address (127.0.0.0/8, ::1) or localhost, and returns it without
// a trailing slash. This tool generates load: it must never point at a
// machine other than the one it runs on.
func checkLoopbackURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q: want an http:// or https:// base URL", raw)
	case u.Hostname() == "":
		return "", fmt.Errorf("%q: no host", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%q: want a base URL without user info, query or fragment", raw)
	case !isLoopbackHost(u.Hostname()):
		return "", fmt.Errorf("%q: host %q is not a loopback address (127.0.0.0/8, ::1, localhost); oidcd-bench sends load only to this machine", raw, u.Hostname())
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// isLoopbackHost reports whether host (no port, no brackets) is localhost
// or a loopback IP address. Names other than localhost are refused rather
// than resolved: a resolver's answer can change between check and dial.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOnly is a net.Dialer Control function: it refuses to connect to
// any address that is not loopback, so neither a redirect, a discovery
// document nor a name that resolves elsewhere can send traffic off the
// machine.
func loopbackOnly(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("oidcd-bench: refusing to connect to %s: not a loopback address", address)
	}
	return nil
}

// newTransport is the one connection pool of the run. Proxies from the
// environment are ignored: the load goes straight to the targets.
func newTransport(concurrency int) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: loopbackOnly}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		MaxIdleConns:        0, // no global limit
		MaxIdleConnsPerHost: 2*concurrency + 8,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
		DisableCompression:  true,
	}
}

// noRedirect makes a client hand every redirect back to the caller, the
// way the tool's browsers read each Location themselves.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// targetHost returns the host:port of a base URL.
func targetHost(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Host
}
