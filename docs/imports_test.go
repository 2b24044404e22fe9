package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The rooms of docs/architecture.md and what each never imports, held
// against the import graph the go command reports. Only the imports of
// the code a binary runs count (a package's Imports, not its tests'): a
// test of oidc may drive a whole node through testcluster.

// A pattern names packages of this module by their path below the module
// root: "fsm" is that package, "internal/..." is internal and everything
// below it, "..." is every package of the module. A list of patterns is
// read in order and the last one that matches a package decides; one
// starting with "!" takes packages out ("internal/...",
// "!internal/testkit/..." is internal/ without its test kits).

// helpers are the leaf helpers: internal/ without the test kits.
var helpers = []string{"internal/...", "!internal/testkit/..."}

// testKits are the packages only tests (and the load generator) use.
var testKits = []string{"internal/testkit/...", "testcluster"}

// importRule is one rule of docs/architecture.md: no package matched by
// from imports a package matched by never, or (only set) any package of
// the module that only does not match. With deps, the rule holds for
// every package from depends on, directly or not, not only its imports.
type importRule struct {
	from   []string
	never  []string
	only   []string
	deps   bool
	reason string
}

// with is the patterns named first, then those of set.
func with(set []string, names ...string) []string {
	return append(slices.Clip(names), set...)
}

// importRules is the table of docs/architecture.md, "The rules".
var importRules = []importRule{
	{from: []string{"fsm"}, never: []string{"...", "!fsm/trail"},
		reason: "every node replays the raft log through the state machine; it stays deterministic and is tested alone, so it depends on nothing of ours but the store of its own audit trail"},
	{from: []string{"fsm/trail"}, never: []string{"..."},
		reason: "the audit trail's store on each node's disk, outside the raft snapshot: fsm keeps its events in it, so it imports nothing of ours"},
	{from: []string{"webui"}, only: []string{"internal/i18n"},
		reason: "templates render what a handler hands them and know nothing of state, keys or the cluster; their texts come from catalogs read by internal/i18n, as the mail's do"},
	{from: []string{"docs"}, never: []string{"..."},
		reason: "docs only embeds the documents node serves; its tests reach a node through testcluster, never its code"},
	{from: helpers, only: helpers,
		reason: "leaf helpers are the floor every room stands on: a helper importing a room would tie every room that uses it to that room"},
	{from: []string{"...", "!node", "!cmd/..."}, never: []string{"cluster"},
		reason: "raft is wired in one place: node hands the cluster to each room as the narrow interfaces that room declares (fsm.Applier, a read index, a rate limiter), so each room runs in its tests without a cluster"},
	{from: []string{"...", "!cmd/...", "!testcluster", "!internal/testkit/..."}, never: []string{"node"},
		reason: "node assembles every room; a room importing it would depend on all the others"},
	{from: []string{"cluster"}, only: with(helpers, "fsm"),
		reason: "the cluster replicates commands and knows nothing of the protocol it carries"},
	{from: []string{"keys"}, only: with(helpers, "fsm"),
		reason: "key rotation writes through fsm.Applier and reads fsm.State; the leader-only loop is started by node"},
	{from: []string{"directory"}, only: with(helpers, "fsm"),
		reason: "the LDAP client and the directory sync read the state through fsm and write through fsm.Applier; the cluster is node's to hand over"},
	{from: []string{"federation"}, only: helpers,
		reason: "the upstream client speaks OpenID Connect to the site's other providers and checks what they answer; it takes plain configuration, so the records, the sign-in and the admin API that use it stay theirs"},
	{from: []string{"logout"}, only: with(helpers, "fsm", "keys", "session", "webui", "federation"),
		reason: "logout signs back-channel logout tokens, renders its pages and ends the browser's session through session; it builds an upstream's end-session URL through federation (which imports only helpers, so no cycle); it writes through fsm.Applier, never through the cluster"},
	{from: []string{"oidc"}, only: with(helpers, "fsm", "keys", "session", "webui"),
		reason: "the protocol handlers read fsm.State, sign with keys, keep the browser's session through session and write through fsm.Applier; how a person proves who they are (passwords, factors, directories) is signin's"},
	{from: []string{"oidc"}, never: []string{"signin"},
		reason: "oidc hands the browser to sign-in through an interface oidc declares and node fills with signin, so sign-in changes never touch the protocol"},
	{from: []string{"signin"}, never: []string{"oidc", "keys", "cluster", "logout", "node"},
		reason: "sign-in proves who the person is and hands the answer back; it issues no token, signs nothing and writes through fsm.Applier"},
	{from: []string{"session"}, only: with(helpers, "fsm"),
		reason: "the browser session is one owner that oidc, signin and logout are handed; it reads the state and the browser key and knows nothing of the rooms that use it"},
	{from: []string{"email"}, only: with(helpers, "fsm"),
		reason: "mail to people is composed and sealed by the room that makes its link and committed with it; the leader's delivery reads the outbox through fsm and records outcomes through fsm.Applier"},
	{from: []string{"admin"}, only: with(helpers, "fsm", "directory", "email", "federation"),
		reason: "the admin API changes the state through fsm.Applier alone; it never reaches into the protocol rooms"},
	{from: []string{"admin/console"}, only: with(helpers, "admin", "fsm"),
		reason: "the console is a browser face on the admin API and calls it in process; everything it does, the API does"},
	{from: []string{"admin/cli"}, only: helpers,
		reason: "oidcd admin speaks HTTP to the admin API of a running node and shares no code with the server behind it"},
	{from: []string{"cmd/oidcd", "cmd/oidcd-demo-rp"}, never: testKits, deps: true,
		reason: "the shipped binaries carry no test kit: an applier without raft, a browser driver, a throwaway slapd or test nodes have no place in production"},
}

// match reports whether the patterns select pkg (a path below the module
// root): the last pattern that matches decides.
func match(patterns []string, pkg string) bool {
	in := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if matchOne(strings.TrimPrefix(p, "!"), pkg) {
			in = !neg
		}
	}
	return in
}

func matchOne(p, pkg string) bool {
	if p == "..." {
		return true
	}
	if dir, ok := strings.CutSuffix(p, "/..."); ok {
		return pkg == dir || strings.HasPrefix(pkg, dir+"/")
	}
	return p == pkg
}

// importGraph maps each package of the module (a path below its root) to
// the packages of the module it imports.
type importGraph map[string][]string

func (g importGraph) sorted() []string {
	var out []string
	for p := range g {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// via returns, for every package pkg depends on, the package it is
// reached from (pkg itself for its own imports), in a breadth-first walk,
// so a path to each is the shortest.
func (g importGraph) via(pkg string) map[string]string {
	from := map[string]string{}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p] {
			if _, seen := from[imp]; !seen && imp != pkg {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return from
}

// path is how pkg reaches dep, by the walk of via: "a → b → c".
func path(via map[string]string, pkg, dep string) string {
	hops := []string{dep}
	for p := dep; p != pkg; {
		p = via[p]
		hops = append(hops, p)
	}
	slices.Reverse(hops)
	return strings.Join(hops, " → ")
}

// violation is one import a rule forbids.
type violation struct {
	rule     int    // index in the table
	pkg, dep string // the importing package and the forbidden one
	path     string // how pkg reaches dep
}

func (v violation) String() string { return v.path }

// checkImports returns every import of g that one of rules forbids.
func checkImports(rules []importRule, g importGraph) []violation {
	var out []violation
	for i, r := range rules {
		for _, pkg := range g.sorted() {
			if !match(r.from, pkg) {
				continue
			}
			via := map[string]string{}
			if r.deps {
				via = g.via(pkg)
			} else {
				for _, imp := range g[pkg] {
					via[imp] = pkg
				}
			}
			deps := make([]string, 0, len(via))
			for d := range via {
				deps = append(deps, d)
			}
			slices.Sort(deps)
			for _, d := range deps {
				if (r.never != nil && match(r.never, d)) || (r.only != nil && !match(r.only, d)) {
					out = append(out, violation{rule: i, pkg: pkg, dep: d, path: path(via, pkg, d)})
				}
			}
		}
	}
	return out
}

// missingPackages returns, for each pattern of rules (but "...") that
// selects no package of g, a line naming it: a rule about a package that
// was renamed or removed would otherwise hold forever without saying so.
func missingPackages(rules []importRule, g importGraph) []string {
	var out []string
	for i, r := range rules {
		for _, list := range [][]string{r.from, r.never, r.only} {
			for _, p := range list {
				bare := strings.TrimPrefix(p, "!")
				if bare == "..." || slices.ContainsFunc(g.sorted(), func(pkg string) bool { return matchOne(bare, pkg) }) {
					continue
				}
				out = append(out, fmt.Sprintf("rule %d names %q, which is no package of the module", i, p))
			}
		}
	}
	return slices.Compact(out)
}

// listedPackage is what go list -json says of one package.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Module     *struct{ Path string }
}

var moduleGraph = sync.OnceValues(func() (loaded, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps,Module", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return loaded{}, fmt.Errorf("go list: %v: %s", err, stderr.Bytes())
	}
	return parseList(out)
})

// loaded is the module's import graph and what go list gives as each
// package's dependencies (our packages only), to check the walk against.
type loaded struct {
	graph importGraph
	deps  map[string][]string
}

func parseList(out []byte) (loaded, error) {
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return loaded{}, err
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 || pkgs[0].Module == nil {
		return loaded{}, errors.New("go list: no package of a module")
	}
	mod := pkgs[0].Module.Path
	ours := func(list []string) []string {
		var out []string
		for _, p := range list {
			if p == mod {
				out = append(out, ".")
			} else if rel, ok := strings.CutPrefix(p, mod+"/"); ok {
				out = append(out, rel)
			}
		}
		return out
	}
	l := loaded{graph: importGraph{}, deps: map[string][]string{}}
	for _, p := range pkgs {
		name := ours([]string{p.ImportPath})
		if len(name) != 1 {
			return loaded{}, fmt.Errorf("go list: %s is outside module %s", p.ImportPath, mod)
		}
		l.graph[name[0]] = ours(p.Imports)
		l.deps[name[0]] = ours(p.Deps)
	}
	return l, nil
}

func realGraph(t *testing.T) loaded {
	t.Helper()
	l, err := moduleGraph()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.graph) < 20 {
		t.Fatalf("go list found %d packages: not the module?", len(l.graph))
	}
	return l
}

// TestImportRulesNamePackages: every package a rule names is a package of
// the module, so a rule cannot outlive the room it is about.
func TestImportRulesNamePackages(t *testing.T) {
	for _, m := range missingPackages(importRules, realGraph(t).graph) {
		t.Error(m)
	}
}

// TestImportRulesHold: the module's imports keep every rule of
// docs/architecture.md.
func TestImportRulesHold(t *testing.T) {
	for _, v := range checkImports(importRules, realGraph(t).graph) {
		t.Errorf("%s: %s", v, importRules[v.rule].reason)
	}
}

// TestArchitecturePageStatesEachRule: docs/architecture.md gives each
// rule of the table with its reason, in the same words, so the page and
// the test cannot drift apart.
func TestArchitecturePageStatesEachRule(t *testing.T) {
	b, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	page := strings.ReplaceAll(string(b), "`", "")
	for i, r := range importRules {
		if !strings.Contains(page, "| "+r.reason+" |") {
			t.Errorf("docs/architecture.md does not give rule %d (from %q) with its reason %q", i, r.from, r.reason)
		}
	}
}

// TestShippedBinariesCarryNoTestKit: go list's own dependencies of the
// shipped commands hold no test kit, and the walk the deps rules use finds
// exactly the packages of ours go list finds (so the walk cannot miss one).
func TestShippedBinariesCarryNoTestKit(t *testing.T) {
	l := realGraph(t)
	for _, cmd := range []string{"cmd/oidcd", "cmd/oidcd-demo-rp"} {
		want, ok := l.deps[cmd]
		if !ok {
			t.Fatalf("no package %s", cmd)
		}
		for _, d := range want {
			if match(testKits, d) {
				t.Errorf("%s depends on the test kit %s", cmd, d)
			}
		}
		var got []string
		for d := range l.graph.via(cmd) {
			got = append(got, d)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the walk finds %v, go list -deps %v", cmd, got, want)
		}
	}
}

// TestCheckImportsCatchesEachKind: over a small graph, each kind of
// violation is reported (a forbidden import, one outside an only list, a
// forbidden dependency some hops away, an exception that does not apply
// to its neighbour) and a graph that keeps the rules gives none.
func TestCheckImportsCatchesEachKind(t *testing.T) {
	rules := []importRule{
		{from: []string{"core"}, never: []string{"..."}, reason: "core imports nothing"},
		{from: []string{"...", "!hub"}, never: []string{"net"}, reason: "only hub imports net"},
		{from: []string{"room"}, only: []string{"core", "lib/...", "!lib/fake"}, reason: "room imports core and libs"},
		{from: []string{"cmd"}, never: []string{"lib/fake"}, deps: true, reason: "no fake in the binary"},
	}
	good := importGraph{
		"core": nil, "net": {"core"}, "lib/a": nil, "lib/fake": {"lib/a"},
		"room": {"core", "lib/a"}, "hub": {"net", "room"}, "cmd": {"hub"}, "test": {"hub", "lib/fake"},
	}
	if m := missingPackages(rules, good); len(m) > 0 {
		t.Fatalf("missing: %v", m)
	}
	if v := checkImports(rules, good); len(v) > 0 {
		t.Fatalf("a graph that keeps the rules: %v", v)
	}
	for _, tc := range []struct {
		name     string
		pkg, imp string // the edge added to good
		want     []string
	}{
		{"never: core imports anything", "core", "lib/a", []string{"0 core → lib/a"}},
		{"never with an exception: room is not hub", "room", "net", []string{"1 room → net", "2 room → net"}},
		{"only: room imports what it may not", "room", "hub", []string{"2 room → hub"}},
		{"only with an exception: lib/fake is taken out of lib/...", "room", "lib/fake", []string{"2 room → lib/fake", "3 cmd → hub → room → lib/fake"}},
		{"deps: a fake three hops away", "lib/a", "lib/fake", []string{"3 cmd → hub → room → lib/a → lib/fake"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := importGraph{}
			for p, imps := range good {
				g[p] = slices.Clone(imps)
			}
			g[tc.pkg] = append(g[tc.pkg], tc.imp)
			var got []string
			for _, v := range checkImports(rules, g) {
				got = append(got, fmt.Sprintf("%d %s", v.rule, v))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("a rule naming no package", func(t *testing.T) {
		stale := append(slices.Clone(rules),
			importRule{from: []string{"gone"}, never: []string{"core"}},
			importRule{from: []string{"...", "!moved/..."}, only: []string{"core"}},
		)
		want := []string{
			`rule 4 names "gone", which is no package of the module`,
			`rule 5 names "!moved/...", which is no package of the module`,
		}
		if got := missingPackages(stale, good); !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

// TestEveryImportRuleCanFail: for each rule of the table, one import that
// breaks it, added to the module's real graph (with the packages a rule
// names but the module does not hold yet), is reported under that rule.
func TestEveryImportRuleCanFail(t *testing.T) {
	base := realGraph(t).graph
	for i, r := range importRules {
		t.Run(fmt.Sprint(i, " ", r.from), func(t *testing.T) {
			g := importGraph{}
			for p, imps := range base {
				g[p] = slices.Clone(imps)
			}
			for _, list := range [][]string{r.from, r.never, r.only} {
				for _, p := range list {
					p = strings.TrimPrefix(p, "!")
					if firstMatch(g, func(pkg string) bool { return matchOne(p, pkg) }) == "" {
						g[strings.TrimSuffix(p, "/...")] = nil // a room the table names before it exists
					}
				}
			}
			pkg := firstMatch(g, func(p string) bool { return match(r.from, p) })
			dep := firstMatch(g, func(p string) bool {
				return p != pkg && (r.never != nil && match(r.never, p) || r.only != nil && !match(r.only, p))
			})
			if pkg == "" || dep == "" {
				t.Fatalf("rule %d can break no import: from %q, forbidden %q", i, pkg, dep)
			}
			g[pkg] = append(g[pkg], dep)
			for _, v := range checkImports(importRules, g) {
				if v.rule == i && v.pkg == pkg && v.dep == dep {
					return
				}
			}
			t.Errorf("rule %d misses %s importing %s", i, pkg, dep)
		})
	}
}

func firstMatch(g importGraph, ok func(string) bool) string {
	for _, p := range g.sorted() {
		if ok(p) {
			return p
		}
	}
	return ""
}
