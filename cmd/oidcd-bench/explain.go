package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
)

// A matrix run that misses its target must say why, from this run's own
// measurements: the speed issue's "measured bottleneck and a profile
// excerpt". While each scenario runs, the matrix takes a CPU profile of
// the node process (through its child's control listener) and the load
// generator's own CPU time, and it does the same for the trivial handler,
// so a figure below its ceiling comes with where the node's CPU went and
// how much of the machine the load generator took.

// cpuUse is what one run cost in CPU, on the serving side and on the
// load generator's.
type cpuUse struct {
	// ProfileS is how long the serving process was profiled; ServerCores
	// its CPU over that time (samples / duration), ServerUsPerOp its CPU
	// per operation in µs.
	ProfileS      float64 `json:"profile_s"`
	ServerCores   float64 `json:"server_cores"`
	ServerUsPerOp float64 `json:"server_cpu_us_per_op"`
	// LoadGenCores is the load generator's CPU over the run
	// (getrusage), LoadGenUsPerOp the same per operation.
	LoadGenCores   float64 `json:"loadgen_cores"`
	LoadGenUsPerOp float64 `json:"loadgen_cpu_us_per_op"`
	// Shares are the serving process's CPU by what it was doing,
	// inclusive (a sample counts for every probe its stack matches);
	// Top the functions with the most samples of their own.
	Shares []share `json:"shares,omitempty"`
	Top    []share `json:"top,omitempty"`
}

// share is a part of a profile: a name and its fraction of the samples.
type share struct {
	Name     string  `json:"name"`
	Fraction float64 `json:"fraction"`
}

// probe names a part of the node's work by the functions on its stack.
type probe struct {
	name string
	// prefixes: a sample matches when any frame starts with one of them.
	prefixes []string
	// outside: and no frame starts with one of these.
	outside []string
}

// probes are the parts the explanations name: the ceilings' own work
// first (signatures, password hashing), then what else a request costs.
var probes = []probe{
	{name: "RS256 signing and verifying (crypto/rsa)", prefixes: []string{"crypto/rsa.", "crypto/internal/fips140/rsa."}},
	{name: "argon2id", prefixes: []string{"golang.org/x/crypto/argon2."}},
	{name: "net/http outside oidcd's handlers", prefixes: []string{"net/http.(*conn).serve"}, outside: []string{"github.com/oidcd/oidcd/"}},
	{name: "oidcd's handlers and middleware", prefixes: []string{"github.com/oidcd/oidcd/node.", "github.com/oidcd/oidcd/oidc.", "github.com/oidcd/oidcd/webui.", "github.com/oidcd/oidcd/logout.", "github.com/oidcd/oidcd/internal/"}},
	{name: "state reads and writes (fsm, bbolt)", prefixes: []string{"github.com/oidcd/oidcd/fsm.", "go.etcd.io/bbolt."}},
	{name: "raft (log, replication, read index)", prefixes: []string{"github.com/hashicorp/raft", "github.com/oidcd/oidcd/cluster."}},
	{name: snapshotProbe, prefixes: []string{"github.com/oidcd/oidcd/fsm.(*snapshot).Persist"}},
	{name: "JSON and CBOR encoding", prefixes: []string{"encoding/json.", "github.com/fxamacker/cbor/"}},
	{name: "system calls (sockets, files)", prefixes: []string{"syscall.", "internal/runtime/syscall."}},
	{name: "memory allocation", prefixes: []string{"runtime.mallocgc"}},
	{name: "garbage collection", prefixes: []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge"}},
	{name: "scheduler and timers", prefixes: []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.checkTimers"}},
}

// snapshotProbe names the probe of raft snapshots.
const snapshotProbe = "raft snapshots (the state compacted and written)"

// topFunctions is how many functions an excerpt lists.
const topFunctions = 8

// summarize reads a CPU profile of ops operations into shares.
func summarize(p *profile.Profile, ops uint64) cpuUse {
	var u cpuUse
	vi := cpuValueIndex(p)
	var total int64
	hits := make([]int64, len(probes))
	flat := map[string]int64{}
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		var names []string
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				if ln.Function != nil {
					names = append(names, ln.Function.Name)
				}
			}
		}
		if len(names) > 0 {
			flat[names[0]] += v // the leaf: the first line of the first location
		}
		for i, pr := range probes {
			if pr.matches(names) {
				hits[i] += v
			}
		}
	}
	u.ProfileS = float64(p.DurationNanos) / 1e9
	if total == 0 || u.ProfileS <= 0 {
		return u
	}
	cpuS := float64(total) / 1e9 // nanoseconds of CPU
	u.ServerCores = cpuS / u.ProfileS
	if ops > 0 {
		u.ServerUsPerOp = cpuS * 1e6 / float64(ops)
	}
	for i, pr := range probes {
		if hits[i] > 0 {
			u.Shares = append(u.Shares, share{Name: pr.name, Fraction: float64(hits[i]) / float64(total)})
		}
	}
	for name, v := range flat {
		u.Top = append(u.Top, share{Name: name, Fraction: float64(v) / float64(total)})
	}
	sort.Slice(u.Top, func(i, j int) bool {
		if u.Top[i].Fraction != u.Top[j].Fraction {
			return u.Top[i].Fraction > u.Top[j].Fraction
		}
		return u.Top[i].Name < u.Top[j].Name
	})
	if len(u.Top) > topFunctions {
		u.Top = u.Top[:topFunctions]
	}
	return u
}

// cpuValueIndex is the index of the CPU nanoseconds among a profile's
// sample values (the last one in the runtime's CPU profiles).
func cpuValueIndex(p *profile.Profile) int {
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			return i
		}
	}
	return len(p.SampleType) - 1
}

func (pr probe) matches(names []string) bool {
	hit := false
	for _, n := range names {
		for _, o := range pr.outside {
			if strings.HasPrefix(n, o) {
				return false
			}
		}
		for _, pre := range pr.prefixes {
			if strings.HasPrefix(n, pre) {
				hit = true
			}
		}
	}
	return hit
}

// profiler takes a CPU profile of a child process while a run goes on,
// and the load generator's own CPU time over the same run.
type profiler struct {
	control string // the child's control listener
	seconds int
	began   time.Time
	rusage  time.Duration
	done    chan profileResult
}

type profileResult struct {
	p   *profile.Profile
	err error
}

// startProfile begins profiling the child behind control for the run
// about to start: a profile of d rounded down to whole seconds (at least
// one), from half a second in, so that it sees the run and not its
// start or end.
func startProfile(ctx context.Context, control string, d time.Duration) *profiler {
	pf := &profiler{control: control, seconds: max(1, int((d-time.Second)/time.Second)), began: time.Now(),
		rusage: selfCPU(), done: make(chan profileResult, 1)}
	go func() {
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			pf.done <- profileResult{err: ctx.Err()}
			return
		}
		p, err := fetchProfile(ctx, control, pf.seconds)
		pf.done <- profileResult{p, err}
	}()
	return pf
}

// finish waits for the profile and summarizes the run of ops operations.
func (pf *profiler) finish(ops uint64) (cpuUse, error) {
	lg, took := selfCPU()-pf.rusage, time.Since(pf.began)
	r := <-pf.done
	if r.err != nil {
		return cpuUse{}, r.err
	}
	// The profile covers seconds of the run, the ops all of it: scale the
	// operations to the profiled time.
	profiled := uint64(float64(ops) * float64(r.p.DurationNanos) / float64(took))
	u := summarize(r.p, profiled)
	u.LoadGenCores = lg.Seconds() / took.Seconds()
	if ops > 0 {
		u.LoadGenUsPerOp = float64(lg.Microseconds()) / float64(ops)
	}
	return u, nil
}

// fetchProfile asks the child's control listener for a CPU profile of
// seconds.
func fetchProfile(ctx context.Context, control string, seconds int) (*profile.Profile, error) {
	u := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", control, seconds)
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: newTransport(1), Timeout: time.Duration(seconds+30) * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%s: status %d: %s", u, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return profile.Parse(resp.Body)
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadExplained is load, with the serving child behind control profiled
// during the run when explain is set. A profile that fails is logged and
// left out: the figures stand without it.
func loadExplained(ctx context.Context, cfg *config, e *env, stderr io.Writer, explain bool, control string) (*report, *cpuUse, error) {
	var pf *profiler
	if explain && control != "" {
		cfg.onStart = func() { pf = startProfile(ctx, control, cfg.duration) }
	}
	rep, err := load(ctx, cfg, e, stderr)
	if err != nil || pf == nil {
		return rep, nil, err
	}
	u, perr := pf.finish(rep.Ops)
	if perr != nil {
		logf(stderr, "%s: no profile: %v", cfg.scenario, perr)
		return rep, nil, nil
	}
	return rep, &u, nil
}

// explanations renders, for every run that missed its target, where the
// time went: the CPU split between the node process and the load
// generator, what that split allows, and the node's profile.
func (res *matrixResult) explanations() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	var missed []matrixRun
	for _, r := range res.Runs {
		if r.Met != nil && !*r.Met {
			missed = append(missed, r)
		}
	}
	if len(missed) == 0 {
		return ""
	}
	p("\n### Targets not met: the bottleneck, from this run's profiles\n\n")
	p("While each scenario ran, the matrix profiled the node process (`runtime/pprof`, %d s from half a second in) and counted the load generator's own CPU (getrusage). ", max(1, int(res.BenchtimeS)-1))
	p("Both share the machine's %d cores: the rate is the cores they use over their two costs per operation added, so a target names the node's cost it needs at the same use of the cores. Shares are inclusive (a sample counts for every part on its stack).\n", res.Machine.GOMAXPROCS)
	if t := res.Ceilings.TrivialCPU; t != nil {
		p("The trivial handler's first run cost %.1f µs of server CPU and %.1f µs of load generator per request (server %.2f cores, load generator %.2f); a scenario it bounds is compared with the two runs around it.\n",
			t.ServerUsPerOp, t.LoadGenUsPerOp, t.ServerCores, t.LoadGenCores)
	}
	for _, r := range missed {
		p("\n**%s on %d node(s)**: %s/s, p99 %.1f ms, %s; target %s.\n\n", r.Scenario, r.Nodes, thousands(r.OpsPerS), r.Latency.P99,
			fmt.Sprintf("%.2f of %s", r.Fraction, r.Ceiling), r.Target)
		u := r.CPU
		if u == nil || u.ServerUsPerOp == 0 {
			p("- No profile of this run.\n")
			continue
		}
		used := u.ServerCores + u.LoadGenCores
		p("- CPU per operation: node process %s µs (%.2f cores), load generator %s µs (%.2f cores); together %.2f of the %d cores.\n",
			thousands(u.ServerUsPerOp), u.ServerCores, thousands(u.LoadGenUsPerOp), u.LoadGenCores, used, res.Machine.GOMAXPROCS)
		t := res.Ceilings.TrivialCPU
		if r.Trivial != nil && r.Trivial.CPU != nil {
			t = r.Trivial.CPU // the trivial runs around this scenario
		}
		switch {
		case r.Ceiling == "trivial" && t != nil && t.ServerUsPerOp > 0:
			both := t.ServerUsPerOp + t.LoadGenUsPerOp
			p("- Against the trivial handler's %s µs (server and load generator, the runs around it), the fraction is about %s / %s = %.2f (measured %.2f).",
				thousands(both), thousands(both), thousands(u.ServerUsPerOp+u.LoadGenUsPerOp), both/(u.ServerUsPerOp+u.LoadGenUsPerOp), r.Fraction)
			ceil := res.Ceilings.Trivial
			if r.Trivial != nil && r.Trivial.OpsPerS > 0 {
				ceil = r.Trivial.OpsPerS
			}
			if frac := r.TargetOpsPerS / ceil; frac > 0 {
				p(" %.2f needs the node at %s", frac, needStr(both/frac-u.LoadGenUsPerOp, u.ServerUsPerOp))
			}
			p(".\n")
		case r.TargetOpsPerS > 0:
			need := used*1e6/r.TargetOpsPerS - u.LoadGenUsPerOp
			p("- At the same use of the cores, %s/s needs the node at %s%s.\n",
				thousands(r.TargetOpsPerS), needStr(need, u.ServerUsPerOp), beyond(need, r.Ceiling, res.Ceilings))
		}
		if name, alone := ceilingWork(r.Ceiling, res.Ceilings); name != "" {
			sh := shareOf(u, name)
			p("- The ceiling's own work (%s) took %.0f %% of the node's CPU, %s µs per operation (measured alone: %s µs): %.2f cores, where the ceiling gives it all %d; everything else in the node cost %s µs per operation.\n",
				name, 100*sh, thousands(sh*u.ServerUsPerOp), thousands(alone), sh*u.ServerCores, res.Machine.GOMAXPROCS, thousands((1-sh)*u.ServerUsPerOp))
		}
		if r.MaxP99Ms > 0 && r.Latency.P99 >= r.MaxP99Ms && r.OpsPerS > 0 && r.Latency.Mean > 0 {
			ratio := r.Latency.P99 / r.Latency.Mean
			p("- Latency: %d workers at %s/s wait %.1f ms on average (Little's law: workers / rate; measured mean %.1f ms), and the p99 is %.1f × the mean. ",
				res.Concurrency, thousands(r.OpsPerS), float64(res.Concurrency)/r.OpsPerS*1000, r.Latency.Mean, ratio)
			need := float64(res.Concurrency) * ratio / r.MaxP99Ms * 1000
			p("A p99 under %.0f ms at that spread needs a mean under %.1f ms: %s/s", r.MaxP99Ms, r.MaxP99Ms/ratio, thousands(need))
			if u != nil && u.ServerUsPerOp > 0 {
				cost := used*1e6/need - u.LoadGenUsPerOp
				p(", or %s µs of node CPU per operation at the same use of the cores%s", thousands(cost), beyond(cost, r.Ceiling, res.Ceilings))
			}
			p(".")
			if r.Ceiling == "two signatures" {
				p(" At the two-signature ceiling itself (%s/s) the mean would be %.1f ms.", thousands(res.Ceilings.TwoSig), float64(res.Concurrency)/res.Ceilings.TwoSig*1000)
			}
			p("\n")
		}
		p("\n| the node process's CPU went to | share |\n|---|---|\n")
		shares := append([]share(nil), u.Shares...)
		sort.SliceStable(shares, func(i, j int) bool { return shares[i].Fraction > shares[j].Fraction })
		for _, s := range shares {
			if s.Fraction >= 0.01 {
				p("| %s | %.1f %% |\n", s.Name, 100*s.Fraction)
			}
		}
		p("\nProfile excerpt, the functions with the most samples of their own:\n\n```\n")
		for _, t := range u.Top {
			p("%5.1f%%  %s\n", 100*t.Fraction, t.Name)
		}
		p("```\n")
	}
	return b.String()
}

// ceilingWork is the probe that measures a ceiling's own work, and what
// that work costs per operation alone, in µs.
func ceilingWork(ceiling string, c ceilings) (string, float64) {
	switch ceiling {
	case "argon2id":
		return "argon2id", c.Argon2Ms * 1000
	case "two signatures":
		return probes[0].name, 2 * c.SignMs * 1000
	}
	return "", 0
}

// beyond says when a node cost a target needs is below the work no such
// operation can skip, each part at its cost measured alone: the two RS256
// signatures of every sign-in, and a password sign-in's argon2id hash.
func beyond(need float64, ceiling string, c ceilings) string {
	sigs := 2 * c.SignMs * 1000
	var floor float64
	var what string
	switch ceiling {
	case "two signatures":
		floor, what = sigs, "the two signatures"
	case "argon2id":
		floor, what = c.Argon2Ms*1000+sigs, "one argon2id hash and two signatures"
	default:
		return ""
	}
	if floor <= 0 || need >= floor {
		return ""
	}
	return fmt.Sprintf(", less than %s alone cost (%s µs): out of reach on these cores", what, thousands(floor))
}

// shareOf is the fraction of u's samples that the named probe matched.
func shareOf(u *cpuUse, name string) float64 {
	for _, s := range u.Shares {
		if s.Name == name {
			return s.Fraction
		}
	}
	return 0
}

// needStr is a cost the target needs, with its share of the cost now;
// a cost of zero or less says the load generator alone takes too much.
func needStr(need, now float64) string {
	if need <= 0 {
		return "0 (out of reach: the load generator alone takes more than the target leaves)"
	}
	return fmt.Sprintf("%s µs per operation or less (%.0f %% of its cost now)", thousands(need), 100*need/now)
}

// grownGoal is Speed II's bound on what a grown store may cost: its
// figures within 10 % of the empty store's.
const grownGoal = 0.90

// againstBaseline renders a grown store's figures against the empty
// store's run: the fraction of each ceiling here over the same fraction
// there (each run against ceilings of its own sitting; a scenario without
// a ceiling compares its rates), and where one falls short, the node's
// CPU per operation on both and what grew.
func (res *matrixResult) againstBaseline() string {
	if res.Baseline == nil {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n### Against the empty store (%s, %s, %s)\n\n", res.Baseline.File, res.Baseline.Date, res.Baseline.Commit)
	p("| scenario | nodes | grown: ops/s, p99 ms | empty: ops/s, p99 ms | grown / empty | goal | met |\n|---|---|---|---|---|---|---|\n")
	var short []string
	for _, r := range res.Runs {
		base, ok := findRun(res.Baseline.Runs, r.Scenario, r.Nodes)
		if !ok || base.OpsPerS <= 0 {
			continue
		}
		ratio := r.OpsPerS / base.OpsPerS
		if r.Fraction > 0 && base.Fraction > 0 {
			ratio = r.Fraction / base.Fraction
		}
		met := "**met**"
		if ratio < grownGoal {
			met = "not met"
			if line := grownCost(r, base); line != "" {
				short = append(short, line)
			}
		}
		p("| %s | %d | %s, %.1f | %s, %.1f | %.2f | ≥ %.2f | %s |\n", r.Scenario, r.Nodes, thousands(r.OpsPerS), r.Latency.P99,
			thousands(base.OpsPerS), base.Latency.P99, ratio, grownGoal, met)
	}
	for _, s := range short {
		p("\n%s\n", s)
	}
	return b.String()
}

// grownCost says how a run's cost grew over the empty store's, from the
// two profiles: the node's CPU per operation and the parts that grew.
func grownCost(r, base matrixRun) string {
	if r.CPU == nil || base.CPU == nil || base.CPU.ServerUsPerOp <= 0 {
		return fmt.Sprintf("- **%s on %d node(s)**: no profile to compare.", r.Scenario, r.Nodes)
	}
	var grew []string
	for _, s := range r.CPU.Shares {
		was := shareOf(base.CPU, s.Name) * base.CPU.ServerUsPerOp
		now := s.Fraction * r.CPU.ServerUsPerOp
		if now-was >= 0.02*base.CPU.ServerUsPerOp {
			grew = append(grew, fmt.Sprintf("%s %s → %s µs", s.Name, thousands(was), thousands(now)))
		}
	}
	line := fmt.Sprintf("- **%s on %d node(s)**: node CPU per operation %s µs, against %s µs on the empty store; load generator %s against %s µs.",
		r.Scenario, r.Nodes, thousands(r.CPU.ServerUsPerOp), thousands(base.CPU.ServerUsPerOp), thousands(r.CPU.LoadGenUsPerOp), thousands(base.CPU.LoadGenUsPerOp))
	if len(grew) > 0 {
		line += " What grew (per operation): " + strings.Join(grew, "; ") + "."
	}
	if sh := shareOf(r.CPU, snapshotProbe); sh >= 0.05 {
		line += fmt.Sprintf(" A raft snapshot of the grown store ran during this scenario (%.0f %% of the node's CPU in it): snapshots are spaced twenty times their own cost apart, about 5 %% of a core over time, so one scenario's few seconds hold all of one or none.", 100*sh)
	}
	return line
}

func findRun(runs []matrixRun, scenario string, nodes int) (matrixRun, bool) {
	for _, r := range runs {
		if r.Scenario == scenario && r.Nodes == nodes {
			return r, true
		}
	}
	return matrixRun{}, false
}
