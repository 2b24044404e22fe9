package sbom

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"golang.org/x/mod/module"
)

// fakeCache is a module cache in a temporary directory holding the
// modules given, each as its files (name to text).
func fakeCache(t *testing.T, mods map[string]map[string]string) string {
	t.Helper()
	cache := t.TempDir()
	for pv, files := range mods {
		path, version, _ := strings.Cut(pv, "@")
		ep, _ := module.EscapePath(path)
		ev, _ := module.EscapeVersion(version)
		dir := filepath.Join(cache, ep+"@"+ev)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return cache
}

// realLicense is the text of a real licence: golang.org/x/mod's, which
// this test links (BSD-3-Clause), from the module cache.
func realLicense(t *testing.T) string {
	t.Helper()
	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		t.Skip(err)
	}
	bi, _ := debug.ReadBuildInfo()
	for _, d := range bi.Deps {
		if d.Path == "golang.org/x/mod" {
			b, err := os.ReadFile(filepath.Join(cache, "golang.org/x/mod@"+d.Version, "LICENSE"))
			if err != nil {
				t.Skip(err)
			}
			return string(b)
		}
	}
	t.Skip("golang.org/x/mod is not linked into the test")
	return ""
}

func buildInfo(deps ...*debug.Module) *buildinfo.BuildInfo {
	return &buildinfo.BuildInfo{
		GoVersion: "go1.26.8",
		Path:      "example.com/app/cmd/app",
		Main:      debug.Module{Path: "example.com/app", Version: "(devel)"},
		Deps:      deps,
		Settings: []debug.BuildSetting{
			{Key: "-ldflags", Value: `"-X main.version=1.4.2"`}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
		},
	}
}

func component(t *testing.T, bom *cdx.BOM, name string) cdx.Component {
	t.Helper()
	for _, c := range *bom.Components {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no component %s", name)
	return cdx.Component{}
}

// TestLicences: a licence file the classifier knows is named by its SPDX
// identifier, as concluded; one it does not know is "unknown" with the
// file's text, so the reader sees what it says; a module with no licence
// file is "unknown" with nothing; a replaced module is its replacement.
func TestLicences(t *testing.T) {
	bsd := realLicense(t)
	odd := "You may use this if you whistle while you do.\n"
	cache := fakeCache(t, map[string]map[string]string{
		"example.com/known@v1.0.0":   {"LICENSE": bsd, "go.mod": "module example.com/known\n"},
		"example.com/odd@v0.1.0":     {"COPYING.txt": odd},
		"example.com/none@v0.0.0-x":  {"go.mod": "module example.com/none\n"},
		"example.com/Fork/Up@v2.0.0": {"LICENSE.md": bsd},
	})
	main := t.TempDir()
	bi := buildInfo(
		&debug.Module{Path: "example.com/known", Version: "v1.0.0", Sum: "h1:abc="},
		&debug.Module{Path: "example.com/odd", Version: "v0.1.0"},
		&debug.Module{Path: "example.com/none", Version: "v0.0.0-x"},
		&debug.Module{Path: "example.com/up", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/Fork/Up", Version: "v2.0.0"}},
	)
	bom, err := generate(Options{Binary: "app", MainDir: main, ModCache: cache}, bi, []byte("binary"))
	if err != nil {
		t.Fatal(err)
	}
	var got []Module
	for _, c := range *bom.Components {
		got = append(got, Module{c.Name, c.Version})
	}
	want := Modules(bi)[1:]
	if len(got) != len(want) {
		t.Fatalf("components %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("component %d: got %v, want %v", i, got[i], want[i])
		}
	}

	lic := func(c cdx.Component) cdx.License {
		t.Helper()
		if c.Licenses == nil || len(*c.Licenses) != 1 || (*c.Licenses)[0].License == nil {
			t.Fatalf("%s: licences %+v, want one", c.Name, c.Licenses)
		}
		return *(*c.Licenses)[0].License
	}
	if l := lic(component(t, bom, "example.com/known")); l.ID != "BSD-3-Clause" || l.Acknowledgement != cdx.LicenseAcknowledgementConcluded || l.Text != nil {
		t.Errorf("known: %+v, want BSD-3-Clause concluded", l)
	}
	if l := lic(component(t, bom, "example.com/odd")); l.Name != Unknown || l.ID != "" || l.Text == nil || l.Text.Content != odd ||
		l.Properties == nil || (*l.Properties)[0].Value != "COPYING.txt" {
		t.Errorf("odd: %+v, want unknown with the text of COPYING.txt", l)
	}
	if l := lic(component(t, bom, "example.com/none")); l.Name != Unknown || l.Text != nil {
		t.Errorf("none: %+v, want unknown without text", l)
	}
	up := component(t, bom, "example.com/Fork/Up")
	if l := lic(up); l.ID != "BSD-3-Clause" {
		t.Errorf("replacement: %+v, want BSD-3-Clause", l)
	}
	if up.Properties == nil || (*up.Properties)[0] != (cdx.Property{Name: "oidcd:go:replaces", Value: "example.com/up@v1.0.0"}) {
		t.Errorf("replacement properties %+v, want what it replaces", up.Properties)
	}
	if k := component(t, bom, "example.com/known"); k.PackageURL != "pkg:golang/example.com/known@v1.0.0?goarch=arm64&goos=linux&type=module" {
		t.Errorf("purl %q", k.PackageURL)
	}

	m := bom.Metadata.Component
	if m.Name != "example.com/app" || m.Version != "1.4.2" || m.Type != cdx.ComponentTypeApplication {
		t.Errorf("main component %s %s %s, want example.com/app 1.4.2 application (the stamped version)", m.Name, m.Version, m.Type)
	}
	if l := lic(*m); l.Name != Unknown {
		t.Errorf("main module without licence file: %+v, want unknown", l)
	}

	// A build that records no -ldflags (-trimpath): the version given.
	trimmed := buildInfo()
	trimmed.Settings = trimmed.Settings[1:]
	if b, err := generate(Options{Binary: "app", MainDir: main, ModCache: cache, Version: "2.0.0"}, trimmed, nil); err != nil || b.Metadata.Component.Version != "2.0.0" {
		t.Errorf("main version of a -trimpath build: %v %v, want the given 2.0.0", b.Metadata.Component.Version, err)
	}

	// Declared by the project: recorded as declared, not looked for.
	bom, err = generate(Options{Binary: "app", MainDir: main, ModCache: cache, MainLicense: "Proprietary"}, bi, []byte("binary"))
	if err != nil {
		t.Fatal(err)
	}
	if l := lic(*bom.Metadata.Component); l.Name != "Proprietary" || l.Acknowledgement != cdx.LicenseAcknowledgementDeclared {
		t.Errorf("declared main licence: %+v", l)
	}

	// The JSON a reader gets: CycloneDX 1.6, the same bytes each time.
	var a, b bytes.Buffer
	if err := Write(&a, bom); err != nil {
		t.Fatal(err)
	}
	again, _ := generate(Options{Binary: "app", MainDir: main, ModCache: cache, MainLicense: "Proprietary"}, bi, []byte("binary"))
	Write(&b, again)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same binary gave two different documents")
	}
	var doc struct {
		BOMFormat, SpecVersion, SerialNumber string
	}
	if err := json.Unmarshal(a.Bytes(), &doc); err != nil || doc.BOMFormat != "CycloneDX" || doc.SpecVersion != "1.6" || !strings.HasPrefix(doc.SerialNumber, "urn:uuid:") {
		t.Errorf("document head %+v (%v)", doc, err)
	}
}

// TestModuleNotInCache: a module the binary links but the cache lacks, or
// holds with another sum, is an error, never a component without licence.
func TestModuleNotInCache(t *testing.T) {
	cache := fakeCache(t, map[string]map[string]string{"example.com/a@v1.0.0": {"LICENSE": "x"}})
	_, err := generate(Options{MainDir: t.TempDir(), ModCache: cache}, buildInfo(&debug.Module{Path: "example.com/b", Version: "v1.0.0"}), nil)
	if err == nil || !strings.Contains(err.Error(), "example.com/b@v1.0.0 is not in the module cache") {
		t.Errorf("missing module: %v", err)
	}
	dl := filepath.Join(cache, "cache", "download", "example.com", "a", "@v")
	os.MkdirAll(dl, 0o755)
	os.WriteFile(filepath.Join(dl, "v1.0.0.ziphash"), []byte("h1:other=\n"), 0o644)
	_, err = generate(Options{MainDir: t.TempDir(), ModCache: cache}, buildInfo(&debug.Module{Path: "example.com/a", Version: "v1.0.0", Sum: "h1:mine="}), nil)
	if err == nil || !strings.Contains(err.Error(), "not the module that was built") {
		t.Errorf("sum mismatch: %v", err)
	}
}
