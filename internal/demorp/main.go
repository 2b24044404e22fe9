package demorp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Defaults of the flags.
const (
	DefaultIssuer   = "http://127.0.0.1:8080"
	DefaultAddr     = "127.0.0.1:9090"
	DefaultClientID = "demo-rp"
)

const usage = `oidcd-demo-rp: a tiny relying party to try the provider with.

Usage:
  oidcd-demo-rp [flags]

It serves http://<addr>/ with a "Sign in" button, shows the ID token's
claims, the userinfo answer and /api/v1/me/memberships after sign-in, signs
out through the provider (RP-initiated logout) and receives back-channel
logout tokens at /backchannel-logout. The client must have these URIs
registered (oidcd serve --demo does it for the defaults):

  redirect URIs            http://<addr>/callback, http://<addr>/signed-out
  back-channel logout URI  http://<addr>/backchannel-logout

Flags:
`

// Main runs demo-rp until SIGINT or SIGTERM; it returns the exit code (2
// for bad flags, 1 when it cannot serve).
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo-rp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	issuer := fs.String("issuer", DefaultIssuer, "the provider's issuer URL")
	addr := fs.String("addr", DefaultAddr, "listen address (127.0.0.1 only: this is a demo)")
	clientID := fs.String("client-id", DefaultClientID, "client_id registered at the provider")
	secret := fs.String("client-secret", "", "client secret of a confidential client (none: a public client)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo-rp: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := checkAddr(*addr); err != nil {
		fmt.Fprintf(stderr, "demo-rp: --addr %q: %v\n", *addr, err)
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "demo-rp: %v\n", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	base := "http://" + ln.Addr().String()
	app, err := New(Config{Issuer: strings.TrimRight(*issuer, "/"), BaseURL: base, ClientID: *clientID, ClientSecret: *secret, Logger: log})
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "demo-rp: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "demo-rp: open %s/ (issuer %s, client %s)\n", base, *issuer, *clientID)
	if err := Serve(ctx, ln, app); err != nil {
		fmt.Fprintf(stderr, "demo-rp: %v\n", err)
		return 1
	}
	return 0
}

// checkAddr accepts only loopback listen addresses.
func checkAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return errors.New("must be a loopback address, such as 127.0.0.1:9090")
	}
	return nil
}

// Serve serves app on ln until ctx ends, then shuts down within 5 s.
func Serve(ctx context.Context, ln net.Listener, app http.Handler) error {
	srv := &http.Server{
		Handler:           app,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
