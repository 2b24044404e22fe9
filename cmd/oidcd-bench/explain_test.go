package main

import (
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// fakeProfile is a CPU profile of 2 s whose samples have the given stacks
// (leaf first) and CPU nanoseconds.
func fakeProfile(stacks map[string]int64) *profile.Profile {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		DurationNanos: 2e9,
	}
	fns := map[string]*profile.Function{}
	for stack, ns := range stacks {
		var locs []*profile.Location
		for _, name := range strings.Split(stack, ";") {
			fn := fns[name]
			if fn == nil {
				fn = &profile.Function{ID: uint64(len(fns) + 1), Name: name}
				fns[name] = fn
				p.Function = append(p.Function, fn)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn}}}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{ns / 1e7, ns}})
	}
	return p
}

func TestSummarize(t *testing.T) {
	p := fakeProfile(map[string]int64{
		"crypto/internal/fips140/bigmod.addMulVVW1024;crypto/rsa.SignPKCS1v15;github.com/oidcd/oidcd/oidc.(*Provider).sign;net/http.(*conn).serve": 2e9,
		"internal/runtime/syscall/linux.Syscall6;syscall.write;net/http.(*conn).serve":                                                             1e9,
		"go.etcd.io/bbolt.(*Cursor).search;github.com/oidcd/oidcd/fsm.get;github.com/oidcd/oidcd/oidc.(*Provider).bearer;net/http.(*conn).serve":   5e8,
		"runtime.scanObject;runtime.gcBgMarkWorker": 5e8,
	})
	u := summarize(p, 1000)
	if u.ProfileS != 2 || u.ServerCores != 2 || u.ServerUsPerOp != 4000 {
		t.Errorf("profile %v s, %v cores, %v µs/op; want 2 s, 2 cores (4 s of CPU in 2 s), 4000 µs/op", u.ProfileS, u.ServerCores, u.ServerUsPerOp)
	}
	want := map[string]float64{
		probes[0].name:                        0.5,   // RSA
		"net/http outside oidcd's handlers":   0.25,  // the write, not the two requests in oidcd's handlers
		"oidcd's handlers and middleware":     0.625, // sign and bearer
		"state reads and writes (fsm, bbolt)": 0.125,
		"system calls (sockets, files)":       0.25,
		"garbage collection":                  0.125,
	}
	got := map[string]float64{}
	for _, s := range u.Shares {
		got[s.Name] = s.Fraction
	}
	for name, f := range want {
		if got[name] != f {
			t.Errorf("share of %q = %v, want %v", name, got[name], f)
		}
	}
	if _, ok := got["argon2id"]; ok {
		t.Errorf("argon2id has a share in a profile without it: %v", got)
	}
	if len(u.Top) != 4 || u.Top[0].Name != "crypto/internal/fips140/bigmod.addMulVVW1024" || u.Top[0].Fraction != 0.5 {
		t.Errorf("top functions: %+v", u.Top)
	}
}

func TestExplanations(t *testing.T) {
	no, yes := false, true
	res := &matrixResult{
		Machine: machine{GOMAXPROCS: 2}, BenchtimeS: 8, Concurrency: 32,
		Ceilings: ceilings{Trivial: 40000, TwoSig: 1400, SignMs: 0.7, Argon2Ms: 17.5, TrivialCPU: &cpuUse{ServerUsPerOp: 12, LoadGenUsPerOp: 20, ServerCores: 0.6, LoadGenCores: 1}},
		Runs: []matrixRun{
			{Scenario: "discovery", Nodes: 1, OpsPerS: 38000, Ceiling: "trivial", Fraction: 0.95, Met: &yes},
			{Scenario: "userinfo", Nodes: 1, OpsPerS: 20000, Ceiling: "trivial", Fraction: 0.5, Target: "≥ 0.60 (24,000/s)", TargetOpsPerS: 24000, Met: &no,
				CPU: &cpuUse{ServerUsPerOp: 40, LoadGenUsPerOp: 24, ServerCores: 0.8, LoadGenCores: 0.48,
					Shares: []share{{"net/http outside oidcd's handlers", 0.4}, {"state reads and writes (fsm, bbolt)", 0.2}},
					Top:    []share{{"internal/runtime/syscall/linux.Syscall6", 0.19}}}},
			{Scenario: "silent-signin", Nodes: 1, OpsPerS: 800, Latency: latency{Mean: 40, P99: 66}, Ceiling: "two signatures", Fraction: 0.57,
				Target: "≥ 0.50 (700/s), p99 < 50 ms", TargetOpsPerS: 700, MaxP99Ms: 50, Met: &no,
				CPU: &cpuUse{ServerUsPerOp: 2000, LoadGenUsPerOp: 250, ServerCores: 1.6, LoadGenCores: 0.2,
					Shares: []share{{probes[0].name, 0.8}}, Top: []share{{"crypto/internal/fips140/bigmod.addMulVVW1024", 0.45}}}},
			{Scenario: "password-signin", Nodes: 1, OpsPerS: 70, Ceiling: "argon2id", Fraction: 0.6, Target: "≥ 0.85 (100/s)", TargetOpsPerS: 100, Met: &no},
			{Scenario: "password-signin", Nodes: 3, OpsPerS: 70, Ceiling: "argon2id", Fraction: 0.6, Target: "≥ 0.85 (100/s)", TargetOpsPerS: 100, Met: &no,
				CPU: &cpuUse{ServerUsPerOp: 25000, LoadGenUsPerOp: 900, ServerCores: 1.8, LoadGenCores: 0.1}},
		},
	}
	md := res.explanations()
	for _, want := range []string{
		"### Targets not met",
		"**userinfo on 1 node(s)**",
		// (12+20) / (40+24) = 0.5; 0.60 of 40,000 needs (32/0.6 - 24) = 29.3 µs of the node
		"the fraction is about 32 / 64 = 0.50 (measured 0.50). 0.60 needs the node at 29.3 µs per operation or less (73 % of its cost now)",
		"| net/http outside oidcd's handlers | 40.0 % |",
		" 19.0%  internal/runtime/syscall/linux.Syscall6",
		// 1.8 cores over 700/s leave 2,571 µs, less the load generator's 250
		"700/s needs the node at 2,321 µs per operation or less (116 % of its cost now)",
		"took 80 % of the node's CPU, 1,600 µs per operation (measured alone: 1,400 µs): 1.28 cores",
		"everything else in the node cost 400 µs per operation",
		"32 workers at 800/s wait 40.0 ms on average",
		// p99 / mean = 1.65: 50 ms needs a mean of 30.3 ms, 32 / 30.3 ms = 1,056/s
		"A p99 under 50 ms at that spread needs a mean under 30.3 ms: 1,056/s, or 1,455 µs of node CPU per operation at the same use of the cores.",
		"At the two-signature ceiling itself (1,400/s) the mean would be 22.9 ms",
		"**password-signin on 1 node(s)**",
		"- No profile of this run.",
		// 1.9 cores over 100/s leave 19,000 µs, less the load generator's 900;
		// one hash (17.5 ms) and two signatures (1.4 ms) alone are 18,900
		"100/s needs the node at 18,100 µs per operation or less (72 % of its cost now), less than one argon2id hash and two signatures alone cost (18,900 µs): out of reach on these cores.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("explanations lack %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "**discovery") {
		t.Errorf("a met target is explained:\n%s", md)
	}
	res.Runs = res.Runs[:1]
	if md := res.explanations(); md != "" {
		t.Errorf("every target met, yet: %q", md)
	}
}

func TestAgainstBaseline(t *testing.T) {
	empty := []matrixRun{
		{Scenario: "userinfo", Nodes: 1, OpsPerS: 30000, Fraction: 0.6, Latency: latency{P99: 5}},
		{Scenario: "silent-signin", Nodes: 1, OpsPerS: 800, Fraction: 0.55, Latency: latency{P99: 66},
			CPU: &cpuUse{ServerUsPerOp: 2000, LoadGenUsPerOp: 250, Shares: []share{{"state reads and writes (fsm, bbolt)", 0.05}, {probes[0].name, 0.7}}}},
		{Scenario: "mixed", Nodes: 1, OpsPerS: 500},
	}
	res := &matrixResult{Grown: 100000, Baseline: &matrixBase{File: "bin/bench.json", Date: "d", Commit: "c", Runs: empty},
		Runs: []matrixRun{
			// Ceilings drift between sittings: the fractions are compared.
			{Scenario: "userinfo", Nodes: 1, OpsPerS: 25000, Fraction: 0.57, Latency: latency{P99: 6}},
			{Scenario: "silent-signin", Nodes: 1, OpsPerS: 600, Fraction: 0.44, Latency: latency{P99: 90},
				CPU: &cpuUse{ServerUsPerOp: 2500, LoadGenUsPerOp: 250, Shares: []share{{"state reads and writes (fsm, bbolt)", 0.2}, {probes[0].name, 0.56}, {snapshotProbe, 0.1}}}},
			{Scenario: "mixed", Nodes: 1, OpsPerS: 490},
			{Scenario: "jwks", Nodes: 1, OpsPerS: 40000, Fraction: 0.9}, // not in the baseline
		}}
	md := res.againstBaseline()
	for _, want := range []string{
		"### Against the empty store (bin/bench.json, d, c)",
		"| userinfo | 1 | 25,000, 6.0 | 30,000, 5.0 | 0.95 | ≥ 0.90 | **met** |",
		"| silent-signin | 1 | 600, 90.0 | 800, 66.0 | 0.80 | ≥ 0.90 | not met |",
		"| mixed | 1 | 490, 0.0 | 500, 0.0 | 0.98 | ≥ 0.90 | **met** |",
		// state reads 0.05 x 2000 = 100 -> 0.2 x 2500 = 500; RSA 1400 -> 1400 did not grow
		"node CPU per operation 2,500 µs, against 2,000 µs on the empty store",
		"What grew (per operation): state reads and writes (fsm, bbolt) 100 → 500 µs; raft snapshots (the state compacted and written) 0 → 250 µs.",
		"A raft snapshot of the grown store ran during this scenario (10 % of the node's CPU in it)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| jwks") {
		t.Errorf("a run the baseline lacks is compared:\n%s", md)
	}
	if (&matrixResult{}).againstBaseline() != "" {
		t.Error("a comparison without a baseline")
	}
}
