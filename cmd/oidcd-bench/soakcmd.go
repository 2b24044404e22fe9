package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/oidcd/oidcd/internal/password"
)

// soakConfig is the command line of `oidcd-bench soak`.
type soakConfig struct {
	duration      time.Duration
	mark          time.Duration
	concurrency   int
	users         int
	tokenTTL      int64
	sessionIdle   time.Duration
	reapEvery     time.Duration
	reapGrace     time.Duration
	auditKeep     time.Duration
	storm         int
	stormDuration time.Duration
	json          bool
	reportEvery   time.Duration
	pprof         bool
}

// soakResult is what `oidcd-bench soak` measured.
type soakResult struct {
	Mixed *report `json:"mixed"`
	Storm *report `json:"storm,omitempty"`
	// StormRSSGrowth is the storm's peak RSS over its starting RSS;
	// SemaphoreBound is what the hasher's slots may hold at once (slots x
	// m), Unbounded what the storm's connections would hold without it.
	StormRSSGrowth int64 `json:"storm_rss_growth_bytes,omitempty"`
	// StormHeap is the node process's Go heap (runtime/metrics, sampled
	// every 10 ms in the process) when the storm began and its peak.
	StormHeapStart uint64 `json:"storm_heap_start_bytes,omitempty"`
	StormHeapPeak  uint64 `json:"storm_heap_peak_bytes,omitempty"`
	SemaphoreBound int64  `json:"semaphore_bound_bytes,omitempty"`
	Unbounded      int64  `json:"unbounded_bytes,omitempty"`
	Slots          int    `json:"argon2id_slots"`
	Params         string `json:"argon2id_params"`
}

func parseSoakFlags(args []string, stderr io.Writer) (*soakConfig, error) {
	fs := flag.NewFlagSet("oidcd-bench soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sc := &soakConfig{}
	fs.DurationVar(&sc.duration, "duration", 10*time.Minute, "how long the mixed load runs")
	fs.DurationVar(&sc.mark, "mark", -1, "the figures the end is compared with are taken this far into the run (default: 2m, or a fifth of a shorter --duration)")
	fs.IntVar(&sc.concurrency, "concurrency", 32, "workers of the mixed load")
	fs.IntVar(&sc.users, "users", 16, "people to provision")
	fs.Int64Var(&sc.tokenTTL, "token-ttl", 60, "access token lifetime of the provisioned clients, seconds: short, so that codes become reapable within the run")
	fs.DurationVar(&sc.sessionIdle, "session-idle", time.Minute, "the node's SSO session idle lifetime: short, so that abandoned sessions become reapable within the run")
	fs.DurationVar(&sc.reapEvery, "reap-every", 15*time.Second, "how often the leader reaps (the node's default is 1m)")
	fs.DurationVar(&sc.reapGrace, "reap-grace", 15*time.Second, "how long after expiry records are reaped (the node's default is 5m)")
	fs.DurationVar(&sc.auditKeep, "audit-retention", time.Minute, "the node's --audit-retention: short, so that the trail reaches its steady state before the mark")
	fs.IntVar(&sc.storm, "storm", 200, "connections of the login storm after the mixed load (fresh password sign-ins); 0 = none")
	fs.DurationVar(&sc.stormDuration, "storm-duration", 20*time.Second, "how long the login storm lasts")
	fs.BoolVar(&sc.json, "json", false, "print the result as JSON")
	fs.DurationVar(&sc.reportEvery, "report-interval", time.Minute, "progress line on stderr this often; 0 = none")
	fs.BoolVar(&sc.pprof, "pprof", false, "give the node a pprof listener on 127.0.0.1 (its address is printed on stderr)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: oidcd-bench soak [flags]\n\nStarts one node on 127.0.0.1 in a child process, runs the mixed profile against it while watching its data dir and RSS (start, mark, end, peak), then a login storm that shows the argon2id memory is bounded by the hasher's semaphore. Flags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, errPrinted{err}
	}
	if sc.mark == -1 {
		sc.mark = min(2*time.Minute, sc.duration/5)
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case sc.duration < time.Second || sc.duration > 24*time.Hour:
		return nil, errors.New("--duration must be between 1s and 24h")
	case sc.mark < 0 || sc.mark >= sc.duration:
		return nil, errors.New("--mark must be within --duration")
	case sc.concurrency < 1 || sc.concurrency > 1024 || sc.storm < 0 || sc.storm > 1024:
		return nil, errors.New("--concurrency and --storm must be at most 1024")
	case sc.tokenTTL < 60 || sc.tokenTTL > 86400:
		return nil, errors.New("--token-ttl must be between 60 and 86400 seconds")
	case sc.sessionIdle < time.Minute:
		return nil, errors.New("--session-idle must be at least 1m")
	case sc.reapEvery <= 0 || sc.reapGrace <= 0 || sc.auditKeep <= 0:
		return nil, errors.New("--reap-every, --reap-grace and --audit-retention must be positive")
	case sc.stormDuration <= 0 && sc.storm > 0:
		return nil, errors.New("--storm-duration must be positive")
	}
	return sc, nil
}

// runSoakCommand is `oidcd-bench soak`.
func runSoakCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sc, err := parseSoakFlags(args, stderr)
	if err != nil {
		return usageExit(err, "oidcd-bench soak:", stderr)
	}
	res, err := soak(ctx, sc, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "oidcd-bench soak:", err)
		return 1
	}
	if sc.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return 1
		}
		return 0
	}
	res.writeTable(stdout)
	return 0
}

// soak runs the mixed load and then the storm against one node.
func soak(ctx context.Context, sc *soakConfig, stderr io.Writer) (*soakResult, error) {
	// Short lifetimes, a short reap grace and frequent reaps bring the
	// run to its steady state (as many records reaped as are created)
	// before the mark: a session idle for its minute is reaped within
	// 90 s, an audit event within 75 s.
	args := []string{"--size", "1", "--session-idle", sc.sessionIdle.String(), "--reap-grace", sc.reapGrace.String(), "--log-level", "none",
		"--audit-retention", sc.auditKeep.String(), "--reap-every", sc.reapEvery.String()}
	if sc.pprof {
		args = append(args, "--pprof")
	}
	ch, err := spawnNodes(ctx, stderr, 90*time.Second, args...)
	if err != nil {
		return nil, err
	}
	defer ch.stop()
	if sc.pprof {
		logf(stderr, "pprof of the node: %s", strings.Join(ch.info.Pprof, ", "))
	}
	cfg := &config{
		targets: ch.info.URLs, issuer: ch.info.Issuer, adminToken: ch.info.AdminToken,
		concurrency: max(sc.concurrency, sc.storm), timeout: 30 * time.Second, users: sc.users,
		tokenTTL: sc.tokenTTL, soak: true, dataDir: filepath.Dir(ch.info.DataDirs[0]), pid: ch.info.PID, control: ch.info.Control,
		soakSample: time.Second, reportInterval: sc.reportEvery,
	}
	e, cleanup, err := prepare(ctx, cfg, stderr)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	p := password.DefaultParams()
	res := &soakResult{Slots: ch.info.Slots, Params: ch.info.Password}

	mixed := *cfg
	mixed.scenario, mixed.concurrency, mixed.duration, mixed.soakMark = mixedName, sc.concurrency, sc.duration, sc.mark
	if res.Mixed, err = load(ctx, &mixed, e, stderr); err != nil {
		return nil, err
	}
	if sc.storm == 0 {
		return res, nil
	}
	storm := *cfg
	storm.scenario, storm.concurrency, storm.duration = "password-signin", sc.storm, sc.stormDuration
	storm.soakMark, storm.soakSample, storm.reportInterval = 0, 50*time.Millisecond, 0
	before, err := readHeap(ctx, ch.info.Control, true)
	if err != nil {
		return nil, err
	}
	if res.Storm, err = load(ctx, &storm, e, stderr); err != nil {
		return nil, err
	}
	after, err := readHeap(ctx, ch.info.Control, false)
	if err != nil {
		return nil, err
	}
	res.StormHeapStart, res.StormHeapPeak = before.ObjectsBytes, after.PeakBytes
	if f := res.Storm.Soak.RSSBytes; f != nil && f.Start > 0 && f.Peak > 0 {
		res.StormRSSGrowth = f.Peak - f.Start
	}
	res.SemaphoreBound = int64(res.Slots) * int64(p.Memory) * 1024
	res.Unbounded = int64(sc.storm) * int64(p.Memory) * 1024
	return res, nil
}

// flatLimit is the bound on the growth of the data dir and the
// RSS between the mark and the end of a soak.
const flatLimit = 0.10

func (r *soakResult) writeTable(w io.Writer) {
	fmt.Fprintln(w, "== mixed load ==")
	r.Mixed.writeTable(w)
	if s := r.Mixed.Soak; s != nil {
		for _, x := range []struct {
			name string
			f    *figures
		}{{"data dir", s.DataDirBytes}, {"rss", s.RSSBytes}, {"go heap", s.HeapBytes}, {"audit trail", s.AuditBytes}} {
			if x.f == nil {
				continue
			}
			verdict := "flat (within 10 %): met"
			if g := x.f.growth(); g > flatLimit || g < -flatLimit {
				verdict = "not flat (beyond 10 %): not met"
			}
			fmt.Fprintf(w, "%s from the mark to the end: %+.1f %%, %s\n", x.name, 100*x.f.growth(), verdict)
		}
		if len(s.PartsMark) > 0 && len(s.PartsEnd) > 0 {
			var parts []string
			last := 0.0
			for _, k := range []string{"state file", "raft log", "raft snapshots", "other"} {
				parts = append(parts, fmt.Sprintf("%s %s -> %s (largest first at %s)", k, bytesStr(s.PartsMark[k]), bytesStr(s.PartsEnd[k]),
					time.Duration(s.PartsGrewS[k]*float64(time.Second))))
				last = max(last, s.PartsGrewS[k])
			}
			fmt.Fprintf(w, "data dir by file, mark -> end: %s\n", strings.Join(parts, ", "))
			if g := s.DataDirBytes; g != nil && g.growth() > flatLimit {
				fmt.Fprintf(w, "the data dir grew after the mark until %s and not in the %s after: bbolt grows its files in steps (16 MiB each past 16 MiB, its AllocSize) and never returns space, so the files stand at the largest the load has needed\n",
					time.Duration(last*float64(time.Second)), (time.Duration(r.Mixed.DurationS*float64(time.Second)) - time.Duration(last*float64(time.Second))).Round(time.Second))
			}
		}
	}
	if r.Storm == nil {
		return
	}
	fmt.Fprintln(w, "\n== login storm ==")
	r.Storm.writeTable(w)
	fmt.Fprintf(w, "\nstorm: peak RSS %s over its start, peak Go heap %s over its start (%s -> %s); the hasher's %d slots x %s hold at most %s at once (without the semaphore, %d connections would hold %s)\n",
		signed(r.StormRSSGrowth), signed(int64(r.StormHeapPeak)-int64(r.StormHeapStart)), bytesStr(int64(r.StormHeapStart)), bytesStr(int64(r.StormHeapPeak)),
		r.Slots, r.Params, bytesStr(r.SemaphoreBound), r.Storm.Concurrency, bytesStr(r.Unbounded))
}

func signed(n int64) string {
	if n >= 0 {
		return "+" + bytesStr(n)
	}
	return bytesStr(n)
}
