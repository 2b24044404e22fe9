package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for oidcd-bench when the matrix
// and soak commands start their child process (os.Executable is the test
// binary): `<test binary> nodes ...` runs the nodes command instead of
// the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "nodes" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		code := runNodes(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestJudge(t *testing.T) {
	c := ceilings{TwoSig: 1000, Argon2PerS: 80, Trivial: 20000}
	yes, no := true, false
	cases := []struct {
		name string
		run  matrixRun
		frac float64
		met  *bool
	}{
		{"password 0.85 of argon2id", matrixRun{Scenario: "password-signin", Nodes: 1, Ops: 680, OpsPerS: 68}, 0.85, &yes},
		{"password 0.76 of argon2id", matrixRun{Scenario: "password-signin", Nodes: 1, Ops: 610, OpsPerS: 61}, 0.763, &no},
		{"password against the argon2id runs around it", matrixRun{Scenario: "password-signin", Nodes: 1, Ops: 680, OpsPerS: 68,
			Near: &nearCeiling{PerS: 100, Runs: []float64{90, 110}}}, 0.68, &no},
		{"silent against the signatures around it", matrixRun{Scenario: "silent-signin", Nodes: 1, Ops: 6000, OpsPerS: 600, Latency: latency{P99: 40},
			Near: &nearCeiling{PerS: 800}}, 0.75, &yes},
		{"password on three nodes has no target", matrixRun{Scenario: "password-signin", Nodes: 3, Ops: 500, OpsPerS: 50}, 0.625, nil},
		{"silent 0.70 of the two-signature ceiling", matrixRun{Scenario: "silent-signin", Nodes: 1, Ops: 7000, OpsPerS: 700, Latency: latency{P99: 49}}, 0.7, &yes},
		{"silent 0.69", matrixRun{Scenario: "silent-signin", Nodes: 1, Ops: 6900, OpsPerS: 690, Latency: latency{P99: 20}}, 0.69, &no},
		{"silent fast enough but p99 too slow", matrixRun{Scenario: "silent-signin", Nodes: 1, Ops: 8000, OpsPerS: 800, Latency: latency{P99: 51}}, 0.8, &no},
		{"silent on three nodes: a third", matrixRun{Scenario: "silent-signin", Nodes: 3, Ops: 3400, OpsPerS: 340, Latency: latency{P99: 20}}, 0.34, &yes},
		{"userinfo 0.75", matrixRun{Scenario: "userinfo", Nodes: 1, Ops: 150000, OpsPerS: 15000}, 0.75, &yes},
		{"userinfo 0.74", matrixRun{Scenario: "userinfo", Nodes: 1, Ops: 148000, OpsPerS: 14800}, 0.74, &no},
		{"userinfo against the trivial runs around it", matrixRun{Scenario: "userinfo", Nodes: 1, Ops: 150000, OpsPerS: 15000,
			Trivial: &trivialRun{OpsPerS: 24000}}, 0.625, &no},
		{"userinfo with errors", matrixRun{Scenario: "userinfo", Nodes: 1, Ops: 160000, OpsPerS: 16000, Errors: map[string]uint64{"timeout": 1000}}, 0.8, &no},
		{"userinfo on three nodes", matrixRun{Scenario: "userinfo", Nodes: 3, Ops: 100000, OpsPerS: 10000}, 0.5, &yes},
		{"introspect 0.70", matrixRun{Scenario: "introspect", Nodes: 1, Ops: 140000, OpsPerS: 14000}, 0.7, &yes},
		{"introspect 0.65", matrixRun{Scenario: "introspect", Nodes: 1, Ops: 130000, OpsPerS: 13000}, 0.65, &no},
		{"introspect on three nodes below", matrixRun{Scenario: "introspect", Nodes: 3, Ops: 90000, OpsPerS: 9000}, 0.45, &no},
		{"discovery 0.95", matrixRun{Scenario: "discovery", Nodes: 1, Ops: 190000, OpsPerS: 19000}, 0.95, &yes},
		{"discovery 0.92 on one node", matrixRun{Scenario: "discovery", Nodes: 1, Ops: 184000, OpsPerS: 18400}, 0.92, &no},
		{"discovery 0.75 on three nodes", matrixRun{Scenario: "discovery", Nodes: 3, Ops: 150000, OpsPerS: 15000}, 0.75, &yes},
		{"jwks below", matrixRun{Scenario: "jwks", Nodes: 3, Ops: 140000, OpsPerS: 14000}, 0.7, &no},
		{"mixed has no ceiling", matrixRun{Scenario: "mixed", Nodes: 1, Ops: 1000, OpsPerS: 100}, 0, nil},
	}
	for _, c2 := range cases {
		t.Run(c2.name, func(t *testing.T) {
			r := c2.run
			judge(&r, c)
			if r.Fraction != c2.frac {
				t.Errorf("fraction: got %v, want %v", r.Fraction, c2.frac)
			}
			switch {
			case c2.met == nil && r.Met != nil:
				t.Errorf("met: got %v (target %q), want no target", *r.Met, r.Target)
			case c2.met != nil && r.Met == nil:
				t.Errorf("met: got no target, want %v", *c2.met)
			case c2.met != nil && *r.Met != *c2.met:
				t.Errorf("met: got %v, want %v (target %q)", *r.Met, *c2.met, r.Target)
			}
		})
	}
}

func TestRewriteSection(t *testing.T) {
	md := sectionBegin + "\n## Figures\n\nnew\n\n" + sectionEnd + "\n"
	gb, ge := (&matrixResult{Grown: 100}).markers()
	gmd := gb + "\n## Grown 100\n\nnew\n\n" + ge + "\n"
	hb, he := (&matrixResult{Grown: 1000}).markers()
	hmd := hb + "\n## Grown 1000\n\nnew\n\n" + he + "\n"
	cases := []struct {
		name, in, want string
		err            bool
		grown, big     bool
	}{
		{name: "grown: right after the matrix",
			in:   "# B\n\n" + md + "\n## Older\n",
			want: "# B\n\n" + md + "\n" + gmd + "\n## Older\n", grown: true},
		{name: "grown: replaces its own section only",
			in:   "# B\n\n" + md + "\n" + gb + "\nstale\n" + ge + "\n\n" + hmd + "\n## Older\n",
			want: "# B\n\n" + md + "\n" + gmd + "\n" + hmd + "\n## Older\n", grown: true},
		{name: "grown: a new size after the other sizes",
			in:   "# B\n\n" + md + "\n" + gmd + "\n## Older\n",
			want: "# B\n\n" + md + "\n" + gmd + "\n" + hmd + "\n## Older\n", grown: true, big: true},
		{name: "the matrix leaves the grown section",
			in:   "# B\n\n" + sectionBegin + "\nstale\n" + sectionEnd + "\n\n" + gmd + "\n## Older\n",
			want: "# B\n\n" + md + "\n" + gmd + "\n## Older\n"},
		{"first run: before the first heading",
			"# Benchmarks\n\nIntro.\n\n## Older figures\n\nold\n",
			"# Benchmarks\n\nIntro.\n\n" + md + "\n## Older figures\n\nold\n", false, false, false},
		{"no heading: appended", "# Benchmarks\n", "# Benchmarks\n\n" + md, false, false, false},
		{"replaces the section and nothing else",
			"# B\n\n" + sectionBegin + "\nstale\n" + sectionEnd + "\n\n## Older\n",
			"# B\n\n" + md + "\n## Older\n", false, false, false},
		{"a lone marker is an error", "# B\n\n" + sectionBegin + "\nstale\n", "", true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
			if err := os.WriteFile(path, []byte(c.in), 0o644); err != nil {
				t.Fatal(err)
			}
			m, b, e := md, sectionBegin, sectionEnd
			if c.grown {
				m, b, e = gmd, gb, ge
			}
			if c.big {
				m, b, e = hmd, hb, he
			}
			err := rewriteSection(path, m, b, e)
			if c.err {
				if err == nil {
					t.Fatal("got no error, want one")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
			// A second run with the same figures changes nothing.
			if err := rewriteSection(path, m, b, e); err != nil {
				t.Fatal(err)
			}
			again, _ := os.ReadFile(path)
			if !bytes.Equal(again, got) {
				t.Errorf("second run: got\n%s\nwant\n%s", again, got)
			}
		})
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 58.44: "58.4", 99.96: "100", 100: "100", 1234.4: "1,234", 46000: "46,000", 1234567: "1,234,567"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v): got %q, want %q", in, got, want)
		}
	}
}

// TestMatrixEndToEnd runs a small matrix (one node, two scenarios, one
// second each) through the child process and checks the file it writes.
func TestMatrixEndToEnd(t *testing.T) {
	dir := t.TempDir()
	md, js := filepath.Join(dir, "BENCHMARKS.md"), filepath.Join(dir, "m.json")
	if err := os.WriteFile(md, []byte("# Benchmarks\n\nIntro.\n\n## Older\n\nkept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"matrix", "--benchtime", "1s", "--ceiling-time", "100ms", "--sizes", "1",
		"--scenarios", "discovery,userinfo", "--concurrency", "4", "--users", "2", "--write", md, "--json", js,
		"--command", "make bench BENCHTIME=1s"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var res matrixResult
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	c := res.Ceilings
	if c.SignPerCore <= 0 || c.TwoSig <= 0 || c.Argon2Ms <= 0 || c.Argon2PerS <= 0 || c.Trivial <= 0 {
		t.Errorf("ceilings not measured: %+v", c)
	}
	if len(res.Runs) != 2 {
		t.Fatalf("got %d runs, want 2: %+v", len(res.Runs), res.Runs)
	}
	missed := false
	for _, r := range res.Runs {
		if r.Ops == 0 || len(r.Errors) != 0 || r.Ceiling != "trivial" || r.Fraction <= 0 || r.Met == nil {
			t.Errorf("run %+v: want ops, no error, a fraction of the trivial ceiling and a verdict", r)
		}
		if r.CPU == nil || r.CPU.ServerCores <= 0 || r.CPU.ServerUsPerOp <= 0 || r.CPU.LoadGenCores <= 0 || len(r.CPU.Shares) == 0 || len(r.CPU.Top) == 0 {
			t.Errorf("run %s: want the node's profile and the load generator's CPU, got %+v", r.Scenario, r.CPU)
		}
		if r.Trivial == nil || r.Trivial.OpsPerS <= 0 {
			t.Errorf("run %s: want the trivial handler measured around it, got %+v", r.Scenario, r.Trivial)
		}
		missed = missed || (r.Met != nil && !*r.Met)
	}
	if tc := c.TrivialCPU; tc == nil || tc.ServerUsPerOp <= 0 || tc.LoadGenUsPerOp <= 0 {
		t.Errorf("the trivial handler's CPU: %+v", c.TrivialCPU)
	}
	if len(res.Nodes) != 1 || res.Nodes[0].RSSBytes <= 0 || res.Nodes[0].DataDirBytes <= 0 {
		t.Errorf("node usage: %+v", res.Nodes)
	}
	got, _ := os.ReadFile(md)
	for _, want := range []string{"# Benchmarks\n\nIntro.\n\n" + sectionBegin, "Command: `make bench BENCHTIME=1s`",
		"| discovery | 1 |", "| userinfo | 1 |", "of trivial", "GOMAXPROCS", sectionEnd + "\n\n## Older\n\nkept\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, got)
		}
	}
	if explained := strings.Contains(string(got), "### Targets not met") && strings.Contains(string(got), "Profile excerpt"); explained != missed {
		t.Errorf("a target missed: %v, but explanations written: %v:\n%s", missed, explained, got)
	}
}

// TestSoakAndLoginStorm is a short soak: a few seconds of the mixed
// profile with the data dir and RSS watched, then a storm of 100
// concurrent fresh password sign-ins at the production argon2id
// parameters. It asserts what cannot depend on timing: the figures are
// taken, and the storm's peak RSS stays far below what the connections
// would hold without the hasher's semaphore (each hash holds m = 19 MiB).
// The storm signs in as 100 people, one per connection: with 4 people, 25
// sign-ins of each at once are what the per-account throttle counts
// before the guess, and on a loaded machine they locked every account and
// the storm saw only 429s (a lockout, as it should be for that pattern).
func TestSoakAndLoginStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("a 12 s soak")
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"soak", "--duration", "6s", "--mark", "2s", "--concurrency", "4", "--users", "100",
		"--storm", "100", "--storm-duration", "5s", "--report-interval", "0", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var res soakResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	m := res.Mixed
	if m == nil || m.Ops == 0 || m.Soak == nil || m.Soak.DataDirBytes == nil || m.Soak.RSSBytes == nil {
		t.Fatalf("mixed: %+v", m)
	}
	for name, f := range map[string]*figures{"data dir": m.Soak.DataDirBytes, "rss": m.Soak.RSSBytes} {
		if f.Start <= 0 || f.Mark <= 0 || f.End <= 0 || f.Peak < f.End || f.Peak < f.Mark {
			t.Errorf("%s figures: %+v; want start, mark, end and a peak at least as high", name, *f)
		}
	}
	if a := m.Soak.AuditBytes; a == nil || a.End <= 0 || a.Peak < a.End {
		t.Errorf("audit trail figures: %+v; want the trail measured", a)
	}
	if m.Soak.MarkS < 1.9 {
		t.Errorf("mark taken at %.1f s, want 2 s", m.Soak.MarkS)
	}
	for _, p := range []string{"state file", "raft log"} {
		if m.Soak.PartsMark[p] <= 0 || m.Soak.PartsEnd[p] <= 0 {
			t.Errorf("%s at the mark and the end: %d and %d bytes, want both measured", p, m.Soak.PartsMark[p], m.Soak.PartsEnd[p])
		}
		if _, ok := m.Soak.PartsGrewS[p]; !ok {
			t.Errorf("no time for the %s's largest size: %v", p, m.Soak.PartsGrewS)
		}
	}
	s := res.Storm
	if s == nil || s.Ops == 0 || s.Concurrency != 100 {
		t.Fatalf("storm: %+v", s)
	}
	if res.SemaphoreBound <= 0 || res.Unbounded != 100*res.SemaphoreBound/int64(res.Slots) {
		t.Fatalf("bounds: %+v", res)
	}
	// The semaphore lets Slots hashes hold 19 MiB each; garbage collection
	// may keep as much again before it frees them. Without it, 100
	// connections hash at once. The Go heap is the measure here: under
	// the race detector the RSS also holds shadow memory.
	limit := uint64(res.Unbounded / 4)
	growth := res.StormHeapPeak - min(res.StormHeapPeak, res.StormHeapStart)
	t.Logf("storm: %d sign-ins, heap %d MiB -> peak %d MiB, RSS +%d MiB; semaphore bound %d MiB, unbounded %d MiB",
		s.Ops, res.StormHeapStart>>20, res.StormHeapPeak>>20, res.StormRSSGrowth>>20, res.SemaphoreBound>>20, res.Unbounded>>20)
	if res.StormHeapPeak == 0 || growth > limit {
		t.Errorf("storm heap grew by %d MiB (peak %d), above %d MiB: argon2id memory is not bounded by the semaphore", growth>>20, res.StormHeapPeak, limit>>20)
	}
}

func TestMatrixAndSoakFlagErrors(t *testing.T) {
	cases := []struct {
		cmd  string
		args []string
		want string // "" = accepted
	}{
		{"matrix", nil, ""},
		{"matrix", []string{"--sizes", "1,3", "--scenarios", "userinfo,mixed"}, ""},
		{"matrix", []string{"--sizes", "0"}, "--sizes"},
		{"matrix", []string{"--sizes", "1,x"}, "--sizes"},
		{"matrix", []string{"--scenarios", "trivial"}, "--scenarios"},
		{"matrix", []string{"--benchtime", "10ms"}, "--benchtime"},
		{"matrix", []string{"--concurrency", "0"}, "--concurrency"},
		{"matrix", []string{"extra"}, "unexpected argument"},
		{"soak", nil, ""},
		{"soak", []string{"--duration", "30s"}, ""}, // the mark defaults to a fifth
		{"soak", []string{"--duration", "30s", "--mark", "30s"}, "--mark"},
		{"soak", []string{"--token-ttl", "30"}, "--token-ttl"},
		{"soak", []string{"--session-idle", "30s"}, "--session-idle"},
		{"soak", []string{"--storm", "5000"}, "--storm"},
	}
	for _, c := range cases {
		t.Run(c.cmd+" "+strings.Join(c.args, " "), func(t *testing.T) {
			var err error
			if c.cmd == "matrix" {
				_, err = parseMatrixFlags(c.args, io.Discard)
			} else {
				var sc *soakConfig
				sc, err = parseSoakFlags(c.args, io.Discard)
				if err == nil && (sc.mark <= 0 || sc.mark >= sc.duration) {
					t.Errorf("mark %s for a %s run", sc.mark, sc.duration)
				}
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error about %q", err, c.want)
			}
		})
	}
}

func TestRenewBefore(t *testing.T) {
	for ttl, want := range map[int64]time.Duration{86400: time.Minute, 600: time.Minute, 120: 30 * time.Second, 60: 15 * time.Second, 0: time.Minute} {
		b := &bench{cfg: &config{tokenTTL: ttl}}
		if got := b.renewBefore(); got != want {
			t.Errorf("token ttl %d s: got %s, want %s", ttl, got, want)
		}
	}
}

func TestBracketed(t *testing.T) {
	a := trivialRun{OpsPerS: 40000, CPU: &cpuUse{ServerUsPerOp: 14, LoadGenUsPerOp: 20, ServerCores: 0.6, LoadGenCores: 1}}
	b := trivialRun{OpsPerS: 50000, CPU: &cpuUse{ServerUsPerOp: 12, LoadGenUsPerOp: 18, ServerCores: 0.7, LoadGenCores: 0.9}}
	got := bracketed(a, b)
	if got.OpsPerS != 45000 || got.CPU.ServerUsPerOp != 13 || got.CPU.LoadGenUsPerOp != 19 || len(got.Runs) != 2 || got.Runs[1] != 50000 {
		t.Fatalf("got %+v (cpu %+v)", got, got.CPU)
	}
	if a.CPU.ServerUsPerOp != 14 {
		t.Fatal("bracketed changed its argument")
	}
	if got := bracketed(trivialRun{OpsPerS: 1}, b); got.CPU != nil {
		t.Fatalf("a mean with one side unprofiled: %+v", got.CPU)
	}
}
