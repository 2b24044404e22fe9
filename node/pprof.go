package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"
)

// checkLoopbackAddr accepts a host:port whose host is a loopback IP
// address (127.0.0.0/8, ::1) or localhost. An empty host (":6060") means
// every interface and is refused, as is any other name: profiles expose
// memory contents, command lines and timing, so the pprof listener must
// never be reachable from another machine.
func checkLoopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("host %q is not a loopback address (127.0.0.1, [::1] or localhost)", host)
}

// pprofServer is the opt-in profiling listener of Config.PprofAddr.
type pprofServer struct {
	srv *http.Server
	ln  net.Listener
}

// startPprof listens on addr (loopback only, checked again on the bound
// address so that a "localhost" resolving elsewhere is refused too) and
// serves net/http/pprof under /debug/pprof/ on its own mux.
func startPprof(addr string, log *slog.Logger) (*pprofServer, error) {
	if err := checkLoopbackAddr(addr); err != nil {
		return nil, fmt.Errorf("--pprof-addr %q: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listener: %w", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("--pprof-addr %q: bound to %s, not a loopback address", addr, ln.Addr())
	}
	// Its own mux: importing net/http/pprof also registers these handlers
	// on http.DefaultServeMux, which no listener of the node serves.
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	p := &pprofServer{ln: ln, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		// No write timeout: a CPU profile or a trace streams for as long
		// as its seconds parameter asks.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}
	go func() {
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof listener stopped", "error", err)
		}
	}()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return p, nil
}

// close stops the listener at once; a profile in progress is cut short.
func (p *pprofServer) close() {
	if p != nil {
		p.srv.Close()
	}
}

// PprofAddr is the address the pprof listener is bound to ("" when
// Config.PprofAddr is empty).
func (n *Node) PprofAddr() string {
	if n.pprof == nil {
		return ""
	}
	return n.pprof.ln.Addr().String()
}
