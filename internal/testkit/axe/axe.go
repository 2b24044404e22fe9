// Package axe checks the page loaded in a chromedp tab against axe-core's
// WCAG 2.1 A and AA rules. axe-core comes from npm at the version
// package-lock.json locks (scripts/ensure-node.sh installs it with npm ci
// into node_modules here); without it a test is skipped, or fails when
// the environment variable CI is "true".
//
// The script is put into the page with the DevTools protocol's
// Runtime.evaluate, which runs in the page's main world and is not
// subject to the page's Content-Security-Policy: the pages keep their
// policy (no script-src but the passkey page's own file), Page.setBypassCSP
// is not needed, and axe sees them exactly as a person's browser does.
// axe-core itself needs no eval.
package axe

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
)

// Tags are the rule sets every page must pass: WCAG 2.0 and 2.1, levels
// A and AA.
var Tags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa"}

// Violation is one rule a page breaks, with the elements that break it.
type Violation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Help    string   `json:"help"`
	HelpURL string   `json:"helpUrl"`
	Targets []string `json:"targets"`
	// Summary is axe's explanation for the first element (what to fix).
	Summary string `json:"summary"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s (%s): %s; at %s; %s", v.ID, v.Impact, v.Help, strings.Join(v.Targets, ", "), v.Summary)
}

var (
	loadOnce sync.Once
	source   string
	loadErr  error
)

// scriptPath is node_modules/axe-core/axe.min.js beside this file.
func scriptPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "node_modules", "axe-core", "axe.min.js")
}

// Script returns axe.min.js, or skips the test (fails it under CI=true)
// when it is not installed.
func Script(t testing.TB) string {
	t.Helper()
	loadOnce.Do(func() {
		b, err := os.ReadFile(scriptPath())
		source, loadErr = string(b), err
	})
	if loadErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("axe-core not installed (run scripts/ensure-node.sh): %v", loadErr)
		}
		t.Skipf("axe-core not installed; run scripts/ensure-node.sh: %v", loadErr)
	}
	return source
}

// runScript runs axe on the whole document with Tags and returns its
// violations as JSON.
var runScript = `(async () => {
  const r = await axe.run(document, {runOnly: {type: "tag", values: ` + mustJSON(Tags) + `}, resultTypes: ["violations"]});
  return JSON.stringify(r.violations.map((v) => ({
    id: v.id, impact: v.impact || "", help: v.help, helpUrl: v.helpUrl,
    targets: v.nodes.map((n) => n.target.join(" ")),
    summary: v.nodes.length ? (n => n.failureSummary || "")(v.nodes[0]) : "",
  })));
})()`

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Run injects axe-core into the tab's current page (once a page) and
// returns the violations of Tags found there.
func Run(t testing.TB, ctx context.Context) []Violation {
	t.Helper()
	src := Script(t)
	actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
	defer cancel()
	present, err := chromedp.Run(actx, chromedp.Evaluate[bool](`typeof window.axe === "object"`))
	if err != nil {
		t.Fatalf("axe: at %s: %v", chrometest.Location(t, ctx), err)
	}
	if !present {
		// Evaluate the library as a script of the page's main world; its
		// completion value is not wanted.
		if _, err := chromedp.Run(actx, chromedp.Evaluate[bool](src+"\n;true")); err != nil {
			t.Fatalf("axe: inject at %s: %v", chrometest.Location(t, ctx), err)
		}
	}
	out, err := chromedp.Run(actx, chromedp.Evaluate[string](runScript, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe: run at %s: %v", chrometest.Location(t, ctx), err)
	}
	var vs []Violation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("axe: result %q: %v", out, err)
	}
	return vs
}

// Check runs axe on the tab's current page and fails the test (without
// stopping it) with each violation, naming the page name.
func Check(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	for _, v := range Run(t, ctx) {
		t.Errorf("%s: %s", name, v)
	}
}
