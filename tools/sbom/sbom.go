package sbom

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/CycloneDX/cyclonedx-gomod/pkg/licensedetect"
	"github.com/CycloneDX/cyclonedx-gomod/pkg/licensedetect/local"
	"github.com/google/uuid"
	"github.com/package-url/packageurl-go"
	"github.com/rs/zerolog"
	"golang.org/x/mod/module"
)

// SpecVersion is the CycloneDX version of the documents Write writes.
const SpecVersion = cdx.SpecVersion1_6

// Unknown is the licence name recorded where no licence is recognised.
const Unknown = "unknown"

// Options say what to describe.
type Options struct {
	// Binary is the built Go binary to describe.
	Binary string
	// MainDir is the main module's source tree, where its licence file
	// would be; default the current directory.
	MainDir string
	// ModCache is the module cache holding the dependencies' files;
	// default `go env GOMODCACHE`.
	ModCache string
	// MainLicense, when set, is the licence the project declares for its
	// own module (an SPDX identifier or a name), recorded as declared;
	// otherwise the main module's licence is detected like any other.
	MainLicense string
	// Time stamps the document; the zero time leaves it unstamped.
	Time time.Time
	// Version is the build's version (tools/version.sh), given to the
	// main module where the build record shows "(devel)" and the binary
	// carries no -X main.version stamp of its own (a -trimpath build
	// records no -ldflags).
	Version string
}

// Module is one module of a binary's build record as the document lists
// it: the module the binary holds (the replacement of a replaced one).
type Module struct {
	Path, Version string
}

// Modules returns the modules the build record of bi shows, main module
// first: the list a document made from bi holds.
func Modules(bi *buildinfo.BuildInfo) []Module {
	out := []Module{{bi.Main.Path, mainVersion(bi, "")}}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		out = append(out, Module{d.Path, d.Version})
	}
	return out
}

// Generate reads the build record of o.Binary and returns its document.
func Generate(o Options) (*cdx.BOM, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return nil, fmt.Errorf("sbom: %s: %w", o.Binary, err)
	}
	return generate(o, bi, bin)
}

// generate makes the document of the binary bin whose build record is bi.
func generate(o Options, bi *buildinfo.BuildInfo, bin []byte) (*cdx.BOM, error) {
	var err error
	if bi.Main.Path == "" {
		return nil, fmt.Errorf("sbom: %s was not built in module mode: it records no main module", o.Binary)
	}
	if o.MainDir == "" {
		o.MainDir = "."
	}
	if o.ModCache == "" {
		if o.ModCache, err = goEnv("GOMODCACHE"); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(bin)
	g := generator{o: o, bi: bi, detector: local.NewDetector(zerolog.Nop())}

	main, err := g.component(&bi.Main, true)
	if err != nil {
		return nil, err
	}
	main.Type = cdx.ComponentTypeApplication
	main.Version = mainVersion(bi, o.Version)
	if main.Version != bi.Main.Version {
		main.Properties = appendProperty(main.Properties, "oidcd:go:module-version", bi.Main.Version)
	}
	main.PackageURL, main.BOMRef = g.purl(bi.Main.Path, main.Version), g.purl(bi.Main.Path, main.Version)
	if o.MainLicense != "" {
		main.Licenses = &cdx.Licenses{{License: named(o.MainLicense, cdx.LicenseAcknowledgementDeclared)}}
	}
	components := make([]cdx.Component, 0, len(bi.Deps))
	for _, d := range bi.Deps {
		c, err := g.component(d, false)
		if err != nil {
			return nil, err
		}
		components = append(components, *c)
	}

	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuid.NewSHA1(uuid.NameSpaceURL, []byte("sha256:"+hex.EncodeToString(sum[:]))).String()
	bom.Metadata = &cdx.Metadata{
		Component:  main,
		Tools:      &cdx.ToolsChoice{Components: &[]cdx.Component{self()}},
		Properties: g.buildProperties(filepath.Base(o.Binary), hex.EncodeToString(sum[:])),
	}
	if !o.Time.IsZero() {
		bom.Metadata.Timestamp = o.Time.UTC().Format(time.RFC3339)
	}
	bom.Components = &components
	return bom, nil
}

// Write writes bom as indented CycloneDX JSON of SpecVersion.
func Write(w io.Writer, bom *cdx.BOM) error {
	return cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON).SetPretty(true).SetEscapeHTML(false).EncodeVersion(bom, SpecVersion)
}

// WriteFile generates the document of o.Binary and writes it to path.
func WriteFile(path string, o Options) error {
	bom, err := Generate(o)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := Write(&b, bom); err != nil {
		return err
	}
	// #nosec G306 -- a bill of materials is public: it ships in the package's documentation
	return os.WriteFile(path, b.Bytes(), 0o644)
}

type generator struct {
	o        Options
	bi       *buildinfo.BuildInfo
	detector licensedetect.Detector
}

// component describes one module of the build record.
func (g generator) component(m *debug.Module, isMain bool) (*cdx.Component, error) {
	held := m
	if m.Replace != nil {
		held = m.Replace
	}
	dir, err := g.dir(held, isMain)
	if err != nil {
		return nil, err
	}
	c := &cdx.Component{
		Type:       cdx.ComponentTypeLibrary,
		Name:       held.Path,
		Version:    held.Version,
		PackageURL: g.purl(held.Path, held.Version),
	}
	c.BOMRef = c.PackageURL
	if !isMain {
		c.Scope = cdx.ScopeRequired
	}
	if held.Sum != "" {
		c.Properties = appendProperty(c.Properties, "oidcd:go:sum", held.Sum)
	}
	if m.Replace != nil {
		c.Properties = appendProperty(c.Properties, "oidcd:go:replaces", m.Path+"@"+m.Version)
	}
	if isMain && g.o.MainLicense != "" {
		return c, nil
	}
	lic, err := g.licenses(held, dir)
	if err != nil {
		return nil, err
	}
	c.Licenses = &lic
	return c, nil
}

// dir is where the files of m are: the main module's tree, a local
// replacement's directory, or m's directory in the module cache, whose
// sum must be the one the binary records.
func (g generator) dir(m *debug.Module, isMain bool) (string, error) {
	if isMain {
		return g.o.MainDir, nil
	}
	if m.Version == "" { // a replacement by a directory
		if filepath.IsAbs(m.Path) {
			return m.Path, nil
		}
		return filepath.Join(g.o.MainDir, m.Path), nil
	}
	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return "", fmt.Errorf("sbom: %s: %w", m.Path, err)
	}
	escVersion, err := module.EscapeVersion(m.Version)
	if err != nil {
		return "", fmt.Errorf("sbom: %s@%s: %w", m.Path, m.Version, err)
	}
	dir := filepath.Join(g.o.ModCache, escPath+"@"+escVersion)
	// #nosec G703 -- a module's directory in the module cache, from the binary's build record and escaped by golang.org/x/mod/module
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("sbom: %s@%s is not in the module cache %s (go mod download it, or build the binary here first)", m.Path, m.Version, g.o.ModCache)
	}
	if m.Sum != "" {
		ziphash := filepath.Join(g.o.ModCache, "cache", "download", escPath, "@v", escVersion+".ziphash")
		// #nosec G304 G703 -- the module cache's own record of that module's sum
		if b, err := os.ReadFile(ziphash); err == nil && strings.TrimSpace(string(b)) != m.Sum {
			return "", fmt.Errorf("sbom: %s@%s in the module cache has sum %s, the binary records %s: not the module that was built",
				m.Path, m.Version, strings.TrimSpace(string(b)), m.Sum)
		}
	}
	return dir, nil
}

// licenses are the licences of the module m whose files are in dir.
func (g generator) licenses(m *debug.Module, dir string) (cdx.Licenses, error) {
	found, err := g.detector.Detect(m.Path, m.Version, dir)
	if err != nil {
		return nil, fmt.Errorf("sbom: licence of %s@%s: %w", m.Path, m.Version, err)
	}
	var out cdx.Licenses
	for _, l := range found {
		l := l
		l.Acknowledgement = cdx.LicenseAcknowledgementConcluded
		out = append(out, cdx.LicenseChoice{License: &l})
	}
	if len(out) > 0 {
		return out, nil
	}
	// Unmatched: say so, with what the file says.
	unknown := named(Unknown, cdx.LicenseAcknowledgementConcluded)
	if name, text := licenseFile(dir); name != "" {
		unknown.Text = &cdx.AttachedText{ContentType: "text/plain", Content: text}
		unknown.Properties = appendProperty(nil, "oidcd:license:file", name)
	}
	return cdx.Licenses{{License: unknown}}, nil
}

// licenseFileName is how a licence file of a module is named.
var licenseFileName = regexp.MustCompile(`(?i)^(licen[cs]e|copying|unlicense)([._-].*)?$`)

// licenseFile returns the name and text of the first licence file in
// dir, or "" when it holds none.
func licenseFile(dir string) (name, text string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", ""
	}
	for _, e := range entries { // sorted by name
		if e.Type().IsRegular() && licenseFileName.MatchString(e.Name()) {
			// #nosec G304 G703 -- a licence file of a module's directory, read to record its text
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err == nil {
				return e.Name(), string(b)
			}
		}
	}
	return "", ""
}

// purl is the package URL of a Go module built for the binary's platform.
func (g generator) purl(path, version string) string {
	ns, name := "", path
	if i := strings.LastIndex(path, "/"); i >= 0 {
		ns, name = path[:i], path[i+1:]
	}
	var q packageurl.Qualifiers
	for _, k := range []string{"GOARCH", "GOOS"} {
		if v := g.setting(k); v != "" {
			q = append(q, packageurl.Qualifier{Key: strings.ToLower(k), Value: v})
		}
	}
	q = append(q, packageurl.Qualifier{Key: "type", Value: "module"})
	return packageurl.NewPackageURL(packageurl.TypeGolang, ns, name, version, q, "").ToString()
}

func (g generator) setting(key string) string {
	for _, s := range g.bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// buildProperties are the binary's and its build's, named as
// cyclonedx-gomod names them (the cdx:gomod taxonomy).
func (g generator) buildProperties(name, sha256hex string) *[]cdx.Property {
	props := []cdx.Property{
		{Name: "cdx:gomod:binary:name", Value: name},
		{Name: "cdx:gomod:binary:hash:SHA-256", Value: sha256hex},
		{Name: "cdx:gomod:build:env:GOVERSION", Value: g.bi.GoVersion},
	}
	for _, s := range []struct{ key, prop string }{
		{"CGO_ENABLED", "cdx:gomod:build:env:CGO_ENABLED"},
		{"GOARCH", "cdx:gomod:build:env:GOARCH"},
		{"GOOS", "cdx:gomod:build:env:GOOS"},
		{"-compiler", "cdx:gomod:build:compiler"},
		{"vcs", "cdx:gomod:build:vcs"},
		{"vcs.revision", "cdx:gomod:build:vcs:revision"},
		{"vcs.time", "cdx:gomod:build:vcs:time"},
		{"vcs.modified", "cdx:gomod:build:vcs:modified"},
		{"-ldflags", "oidcd:go:build:ldflags"},
		{"-trimpath", "oidcd:go:build:trimpath"},
	} {
		if v := g.setting(s.key); v != "" {
			props = append(props, cdx.Property{Name: s.prop, Value: v})
		}
	}
	if tags := g.setting("-tags"); tags != "" {
		for _, t := range strings.Split(tags, ",") {
			props = append(props, cdx.Property{Name: "cdx:gomod:build:tag", Value: t})
		}
	}
	props = append(props, cdx.Property{Name: "oidcd:go:package", Value: g.bi.Path})
	sort.SliceStable(props, func(i, j int) bool { return props[i].Name < props[j].Name })
	return &props
}

// mainVersionFlag is how the build stamps oidcd's version (Makefile's
// LDFLAGS).
var mainVersionFlag = regexp.MustCompile(`-X[= ]main\.version=([^\s'"]+)`)

// mainVersion is the main module's version: the one the build record
// shows, or, where that is "(devel)" (a build from a work tree), the
// version the build stamped into the binary with -X main.version, which
// `oidcd version` prints and the package carries, else given, else
// "(devel)".
func mainVersion(bi *buildinfo.BuildInfo, given string) string {
	if bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "-ldflags" {
			if m := mainVersionFlag.FindStringSubmatch(s.Value); m != nil {
				return m[1]
			}
		}
	}
	if given != "" {
		return given
	}
	return bi.Main.Version
}

// self names the tool and the libraries that made the document, at the
// versions linked into it.
func self() cdx.Component {
	c := cdx.Component{Type: cdx.ComponentTypeApplication, Name: "oidcd-sbom", Group: "github.com/oidcd/oidcd/tools"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return c
	}
	var libs []cdx.Component
	for _, d := range bi.Deps {
		switch d.Path {
		case "github.com/CycloneDX/cyclonedx-go", "github.com/CycloneDX/cyclonedx-gomod", "github.com/go-enry/go-license-detector/v4":
			libs = append(libs, cdx.Component{Type: cdx.ComponentTypeLibrary, Name: d.Path, Version: d.Version})
		}
	}
	if len(libs) > 0 {
		c.Components = &libs
	}
	return c
}

func named(name string, ack cdx.LicenseAcknowledgement) *cdx.License {
	return &cdx.License{Name: name, Acknowledgement: ack}
}

func appendProperty(p *[]cdx.Property, name, value string) *[]cdx.Property {
	var out []cdx.Property
	if p != nil {
		out = *p
	}
	out = append(out, cdx.Property{Name: name, Value: value})
	return &out
}

// goEnv is one variable of `go env`.
func goEnv(name string) (string, error) {
	// #nosec G204 -- the go command, with a variable name of this package's own
	out, err := exec.Command("go", "env", name).Output()
	v := strings.TrimSpace(string(out))
	if err != nil || v == "" {
		return "", errors.Join(fmt.Errorf("sbom: go env %s gave nothing: set Options.ModCache", name), err)
	}
	return v, nil
}
