package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/oidcd/oidcd/node"
)

// The configuration file is TOML with one top-level key per `oidcd serve`
// flag, named exactly like the flag without its dashes:
//
//	issuer           = "https://id.example.com"
//	bootstrap-expect = 3
//	join             = ["10.0.0.2:8301", "10.0.0.3:8301"]
//	key-rotation     = "720h"
//	demo             = false
//
// Strings and durations ("90s", "12h") are TOML strings, bootstrap-expect
// is an integer, demo a boolean and join an array of strings. Precedence:
// a flag on the command line, then OIDCD_<FLAG> in the environment, then
// the file, then the default.

// configUsage is the help of `oidcd config`.
const configUsage = `Usage:
  oidcd config check [--env-file ENVFILE] FILE
                                  report every problem of a configuration file, with its line;
                                  with --env-file, the OIDCD_* settings of that systemd
                                  EnvironmentFile (e.g. /etc/oidcd/oidcd.env) count too, and win
                                  over the file as they do for the service
  oidcd config example [flags]    print a configuration file with every key, commented;
                                  serve flags given here are written as set keys

The file is TOML: one key per "oidcd serve" flag, named like the flag without
its dashes (http-addr = "127.0.0.1:8080"). Strings and durations ("90s", "12h")
are quoted, bootstrap-expect is an integer, demo is true or false and join is
an array of strings. "oidcd serve --config FILE" (or OIDCD_CONFIG=FILE) reads
it; a flag on the command line wins over OIDCD_<FLAG> in the environment,
which wins over the file, which wins over the default.

Exit codes of check: 0 the file is valid, 1 it has problems (each printed as
FILE:LINE: message), 2 usage error. The process environment is not read:
check looks at FILE, ENVFILE and the defaults only. A valid file can still
draw warnings (FILE:LINE: warning: message), which do not change the exit
code: an issuer left at its default or plain http beyond this machine, a
secret in a file other users can read.
`

// listKeys are the flags whose file value is an array of strings (the flag
// itself takes a comma-separated list).
var listKeys = map[string]bool{"join": true}

// secretKeys are better kept out of a world-readable file and off the
// command line; smtp-url only when it holds a password (secretValue).
var secretKeys = map[string]bool{"cluster-key": true, "admin-token": true, "smtp-url": true}

// secretValue reports whether value, given for the secret key name, holds
// a secret: always, but for an smtp-url without a password.
func secretValue(name, value string) bool {
	if name != "smtp-url" {
		return true
	}
	u, err := url.Parse(value)
	if err != nil {
		return true // cannot tell
	}
	_, has := u.User.Password()
	return has
}

// keyOrder is the order of `oidcd config example`; flags not named here
// follow, sorted.
var keyOrder = []string{
	"issuer", "http-addr", "data-dir", "node-id",
	"raft-addr", "gossip-addr", "join", "bootstrap-expect", "non-voter", "cluster-key",
	"admin-token", "kek-file",
	"key-rotation", "session-idle", "session-max", "audit-retention", "rate-limit",
	"sms-outbox", "sms-webhook",
	"smtp-url", "smtp-from", "smtp-ca-file", "email-outbox",
	"log-level", "demo",
}

// problem is one thing wrong with a configuration file. Line 0 means the
// file as a whole (or a key's line could not be found).
type problem struct {
	line int
	msg  string
	file string // "" for the configuration file; else the --env-file
}

func (p problem) format(path string) string {
	if p.file != "" {
		path = p.file
	}
	if p.line > 0 {
		return fmt.Sprintf("%s:%d: %s", path, p.line, p.msg)
	}
	return fmt.Sprintf("%s: %s", path, p.msg)
}

// configFile is a parsed configuration file.
type configFile struct {
	path   string
	values map[string]string // flag name -> value in the flag's own syntax
	lines  map[string]int    // flag name -> line of its key
	order  []string          // flag names, in file order
}

// readConfig parses the file at path against the flags of fs: syntax,
// unknown keys and values of the wrong type or syntax. It reports every
// problem it finds (a TOML syntax error stops the parse, so it is the only
// one reported).
func readConfig(path string, fs *flag.FlagSet) (*configFile, []problem) {
	// #nosec G304 G703 -- the operator names the configuration file (--config)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []problem{{0, fmt.Sprintf("cannot read: %v", unwrapPath(err)), ""}}
	}
	cf := &configFile{path: path, values: map[string]string{}, lines: keyLines(data)}
	var raw map[string]any
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, []problem{{pe.Position.Line, "syntax error: " + pe.Message, ""}}
		}
		return nil, []problem{{0, err.Error(), ""}}
	}
	scratch := flag.NewFlagSet("config", flag.ContinueOnError)
	scratch.SetOutput(io.Discard)
	var cfg node.Config
	var lvl, join string
	serveFlags(scratch, &cfg, &lvl, &join)
	var probs []problem
	for _, key := range md.Keys() {
		name := key[0]
		line := cf.lines[name]
		if len(key) > 1 {
			continue // the parent key is reported
		}
		f := fs.Lookup(name)
		if f == nil || name == "config" {
			msg := fmt.Sprintf("unknown key %q", name)
			if name == "config" {
				msg += ": a configuration file cannot name another"
			} else if s := suggest(fs, name); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			probs = append(probs, problem{line, msg, ""})
			continue
		}
		v, err := flagText(f, name, raw[name])
		if err == nil {
			if sf := scratch.Lookup(name); sf != nil {
				err = sf.Value.Set(v)
			}
		}
		if err != nil {
			probs = append(probs, problem{line, fmt.Sprintf("%s: %v", name, err), ""})
			continue
		}
		cf.values[name] = v
		cf.order = append(cf.order, name)
	}
	sortProblems(probs)
	return cf, probs
}

// flagText turns a TOML value into the text the flag f parses, checking
// its TOML type.
func flagText(f *flag.Flag, name string, v any) (string, error) {
	if listKeys[name] {
		items, ok := v.([]any)
		if !ok {
			return "", fmt.Errorf("want an array of strings, e.g. %s = [\"10.0.0.2:8301\"], got %s", name, tomlType(v))
		}
		parts := make([]string, len(items))
		for i, it := range items {
			s, ok := it.(string)
			if !ok || strings.TrimSpace(s) == "" || strings.Contains(s, ",") {
				return "", fmt.Errorf("item %d: want a non-empty string without commas, got %s", i+1, tomlType(it))
			}
			parts[i] = strings.TrimSpace(s)
		}
		return strings.Join(parts, ","), nil
	}
	var kind any = ""
	if g, ok := f.Value.(flag.Getter); ok {
		kind = g.Get()
	}
	switch kind.(type) {
	case bool:
		b, ok := v.(bool)
		if !ok {
			return "", fmt.Errorf("want true or false, got %s", tomlType(v))
		}
		return strconv.FormatBool(b), nil
	case int, int64, uint, uint64:
		n, ok := v.(int64)
		if !ok {
			return "", fmt.Errorf("want an integer, got %s", tomlType(v))
		}
		return strconv.FormatInt(n, 10), nil
	case time.Duration:
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("want a duration string such as \"90s\" or \"12h\", got %s", tomlType(v))
		}
		if _, err := time.ParseDuration(s); err != nil {
			return "", fmt.Errorf("%q is not a duration: want a number and a unit (s, m, h), e.g. \"90s\" or \"12h\"", s)
		}
		return s, nil
	default:
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("want a string, got %s", tomlType(v))
		}
		return s, nil
	}
}

func tomlType(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case int64:
		return fmt.Sprintf("the integer %d", v)
	case float64:
		return fmt.Sprintf("the number %v", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// suggest names the flag an unknown key probably meant.
// It normalises the spelling (http_addr, HTTP-ADDR, --http-addr) and
// otherwise accepts a key at most two edits away (isuer).
func suggest(fs *flag.FlagSet, name string) string {
	norm := strings.ToLower(strings.ReplaceAll(strings.TrimLeft(name, "-"), "_", "-"))
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" {
			return
		}
		if d := editDistance(norm, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// keyLines maps each top-level key (and table header) of a TOML document to
// the line it first appears on. It skips the inside of multi-line strings;
// the document is known to parse.
func keyLines(data []byte) map[string]int {
	lines := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	inMulti := ""
	table := false // inside a [table]: its keys are not top-level
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if inMulti != "" {
			if strings.Count(line, inMulti)%2 == 1 {
				inMulti = ""
			}
			continue
		}
		for _, q := range []string{`"""`, `'''`} {
			if strings.Count(line, q)%2 == 1 {
				inMulti = q
			}
		}
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			name := firstKey(strings.TrimSpace(strings.TrimLeft(t, "[")))
			if _, seen := lines[name]; !seen && name != "" {
				lines[name] = n
			}
			table = true
			continue
		}
		if table {
			continue
		}
		name := firstKey(t)
		if name == "" {
			continue
		}
		rest := strings.TrimSpace(t[len(quotedKey(t)):])
		if !strings.HasPrefix(rest, "=") && !strings.HasPrefix(rest, ".") {
			continue
		}
		if _, seen := lines[name]; !seen {
			lines[name] = n
		}
	}
	return lines
}

// quotedKey returns the leading key segment of s as written (bare or
// quoted), or "".
func quotedKey(s string) string {
	if s == "" {
		return ""
	}
	if s[0] == '"' || s[0] == '\'' {
		if end := strings.IndexByte(s[1:], s[0]); end >= 0 {
			return s[:end+2]
		}
		return ""
	}
	i := 0
	for i < len(s) && (s[i] == '-' || s[i] == '_' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9') {
		i++
	}
	return s[:i]
}

// firstKey returns the leading key segment of s, unquoted.
func firstKey(s string) string {
	k := quotedKey(s)
	if len(k) >= 2 && (k[0] == '"' || k[0] == '\'') {
		return k[1 : len(k)-1]
	}
	return k
}

func sortProblems(ps []problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].file != ps[j].file {
			return ps[i].file < ps[j].file
		}
		return ps[i].line < ps[j].line
	})
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// apply sets, on fs, every file value whose flag was neither given on the
// command line nor set from the environment (both are visited flags by
// then), so the file only fills in.
func (cf *configFile) apply(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range cf.order {
		if set[name] {
			continue
		}
		if err := fs.Set(name, cf.values[name]); err != nil {
			return fmt.Errorf("%s:%d: %s: %v", cf.path, cf.lines[name], name, err)
		}
	}
	return nil
}

// flagRef finds the --flag names an error message talks about.
var flagRef = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)

// checkConfig reports every problem of the file at path: those of
// readConfig (and, when envFile is set, of that systemd EnvironmentFile,
// whose OIDCD_* values win over the file as they do for the service), then
// those of the configuration they make with the defaults, each at the line
// of the first setting its message names.
func checkConfig(path, envFile string) []problem {
	probs, _ := checkConfigWarn(path, envFile)
	return probs
}

// checkConfigWarn is checkConfig that also returns the warnings about the
// configuration, at the line that sets what they name: things that check
// but are almost certainly not what a deployment wants (issuerWarnings).
func checkConfigWarn(path, envFile string) (probs, warnings []problem) {
	fs := flag.NewFlagSet("oidcd serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg node.Config
	var logLevel, join string
	serveFlags(fs, &cfg, &logLevel, &join)
	cf, probs := readConfig(path, fs)
	if cf == nil {
		return probs, nil
	}
	envLines := map[string]int{}
	if envFile != "" {
		vals, lines, eprobs := readEnvFile(envFile, fs)
		probs = append(probs, eprobs...)
		for name, v := range vals {
			if err := fs.Set(name, v); err != nil {
				probs = append(probs, problem{lines[name], fmt.Sprintf("OIDCD_%s: %v", envName(name), err), envFile})
				continue
			}
			envLines[name] = lines[name]
		}
	}
	if err := cf.apply(fs); err != nil {
		return append(probs, problem{0, err.Error(), ""}), nil
	}
	if join != "" {
		cfg.Join = strings.Split(join, ",")
	}
	var errs []error
	if err := cfg.Check(); err != nil {
		errs = append(errs, splitJoined(err)...)
	}
	errs = append(errs, extraChecks(&cfg, logLevel)...)
	// at places msg at the line of the first setting it names.
	at := func(msg string) problem {
		p := problem{0, msg, ""}
		for _, m := range flagRef.FindAllStringSubmatch(msg, -1) {
			if l, ok := envLines[m[1]]; ok {
				p.line, p.file = l, envFile
				break
			}
			if l, ok := cf.lines[m[1]]; ok {
				p.line = l
				break
			}
		}
		return p
	}
	for _, err := range errs {
		probs = append(probs, at(err.Error()))
	}
	for _, w := range issuerWarnings(&cfg) {
		warnings = append(warnings, at(w))
	}
	sortProblems(probs)
	return probs, warnings
}

// issuerWarnings warns about an issuer that checks but cannot be the one
// people and applications use: the default (reachable from this machine
// only: a packaged or copied file whose issuer was never set), or plain
// http where other machines are involved (codes, tokens and session
// cookies in clear). Behind a balancer that ends TLS the issuer is still
// https: it is the balancer's URL.
func issuerWarnings(cfg *node.Config) []string {
	if cfg.Issuer == node.DefaultIssuer {
		return []string{fmt.Sprintf("--issuer is the default, %s, which only this machine reaches: set issuer to the https URL "+
			"that people and applications use (the load balancer's, the same on every node)", node.DefaultIssuer)}
	}
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Scheme != "http" {
		return nil // https, or a problem already reported
	}
	switch {
	case !loopbackHost(u.Hostname()):
		return []string{fmt.Sprintf("--issuer %q is not https on a host other machines reach: codes, tokens and session cookies "+
			"would cross the network in clear; use https (TLS at the load balancer, or --tls-cert on the node)", cfg.Issuer)}
	case !loopbackAddr(cfg.HTTPAddr):
		return []string{fmt.Sprintf("--issuer %q is plain http on this machine while --http-addr %q listens beyond it: "+
			"other machines reach the node but cannot use that issuer; set the https URL they use", cfg.Issuer, cfg.HTTPAddr)}
	}
	return nil
}

// loopbackHost reports whether host (a name or an IP address) is this
// machine's loopback.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackAddr reports whether the listener address host:port listens on
// loopback only (":8080" and 0.0.0.0 listen everywhere).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackHost(host)
}

// readEnvFile reads the OIDCD_* settings of a systemd EnvironmentFile
// (KEY=VALUE lines, # and ; comments, optional quotes): the flag values by
// name, their lines, and its problems (other variables are ignored).
func readEnvFile(path string, fs *flag.FlagSet) (map[string]string, map[string]int, []problem) {
	// #nosec G304 -- the operator names the file (--env-file)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, []problem{{0, fmt.Sprintf("cannot read: %v", unwrapPath(err)), path}}
	}
	byEnv := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { byEnv["OIDCD_"+envName(f.Name)] = f.Name })
	vals, lines := map[string]string{}, map[string]int{}
	var probs []problem
	for n, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			probs = append(probs, problem{n + 1, "want VARIABLE=value", path})
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		if !strings.HasPrefix(k, "OIDCD_") {
			continue
		}
		name, known := byEnv[k]
		if !known || name == "config" {
			probs = append(probs, problem{n + 1, fmt.Sprintf("unknown variable %s", k), path})
			continue
		}
		vals[name], lines[name] = v, n+1
	}
	return vals, lines, probs
}

// extraChecks are the checks of a configuration that node.Config.Validate
// leaves to the moment the node uses the value.
func extraChecks(cfg *node.Config, logLevel string) []error {
	var errs []error
	if _, err := parseLevel(logLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel))
	}
	if _, _, err := net.SplitHostPort(cfg.GossipAddr); err != nil {
		errs = append(errs, fmt.Errorf("--gossip-addr %q: %v", cfg.GossipAddr, err))
	}
	for _, j := range cfg.Join {
		if _, _, err := net.SplitHostPort(j); err != nil {
			errs = append(errs, fmt.Errorf("--join %q: %v", j, err))
		}
	}
	if cfg.KEKFile != "" {
		if err := readableFile(cfg.KEKFile); err != nil {
			errs = append(errs, fmt.Errorf("--kek-file %q: %v", cfg.KEKFile, err))
		}
	}
	if cfg.SMSWebhook != "" {
		u, err := url.Parse(cfg.SMSWebhook)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			errs = append(errs, fmt.Errorf("--sms-webhook %q: must be an absolute http(s) URL", cfg.SMSWebhook))
		}
	}
	if cfg.NodeID != "" && strings.TrimSpace(cfg.NodeID) != cfg.NodeID {
		errs = append(errs, fmt.Errorf("--node-id %q: must not begin or end with spaces", cfg.NodeID))
	}
	return errs
}

// readableFile checks that path is a regular, non-empty file this process
// can open.
func readableFile(path string) error {
	// #nosec G304 -- the operator names this file in the configuration
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot read: %v", unwrapPath(err))
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return errors.New("not a regular file")
	case st.Size() == 0:
		return errors.New("the file is empty")
	}
	return nil
}

func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, splitJoined(e)...)
		}
		return out
	}
	return []error{err}
}

// configCmd serves `oidcd config ...`.
func configCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, configUsage)
		return 2
	}
	switch args[0] {
	case "check":
		return configCheck(args[1:], stdout, stderr)
	case "example":
		return configExample(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, configUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "oidcd config: unknown command %q\n\n%s", args[0], configUsage)
		return 2
	}
}

// configCheck serves `oidcd config check [--env-file PATH] FILE`.
func configCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("oidcd config check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	envFile := fs.String("env-file", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, configUsage)
			return 0
		}
		fmt.Fprintf(stderr, "oidcd config check: %v\n\n%s", err, configUsage)
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "oidcd config check: want exactly one FILE\n\n%s", configUsage)
		return 2
	}
	path := fs.Arg(0)
	probs, warnings := checkConfigWarn(path, *envFile)
	for _, p := range probs {
		fmt.Fprintln(stderr, p.format(path))
	}
	if len(probs) > 0 {
		fmt.Fprintf(stderr, "%s: %d problem(s)\n", path, len(probs))
		return 1
	}
	// Warnings do not fail the check: the file works, but probably not
	// as meant.
	for _, w := range warnings {
		w.msg = "warning: " + w.msg
		fmt.Fprintln(stderr, w.format(path))
	}
	if w := secretWarning(path); w != "" {
		fmt.Fprintln(stderr, w)
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return 0
}

// secretWarning warns when a file that holds a secret can be read by other
// users.
func secretWarning(path string) string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var cfg node.Config
	var a, b string
	serveFlags(fs, &cfg, &a, &b)
	cf, _ := readConfig(path, fs)
	// #nosec G703 -- the operator names the configuration file (--config)
	st, err := os.Stat(path)
	if cf == nil || err != nil || st.Mode().Perm()&0o044 == 0 {
		return ""
	}
	for name := range secretKeys {
		if v, ok := cf.values[name]; ok && secretValue(name, v) {
			return fmt.Sprintf("%s: warning: %s is in a file other users can read (mode %04o); prefer OIDCD_%s in a root-only environment file",
				path, name, st.Mode().Perm(), envName(name))
		}
	}
	return ""
}

func envName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// configExample prints a configuration file with every key: the flags
// given to it are set, the others are commented out at their defaults.
func configExample(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("oidcd config example", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg node.Config
	var logLevel, join string
	serveFlags(fs, &cfg, &logLevel, &join)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "oidcd config example: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	fmt.Fprint(stdout, exampleHeader)
	for _, name := range orderedFlags(fs) {
		f := fs.Lookup(name)
		usage := f.Usage
		if _, u := flag.UnquoteUsage(f); u != "" {
			usage = u
		}
		fmt.Fprintf(stdout, "\n# %s.\n", strings.TrimSuffix(usage, "."))
		fmt.Fprintf(stdout, "# Environment: OIDCD_%s.", envName(name))
		switch {
		case name == "smtp-url":
			fmt.Fprint(stdout, " Its password is a secret: prefer the environment (a root-only EnvironmentFile) to this file.")
		case secretKeys[name]:
			fmt.Fprint(stdout, " A secret: prefer the environment (a root-only EnvironmentFile) to this file.")
		}
		fmt.Fprintln(stdout)
		if given[name] {
			fmt.Fprintf(stdout, "%s = %s\n", name, tomlValue(f, name, f.Value.String()))
			continue
		}
		def := f.DefValue
		if def == "" {
			switch {
			case listKeys[name]:
				fmt.Fprintf(stdout, "#%s = []\n", name)
			default:
				fmt.Fprintf(stdout, "#%s = \"\"\n", name)
			}
			continue
		}
		fmt.Fprintf(stdout, "#%s = %s\n", name, tomlValue(f, name, def))
	}
	return 0
}

const exampleHeader = `# oidcd configuration (TOML), read by "oidcd serve --config FILE" or
# OIDCD_CONFIG=FILE. Each key is an "oidcd serve" flag without its dashes.
# A flag on the command line wins over OIDCD_<FLAG> in the environment,
# which wins over this file, which wins over the default shown in the
# commented-out lines. "oidcd config check FILE" checks a file.
`

// orderedFlags lists the flags of fs in keyOrder, then the rest sorted.
func orderedFlags(fs *flag.FlagSet) []string {
	var out, rest []string
	for _, name := range keyOrder {
		if fs.Lookup(name) != nil {
			out = append(out, name)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(keyOrder, f.Name) && f.Name != "config" {
			rest = append(rest, f.Name)
		}
	})
	sort.Strings(rest)
	return append(out, rest...)
}

// tomlValue writes the flag text v as the TOML value of the flag's type.
func tomlValue(f *flag.Flag, name, v string) string {
	if listKeys[name] {
		var items []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, tomlString(s))
			}
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case bool, int, int64, uint, uint64:
			return v
		}
	}
	return tomlString(v)
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
