package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		// The first Ctrl-C ends the run (report and clean-up follow); a
		// second one kills the process.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the parsed command line.
type config struct {
	targets        []string // base URLs without a trailing slash, loopback only
	issuer         string
	adminToken     string
	scenario       string
	concurrency    int
	duration       time.Duration // 0: bounded by requests only
	requests       int64         // 0: bounded by duration only
	timeout        time.Duration // per operation
	json           bool
	users          int
	keep           bool
	preload        int // more people imported before the run (preload)
	soak           bool
	dataDir        string
	pid            int
	reportInterval time.Duration
	soakMark       time.Duration // figures taken once at this point of a soak
	soakSample     time.Duration // how often a soak samples for the peak
	tokenTTL       int64         // access_token_ttl of the provisioned clients, seconds
	cpuProfile     string        // write the load generator's own CPU profile here
	control        string        // the soak command's child: its heap figures
	onStart        func()        // called as the run's workers start (the matrix's profiles)
	upstreamLog    string        // federated-signin: the upstream's log level on stderr
}

// targetList is a repeatable, comma-separated --target.
type targetList []string

func (l *targetList) String() string { return strings.Join(*l, ",") }

func (l *targetList) Set(s string) error {
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			*l = append(*l, t)
		}
	}
	return nil
}

const defaultTarget = "http://127.0.0.1:8080"

// parseFlags turns args into a config; the error is for the user.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("oidcd-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := &config{}
	var targets targetList
	var tokenFile string
	fs.Var(&targets, "target", "base URL of a node; repeat or separate with commas to spread the load (default "+defaultTarget+")")
	fs.StringVar(&cfg.issuer, "issuer", "", "the issuer the tokens carry (default: the first target)")
	fs.StringVar(&cfg.adminToken, "admin-token", "", "admin API token (default: read from --admin-token-file)")
	fs.StringVar(&tokenFile, "admin-token-file", "./data/admin-token", "file holding the admin API token")
	fs.StringVar(&cfg.scenario, "scenario", "", "one of "+strings.Join(scenarioNames, ", "))
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "concurrent workers (browsers and relying parties)")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to run; 0 = until --requests operations")
	fs.Int64Var(&cfg.requests, "requests", 0, "stop after this many operations; 0 = unbounded by count")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "time limit of one operation")
	fs.BoolVar(&cfg.json, "json", false, "print the report as JSON instead of a table")
	fs.IntVar(&cfg.users, "users", 16, "how many people to provision")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the provisioned organization, people and clients afterwards")
	fs.IntVar(&cfg.preload, "preload", 0, "import this many more people (members of the bench organization and a ballast one) before the run, to measure a grown store")
	fs.BoolVar(&cfg.soak, "soak", false, "report --data-dir size and --pid RSS at start and end, and progress every --report-interval")
	fs.StringVar(&cfg.dataDir, "data-dir", "", "with --soak: the node's data directory")
	fs.IntVar(&cfg.pid, "pid", 0, "with --soak: the node's process id (RSS from /proc/PID/status)")
	fs.DurationVar(&cfg.reportInterval, "report-interval", time.Minute, "with --soak: progress line on stderr this often; 0 = none")
	fs.DurationVar(&cfg.soakMark, "soak-mark", 2*time.Minute, "with --soak: also take the figures this far into the run (caches warm); 0 = none")
	fs.DurationVar(&cfg.soakSample, "soak-sample", time.Second, "with --soak: sample the data dir and RSS this often for their peak")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile to this file (is the tool the bottleneck?)")
	fs.StringVar(&cfg.upstreamLog, "upstream-log-level", "none", "federated-signin: the logs of the upstream oidcd the tool starts, on stderr: debug, info, warn, error or none")
	fs.Int64Var(&cfg.tokenTTL, "token-ttl", 86400, "access token lifetime of the provisioned clients, seconds (60-86400)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: oidcd-bench --scenario NAME [flags]\n\nA load generator for oidcd over loopback. Flags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, errPrinted{err} // the flag package has said why
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if len(targets) == 0 {
		targets = targetList{defaultTarget}
	}
	for _, t := range targets {
		u, err := checkLoopbackURL(t)
		if err != nil {
			return nil, fmt.Errorf("--target: %w", err)
		}
		cfg.targets = append(cfg.targets, u)
	}
	if cfg.issuer == "" {
		cfg.issuer = cfg.targets[0]
	}
	cfg.issuer = strings.TrimSuffix(cfg.issuer, "/")
	if _, ok := scenarios[cfg.scenario]; !ok {
		return nil, fmt.Errorf("--scenario %q: want one of %s", cfg.scenario, strings.Join(scenarioNames, ", "))
	}
	switch {
	case cfg.concurrency < 1:
		return nil, errors.New("--concurrency must be at least 1")
	case cfg.users < 1:
		return nil, errors.New("--users must be at least 1")
	case cfg.preload < 0:
		return nil, errors.New("--preload must not be negative")
	case cfg.duration < 0 || cfg.requests < 0:
		return nil, errors.New("--duration and --requests must not be negative")
	case cfg.duration == 0 && cfg.requests == 0:
		return nil, errors.New("--duration 0 needs --requests N: the run must be bounded")
	case cfg.timeout <= 0:
		return nil, errors.New("--timeout must be positive")
	case cfg.soakSample <= 0 || cfg.soakMark < 0:
		return nil, errors.New("--soak-sample must be positive and --soak-mark not negative")
	case cfg.tokenTTL < 60 || cfg.tokenTTL > 86400:
		return nil, errors.New("--token-ttl must be between 60 and 86400 seconds")
	case !cfg.soak && (cfg.dataDir != "" || cfg.pid != 0):
		return nil, errors.New("--data-dir and --pid go with --soak")
	case cfg.soak && cfg.dataDir == "" && cfg.pid == 0:
		return nil, errors.New("--soak needs --data-dir PATH, --pid PID or both")
	}
	if cfg.pid != 0 {
		if _, err := readRSS(cfg.pid); err != nil {
			return nil, fmt.Errorf("--pid %d: %w", cfg.pid, err)
		}
	}
	if cfg.dataDir != "" {
		if _, err := dirSize(cfg.dataDir); err != nil {
			return nil, fmt.Errorf("--data-dir: %w", err)
		}
	}
	if cfg.adminToken == "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("no admin token: pass --admin-token or --admin-token-file (%w)", err)
		}
		cfg.adminToken = strings.TrimSpace(string(b))
		if cfg.adminToken == "" {
			return nil, fmt.Errorf("no admin token: %s is empty", tokenFile)
		}
	}
	return cfg, nil
}

// run is the whole command; main only wires signals and the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Progress lines come from several goroutines, and the child process
	// of the matrix and soak commands writes its logs through os/exec's
	// copying goroutine when stderr is not a file.
	stderr = &syncWriter{w: stderr}
	if len(args) > 0 {
		switch args[0] {
		case "matrix":
			return runMatrix(ctx, args[1:], stdout, stderr)
		case "soak":
			return runSoakCommand(ctx, args[1:], stdout, stderr)
		case "nodes":
			return runNodes(ctx, args[1:], os.Stdin, stdout, stderr)
		}
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return usageExit(err, "oidcd-bench:", stderr)
	}
	if cfg.cpuProfile != "" {
		stop, err := startCPUProfile(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "oidcd-bench:", err)
			return 1
		}
		defer stop()
	}
	rep, cleanup, err := execute(ctx, cfg, stderr)
	defer cleanup()
	if err != nil {
		fmt.Fprintln(stderr, "oidcd-bench:", err)
		return 1
	}
	if cfg.json {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "oidcd-bench:", err)
		return 1
	}
	if rep.Ops == 0 {
		fmt.Fprintln(stderr, "oidcd-bench: no operation succeeded")
		return 1
	}
	return 0
}

// errPrinted is an error the flag package has already printed.
type errPrinted struct{ error }

// usageExit is the exit code of a command whose flags did not parse: 0 for
// -h, else 2, printing err under prefix unless the flag package has.
func usageExit(err error, prefix string, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if !errors.As(err, new(errPrinted)) {
		fmt.Fprintln(stderr, prefix, err)
	}
	return 2
}

func (e errPrinted) Unwrap() error { return e.error }

// logf writes a progress line to stderr.
func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "oidcd-bench: "+format+"\n", args...)
}

// startCPUProfile profiles this process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
