package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// The targets of the speed issues, as fractions of the ceilings measured
// in the same run. One node: Speed III's (discovery and the JWKS 0.95 of
// the trivial handler, userinfo 0.75, introspection 0.70, silent sign-in
// 0.70 of two signatures with p99 under 50 ms, password sign-ins 0.85 of
// argon2id). Three nodes, which share one process and its two cores:
// userinfo and introspection 0.50 (Speed III), the static documents 0.75
// and silent sign-in a third of two signatures (Speed II), with the same
// p99.
const (
	targetPassword1   = 0.85 // of the argon2id ceiling
	targetSilent1     = 0.70 // of the two-signature ceiling
	targetSilent3     = 1.0 / 3
	targetSilentP99Ms = 50.0
	targetUserinfo1   = 0.75 // of the trivial handler
	targetUserinfo3   = 0.50
	targetIntrospect1 = 0.70
	targetIntrospect3 = 0.50
	targetStatic1     = 0.95 // discovery and jwks
	targetStatic3     = 0.75
	// maxErrorRate is the share of failed operations above which a target
	// is not met whatever the throughput.
	maxErrorRate = 0.001
)

// trivialBound reports whether the trivial handler bounds scenario.
func trivialBound(scenario string) bool {
	switch scenario {
	case "discovery", "jwks", "userinfo", "introspect", "preflight":
		return true
	}
	return false
}

// judge fills r's ceiling, fraction, target and verdict.
func judge(r *matrixRun, c ceilings) {
	var ceiling, minFrac, minOps, maxP99 float64
	one := r.Nodes == 1
	switch r.Scenario {
	case "password-signin":
		r.Ceiling, ceiling = "argon2id", c.Argon2PerS
		if one {
			minFrac = targetPassword1
		}
	case "silent-signin":
		r.Ceiling, ceiling, maxP99 = "two signatures", c.TwoSig, targetSilentP99Ms
		minFrac = pick(one, targetSilent1, targetSilent3)
	case "userinfo":
		r.Ceiling, ceiling, minFrac = "trivial", c.Trivial, pick(one, targetUserinfo1, targetUserinfo3)
	case "introspect":
		r.Ceiling, ceiling, minFrac = "trivial", c.Trivial, pick(one, targetIntrospect1, targetIntrospect3)
	case "discovery", "jwks":
		r.Ceiling, ceiling, minFrac = "trivial", c.Trivial, pick(one, targetStatic1, targetStatic3)
	case "preflight": // a figure beside the ceiling, no target of its own
		r.Ceiling, ceiling = "trivial", c.Trivial
	case federatedName: // beside password-signin (besidePassword), no target of its own
		return
	default: // mixed: a profile, no ceiling of its own
		return
	}
	if r.Ceiling == "trivial" && r.Trivial != nil && r.Trivial.OpsPerS > 0 {
		ceiling = r.Trivial.OpsPerS // the runs around this scenario
	}
	if r.Near != nil && r.Near.PerS > 0 {
		ceiling = r.Near.PerS // measured again around this scenario
	}
	if ceiling > 0 {
		r.Fraction = math.Round(r.OpsPerS/ceiling*1000) / 1000
	}
	var conds []string
	met := true
	if minOps > 0 {
		conds = append(conds, fmt.Sprintf("≥ %s/s", thousands(minOps)))
		met = met && r.OpsPerS >= minOps
	}
	if minFrac > 0 {
		conds = append(conds, fmt.Sprintf("≥ %.2f (%s/s)", minFrac, thousands(minFrac*ceiling)))
		met = met && r.Fraction >= minFrac
	}
	if maxP99 > 0 {
		conds = append(conds, fmt.Sprintf("p99 < %.0f ms", maxP99))
		met = met && r.Latency.P99 < maxP99
	}
	if len(conds) == 0 {
		return
	}
	total := float64(r.Ops) + float64(errorCount(r.Errors))
	if total > 0 && float64(errorCount(r.Errors))/total > maxErrorRate {
		met = false
	}
	r.Target = strings.Join(conds, ", ")
	r.TargetOpsPerS, r.MaxP99Ms = max(minOps, minFrac*ceiling), maxP99
	r.Met = &met
}

func pick(one bool, a, b float64) float64 {
	if one {
		return a
	}
	return b
}

// machine describes where the figures were taken.
type machine struct {
	CPU        string  `json:"cpu"`
	CPUs       int     `json:"cpus"`
	MemBytes   int64   `json:"mem_bytes"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	Go         string  `json:"go"`
	OS         string  `json:"os"`
	LoadAvg    float64 `json:"load_average_1m"` // at the start: other work on the machine
}

// describeMachine reads /proc/cpuinfo, /proc/meminfo and /proc/loadavg
// (Linux; fields stay empty elsewhere).
func describeMachine() machine {
	m := machine{GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch {
			case !ok:
			case k == "processor":
				m.CPUs++
			case k == "model name" && m.CPU == "":
				m.CPU = v
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) == 2 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					m.MemBytes = kb * 1024
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.LoadAvg, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	return m
}

// gitCommit is the short commit of the working tree, "+changes" when it
// has uncommitted changes, "unknown" outside a git checkout.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}

// The markers around the generated sections of BENCHMARKS.md: the
// matrix, and after it the matrix on each grown store.
const (
	sectionBegin = "<!-- BEGIN oidcd-bench matrix: written by `make bench`; edits between these markers are overwritten -->"
	sectionEnd   = "<!-- END oidcd-bench matrix -->"
	grownEndStem = "<!-- END oidcd-bench matrix grown to "
)

// markers are the begin and end markers of res's section.
func (res *matrixResult) markers() (begin, end string) {
	if res.Grown == 0 {
		return sectionBegin, sectionEnd
	}
	return fmt.Sprintf("<!-- BEGIN oidcd-bench matrix grown to %d people: written by `make bench-grown`; edits between these markers are overwritten -->", res.Grown),
		fmt.Sprintf("%s%d people -->", grownEndStem, res.Grown)
}

// markdown renders the result as the generated section, markers
// included.
func (res *matrixResult) markdown() string {
	var b strings.Builder
	c := res.Ceilings
	m := res.Machine
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	begin, end := res.markers()
	if res.Grown > 0 {
		p("%s\n## The `make bench` matrix on a store grown to %s people (%s)\n\n", begin, thousands(float64(res.Grown)), res.Date)
		p("- Store: before the scenarios, every set of nodes was grown through raft to %s people (`fsmtest.Grown`: each a member of two organizations, with a live SSO session, an app session and a live access token), then snapshotted; the scenarios' own people come on top.\n", thousands(float64(res.Grown)))
	} else {
		p("%s\n## The `make bench` matrix (%s)\n\n", begin, res.Date)
	}
	p("- Machine: %d × %s, %s RAM, GOMAXPROCS %d, %s %s; load average %.1f when the run began (other work on the machine).\n",
		m.CPUs, orDash(m.CPU), bytesStr(m.MemBytes), m.GOMAXPROCS, m.Go, m.OS, m.LoadAvg)
	p("- Commit: %s.\n", res.Commit)
	p("- Command: `%s` (%s in all).\n", res.Command, durationWords(res.ElapsedS))
	p("- Method: every scenario ran %s with %d workers of `oidcd-bench` in its own process, against nodes in one child process built with `node.New` as `testcluster` builds them (static peers, 127.0.0.1), but with the production argon2id parameters and raft timings and `--rate-limit off`; the three nodes of the cluster share that process and the same %d cores, and the load generator takes its share of them. Each figure is shown as a fraction of the ceiling that bounds it, measured in the same run.\n\n",
		strconv.FormatFloat(res.BenchtimeS, 'f', -1, 64)+" s", res.Concurrency, m.GOMAXPROCS)

	p("| ceiling (measured in this run) | figure | bounds |\n|---|---|---|\n")
	p("| RS256 signature, RSA-2048, `crypto/rsa` alone (no JWT library), one goroutine | %s/s per core (%.2f ms) | |\n", thousands(c.SignPerCore), c.SignMs)
	p("| the same on %d goroutines | %s/s | |\n", m.GOMAXPROCS, thousands(c.SignAllCores))
	p("| two-signature sign-in: %d × per-core rate / 2 (ID and access token) | %s/s; measured again for an eighth of the scenario's time just before and just after silent-signin, which is set against their mean (in its row) | silent-signin |\n", m.GOMAXPROCS, thousands(c.TwoSig))
	p("| argon2id at the node's parameters (%s), one hash | %.1f ms: %s/s on %d cores; measured again around password-signin as above | password-signin |\n", c.Argon2Params, c.Argon2Ms, thousands(c.Argon2PerS), m.GOMAXPROCS)
	p("| trivial net/http JSON handler, same load generator and workers | %s req/s (p50 %.2f ms, p99 %.2f ms); each scenario it bounds is set against the mean of two runs of a quarter of its time, just before and just after it (in its row) | userinfo, introspect, discovery, jwks |\n\n",
		thousands(c.Trivial), c.TrivialMs.P50, c.TrivialMs.P99)

	p("| scenario | nodes | ops/s | p50 ms | p99 ms | errors | of ceiling | target (speed issue) | met |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		frac := "—"
		if r.Ceiling != "" {
			frac = fmt.Sprintf("%.2f of %s", r.Fraction, r.Ceiling)
		}
		if r.Scenario == federatedName {
			frac = r.besideCell()
		}
		if r.Trivial != nil {
			frac += fmt.Sprintf(" (%s/s around it)", thousands(r.Trivial.OpsPerS))
		}
		if r.Near != nil {
			frac += fmt.Sprintf(" (%s/s around it)", thousands(r.Near.PerS))
		}
		target, met := "—", "—"
		if r.Met != nil {
			target = r.Target
			met = "not met"
			if *r.Met {
				met = "**met**"
			}
		}
		p("| %s | %d | %s | %.2f | %.2f | %s | %s | %s | %s |\n", r.Scenario, r.Nodes, thousands(r.OpsPerS),
			r.Latency.P50, r.Latency.P99, errorsStr(r.Errors), frac, target, met)
	}
	b.WriteString(res.federationTable())
	p("\n")
	for _, u := range res.Nodes {
		p("- After its scenarios, the process of %d node(s): RSS %s, data dirs %s.\n", u.Nodes, bytesStr(u.RSSBytes), bytesStr(u.DataDirBytes))
	}
	b.WriteString(res.againstBaseline())
	b.WriteString(res.explanations())
	p("\n%s\n", end)
	return b.String()
}

// rewriteSection replaces the generated section of the markdown file at
// path with md, or inserts it before the file's first second-level
// heading when the file has none yet. The file is replaced atomically.
func rewriteSection(path, md, begin, end string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(old)
	var out string
	bi, ei := strings.Index(s, begin), strings.Index(s, end)
	// A grown store's new section goes after the last generated one.
	after := strings.Index(s, sectionEnd)
	if gi := strings.LastIndex(s, grownEndStem); gi > after && begin != sectionBegin {
		after = gi
	}
	switch {
	case bi >= 0 && ei > bi:
		out = s[:bi] + md + strings.TrimPrefix(s[ei+len(end):], "\n")
	case bi >= 0 || ei >= 0:
		return fmt.Errorf("%s: one of the section markers is missing or they are out of order", path)
	case begin != sectionBegin && after >= 0:
		at := after + strings.Index(s[after:], "-->") + len("-->\n")
		at = min(at, len(s))
		out = s[:at] + "\n" + md + s[at:]
	default:
		at := strings.Index(s, "\n## ")
		if at < 0 {
			out = strings.TrimRight(s, "\n") + "\n\n" + md
		} else {
			out = s[:at+1] + md + "\n" + s[at+1:]
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bench-*.md")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// thousands prints f rounded, with comma separators below 100 it keeps
// one decimal: 12,345 and 58.4.
func thousands(f float64) string {
	if math.Abs(f) < 100 {
		return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64)
	}
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// errorsStr is the error count with its kinds: 0, or "3 (2 timeout, 1 conn)".
func errorsStr(m map[string]uint64) string {
	n := errorCount(m)
	if n == 0 {
		return "0"
	}
	var kinds []string
	for k, c := range m {
		kinds = append(kinds, fmt.Sprintf("%d %s", c, k))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%d (%s)", n, strings.Join(kinds, ", "))
}

func durationWords(s float64) string {
	if s < 60 {
		return fmt.Sprintf("%.0f s", s)
	}
	return fmt.Sprintf("%d min %02d s", int(s)/60, int(s)%60)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
