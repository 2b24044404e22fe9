package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeGoVersion: the README's install paragraph names the Go that
// go.mod needs, exactly: its `go` line (and its `toolchain` line, when it
// has one), not a looser "1.26+", for an older Go tries to download the
// toolchain go.mod names, which fails on a machine offline. The paragraph
// says so.
func TestReadmeGoVersion(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	need := string(goLine[1])
	toolchain := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindSubmatch(mod)

	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The paragraph that begins "Needs only Go".
	text := string(readme)
	i := strings.Index(text, "\nNeeds only Go")
	if i < 0 {
		t.Fatal(`README.md: no paragraph "Needs only Go ..."`)
	}
	para, _, _ := strings.Cut(text[i+1:], "\n\n")

	// Every Go version the paragraph names is go.mod's.
	versions := regexp.MustCompile(`\bgo ?\(?(\d+\.\d+(?:\.\d+)?)(\+)?`).FindAllStringSubmatch(strings.ToLower(para), -1)
	if len(versions) == 0 {
		t.Fatalf("README.md's paragraph names no Go version:\n%s", para)
	}
	for _, v := range versions {
		if v[1] != need && (toolchain == nil || v[1] != string(toolchain[1])) || v[2] != "" {
			t.Errorf("README.md names Go %q; go.mod's go line is %q", v[0], need)
		}
	}
	for _, want := range []string{"Needs only Go " + need + " or newer", "`go " + need + "`", "offline"} {
		if !strings.Contains(para, want) {
			t.Errorf("README.md's paragraph lacks %q:\n%s", want, para)
		}
	}
	if toolchain != nil && !strings.Contains(para, "`toolchain go"+string(toolchain[1])+"`") {
		t.Errorf("go.mod names toolchain go%s; README.md's paragraph does not:\n%s", toolchain[1], para)
	}
}
