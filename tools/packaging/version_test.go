package packaging

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// repoRoot is the source tree these tests run in.
var repoRoot = filepath.Join("..", "..")

// versionScript is tools/version.sh, which make build and make package
// run.
var versionScript = filepath.Join(repoRoot, "tools", "version.sh")

// buildVersion runs version.sh as make does and returns what it prints.
func buildVersion(t *testing.T, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", script).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("sh %s: %v\n%s", script, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// versionPattern is every form version.sh prints (RELEASES).
var versionPattern = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(\+git\.[0-9]+\.[0-9a-f]{7,}(\.dirty)?|\+shallow\.[0-9a-f]{7,}(\.dirty)?|\+nogit)?$`)

// needDpkg skips a test where dpkg cannot compare versions (and fails it
// under CI=true).
func needDpkg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("dpkg"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("dpkg is missing (apt-get install dpkg); CI must compare versions as dpkg does")
		}
		t.Skip("dpkg is missing: versions cannot be compared as dpkg does")
	}
}

// dpkgLess reports whether dpkg orders Debian version a before b.
func dpkgLess(t *testing.T, a, b string) bool {
	t.Helper()
	err := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run()
	if err == nil {
		return true
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		return false
	}
	t.Fatalf("dpkg --compare-versions %s lt %s: %v", a, b, err)
	return false
}

// scratchRepo is a git repository in a temporary directory holding a
// copy of version.sh at tools/version.sh, with its own identity and no
// global or system git configuration.
type scratchRepo struct {
	t   *testing.T
	dir string
}

func newScratchRepo(t *testing.T) *scratchRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is missing")
	}
	r := &scratchRepo{t: t, dir: t.TempDir()}
	script, err := os.ReadFile(versionScript)
	if err != nil {
		t.Fatal(err)
	}
	r.write("tools/version.sh", string(script))
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *scratchRepo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *scratchRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+r.dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	cmd.Env = without(cmd.Env, gitRepoVars...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitRepoVars would point git at another repository (a test run from a
// git hook has them).
var gitRepoVars = []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"}

// without returns env without the variables named.
func without(env []string, names ...string) []string {
	var out []string
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		if !slices.Contains(names, name) {
			out = append(out, e)
		}
	}
	return out
}

func (r *scratchRepo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "--short", "HEAD")
}

func (r *scratchRepo) version() string {
	r.t.Helper()
	return buildVersion(r.t, filepath.Join(r.dir, "tools", "version.sh"))
}

// TestVersionScheme walks tools/version.sh through the life of a
// repository: the commit that sets VERSION builds as VERSION itself,
// later commits as VERSION+git.<commits since it changed>.<commit>,
// uncommitted changes add .dirty, a bump starts again from the new
// version; a shallow clone and a tree without git say so. dpkg orders the
// builds of main as they follow each other, after the previous release.
func TestVersionScheme(t *testing.T) {
	r := newScratchRepo(t)
	r.write("VERSION", "0.2.0\n")
	r.write("main.go", "package main\n")
	r.commit("behaviour changes: VERSION 0.2.0")
	var order []string
	step := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got %q, want %q", what, got, want)
		}
		if !versionPattern.MatchString(got) {
			t.Errorf("%s: %q is not of the scheme", what, got)
		}
		if DebVersion(got) != got {
			t.Errorf("%s: the package's version %q is not the build's %q", what, DebVersion(got), got)
		}
	}
	step("the commit that set VERSION", r.version(), "0.2.0")
	order = append(order, "0.1.0", r.version())

	r.write("main.go", "package main\n\n// one\n")
	h1 := r.commit("one")
	step("one commit later", r.version(), "0.2.0+git.1."+h1)
	order = append(order, r.version())

	r.write("main.go", "package main\n\n// two\n")
	step("a changed file", r.version(), "0.2.0+git.1."+h1+".dirty")
	r.git("checkout", "-q", "--", "main.go")
	r.write("new.go", "package main\n")
	step("a new file", r.version(), "0.2.0+git.1."+h1+".dirty")
	r.write(".gitignore", "/bin/\n/new.go\n")
	r.write("bin/oidcd", "binary")
	step("an ignored file", r.version(), "0.2.0+git.1."+h1+".dirty") // .gitignore itself is new
	h2 := r.commit("ignore bin")
	step("ignored files only", r.version(), "0.2.0+git.2."+h2)
	order = append(order, r.version())

	for i := 3; i <= 10; i++ {
		r.write("main.go", fmt.Sprintf("package main\n\n// %d\n", i))
		r.commit(strconv.Itoa(i))
	}
	h10 := r.git("rev-parse", "--short", "HEAD")
	step("ten commits later", r.version(), "0.2.0+git.10."+h10)
	order = append(order, r.version())

	r.write("VERSION", "0.3.0\n")
	r.commit("behaviour changes: VERSION 0.3.0")
	step("the bump", r.version(), "0.3.0")
	order = append(order, r.version())
	r.write("main.go", "package main\n\n// after\n")
	h := r.commit("after the bump")
	step("after the bump", r.version(), "0.3.0+git.1."+h)
	order = append(order, r.version())

	needDpkg(t)
	for i := 1; i < len(order); i++ {
		if !dpkgLess(t, order[i-1], order[i]) {
			t.Errorf("dpkg does not order %s before %s", order[i-1], order[i])
		}
	}

	// A shallow clone cannot count; a tree without git cannot either.
	shallow := t.TempDir()
	cmd := exec.Command("git", "clone", "-q", "--depth", "1", "file://"+r.dir, shallow)
	cmd.Env = without(os.Environ(), gitRepoVars...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone --depth 1: %v\n%s", err, out)
	}
	if got := buildVersion(t, filepath.Join(shallow, "tools", "version.sh")); got != "0.3.0+shallow."+h {
		t.Errorf("a shallow clone: got %q, want %q", got, "0.3.0+shallow."+h)
	}
	plain := t.TempDir()
	os.MkdirAll(filepath.Join(plain, "tools"), 0o755)
	script, _ := os.ReadFile(versionScript)
	os.WriteFile(filepath.Join(plain, "tools", "version.sh"), script, 0o755)
	os.WriteFile(filepath.Join(plain, "VERSION"), []byte("0.3.0\n"), 0o644)
	if got := buildVersion(t, filepath.Join(plain, "tools", "version.sh")); got != "0.3.0+nogit" {
		t.Errorf("no git: got %q, want 0.3.0+nogit", got)
	}
}

// TestVersionFileMustBeSemantic: version.sh refuses a VERSION that is not
// MAJOR.MINOR.PATCH, saying so, and make then stops.
func TestVersionFileMustBeSemantic(t *testing.T) {
	for _, bad := range []string{"v0.2.0", "0.2", "0.2.0-rc1", "02.0.0", "", "0.2.0 0.3.0"} {
		r := newScratchRepo(t)
		r.write("VERSION", bad+"\n")
		cmd := exec.Command("sh", filepath.Join(r.dir, "tools", "version.sh"))
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "want MAJOR.MINOR.PATCH") {
			t.Errorf("VERSION %q: got %v %q, want a failure that says MAJOR.MINOR.PATCH", bad, err, out)
		}
	}
}

// newestRelease reads the newest release listed in RELEASES.
func newestRelease(t *testing.T) (version, commit string) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "RELEASES"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if fields := strings.Fields(line); len(fields) == 2 {
			version, commit = fields[0], fields[1]
		}
	}
	if version == "" {
		t.Fatal("RELEASES names no release")
	}
	return version, commit
}

// semver parses MAJOR.MINOR.PATCH.
func semver(t *testing.T, v string) [3]int {
	t.Helper()
	m := regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)\.([0-9]+)$`).FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("%q is not MAJOR.MINOR.PATCH", v)
	}
	var out [3]int
	for i := range out {
		out[i], _ = strconv.Atoi(m[i+1])
	}
	return out
}

// TestVersionAndReleasesAgree: VERSION is never older than the newest
// release in RELEASES; this tree's build has the scheme's form, starts
// with VERSION, and dpkg sorts it after that release (unless it is that
// release's own commit, clean).
func TestVersionAndReleasesAgree(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	file := strings.TrimSpace(string(b))
	release, _ := newestRelease(t)
	v, r := semver(t, file), semver(t, release)
	if v[0] < r[0] || v[0] == r[0] && (v[1] < r[1] || v[1] == r[1] && v[2] < r[2]) {
		t.Errorf("VERSION %s is older than the newest release, %s", file, release)
	}
	build := buildVersion(t, versionScript)
	if !versionPattern.MatchString(build) || (build != file && !strings.HasPrefix(build, file+"+")) {
		t.Errorf("this tree's build version %q: want VERSION (%s) in the form of RELEASES", build, file)
	}
	needDpkg(t)
	if prev := DebVersion(release); DebVersion(build) != prev && !dpkgLess(t, prev, DebVersion(build)) {
		t.Errorf("dpkg sorts this build, %s, before the newest release, %s", DebVersion(build), prev)
	}
}

// TestMakeStampsTheVersion: make build stamps version.sh's version into
// the binary, and make package gives the packager the same one.
func TestMakeStampsTheVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is missing")
	}
	want := buildVersion(t, versionScript)
	cmd := exec.Command("make", "-n", "build", "package")
	cmd.Dir = repoRoot
	cmd.Env = without(os.Environ(), append(gitRepoVars, "VERSION")...) // make works the version out itself
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build package: %v\n%s", err, out)
	}
	for _, s := range []string{`-X main.version=` + want + `"`, "--version " + want + " "} {
		if strings.Count(string(out), s) == 0 {
			t.Errorf("make -n build package does not pass %q:\n%s", s, out)
		}
	}
	if n := strings.Count(string(out), "-X main.version="+want); n != 2 {
		t.Errorf("make stamps %s into %d binaries, want 2 (bin/oidcd, dist/oidcd-linux-*):\n%s", want, n, out)
	}
}
