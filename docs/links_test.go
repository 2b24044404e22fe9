package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The documentation is a web of pages: README.md points into docs/, and
// the pages point at each other, at sections of each other and at files of
// the repository. A page that moves or a heading that is reworded breaks
// the links to it without any test noticing, so this file checks every
// relative link of README.md and docs/**/*.md: the file (or directory) it
// names exists, and a #fragment names a heading of the target page, by the
// rules GitHub uses to make a heading's anchor.

// mdLink is one link found in a Markdown file.
type mdLink struct {
	line   int
	target string
}

var (
	// inlineLink matches [text](target) and ![alt](target), with an
	// optional "title"; the text may hold one level of brackets.
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	// refDefinition matches a reference-style definition: [label]: target.
	refDefinition = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// codeSpan matches an inline code span (`code`, ``code``).
	codeSpan = regexp.MustCompile("``.*?``|`[^`]*`")
	// atxHeading matches a heading line: # Title.
	atxHeading = regexp.MustCompile(`^\s{0,3}#{1,6}(?:\s+(.*?))?\s*$`)
	// htmlAnchor matches an explicit anchor: <a name="x"> or id="x".
	htmlAnchor = regexp.MustCompile(`(?:name|id)="([^"]+)"`)
	// hasScheme tells an absolute URL (https:, mailto:) from a path.
	hasScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// closingHashes is the optional closing sequence of an ATX heading.
	closingHashes = regexp.MustCompile(`\s+#+$`)
	// linkMarkup is a link inside a heading: its text counts, not its target.
	linkMarkup = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// proseLines calls f with each line of md that is prose, as it is and
// with its code spans blanked out; lines inside fenced code blocks (```
// or ~~~, indented or not) are skipped.
func proseLines(md string, f func(n int, raw, prose string)) {
	fence := ""
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			n := len(trimmed) - len(strings.TrimLeft(trimmed, trimmed[:1]))
			fence = strings.Repeat(trimmed[:1], n)
			continue
		}
		f(i+1, line, codeSpan.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat(" ", len(s)) }))
	}
}

// links returns the links of md outside code.
func links(md string) []mdLink {
	var out []mdLink
	proseLines(md, func(n int, _, line string) {
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, mdLink{n, strings.Trim(m[1], "<>")})
		}
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			out = append(out, mdLink{n, strings.Trim(m[1], "<>")})
		}
	})
	return out
}

// slug is the anchor GitHub gives a heading's text: lower case, every
// character but letters, digits, marks, '_', '-' and spaces removed, and
// each space turned into '-'.
func slug(heading string) string {
	heading = linkMarkup.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the fragments md defines: one per heading, a repeated
// one numbered -1, -2, ... as GitHub does, plus explicit HTML anchors.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	proseLines(md, func(_ int, raw, prose string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(prose, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(raw) // a heading's code counts
		if m == nil {
			return
		}
		s := slug(closingHashes.ReplaceAllString(m[1], ""))
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	})
	return out
}

// brokenLinks checks the relative links of the Markdown files (paths
// relative to root, with slashes) and returns one message per link that
// does not resolve, and how many relative links it checked.
func brokenLinks(root string, files []string) ([]string, int, error) {
	var problems []string
	checked := 0
	pages := map[string]map[string]bool{} // anchors per page read
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := pages[rel]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		pages[rel] = anchors(string(b))
		return pages[rel], nil
	}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return nil, 0, err
		}
		for _, l := range links(string(b)) {
			if hasScheme.MatchString(l.target) || strings.HasPrefix(l.target, "//") {
				continue // another site: not ours to check offline
			}
			checked++
			where := fmt.Sprintf("%s:%d: link %q", file, l.line, l.target)
			p, frag, _ := strings.Cut(l.target, "#")
			p, _, _ = strings.Cut(p, "?")
			p, err := url.PathUnescape(p)
			if err != nil {
				problems = append(problems, where+": not a valid path")
				continue
			}
			target := file
			if p != "" {
				if strings.HasPrefix(p, "/") {
					problems = append(problems, where+": an absolute path; use one relative to the page")
					continue
				}
				target = filepath.ToSlash(filepath.Join(filepath.Dir(file), p))
				if target == ".." || strings.HasPrefix(target, "../") {
					problems = append(problems, where+": points outside the repository")
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					problems = append(problems, where+": "+target+" does not exist")
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue // a fragment of a source file (#L10) is GitHub's, not a heading
			}
			a, err := anchorsOf(target)
			if err != nil {
				return nil, 0, err
			}
			if !a[frag] {
				problems = append(problems, where+": "+target+" has no heading with the anchor #"+frag)
			}
		}
	}
	return problems, checked, nil
}

// markdownFiles lists README.md and every .md file under docs/, relative
// to root, with slashes.
func markdownFiles(root string) ([]string, error) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// TestEveryRelativeLinkResolves: every relative link of README.md and of
// the pages under docs/ names a file or directory of the repository, and
// every #fragment into a page names one of its headings.
func TestEveryRelativeLinkResolves(t *testing.T) {
	files, err := markdownFiles("..")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v: not the repository?", files)
	}
	problems, checked, err := brokenLinks("..", files)
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Errorf("checked only %d relative links in %d files: is the link finder broken?", checked, len(files))
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestBrokenLinksFindsWhatIsBroken runs the checker on a small tree of
// pages, one case per kind of link, so that the test above cannot pass by
// checking nothing.
func TestBrokenLinksFindsWhatIsBroken(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/target.md", "# Target page\n\n## What \"consistent\" means here\n\n## `proxy-header = \"forwarded\"`\n\n## Flags\n\n## Flags\n\n```\n# Not a heading\n```\n\n<a name=\"custom\"></a>\n")
	write("deploy/haproxy.cfg", "global\n")
	cases := []struct {
		name, page string
		broken     bool
	}{
		{"a page that exists", "[t](target.md)", false},
		{"a page that does not", "[t](missing.md)", true},
		{"a file up the tree", "[cfg](../deploy/haproxy.cfg)", false},
		{"a directory", "[dir](../deploy)", false},
		{"a file up the tree that does not exist", "[cfg](../deploy/nginx.conf)", true},
		{"outside the repository", "[x](../../etc/passwd)", true},
		{"an absolute path", "[x](/docs/target.md)", true},
		{"a heading with quotes", "[c](target.md#what-consistent-means-here)", false},
		{"a heading with code and punctuation", "[f](target.md#proxy-header--forwarded)", false},
		{"a repeated heading, numbered", "[f](target.md#flags-1)", false},
		{"a repeated heading, once too many", "[f](target.md#flags-2)", true},
		{"a heading that does not exist", "[c](target.md#what-consistent-means)", true},
		{"a heading inside a code block is none", "[c](target.md#not-a-heading)", true},
		{"an explicit anchor", "[c](target.md#custom)", false},
		{"a heading of the same page", "# Here\n\n[h](#here)", false},
		{"a missing heading of the same page", "# Here\n\n[h](#there)", true},
		{"a link with a title", "[t](target.md \"the target\")", false},
		{"an image", "![pic](missing.png)", true},
		{"a reference definition", "[t]: missing.md", true},
		{"a link in a code block is not checked", "```sh\n[t](missing.md)\n```", false},
		{"a link in an indented code block is not checked", "1. step\n\n   ```sh\n   [t](missing.md)\n   ```", false},
		{"a link in a code span is not checked", "`[t](missing.md)`", false},
		{"another site is not checked", "[t](https://example.com/missing.md#nothing)", false},
		{"an escaped path", "[t](target%2Emd)", false},
		{"a fragment of a source file is GitHub's", "[cfg](../deploy/haproxy.cfg#L1)", false},
		{"a link after a code span on the same line", "`code` then [t](missing.md)", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			write("docs/page.md", c.page+"\n")
			problems, _, err := brokenLinks(root, []string{"docs/page.md"})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(problems) > 0; got != c.broken {
				t.Errorf("%q: broken %v, want %v (%v)", c.page, got, c.broken, problems)
			}
		})
	}
}

// TestSlug: GitHub's anchors for the kinds of headings the pages use.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Running a node":                        "running-a-node",
		"Stopping, liveness and readiness":      "stopping-liveness-and-readiness",
		`What "consistent" means here`:          "what-consistent-means-here",
		"`proxy-header = \"forwarded\"`":        "proxy-header--forwarded",
		"Behind a load balancer, and TLS":       "behind-a-load-balancer-and-tls",
		"Errors on the redirect URI":            "errors-on-the-redirect-uri",
		"The [demo](x.md) relying party":        "the-demo-relying-party",
		"snake_case and CamelCase 2.0":          "snake_case-and-camelcase-20",
		"Directory sign-in (LDAP, AD)":          "directory-sign-in-ldap-ad",
		"Upgrades: one node at a time — safely": "upgrades-one-node-at-a-time--safely",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
