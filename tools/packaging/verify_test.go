package packaging

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// bom is the part of a CycloneDX document these tests read.
type bom struct {
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component  bomComponent `json:"component"`
		Properties []struct{ Name, Value string }
	}
	Components []bomComponent
}

type bomComponent struct {
	Type, Name, Version string
	Properties          []struct{ Name, Value string }
	Licenses            []struct {
		License struct {
			ID, Name        string
			Acknowledgement string
			Text            *struct{ Content string }
		}
	}
}

func readBOM(t *testing.T, path string) (bom, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d bom
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d, b
}

// goVersionM is what `go version -m` shows of bin: the main module and
// every module linked (a replaced one as its replacement), as path@version,
// with the main module's (devel) read as the version the build stamped
// with -X main.version, as the document gives it.
func goVersionM(t *testing.T, bin string) (main string, deps []string) {
	t.Helper()
	out := command(t, "go", "version", "-m", bin)
	stamped := regexp.MustCompile(`-X[= ]main\.version=([^\s'"]+)`).FindStringSubmatch(out)
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		switch f[0] {
		case "mod":
			v := f[2]
			if v == "(devel)" && stamped != nil {
				v = stamped[1]
			}
			main = f[1] + "@" + v
		case "dep":
			deps = append(deps, f[1]+"@"+f[2])
		case "=>": // the module before it is replaced by this one
			deps[len(deps)-1] = f[1] + "@" + f[2]
		}
	}
	if main == "" || len(deps) == 0 {
		t.Fatalf("go version -m %s shows no modules:\n%s", bin, out)
	}
	return main, deps
}

// TestPackageShipsItsBillOfMaterials: the package carries, under
// /usr/share/doc/oidcd, a CycloneDX document listing exactly the modules
// `go version -m` shows for the binary it ships, no more and no fewer, the
// main module included; each with a licence (an identifier, a declared
// name, or "unknown" with the file's text), the licences of modules whose
// licence is well known as they are, the binary's SHA-256 as the shipped
// file's, and the same document beside the .deb.
func TestPackageShipsItsBillOfMaterials(t *testing.T) {
	deb, root, _ := scratchPackage(t)
	d, shipped := readBOM(t, filepath.Join(root, SBOMPath))
	if st, err := os.Stat(filepath.Join(root, SBOMPath)); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("%s: %v %v, want mode 0644", SBOMPath, st, err)
	}
	if beside, err := os.ReadFile(SBOMBeside(deb)); err != nil || !bytes.Equal(beside, shipped) {
		t.Errorf("the document beside the package (%s, %v) is not the one inside it", SBOMBeside(deb), err)
	}
	if d.SpecVersion != "1.6" {
		t.Errorf("specVersion %q, want 1.6", d.SpecVersion)
	}

	bin := filepath.Join(root, BinaryPath)
	wantMain, wantDeps := goVersionM(t, bin)
	m := d.Metadata.Component
	// The main module is the one go version -m shows, with the build's
	// version where it shows (devel), as a -trimpath build from a work
	// tree does (it records no -ldflags), keeping (devel) as a property.
	if wantMain == "github.com/oidcd/oidcd@(devel)" {
		wantMain = "github.com/oidcd/oidcd@v1.4.2"
		if len(m.Properties) == 0 || m.Properties[0].Name != "oidcd:go:module-version" || m.Properties[0].Value != "(devel)" {
			t.Errorf("the main component's properties %+v do not keep the build record's (devel)", m.Properties)
		}
	}
	if got := m.Name + "@" + m.Version; got != wantMain || m.Type != "application" {
		t.Errorf("the document's main component is %s (%s), want %s (application)", got, m.Type, wantMain)
	}
	var got []string
	for _, c := range d.Components {
		got = append(got, c.Name+"@"+c.Version)
	}
	sort.Strings(got)
	sort.Strings(wantDeps)
	if missing, extra := diff(wantDeps, got), diff(got, wantDeps); len(missing)+len(extra) > 0 {
		t.Errorf("the document lists %d modules, go version -m %d; missing %v, not linked %v", len(got), len(wantDeps), missing, extra)
	}

	licence := map[string]string{}
	for _, c := range append([]bomComponent{m}, d.Components...) {
		if len(c.Licenses) == 0 {
			t.Errorf("%s: no licence", c.Name)
			continue
		}
		l := c.Licenses[0].License
		switch {
		case l.ID != "" && l.Acknowledgement == "concluded":
		case l.Name == "unknown" && l.Acknowledgement == "concluded":
		case c.Name == m.Name && l.Name == License && l.Acknowledgement == "declared":
		default:
			t.Errorf("%s: licence %+v, want an identifier concluded, unknown, or the package's own declared", c.Name, l)
		}
		licence[c.Name] = l.ID + l.Name
	}
	for mod, want := range map[string]string{
		"golang.org/x/crypto": "BSD-3-Clause", "github.com/hashicorp/raft": "MPL-2.0",
		"github.com/prometheus/client_golang": "Apache-2.0", "github.com/go-ldap/ldap/v3": "MIT",
	} {
		if licence[mod] != want {
			t.Errorf("%s: licence %q, want %q", mod, licence[mod], want)
		}
	}

	sum := sha256.Sum256(mustRead(t, bin))
	found := false
	for _, p := range d.Metadata.Properties {
		if p.Name == "cdx:gomod:binary:hash:SHA-256" {
			found = p.Value == hex.EncodeToString(sum[:])
		}
	}
	if !found {
		t.Errorf("the document does not give %s's SHA-256 %x as cdx:gomod:binary:hash:SHA-256", BinaryPath, sum)
	}
}

// TestSumsVerifyOffline: SHA256SUMS beside the package checks the package
// and its document with `sha256sum -c`, and fails, naming it, for a
// package changed after it was made.
func TestSumsVerifyOffline(t *testing.T) {
	deb, _, _ := scratchPackage(t)
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("sha256sum is missing (coreutils)")
	}
	dir := filepath.Dir(deb)
	sums := string(mustRead(t, filepath.Join(dir, SumsFile)))
	for _, name := range []string{filepath.Base(deb), filepath.Base(SBOMBeside(deb))} {
		if !regexp.MustCompile(`(?m)^[0-9a-f]{64}  ` + regexp.QuoteMeta(name) + `$`).MatchString(sums) {
			t.Errorf("%s lacks a line for %s:\n%s", SumsFile, name, sums)
		}
	}
	code, out, errOut := runIn(t, dir, "sha256sum", "-c", SumsFile)
	if code != 0 || !strings.Contains(out, filepath.Base(deb)+": OK") || !strings.Contains(out, filepath.Base(SBOMBeside(deb))+": OK") {
		t.Errorf("sha256sum -c %s: exit %d\n%s%s", SumsFile, code, out, errOut)
	}

	// A copy whose package lost a byte on the way.
	bad := t.TempDir()
	for _, p := range []string{deb, SBOMBeside(deb), filepath.Join(dir, SumsFile)} {
		b := mustRead(t, p)
		if p == deb {
			b = b[:len(b)-1]
		}
		os.WriteFile(filepath.Join(bad, filepath.Base(p)), b, 0o644)
	}
	code, out, _ = runIn(t, bad, "sha256sum", "-c", SumsFile)
	if code == 0 || !strings.Contains(out, filepath.Base(deb)+": FAILED") || !strings.Contains(out, filepath.Base(SBOMBeside(deb))+": OK") {
		t.Errorf("sha256sum -c of a changed package: exit %d\n%s; want it to fail naming %s", code, out, filepath.Base(deb))
	}
}

// TestAddSumsKeepsTheOtherPackages: a second package made into the same
// directory adds its lines and keeps the first's; a file made again gets
// its new sum; a file no longer there loses its line.
func TestAddSumsKeepsTheOtherPackages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	hash := func(text string) string { s := sha256.Sum256([]byte(text)); return hex.EncodeToString(s[:]) }
	a, b := write("oidcd_1_amd64.deb", "a"), write("oidcd_1_arm64.deb", "b")
	if err := AddSums(dir, a); err != nil {
		t.Fatal(err)
	}
	if err := AddSums(dir, b); err != nil {
		t.Fatal(err)
	}
	want := hash("a") + "  oidcd_1_amd64.deb\n" + hash("b") + "  oidcd_1_arm64.deb\n"
	if got := string(mustRead(t, filepath.Join(dir, SumsFile))); got != want {
		t.Errorf("after two packages:\n%s\nwant\n%s", got, want)
	}
	write("oidcd_1_amd64.deb", "a2")
	os.Remove(b)
	if err := AddSums(dir, a); err != nil {
		t.Fatal(err)
	}
	if got, want := string(mustRead(t, filepath.Join(dir, SumsFile))), hash("a2")+"  oidcd_1_amd64.deb\n"; got != want {
		t.Errorf("after a rebuild and a removal:\n%s\nwant\n%s", got, want)
	}
	if err := AddSums(dir, filepath.Join(t.TempDir(), "elsewhere.deb")); err == nil {
		t.Error("AddSums took a file of another directory")
	}
}

func runIn(t *testing.T, dir, name string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// diff is what of a (sorted) b lacks.
func diff(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}

// TestGuideChecksWhatYouWereHanded runs the shell blocks of the install
// page's "Checking what you were handed" (docs/operators/install.md) as an
// operator would, on the scratch package's files with the paths of an
// installed host moved into its unpacked root: sha256sum -c passes, jq
// names oidcd and lists the modules with their licences, the recorded
// hash is the binary's, and the modules are go version -m's.
func TestGuideChecksWhatYouWereHanded(t *testing.T) {
	for _, tool := range []string{"jq", "sha256sum", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing; CI must run the guide's checks", tool)
			}
			t.Skipf("%s is missing: the guide's checks cannot run here", tool)
		}
	}
	b := string(mustRead(t, filepath.Join(repoRoot, "docs", "operators", "install.md")))
	_, section, ok := strings.Cut(b, "\n## Checking what you were handed\n")
	if !ok {
		t.Fatal(`docs/operators/install.md has no section "Checking what you were handed"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := fenced(section, "sh")
	if len(blocks) != 4 {
		t.Fatalf("the section has %d sh blocks, want 4 (the sums, the listing, the hash, the comparison)", len(blocks))
	}
	deb, root, _ := scratchPackage(t)
	dir := t.TempDir()
	for _, p := range []string{deb, SBOMBeside(deb), filepath.Join(filepath.Dir(deb), SumsFile)} {
		os.WriteFile(filepath.Join(dir, filepath.Base(p)), mustRead(t, p), 0o644)
	}
	moved := strings.NewReplacer(SBOMPath, filepath.Join(root, SBOMPath), BinaryPath, filepath.Join(root, BinaryPath))
	run := func(script string) string {
		t.Helper()
		code, out, errOut := runIn(t, dir, "bash", "-eo", "pipefail", "-c", moved.Replace(script))
		if code != 0 || errOut != "" {
			t.Fatalf("%s\nexit %d, stderr %q\n%s", script, code, errOut, out)
		}
		return out
	}
	if out := run(blocks[0]); strings.Count(out, ": OK\n") != 2 {
		t.Errorf("the sums block printed %q, want two OKs", out)
	}
	shared := strings.SplitN(blocks[1], "\n", 2)[0] + "\n" // SBOM=..., which the other blocks use
	out := run(blocks[1])
	if !strings.HasPrefix(out, "github.com/oidcd/oidcd v1.4.2\n") || !regexp.MustCompile(`(?m)^golang\.org/x/crypto\tv\S+\tBSD-3-Clause$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\d+\tMPL-2\.0$`).MatchString(out) {
		t.Errorf("the listing block printed:\n%s\nwant oidcd and its version, golang.org/x/crypto as BSD-3-Clause, a count of MPL-2.0", out)
	}
	lines := strings.Fields(run(shared + blocks[2]))
	if len(lines) < 2 || lines[0] != lines[1] {
		t.Errorf("the hash block printed %q: the recorded SHA-256 is not sha256sum's", lines)
	}
	_, deps := goVersionM(t, filepath.Join(root, BinaryPath))
	if out := run(shared + blocks[3]); out != fmt.Sprintf("the same %d modules\n", len(deps)) {
		t.Errorf("the comparison block printed %q, want \"the same %d modules\"", out, len(deps))
	}
}
