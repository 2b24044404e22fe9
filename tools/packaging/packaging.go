package packaging

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"

	"github.com/oidcd/oidcd/tools/sbom"
)

//go:embed files
var embedded embed.FS

// Paths inside the package.
const (
	BinaryPath = "/usr/bin/oidcd"
	UnitPath   = "/lib/systemd/system/oidcd.service"
	ConfigPath = "/etc/oidcd/oidcd.toml"
	EnvPath    = "/etc/oidcd/oidcd.env"
	ManPath    = "/usr/share/man/man1/oidcd.1.gz"
	DataDir    = "/var/lib/oidcd"
	// AdminAddr is where the shipped configuration serves the admin API,
	// the console and /metrics: loopback, off the public listener.
	AdminAddr   = "127.0.0.1:8081"
	SharePath   = "/usr/share/oidcd"
	DocPath     = "/usr/share/doc/oidcd"
	PackageName = "oidcd"
	// SBOMPath is the bill of materials of the binary (package sbom).
	SBOMPath = DocPath + "/oidcd.cdx.json"
	// License is what the package, and the bill of materials for oidcd's
	// own module, declare.
	License = "Proprietary"
	// SumsFile lists, beside the packages, the SHA-256 of each package and
	// bill of materials written there, as sha256sum(1) writes and checks.
	SumsFile = "SHA256SUMS"
)

// Options say what to package.
type Options struct {
	// Binary is the oidcd binary to ship (linux, Arch).
	Binary string
	// Tool runs `config example` and `man` to generate the configuration
	// file and the manual; default Binary.
	Tool string
	// Version is the build's version (tools/version.sh); DebVersion turns
	// it into the package's.
	Version string
	// Arch is the Go architecture of Binary; default runtime.GOARCH.
	Arch string
	// RepoRoot holds deploy/ and docs/, shipped under /usr/share; default
	// the current directory.
	RepoRoot string
	// Out is the .deb to write; default oidcd_<version>_<arch>.deb in the
	// current directory.
	Out string
	// MTime stamps every file and the bill of materials (reproducible
	// builds); default $SOURCE_DATE_EPOCH, else now (SourceDate).
	MTime time.Time
}

// Build writes the package and returns its path. Beside it, it writes the
// package's bill of materials (SBOMBeside) and adds both files to the
// directory's SumsFile.
func Build(ctx context.Context, o Options) (string, error) {
	if o.Binary == "" {
		return "", errors.New("packaging: no binary")
	}
	if o.Tool == "" {
		o.Tool = o.Binary
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.RepoRoot == "" {
		o.RepoRoot = "."
	}
	if o.MTime.IsZero() {
		o.MTime = SourceDate()
	}
	version := DebVersion(o.Version)
	if o.Out == "" {
		o.Out = fmt.Sprintf("%s_%s_%s.deb", PackageName, version, o.Arch)
	}
	work, err := os.MkdirTemp("", "oidcd-package-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)

	config, err := run(ctx, o.Tool, "config", "example", "--data-dir", DataDir, "--admin-addr", AdminAddr)
	if err != nil {
		return "", err
	}
	man, err := run(ctx, o.Tool, "man")
	if err != nil {
		return "", err
	}
	var manGz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&manGz, gzip.BestCompression)
	if _, err := zw.Write(man); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	write := func(name string, data []byte, mode os.FileMode) (string, error) {
		p := filepath.Join(work, name)
		return p, os.WriteFile(p, data, mode)
	}
	fromEmbed := func(name string, mode os.FileMode) (string, error) {
		b, err := embedded.ReadFile("files/" + name)
		if err != nil {
			return "", err
		}
		return write(name, b, mode)
	}
	var errs []error
	must := func(p string, err error) string {
		errs = append(errs, err)
		return p
	}
	unit := must(fromEmbed("oidcd.service", 0o644))
	env := must(fromEmbed("oidcd.env", 0o600))
	postinst := must(fromEmbed("postinst", 0o755))
	prerm := must(fromEmbed("prerm", 0o755))
	postrm := must(fromEmbed("postrm", 0o755))
	cfg := must(write("oidcd.toml", config, 0o644))
	manFile := must(write("oidcd.1.gz", manGz.Bytes(), 0o644))
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	// The bill of materials of the binary shipped, from its own build
	// record; the same bytes go into the package and beside it.
	bom := filepath.Join(work, "oidcd.cdx.json")
	if err := sbom.WriteFile(bom, sbom.Options{Binary: o.Binary, MainDir: o.RepoRoot, MainLicense: License, Time: o.MTime, Version: o.Version}); err != nil {
		return "", fmt.Errorf("packaging: %w", err)
	}
	file := func(src, dst, typ string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, Type: typ, FileInfo: &files.ContentFileInfo{Mode: mode, MTime: o.MTime}}
	}
	contents := files.Contents{
		file(o.Binary, BinaryPath, "", 0o755),
		file(unit, UnitPath, "", 0o644),
		file(cfg, ConfigPath, files.TypeConfigNoReplace, 0o644),
		file(env, EnvPath, files.TypeConfigNoReplace, 0o600),
		file(manFile, ManPath, "", 0o644),
		file(bom, SBOMPath, "", 0o644),
	}
	for _, extra := range []struct{ src, dst string }{
		{"deploy/grafana/oidcd.json", SharePath + "/grafana/oidcd.json"},
		{"deploy/prometheus/alerts.yml", SharePath + "/prometheus/alerts.yml"},
		{"docs/metrics.md", DocPath + "/metrics.md"},
	} {
		src := filepath.Join(o.RepoRoot, extra.src)
		if _, err := os.Stat(src); err != nil {
			return "", fmt.Errorf("packaging: %w (set RepoRoot to the source tree)", err)
		}
		contents = append(contents, file(src, extra.dst, "", 0o644))
	}
	info := &nfpm.Info{
		Name:          PackageName,
		Arch:          o.Arch,
		Platform:      "linux",
		Version:       version,
		VersionSchema: "none",
		Section:       "net",
		Priority:      "optional",
		Maintainer:    "oidcd operators <root@localhost>",
		Description: "OpenID Connect provider that needs no database\n" +
			"Three or more identical nodes form a Raft cluster whose state machine is a\n" +
			"bbolt file; one node alone is a complete provider. Ships a hardened systemd\n" +
			"unit, a configuration file, the manual, a Grafana dashboard and alert rules.",
		Homepage: "https://github.com/oidcd/oidcd",
		License:  License,
		MTime:    o.MTime,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Scripts:  nfpm.Scripts{PostInstall: postinst, PreRemove: prerm, PostRemove: postrm},
			Deb:      nfpm.Deb{Compression: "gzip"},
		},
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("packaging: %w", err)
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(o.Out), ".oidcd-*.deb")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := pkg.Package(info, tmp); err != nil {
		return "", fmt.Errorf("packaging: %w", errors.Join(err, tmp.Close()))
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	// #nosec G302 -- a .deb is a public artifact: world-readable like any downloaded package
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), o.Out); err != nil {
		return "", err
	}
	// #nosec G304 -- the bill of materials this Build just wrote into its own work directory
	b, err := os.ReadFile(bom)
	if err != nil {
		return "", err
	}
	// #nosec G306 G703 -- beside the package the operator named (Options.Out); the bill of materials is public, as the package is
	if err := os.WriteFile(SBOMBeside(o.Out), b, 0o644); err != nil {
		return "", err
	}
	if err := AddSums(filepath.Dir(o.Out), o.Out, SBOMBeside(o.Out)); err != nil {
		return "", err
	}
	return o.Out, nil
}

// SBOMBeside is where Build writes the bill of materials of the package
// deb: beside it, named as it is with .cdx.json for .deb.
func SBOMBeside(deb string) string {
	return strings.TrimSuffix(deb, ".deb") + ".cdx.json"
}

// SourceDate is $SOURCE_DATE_EPOCH (reproducible-builds.org), else now.
func SourceDate() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Now().UTC()
}

// AddSums records the SHA-256 of each of paths, files of dir, in dir's
// SumsFile in the format of sha256sum(1), so `sha256sum -c SHA256SUMS`
// checks them there. The lines of other files already listed are kept
// while those files are there; a file listed again gets its new sum.
func AddSums(dir string, paths ...string) error {
	sums := map[string]string{}
	// #nosec G304 -- the sums file of the directory the packages are written to
	if b, err := os.ReadFile(filepath.Join(dir, SumsFile)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			sum, name, ok := strings.Cut(l, "  ")
			if !ok || len(sum) != 64 || strings.ContainsAny(name, "/\\") {
				continue
			}
			// #nosec G703 -- a name of that directory's own sums file, refused above when it holds a path separator
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				sums[name] = sum
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, p := range paths {
		if filepath.Clean(filepath.Dir(p)) != filepath.Clean(dir) {
			return fmt.Errorf("packaging: %s is not in %s", p, dir)
		}
		// #nosec G304 -- a file this package wrote into that directory (checked above)
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		sums[filepath.Base(p)] = hex.EncodeToString(h.Sum(nil))
	}
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	var out strings.Builder
	for _, n := range names {
		fmt.Fprintf(&out, "%s  %s\n", sums[n], n)
	}
	tmp, err := os.CreateTemp(dir, "."+SumsFile+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(out.String()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// #nosec G302 -- the sums are public, as the packages they check are
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, SumsFile))
}

// run runs the oidcd tool and returns its standard output.
func run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	// #nosec G204 -- tool is the oidcd binary being packaged (Options.Tool), run without a shell
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("packaging: %s %s: %v: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// DebVersion turns a build version into a Debian version. Those of
// tools/version.sh (0.2.0, 0.2.0+git.5.1a2b3c4.dirty; RELEASES) are Debian
// versions already and keep their order. Others (v1.2.3-4-gabcdef, a bare
// commit, dev) are made valid: a leading v goes, any character outside
// [0-9A-Za-z.+~] becomes +, and one that does not start as MAJOR.MINOR
// does (a commit such as 65a5750 would sort above every release) is put
// before every release as 0.0.0~<it>.
func DebVersion(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if v == "" {
		v = "dev"
	}
	var b strings.Builder
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '.', r == '~', r == '+':
			b.WriteRune(r)
		default:
			b.WriteByte('+')
		}
	}
	s := b.String()
	if !releaseLike.MatchString(s) {
		s = "0.0.0~" + s
	}
	return s
}

// releaseLike is how a version of a release (or a build after one) starts.
var releaseLike = regexp.MustCompile(`^[0-9]+\.[0-9]+`)
