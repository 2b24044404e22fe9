package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// matrixConfig is the command line of `oidcd-bench matrix`.
type matrixConfig struct {
	benchtime   time.Duration
	ceilingTime time.Duration
	concurrency int
	users       int
	preload     int
	sizes       []int
	scenarios   []string
	write       string // BENCHMARKS.md to rewrite; "" = markdown on stdout
	jsonOut     string
	command     string
	pprof       bool
	explain     bool
	nodeLog     string
	grown       int
	baseline    string
}

// matrixScenarios is the order the matrix runs: the reads first, while
// the store is small, then the sign-ins (the federated one right after
// the password sign-in it is judged against), then everything at once.
var matrixScenarios = []string{"discovery", "jwks", "preflight", "userinfo", "introspect", "silent-signin", "password-signin", federatedName, mixedName}

// matrixResult is everything one matrix run measured.
type matrixResult struct {
	Date        string      `json:"date"`
	Commit      string      `json:"commit"`
	Machine     machine     `json:"machine"`
	Command     string      `json:"command"`
	BenchtimeS  float64     `json:"benchtime_s"`
	Concurrency int         `json:"concurrency"`
	Ceilings    ceilings    `json:"ceilings"`
	Runs        []matrixRun `json:"runs"`
	Nodes       []nodeUsage `json:"nodes"`
	ElapsedS    float64     `json:"elapsed_s"`
	// Grown is the people the store was grown to before the scenarios
	// (--grown); Baseline the empty store's runs it is compared with.
	Grown    int         `json:"grown_people,omitempty"`
	Baseline *matrixBase `json:"baseline,omitempty"`
}

// matrixBase is the run a grown store's figures are compared with.
type matrixBase struct {
	File   string      `json:"file"`
	Date   string      `json:"date"`
	Commit string      `json:"commit"`
	Runs   []matrixRun `json:"runs"`
}

// matrixRun is one scenario on one set of nodes, with its verdict.
type matrixRun struct {
	Scenario string            `json:"scenario"`
	Nodes    int               `json:"nodes"`
	Ops      uint64            `json:"ops"`
	OpsPerS  float64           `json:"ops_per_s"`
	Latency  latency           `json:"latency_ms"`
	Errors   map[string]uint64 `json:"errors"`
	Ceiling  string            `json:"ceiling,omitempty"`
	Fraction float64           `json:"fraction_of_ceiling,omitempty"`
	Target   string            `json:"target,omitempty"`
	// TargetOpsPerS is the rate the target asks for (0: none, only a
	// latency); MaxP99Ms the p99 it allows (0: none).
	TargetOpsPerS float64 `json:"target_ops_per_s,omitempty"`
	MaxP99Ms      float64 `json:"target_p99_ms,omitempty"`
	Met           *bool   `json:"met,omitempty"`
	CPU           *cpuUse `json:"cpu,omitempty"`
	// Trivial is the trivial handler's runs around this scenario, its
	// ceiling, when the trivial handler bounds it.
	Trivial *trivialRun `json:"trivial,omitempty"`
	// Near is the CPU ceiling (argon2id, two signatures) measured again
	// just before and just after this scenario, when one bounds it: the
	// machine's speed can move by half between the ceilings measured at
	// the start and a scenario minutes later.
	Near *nearCeiling `json:"near_ceiling,omitempty"`
	// Federation is federated-signin's split by host; Beside the
	// password sign-in of the same run it is judged against.
	Federation *fedFigures `json:"federation,omitempty"`
	Beside     *besideRun  `json:"beside_password_signin,omitempty"`
}

// nodeUsage is the node process's footprint after its scenarios.
type nodeUsage struct {
	Nodes        int   `json:"nodes"`
	RSSBytes     int64 `json:"rss_bytes"`
	DataDirBytes int64 `json:"data_dir_bytes"`
}

func parseMatrixFlags(args []string, stderr io.Writer) (*matrixConfig, error) {
	fs := flag.NewFlagSet("oidcd-bench matrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mc := &matrixConfig{}
	var sizes, scen string
	fs.DurationVar(&mc.benchtime, "benchtime", 8*time.Second, "how long each scenario runs on each set of nodes")
	fs.DurationVar(&mc.ceilingTime, "ceiling-time", 2*time.Second, "how long each CPU ceiling (RS256 on one and on every core, argon2id) is measured")
	fs.IntVar(&mc.concurrency, "concurrency", 32, "concurrent workers of every run, the trivial handler's included")
	fs.IntVar(&mc.users, "users", 16, "people provisioned on each set of nodes")
	fs.IntVar(&mc.preload, "preload", 0, "import this many more people on each set of nodes before its scenarios (a grown store)")
	fs.StringVar(&sizes, "sizes", "1,3", "comma-separated node counts")
	fs.StringVar(&scen, "scenarios", strings.Join(matrixScenarios, ","), "comma-separated scenarios")
	fs.StringVar(&mc.write, "write", "", "rewrite the generated section of this markdown file (BENCHMARKS.md); default: print the section")
	fs.StringVar(&mc.jsonOut, "json", "", "also write the figures as JSON to this file")
	fs.StringVar(&mc.command, "command", "", "the command to record as having produced the figures (default: this one)")
	fs.StringVar(&mc.nodeLog, "node-log-level", "none", "the nodes' logs on stderr: debug, info, warn, error or none (operations cut short at the end of each run log errors)")
	fs.BoolVar(&mc.explain, "explain", true, "profile the node process during every scenario and explain each target not met from the profile")
	fs.IntVar(&mc.grown, "grown", 0, "grow the store through raft to this many signed-in people (memberships, live sessions and tokens) before the scenarios, and write the section of grown stores")
	fs.StringVar(&mc.baseline, "baseline", "", "with --grown: the JSON of an empty-store matrix (--json) to compare every figure with")
	fs.BoolVar(&mc.pprof, "pprof", false, "give the nodes pprof listeners on 127.0.0.1 (printed on stderr) to profile them under load")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: oidcd-bench matrix [flags]\n\nMeasures this machine's ceilings, starts one node and a three-node cluster on 127.0.0.1, runs every scenario on each and reports the figures against the ceilings and the targets of the speed issue. Flags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, errPrinted{err}
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 5 {
			return nil, fmt.Errorf("--sizes %q: want node counts from 1 to 5", sizes)
		}
		mc.sizes = append(mc.sizes, n)
	}
	for _, s := range strings.Split(scen, ",") {
		s = strings.TrimSpace(s)
		if _, ok := scenarios[s]; !ok {
			return nil, fmt.Errorf("--scenarios: %q: want some of %s", s, strings.Join(scenarioNames, ", "))
		}
		mc.scenarios = append(mc.scenarios, s)
	}
	switch {
	case mc.benchtime < time.Second || mc.benchtime > time.Hour:
		return nil, errors.New("--benchtime must be between 1s and 1h")
	case mc.ceilingTime < 100*time.Millisecond || mc.ceilingTime > time.Minute:
		return nil, errors.New("--ceiling-time must be between 100ms and 1m")
	case mc.concurrency < 1 || mc.concurrency > 1024:
		return nil, errors.New("--concurrency must be between 1 and 1024")
	case mc.users < 1:
		return nil, errors.New("--users must be at least 1")
	case mc.preload < 0 || mc.grown < 0:
		return nil, errors.New("--preload and --grown must not be negative")
	case mc.baseline != "" && mc.grown == 0:
		return nil, errors.New("--baseline compares a grown store (--grown) with an empty one")
	}
	if mc.command == "" {
		mc.command = "oidcd-bench matrix " + strings.Join(args, " ")
	}
	return mc, nil
}

// runMatrix is `oidcd-bench matrix`.
func runMatrix(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	mc, err := parseMatrixFlags(args, stderr)
	if err != nil {
		return usageExit(err, "oidcd-bench matrix:", stderr)
	}
	res, err := matrix(ctx, mc, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "oidcd-bench matrix:", err)
		return 1
	}
	md := res.markdown()
	if mc.jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(mc.jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "oidcd-bench matrix:", err)
			return 1
		}
	}
	if mc.write == "" {
		io.WriteString(stdout, md)
		return 0
	}
	begin, end := res.markers()
	if err := rewriteSection(mc.write, md, begin, end); err != nil {
		fmt.Fprintln(stderr, "oidcd-bench matrix:", err)
		return 1
	}
	logf(stderr, "wrote the figures into %s", mc.write)
	io.WriteString(stdout, md)
	return 0
}

// matrix measures the ceilings, then runs every scenario on every size.
func matrix(ctx context.Context, mc *matrixConfig, stderr io.Writer) (*matrixResult, error) {
	began := time.Now()
	res := &matrixResult{
		Date: began.UTC().Format("2006-01-02 15:04 UTC"), Commit: gitCommit(), Machine: describeMachine(),
		Command: mc.command, BenchtimeS: mc.benchtime.Seconds(), Concurrency: mc.concurrency, Grown: mc.grown,
	}
	if mc.baseline != "" {
		b, err := os.ReadFile(mc.baseline)
		if err != nil {
			return nil, err
		}
		var base matrixResult
		if err := json.Unmarshal(b, &base); err != nil {
			return nil, fmt.Errorf("--baseline %s: %w", mc.baseline, err)
		}
		res.Baseline = &matrixBase{File: mc.baseline, Date: base.Date, Commit: base.Commit, Runs: base.Runs}
	}
	logf(stderr, "measuring the CPU ceilings (%s each)", mc.ceilingTime)
	if err := measureCPUCeilings(ctx, mc.ceilingTime, &res.Ceilings); err != nil {
		return nil, err
	}
	logf(stderr, "RS256 %.0f/s per core, %.0f/s on %d; argon2id %.1f ms", res.Ceilings.SignPerCore,
		res.Ceilings.SignAllCores, runtime.GOMAXPROCS(0), res.Ceilings.Argon2Ms)

	triv, err := startTrivial(ctx, mc, stderr)
	if err != nil {
		return nil, err
	}
	defer triv.stop()
	t, err := triv.measure(ctx, mc.benchtime, stderr)
	if err != nil {
		return nil, err
	}
	res.Ceilings.Trivial, res.Ceilings.TrivialMs, res.Ceilings.TrivialCPU = t.OpsPerS, t.Latency, t.CPU
	logf(stderr, "trivial handler %.0f req/s", res.Ceilings.Trivial)

	for _, size := range mc.sizes {
		runs, usage, err := matrixSize(ctx, mc, size, triv, stderr)
		if err != nil {
			return nil, fmt.Errorf("%d node(s): %w", size, err)
		}
		for _, r := range runs {
			judge(&r, res.Ceilings)
			res.Runs = append(res.Runs, r)
		}
		besidePassword(res.Runs)
		res.Nodes = append(res.Nodes, usage)
	}
	res.ElapsedS = time.Since(began).Round(time.Second).Seconds()
	return res, nil
}

// trivialServer is the child process that serves only the trivial
// handler, kept for the whole matrix: a scenario bounded by it is set
// against runs of it just before and after, so that the ceiling and the figure
// see the same state of a shared machine.
type trivialServer struct {
	ch *child
	mc *matrixConfig
}

// trivialRun is one measurement of the trivial handler, or the mean of
// the two around a scenario (Runs: each one's rate).
type trivialRun struct {
	OpsPerS float64   `json:"ops_per_s"`
	Latency latency   `json:"latency_ms"`
	CPU     *cpuUse   `json:"cpu,omitempty"`
	Runs    []float64 `json:"runs_ops_per_s,omitempty"`
}

// nearCeiling is a CPU ceiling's runs just before and after a scenario
// (Runs) and their mean (PerS), in the ceiling's own unit: argon2id
// hashes a second on every core, or two-signature sign-ins a second.
type nearCeiling struct {
	PerS float64   `json:"per_s"`
	Runs []float64 `json:"runs_per_s"`
}

// cpuBound reports whether a CPU ceiling bounds scenario.
func cpuBound(scenario string) bool {
	return scenario == "password-signin" || scenario == "silent-signin"
}

// measureNear measures the ceiling of a cpuBound scenario for about d,
// as measureCPUCeilings does.
func measureNear(ctx context.Context, scenario string, d time.Duration) (float64, error) {
	procs := float64(runtime.GOMAXPROCS(0))
	if scenario == "password-signin" {
		hash, err := measureArgon2(ctx, d)
		if err != nil {
			return 0, fmt.Errorf("argon2id ceiling around %s: %w", scenario, err)
		}
		return procs / hash.Seconds(), nil
	}
	one, err := measureSign(ctx, 1, d)
	if err != nil {
		return 0, fmt.Errorf("RS256 ceiling around %s: %w", scenario, err)
	}
	return procs * one / 2, nil
}

// bracketed is the mean of the trivial runs just before and just after
// a scenario: rates and costs per request (the profile's shares are the
// first run's).
func bracketed(a, b trivialRun) trivialRun {
	t := trivialRun{OpsPerS: (a.OpsPerS + b.OpsPerS) / 2, Latency: a.Latency, Runs: []float64{a.OpsPerS, b.OpsPerS}}
	if a.CPU != nil && b.CPU != nil {
		u := *a.CPU
		u.ServerUsPerOp = (a.CPU.ServerUsPerOp + b.CPU.ServerUsPerOp) / 2
		u.LoadGenUsPerOp = (a.CPU.LoadGenUsPerOp + b.CPU.LoadGenUsPerOp) / 2
		u.ServerCores = (a.CPU.ServerCores + b.CPU.ServerCores) / 2
		u.LoadGenCores = (a.CPU.LoadGenCores + b.CPU.LoadGenCores) / 2
		t.CPU = &u
	}
	return t
}

func startTrivial(ctx context.Context, mc *matrixConfig, stderr io.Writer) (*trivialServer, error) {
	ch, err := spawnNodes(ctx, stderr, 90*time.Second, "--size", "0", "--trivial")
	if err != nil {
		return nil, err
	}
	return &trivialServer{ch: ch, mc: mc}, nil
}

func (t *trivialServer) stop() { t.ch.stop() }

// measure runs the trivial scenario for d.
func (t *trivialServer) measure(ctx context.Context, d time.Duration, stderr io.Writer) (trivialRun, error) {
	cfg := loadConfig(t.mc, []string{t.ch.info.Trivial}, t.ch.info.Trivial, "")
	cfg.scenario, cfg.duration = trivialName, d
	e := newEnv(cfg)
	defer e.tr.CloseIdleConnections()
	rep, cpu, err := loadExplained(ctx, cfg, e, stderr, t.mc.explain, t.ch.info.Control)
	if err != nil {
		return trivialRun{}, err
	}
	if rep.Ops == 0 || errorCount(rep.Errors) > rep.Ops/100 {
		return trivialRun{}, fmt.Errorf("trivial handler: %d ops, errors %v", rep.Ops, rep.Errors)
	}
	return trivialRun{OpsPerS: rep.OpsPerS, Latency: rep.Latency, CPU: cpu}, nil
}

// loadConfig is the config of one matrix run.
func loadConfig(mc *matrixConfig, targets []string, issuer, token string) *config {
	return &config{
		targets: targets, issuer: issuer, adminToken: token, concurrency: mc.concurrency,
		duration: mc.benchtime, timeout: 10 * time.Second, users: mc.users, preload: mc.preload, tokenTTL: 86400,
		soakSample: time.Second, upstreamLog: mc.nodeLog,
	}
}

// matrixSize starts size nodes in a child process, provisions once and
// runs every scenario on them.
func matrixSize(ctx context.Context, mc *matrixConfig, size int, triv *trivialServer, stderr io.Writer) ([]matrixRun, nodeUsage, error) {
	args := []string{"--size", strconv.Itoa(size), "--log-level", mc.nodeLog}
	if mc.pprof {
		args = append(args, "--pprof")
	}
	wait := 90 * time.Second
	if mc.grown > 0 {
		// About three writes a person at several thousand a second.
		args = append(args, "--grown", strconv.Itoa(mc.grown))
		wait += time.Duration(mc.grown) * 2 * time.Millisecond
	}
	ch, err := spawnNodes(ctx, stderr, wait, args...)
	if err != nil {
		return nil, nodeUsage{}, err
	}
	defer ch.stop()
	if mc.pprof {
		logf(stderr, "pprof of the %d node(s): %s", size, strings.Join(ch.info.Pprof, ", "))
	}
	cfg := loadConfig(mc, ch.info.URLs, ch.info.Issuer, ch.info.AdminToken)
	e, cleanup, err := prepare(ctx, cfg, stderr)
	defer cleanup()
	if err != nil {
		return nil, nodeUsage{}, err
	}
	var runs []matrixRun
	for _, name := range mc.scenarios {
		// A quarter of the scenario's time just before it and as much just
		// after: the machine's speed swings by a quarter within a minute.
		bracket := max(mc.benchtime/4, time.Second)
		var before trivialRun
		if trivialBound(name) {
			if before, err = triv.measure(ctx, bracket, stderr); err != nil {
				return nil, nodeUsage{}, err
			}
		}
		cpuBracket := max(mc.benchtime/8, time.Second)
		var nearBefore float64
		if cpuBound(name) {
			if nearBefore, err = measureNear(ctx, name, cpuBracket); err != nil {
				return nil, nodeUsage{}, err
			}
		}
		c := *cfg
		c.scenario = name
		rep, cpu, err := loadExplained(ctx, &c, e, stderr, mc.explain, ch.info.Control)
		if err != nil {
			return nil, nodeUsage{}, fmt.Errorf("%s: %w", name, err)
		}
		var near *trivialRun
		if trivialBound(name) {
			after, err := triv.measure(ctx, bracket, stderr)
			if err != nil {
				return nil, nodeUsage{}, err
			}
			t := bracketed(before, after)
			near = &t
		}
		var nc *nearCeiling
		if cpuBound(name) {
			after, err := measureNear(ctx, name, cpuBracket)
			if err != nil {
				return nil, nodeUsage{}, err
			}
			nc = &nearCeiling{PerS: round1((nearBefore + after) / 2), Runs: []float64{round1(nearBefore), round1(after)}}
		}
		logf(stderr, "%d node(s) %s: %.1f/s, p50 %.2f ms, p99 %.2f ms, %d errors", size, name,
			rep.OpsPerS, rep.Latency.P50, rep.Latency.P99, errorCount(rep.Errors))
		runs = append(runs, matrixRun{Scenario: name, Nodes: size, Ops: rep.Ops, OpsPerS: rep.OpsPerS, Latency: rep.Latency, Errors: rep.Errors, CPU: cpu, Trivial: near, Near: nc,
			Federation: rep.Federation})
	}
	u := nodeUsage{Nodes: size, RSSBytes: -1, DataDirBytes: -1}
	if n, err := readRSS(ch.info.PID); err == nil {
		u.RSSBytes = n
	}
	if len(ch.info.DataDirs) > 0 {
		if n, err := dirSize(filepath.Dir(ch.info.DataDirs[0])); err == nil {
			u.DataDirBytes = n
		}
	}
	return runs, u, nil
}
