package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedTextCitesNoUnshippedDocument: the documents the project
// ships (README, the pages under docs/, the example configurations,
// dashboards and alert rules under deploy/, the package's files) never
// cite the specification and contract files the repository does not hold;
// they point at the project's own pages instead.
func TestShippedTextCitesNoUnshippedDocument(t *testing.T) {
	root := ".."
	var files []string
	for _, f := range []string{"README.md", "BENCHMARKS.md", "RELIABILITY.md"} {
		files = append(files, filepath.Join(root, f))
	}
	for _, dir := range []string{"docs", "deploy", filepath.Join("tools", "packaging", "files")} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
				return err
			}
			files = append(files, path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, missing := range []string{"SPEC.md", "CONTRACT.md"} {
		if _, err := os.Stat(filepath.Join(root, missing)); err == nil {
			continue // shipped after all: citing it is fine
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, missing) {
					t.Errorf("%s:%d cites %s, which the repository does not hold: %q", f, i+1, missing, strings.TrimSpace(line))
				}
			}
		}
	}
}
