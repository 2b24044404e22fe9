package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Exit codes of Run. Scripts may rely on them; they are listed in the usage
// text too.
const (
	ExitOK          = 0 // the call succeeded
	ExitServerError = 1 // the server answered with an error
	ExitUsage       = 2 // bad flags or arguments; nothing was sent
	ExitUnreachable = 3 // the server could not be reached or did not answer in time
	ExitAuth        = 4 // authentication failed (401) or there was no token to send
	ExitNoLeader    = 5 // status only: the node answered but knows no leader
)

// Defaults of the global flags.
const (
	DefaultAddr    = "http://127.0.0.1:8080"
	DefaultTimeout = 10 * time.Second
	// DefaultTransferTimeout replaces DefaultTimeout for the verbs that move
	// a whole file (snapshot save and restore), unless --timeout is given.
	DefaultTransferTimeout = 10 * time.Minute
	// DefaultTokenFile is tried, relative to the working directory, when
	// neither --token, --token-file nor OIDCD_ADMIN_TOKEN gives a token: it
	// is where `oidcd serve` with the default --data-dir writes the token.
	DefaultTokenFile = "data/admin-token"
)

// Environment variables read by Run.
const (
	EnvAddr  = "OIDCD_ADDR"
	EnvToken = "OIDCD_ADMIN_TOKEN" // #nosec G101 -- the name of an environment variable, not a credential
)

// APIPrefix is the base path of the admin API.
const APIPrefix = "/admin/v1"

// globals are the flags accepted before the noun and again after the verb.
type globals struct {
	addr       string
	token      string
	tokenFile  string
	json       bool
	timeout    time.Duration
	timeoutSet bool // --timeout was given
	stale      bool // reads answer from the node's own copy (?stale=true)
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.addr, "addr", g.addr, "admin API address, `URL` or host:port (default "+DefaultAddr+", or $"+EnvAddr+")")
	fs.StringVar(&g.token, "token", g.token, "admin bearer `token` (default $"+EnvToken+")")
	fs.StringVar(&g.tokenFile, "token-file", g.tokenFile, "read the admin token from `PATH`, e.g. <data-dir>/admin-token")
	fs.BoolVar(&g.json, "json", g.json, "print the server's JSON answer instead of a table")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up on the server after this `duration`")
	fs.BoolVar(&g.stale, "stale", g.stale, "reads only: answer from the node's own copy, without asking the leader (faster; may miss a write made through another node a moment ago)")
}

// Run executes `oidcd admin <args>` and returns the process exit code.
//
// env looks up environment variables (os.Getenv in production; nil means
// an empty environment). stdin feeds --password-stdin. Tables and JSON go
// to stdout; errors, usage and one-time notes go to stderr, except that
// help asked for with -h or `help` goes to stdout.
func Run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if env == nil {
		env = func(string) string { return "" }
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	g := &globals{addr: DefaultAddr, timeout: DefaultTimeout}
	if v := env(EnvAddr); v != "" {
		g.addr = v
	}

	root := newFlagSet("oidcd admin")
	g.register(root)
	if err := root.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeMainHelp(stdout)
			return ExitOK
		}
		return usageError(stderr, err.Error(), "oidcd admin help")
	}
	root.Visit(func(f *flag.Flag) { g.timeoutSet = g.timeoutSet || f.Name == "timeout" })
	rest := root.Args()
	if len(rest) == 0 {
		writeMainHelp(stderr)
		return ExitUsage
	}
	if rest[0] == "help" {
		return help(rest[1:], stdout, stderr)
	}
	n := findNoun(rest[0])
	if n == nil {
		return usageError(stderr, fmt.Sprintf("unknown command %q", rest[0]), "oidcd admin help")
	}
	if n.bare {
		if len(rest) > 1 && isHelpWord(rest[1]) {
			return help([]string{n.name}, stdout, stderr)
		}
		return runVerb(ctx, g, n, &n.verbs[0], rest[1:], env, stdin, stdout, stderr)
	}
	if len(rest) == 1 {
		fmt.Fprintf(stderr, "error: %s needs a verb\n\n", n.name)
		writeNounHelp(stderr, n)
		return ExitUsage
	}
	if isHelpWord(rest[1]) {
		return help(append([]string{n.name}, rest[2:]...), stdout, stderr)
	}
	v := n.findVerb(rest[1])
	if v == nil {
		return usageError(stderr, fmt.Sprintf("unknown verb %q for %s", rest[1], n.name), "oidcd admin "+n.name+" help")
	}
	return runVerb(ctx, g, n, v, rest[2:], env, stdin, stdout, stderr)
}

func runVerb(ctx context.Context, g *globals, n *noun, v *verb, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	local := newFlagSet(v.command(n))
	build := v.setup(local)
	all := newFlagSet(v.command(n))
	local.VisitAll(func(f *flag.Flag) { all.Var(f.Value, f.Name, f.Usage) })
	g.register(all)

	helpCmd := "oidcd admin " + v.command(n) + " -h"
	pos, err := parseInterspersed(all, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeVerbHelp(stdout, n, v, local)
			return ExitOK
		}
		return usageError(stderr, err.Error(), helpCmd)
	}
	if len(pos) != len(v.args) {
		return usageError(stderr, argCountError(n, v, pos), helpCmd)
	}
	set := map[string]bool{}
	all.Visit(func(f *flag.Flag) { set[f.Name] = true })
	req, err := build(&inv{args: pos, set: set, stdin: stdin, env: env})
	if err != nil {
		return usageError(stderr, err.Error(), helpCmd)
	}

	if g.stale && req.method != "" && req.method != http.MethodGet {
		return usageError(stderr, "--stale is for commands that read; a write always goes through the leader", helpCmd)
	}
	if v.transfer && !g.timeoutSet && !set["timeout"] {
		g.timeout = DefaultTransferTimeout
	}
	base, err := baseURL(g.addr)
	if err != nil {
		return usageError(stderr, err.Error(), "oidcd admin help")
	}
	if g.timeout <= 0 {
		return usageError(stderr, "--timeout must be positive", "oidcd admin help")
	}
	token := ""
	if !v.noToken {
		var code int
		if token, code = resolveToken(g, env, stderr); code != ExitOK {
			return code
		}
	}
	c := newConn(base, token, g.timeout)
	c.stale = g.stale
	return c.call(ctx, req, g.json, stdout, stderr)
}

func argCountError(n *noun, v *verb, pos []string) string {
	want := len(v.args)
	switch {
	case want == 0:
		return fmt.Sprintf("%s takes no arguments, got %q", v.command(n), strings.Join(pos, " "))
	case len(pos) < want:
		return fmt.Sprintf("%s needs %s", v.command(n), strings.Join(v.args[len(pos):], " "))
	default:
		return fmt.Sprintf("%s takes %s, got extra %q", v.command(n), strings.Join(v.args, " "), strings.Join(pos[want:], " "))
	}
}

// usageError prints msg and where to find help, and returns ExitUsage.
func usageError(stderr io.Writer, msg, helpCmd string) int {
	fmt.Fprintf(stderr, "error: %s\nrun %q for usage\n", msg, helpCmd)
	return ExitUsage
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Run prints its own usage and errors
	fs.Usage = func() {}
	return fs
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments (`user get ID --json`), which flag.Parse alone stops
// at. Everything after a literal "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// baseURL turns --addr into the API base URL: a scheme is added to a bare
// host:port and a trailing slash is dropped.
func baseURL(addr string) (string, error) {
	a := strings.TrimSpace(addr)
	if a == "" {
		return "", errors.New("--addr is empty")
	}
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("invalid --addr %q: want http://host:port, https://host:port or host:port", addr)
	}
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimSuffix(u.String(), "/") + APIPrefix, nil
}

// resolveToken finds the admin token: --token, then --token-file, then
// $OIDCD_ADMIN_TOKEN, then the sign-in `oidcd admin login` kept for --addr,
// then ./data/admin-token. A --token-file that cannot be read is a usage
// error; finding no token at all, or only an expired sign-in, is an
// authentication failure, reported without contacting the server. An
// unreadable credentials file is warned about and passed over.
func resolveToken(g *globals, env func(string) string, stderr io.Writer) (string, int) {
	switch {
	case g.token != "" && g.tokenFile != "":
		return "", usageError(stderr, "give --token or --token-file, not both", "oidcd admin help")
	case g.token != "":
		return strings.TrimSpace(g.token), ExitOK
	case g.tokenFile != "":
		tok, err := readTokenFile(g.tokenFile)
		if err != nil {
			return "", usageError(stderr, "--token-file: "+err.Error(), "oidcd admin help")
		}
		return tok, ExitOK
	case strings.TrimSpace(env(EnvToken)) != "":
		return strings.TrimSpace(env(EnvToken)), ExitOK
	}
	if l, ok, err := storedLogin(env, g.addr); err != nil {
		fmt.Fprintf(stderr, "warning: credentials file: %v\n", err)
	} else if ok {
		if !time.Now().Before(l.ExpiresAt) {
			fmt.Fprintf(stderr, "error: the sign-in kept for %s expired at %s: run \"oidcd admin login\" again, or give --token or --token-file\n",
				clean(g.addr), l.ExpiresAt.Local().Format(time.RFC3339))
			return "", ExitAuth
		}
		return l.AccessToken, ExitOK
	}
	tok, err := readTokenFile(DefaultTokenFile)
	if err != nil {
		why := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			why = "not found"
		}
		fmt.Fprintf(stderr, "error: no admin token: give --token or --token-file PATH (<data-dir>/admin-token), or set %s (tried ./%s: %s)\n", EnvToken, DefaultTokenFile, why)
		return "", ExitAuth
	}
	return tok, ExitOK
}

func readTokenFile(path string) (string, error) {
	// #nosec G304 -- the operator names the token file (or it is <data-dir>/admin-token)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return tok, nil
}
