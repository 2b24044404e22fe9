package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/oidcd/oidcd/node"
)

// serveFlags binds the flags of `oidcd serve` (docs/operators/node.md) to a node.Config.
func serveFlags(fs *flag.FlagSet, cfg *node.Config, logLevel *string, join *string) {
	fs.StringVar(&cfg.Issuer, "issuer", node.DefaultIssuer, "the issuer URL: the base of every endpoint and the iss of every token; identical on every node")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", node.DefaultHTTPAddr, "listener for OIDC, admin API, /metrics, /healthz, /readyz")
	fs.StringVar(&cfg.DataDir, "data-dir", node.DefaultDataDir, "raft log, snapshots and the bbolt state; created if missing")
	fs.StringVar(&cfg.NodeID, "node-id", "", "stable raft server id (default: generated once and stored in the data dir)")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", node.DefaultRaftAddr, "raft transport address")
	fs.StringVar(&cfg.GossipAddr, "gossip-addr", node.DefaultGossipAddr, "memberlist address")
	fs.StringVar(join, "join", "", "gossip addresses of existing nodes: comma-separated here and in OIDCD_JOIN, an array of strings in the config file")
	fs.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 1, "bootstrap once this many nodes see each other; 1 = a single node that works at once")
	fs.BoolVar(&cfg.NonVoter, "non-voter", false, "join as an edge replica: a raft non-voter that serves everything from its own copy of the state but never votes or leads (needs --join; ignores --bootstrap-expect, so a site's nodes can share one config file)")
	fs.StringVar(&cfg.ClusterKey, "cluster-key", "", "base64 of 32 random bytes shared by all nodes (oidcd keygen)")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "bearer token of the admin API (default: generated at first bootstrap, written to <data-dir>/admin-token)")
	fs.StringVar(&cfg.RateLimit, "rate-limit", node.DefaultRateLimit, "per-client-and-IP limit of token, introspect and revoke, as N/duration (5/60s); off disables it")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate (chain) file; with --tls-key, every listener serves HTTPS only (TLS 1.2+, HTTP/2), reloaded when the files change or on SIGHUP")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key file of --tls-cert")
	fs.DurationVar(&cfg.ShutdownDrain, "shutdown-drain", node.DefaultShutdownDrain, "on SIGTERM, /readyz answers 503 for this long while the node still serves, so a load balancer stops sending; a leader then hands leadership over before it stops (a second SIGTERM or SIGINT stops at once)")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", "", "when set, the admin API, the console and /metrics are served on this address only (404 on --http-addr); empty = all on --http-addr")
	fs.StringVar(&cfg.AdminACR, "admin-acr", node.DefaultAdminACR, "the least acr of a person's sign-in that administers the site (console, oidcd admin login): urn:service:sso:acr:phone, urn:service:sso:acr:pwd or urn:service:sso:acr:mfa; a weaker session is asked for its second factor")
	fs.StringVar(&cfg.TrustedProxies, "trusted-proxies", "", "comma-separated CIDRs of load balancers that may name the client, in the way --proxy-header says; empty trusts none")
	fs.StringVar(&cfg.ProxyHeader, "proxy-header", "x-forwarded-for", "how a trusted proxy names the client: x-forwarded-for (the right-most address not in --trusted-proxies), forwarded (RFC 7239 for=, the same rule) or proxy-protocol (a PROXY v1 or v2 header on each connection to --http-addr); every other way is ignored")
	fs.StringVar(&cfg.SMSOutbox, "sms-outbox", "", "file to which text messages are appended, one JSON object per line")
	fs.StringVar(&cfg.SMSWebhook, "sms-webhook", "", "URL to which text messages are POSTed")
	fs.StringVar(&cfg.SMTPURL, "smtp-url", "", "the site's mail relay for invitations, password resets and address checks: smtp://[user:password@]host[:port] (STARTTLS required, port 587) or smtps://... (TLS from the first byte, port 465); give a password through OIDCD_SMTP_URL")
	fs.StringVar(&cfg.SMTPFrom, "smtp-from", "", "the From address of mail to people, such as \"Example ID <id@example.com>\" (required with --smtp-url)")
	fs.StringVar(&cfg.SMTPCAFile, "smtp-ca-file", "", "PEM file of the CA that signs the relay's certificate (default: the system's)")
	fs.StringVar(&cfg.EmailOutbox, "email-outbox", "", "file to which every message to people is appended, one JSON object per line; with neither it nor --smtp-url, invitations, password resets, address checks and registration are off")
	fs.StringVar(&cfg.KEKFile, "kek-file", "", "file holding the key-encryption key for secrets at rest")
	fs.DurationVar(&cfg.KeyRotation, "key-rotation", node.DefaultKeyRotation, "how often the signing key rotates")
	fs.DurationVar(&cfg.SessionIdle, "session-idle", node.DefaultSessionIdle, "an SSO session ends after this long without a sign-in")
	fs.DurationVar(&cfg.SessionMax, "session-max", node.DefaultSessionMax, "an SSO session ends this long after it began, whatever happens")
	fs.DurationVar(&cfg.AuditRetention, "audit-retention", node.DefaultAuditRetention, "audit events older than this are pruned, oldest first; the chain goes on from the oldest kept")
	fs.BoolVar(&cfg.Demo, "demo", false, "on an empty store, create a demo organization, person and public client; print the demo sign-in at every start; without --log-level, log only warnings and errors (of raft only errors)")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", "", "serve net/http/pprof on this loopback address (e.g. 127.0.0.1:6060); empty = off")
	fs.StringVar(logLevel, "log-level", "info", "debug, info, warn or error (with --demo and no --log-level: warn)")
}

// applyEnv sets every flag not given on the command line from
// OIDCD_<FLAG> (upper snake case), so a flag always wins over the
// environment.
func applyEnv(fs *flag.FlagSet, env func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		name := "OIDCD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := env(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", name, v, err))
			}
		}
	})
	return errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

func serve(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("oidcd serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg node.Config
	var logLevel, join, configPath string
	serveFlags(fs, &cfg, &logLevel, &join)
	fs.StringVar(&configPath, "config", "", "read settings from this TOML `file` (oidcd config example prints one); flags and OIDCD_* win over it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "oidcd serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	warnSecretFlags(fs, stderr) // before the environment and the file set flags too
	if err := applyEnv(fs, env); err != nil {
		fmt.Fprintln(stderr, "oidcd serve:", err)
		return 2
	}
	if configPath != "" {
		cf, probs := readConfig(configPath, fs)
		for _, p := range probs {
			fmt.Fprintln(stderr, "oidcd serve:", p.format(configPath))
		}
		if len(probs) > 0 {
			return 2
		}
		if err := cf.apply(fs); err != nil {
			fmt.Fprintln(stderr, "oidcd serve:", err)
			return 2
		}
	}
	level, err := parseLevel(logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "oidcd serve: --log-level %q: %v\n", logLevel, err)
		return 2
	}
	levelGiven := false
	fs.Visit(func(f *flag.Flag) { levelGiven = levelGiven || f.Name == "log-level" })
	quietDemo := cfg.Demo && !levelGiven // demolog.go
	if join != "" {
		cfg.Join = strings.Split(join, ",")
	}
	cfg.Version = version
	if quietDemo {
		level = demoLogLevel
	}
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	if quietDemo {
		h = demoHandler{Handler: h}
	}
	cfg.Logger = slog.New(h)
	cfg.Out = stdout

	n, err := node.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "oidcd serve:", err)
		if errors.Is(err, node.ErrNewerFormat) {
			return ExitNeedsUpgrade
		}
		return 1
	}
	if err := n.Start(); err != nil {
		n.Close()
		fmt.Fprintln(stderr, "oidcd serve:", err)
		return 1
	}
	fmt.Fprintln(stdout, startLine(version, n.Issuer(), n.Addr(), n.DataDir()))
	if quietDemo {
		fmt.Fprintln(stdout, "(--demo: the log shows warnings and errors only; OIDCD_LOG_LEVEL=info, or --log-level info, shows all)")
	}
	// SIGTERM drains first (--shutdown-drain, then a leader hands over);
	// a second SIGTERM, or SIGINT from a terminal, stops at once. SIGHUP
	// reloads --tls-cert and --tls-key (they are also reloaded when the
	// files change).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	code := 0
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case err := <-n.Done():
			switch {
			case errors.Is(err, node.ErrNewerFormat):
				fmt.Fprintln(stderr, "oidcd serve:", err)
				code = ExitNeedsUpgrade
			case err != nil:
				cfg.Logger.Error("http server stopped", "error", err)
				code = 1
			}
			break wait
		case s := <-sigs:
			switch s {
			case syscall.SIGHUP:
				n.ReloadTLS() // logs either way; a bad pair keeps the current one
				continue
			case syscall.SIGTERM:
				cfg.Logger.Info("SIGTERM: draining, then stopping")
				drainUntilStopped(ctx, n, sigs)
			default:
				cfg.Logger.Info("signal received; stopping now", "signal", s.String())
			}
			break wait
		}
	}
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if err != nil {
			cfg.Logger.Error("shutdown", "error", err)
			code = 1
		}
	case <-time.After(20 * time.Second):
		cfg.Logger.Error("shutdown timed out")
		code = 1
	}
	return code
}

// ExitNeedsUpgrade is serve's exit status when the node stops, or will
// not start, because the cluster runs a newer state format than this
// version applies: starting it again changes nothing until the binary is
// upgraded (the package's unit does not restart on it).
const ExitNeedsUpgrade = 3

// startLine is what serve prints once the node serves: the issuer, and the
// listener only when the issuer does not already name it.
func startLine(version, issuer, addr, dataDir string) string {
	if issuer == "http://"+addr || issuer == "https://"+addr {
		return fmt.Sprintf("oidcd %s serving %s (data in %s)", version, issuer, dataDir)
	}
	return fmt.Sprintf("oidcd %s serving %s, listening on %s (data in %s)", version, issuer, addr, dataDir)
}

// warnSecretFlags warns about a secret given on the command line, where
// every local user can read it in the process list.
func warnSecretFlags(fs *flag.FlagSet, stderr io.Writer) {
	fs.Visit(func(f *flag.Flag) {
		if secretKeys[f.Name] && secretValue(f.Name, f.Value.String()) {
			fmt.Fprintf(stderr, "oidcd serve: warning: --%s on the command line is visible to every local user in the process list; use OIDCD_%s (a root-only EnvironmentFile) or the config file instead\n",
				f.Name, envName(f.Name))
		}
	})
}

// drainUntilStopped runs n.Drain, cut short by a second SIGTERM or a
// SIGINT (SIGHUP still reloads the certificate meanwhile).
func drainUntilStopped(ctx context.Context, n *node.Node, sigs <-chan os.Signal) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				if s == syscall.SIGHUP {
					n.ReloadTLS()
					continue
				}
				cancel()
				return
			}
		}
	}()
	n.Drain(dctx)
	close(done)
}
