package docs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unshipped are the names of documents that live outside the repository:
// the interface specification, the operator contract, the house style and
// the outside measurements the project was built against. Nothing the
// repository holds may cite them; it states the rule in place or points at
// a page it ships. The names are built from parts so that this file, which
// is scanned like every other, does not cite them itself.
var unshipped = func() []string {
	var names []string
	for _, base := range []string{"SPEC", "CONTRACT", "STYLE", "MEASURED"} {
		names = append(names, base+"."+"md")
	}
	return names
}()

// missingNames returns the names of unshipped that the repository at root
// does not hold: a document shipped after all may be cited.
func missingNames(root string) []string {
	var out []string
	for _, name := range unshipped {
		if _, err := os.Stat(filepath.Join(root, name)); err == nil {
			continue
		}
		out = append(out, name)
	}
	return out
}

// checkNoCitation reports every line of files (paths relative to root)
// that names one of missing.
func checkNoCitation(t *testing.T, root string, files, missing []string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary: a picture, an archive, a key
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, name := range missing {
				if strings.Contains(line, name) {
					t.Errorf("%s:%d cites %s, which the repository does not hold: %q", f, i+1, name, strings.TrimSpace(line))
				}
			}
		}
	}
}

// TestShippedTextCitesNoUnshippedDocument: the documents the project
// ships (README, the pages under docs/, the example configurations,
// dashboards and alert rules under deploy/, the package's files) never
// cite the specification, contract, style or measurement files the
// repository does not hold; they point at the project's own pages instead.
func TestShippedTextCitesNoUnshippedDocument(t *testing.T) {
	root := ".."
	files := []string{"README.md", "BENCHMARKS.md", "RELIABILITY.md", "SECURITY.md"}
	for _, dir := range []string{"docs", "deploy", filepath.Join("tools", "packaging", "files")} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
				return err
			}
			rel, err := filepath.Rel(root, path)
			files = append(files, rel)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	checkNoCitation(t, root, files, missingNames(root))
}

// TestNoFileCitesUnshippedDocument: no file of the repository, Go sources
// and tests, comments and test messages included, cites a document the
// repository does not hold. The files are those git tracks or would track
// (untracked but not ignored, so a new file counts before it is added);
// without git (an exported tree) every file under the root but .git and
// node_modules.
func TestNoFileCitesUnshippedDocument(t *testing.T) {
	root := ".."
	files, err := gitFiles(root)
	if err != nil {
		t.Logf("git ls-files: %v; walking the tree instead", err)
		files, err = walkFiles(root)
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 100 {
		t.Fatalf("found only %d files under %s: not the repository?", len(files), root)
	}
	checkNoCitation(t, root, files, missingNames(root))
}

// gitFiles lists the files of the work tree at root that git tracks or
// would track, relative to root, skipping node_modules.
func gitFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || inNodeModules(f) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			continue // a symbolic link or a submodule: its target is read where it lives
		}
		files = append(files, filepath.FromSlash(f))
	}
	if len(files) == 0 {
		return nil, errors.New("no files listed")
	}
	return files, nil
}

// walkFiles lists every regular file under root, relative to it, but those
// under .git and node_modules.
func walkFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		files = append(files, rel)
		return err
	})
	return files, err
}

func inNodeModules(path string) bool {
	for _, part := range strings.Split(path, "/") {
		if part == "node_modules" {
			return true
		}
	}
	return false
}
