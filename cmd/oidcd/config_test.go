package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/node"
)

const testKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // base64 of 32 bytes

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigCheck(t *testing.T) {
	kek := writeFile(t, "kek", "0123456789abcdef0123456789abcdef\n")
	empty := writeFile(t, "empty-kek", "")
	type want struct {
		line int
		text string
	}
	cases := []struct {
		name string
		file string
		want []want // nil: the file is valid
	}{
		{"empty file", "", nil},
		{"every kind of value", `# a comment
issuer = "https://id.example.com"
http-addr = "10.0.0.1:8080"
bootstrap-expect = 3
cluster-key = "` + testKey + `"
join = ["10.0.0.2:8301", "10.0.0.3:8301"]
key-rotation = "48h"
demo = true
kek-file = "` + kek + `"
log-level = "debug"
`, nil},
		{"syntax error", "issuer = \"https://x\"\nhttp-addr = \n", []want{{2, "syntax error"}}},
		{"unterminated string", "\n\nissuer = \"https://x\n", []want{{3, "syntax error"}}},
		{"duplicate key", "demo = true\ndemo = false\n", []want{{2, "syntax error"}}},
		{"unknown keys, with a suggestion", "issuer = \"https://x.example\"\nhttp_addr = \"127.0.0.1:1\"\nbogus = 1\n",
			[]want{{2, `unknown key "http_addr" (did you mean "http-addr"?)`}, {3, `unknown key "bogus"`}}},
		{"typos", "isuer = \"https://x.example\"\nHTTP-ADDR = \"127.0.0.1:1\"\nfrobnicate = 1\n",
			[]want{{1, `unknown key "isuer" (did you mean "issuer"?)`}, {2, `(did you mean "http-addr"?)`}, {3, `unknown key "frobnicate"`}}},
		{"a table is unknown", "demo = false\n\n[server]\nport = 1\n", []want{{3, `unknown key "server"`}}},
		{"a config key cannot nest", "config = \"/etc/x.toml\"\n", []want{{1, "cannot name another"}}},
		{"malformed durations", "session-idle = \"5 minutes\"\nkey-rotation = 3600\n",
			[]want{{1, `"5 minutes" is not a duration`}, {2, "want a duration string"}}},
		{"wrong types", "bootstrap-expect = \"3\"\ndemo = \"yes\"\nissuer = 5\njoin = \"a:1,b:2\"\n",
			[]want{{1, "want an integer"}, {2, "want true or false"}, {3, "want a string"}, {4, "want an array of strings"}}},
		{"bad issuer", "\nissuer = \"ftp://id.example.com\"\n", []want{{2, "--issuer"}}},
		{"issuer with a query", "issuer = \"https://id.example.com/?a=b\"\n", []want{{1, "no query"}}},
		{"bootstrap-expect without a cluster key", "# three nodes\nbootstrap-expect = 3\n", []want{{2, "--cluster-key is required"}}},
		{"join without a cluster key", "join = [\"10.0.0.2:8301\"]\n", []want{{1, "--cluster-key is required"}}},
		{"non-voter without join", "cluster-key = \"" + testKey + "\"\nnon-voter = true\n", []want{{2, "--non-voter needs --join"}}},
		{"non-voter with the core's bootstrap-expect (ignored)", "cluster-key = \"" + testKey + "\"\njoin = [\"10.0.0.2:8301\"]\nbootstrap-expect = 3\nnon-voter = true\n", nil},
		{"raft beyond loopback without a cluster key", "raft-addr = \"10.0.0.1:8300\"\n", []want{{1, "--cluster-key is required when --raft-addr"}}},
		{"gossip beyond loopback without a cluster key", "gossip-addr = \"0.0.0.0:8301\"\n", []want{{1, "--cluster-key is required when --gossip-addr"}}},
		{"bad cluster key", "cluster-key = \"c2hvcnQ=\"\n", []want{{1, "--cluster-key"}}},
		{"unreadable kek file", "kek-file = \"/nonexistent/kek\"\n", []want{{1, "--kek-file"}}},
		{"empty kek file", "kek-file = \"" + empty + "\"\n", []want{{1, "empty"}}},
		{"bad log level", "log-level = \"loud\"\n", []want{{1, "--log-level"}}},
		{"bad addresses", "http-addr = \"8080\"\nraft-addr = \"x\"\ngossip-addr = \"y\"\n",
			[]want{{1, "--http-addr"}, {2, "--raft-addr"}, {3, "--gossip-addr"}}},
		{"session lifetimes", "session-idle = \"3h\"\nsession-max = \"1h\"\n", []want{{1, "--session-idle"}}},
		{"rate limit", "rate-limit = \"fast\"\n", []want{{1, "--rate-limit"}}},
		{"short key rotation", "key-rotation = \"10m\"\n", []want{{1, "--key-rotation"}}},
		{"bad webhook", "sms-webhook = \"not a url\"\n", []want{{1, "--sms-webhook"}}},
		{"several problems, all reported", "bogus = 1\nsession-idle = \"x\"\nbootstrap-expect = 2\nlog-level = \"loud\"\n",
			[]want{{1, "unknown key"}, {2, "not a duration"}, {3, "--cluster-key is required"}, {4, "--log-level"}}},
		{"multi-line string does not confuse lines", "node-id = \"\"\"\nissuer = 1\n\"\"\"\nbogus = 2\n",
			[]want{{1, "--node-id"}, {4, `unknown key "bogus"`}}},
		{"multi-line array", "cluster-key = \"" + testKey + "\"\njoin = [\n  \"10.0.0.2:8301\",\n  \"nope\",\n]\n",
			[]want{{2, `--join "nope"`}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "oidcd.toml", c.file)
			probs := checkConfig(path, "")
			if len(probs) != len(c.want) {
				t.Fatalf("got %d problems %v, want %d %v", len(probs), probs, len(c.want), c.want)
			}
			for i, w := range c.want {
				if probs[i].line != w.line || !strings.Contains(probs[i].msg, w.text) {
					t.Errorf("problem %d: got line %d %q, want line %d containing %q", i, probs[i].line, probs[i].msg, w.line, w.text)
				}
			}
			var out, errb bytes.Buffer
			code := run([]string{"config", "check", path}, nil, nil, &out, &errb)
			wantCode := 0
			if len(c.want) > 0 {
				wantCode = 1
			}
			if code != wantCode {
				t.Fatalf("config check: got exit %d, want %d (stderr %q)", code, wantCode, errb.String())
			}
			for _, w := range c.want {
				if w.line > 0 && !strings.Contains(errb.String(), path+":"+strconv.Itoa(w.line)+": ") {
					t.Errorf("stderr %q does not name %s:%d", errb.String(), path, w.line)
				}
			}
		})
	}
}

func TestConfigCheckUsageAndMissingFile(t *testing.T) {
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"config"}, 2, "Usage"},
		{[]string{"config", "check"}, 2, "exactly one FILE"},
		{[]string{"config", "check", "a", "b"}, 2, "exactly one FILE"},
		{[]string{"config", "frobnicate"}, 2, "unknown command"},
		{[]string{"config", "check", "/nonexistent/oidcd.toml"}, 1, "cannot read"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		if code := run(c.args, nil, nil, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.err) {
			t.Errorf("%v: got %d %q, want %d containing %q", c.args, code, errb.String(), c.code, c.err)
		}
	}
}

// parseServe runs serve's flag, environment and file handling up to the
// node.Config, without starting a node.
func parseServe(t *testing.T, args []string, env map[string]string) (node.Config, string, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var cfg node.Config
	var lvl, join, configPath string
	serveFlags(fs, &cfg, &lvl, &join)
	fs.StringVar(&configPath, "config", "", "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(fs, func(k string) string { return env[k] }); err != nil {
		return cfg, "", err
	}
	if configPath != "" {
		cf, probs := readConfig(configPath, fs)
		if len(probs) > 0 {
			t.Fatalf("problems: %v", probs)
		}
		if err := cf.apply(fs); err != nil {
			return cfg, "", err
		}
	}
	return cfg, join, nil
}

func TestPrecedenceFlagEnvFileDefault(t *testing.T) {
	file := writeFile(t, "oidcd.toml", `issuer = "https://file.example"
http-addr = "127.0.0.1:7001"
data-dir = "/var/lib/file"
key-rotation = "100h"
join = ["10.0.0.2:8301", "10.0.0.3:8301"]
demo = true
`)
	env := map[string]string{"OIDCD_HTTP_ADDR": "127.0.0.1:7002", "OIDCD_ISSUER": "https://env.example"}
	cfg, join, err := parseServe(t, []string{"--config", file, "--issuer", "https://flag.example"}, env)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ what, got, want string }{
		{"flag over env and file", cfg.Issuer, "https://flag.example"},
		{"env over file", cfg.HTTPAddr, "127.0.0.1:7002"},
		{"file over default", cfg.DataDir, "/var/lib/file"},
		{"file duration", cfg.KeyRotation.String(), (100 * time.Hour).String()},
		{"file list", join, "10.0.0.2:8301,10.0.0.3:8301"},
		{"file bool", boolText(cfg.Demo), "true"},
		{"default", cfg.RaftAddr, node.DefaultRaftAddr},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.what, c.got, c.want)
		}
	}

	// OIDCD_CONFIG names the file like --config does.
	cfg, _, err = parseServe(t, nil, map[string]string{"OIDCD_CONFIG": file})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Issuer != "https://file.example" || cfg.HTTPAddr != "127.0.0.1:7001" {
		t.Fatalf("OIDCD_CONFIG: got issuer %q http %q", cfg.Issuer, cfg.HTTPAddr)
	}
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestServeRefusesABadConfigFile(t *testing.T) {
	path := writeFile(t, "bad.toml", "issuer = \"https://x.example\"\nsession-idle = \"soon\"\nnope = 1\n")
	var out, errb bytes.Buffer
	code := run([]string{"serve", "--config", path}, func(string) string { return "" }, nil, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), path+":2: ") || !strings.Contains(errb.String(), path+":3: ") {
		t.Fatalf("got exit %d, stderr %q; want 2 naming lines 2 and 3", code, errb.String())
	}
	code = run([]string{"serve", "--config", "/nonexistent.toml"}, func(string) string { return "" }, nil, &out, &errb)
	if code != 2 {
		t.Fatalf("missing file: got exit %d, want 2", code)
	}
}

func TestConfigExampleRoundTrips(t *testing.T) {
	cases := []struct {
		name string
		args []string
		set  map[string]string // keys that must be set (uncommented), with their TOML value
	}{
		{"defaults", nil, nil},
		{"a packaged node", []string{"--data-dir", "/var/lib/oidcd", "--http-addr", "0.0.0.0:8080"},
			map[string]string{"data-dir": `"/var/lib/oidcd"`, "http-addr": `"0.0.0.0:8080"`}},
		{"a cluster member", []string{"--bootstrap-expect", "3", "--join", "10.0.0.2:8301,10.0.0.3:8301", "--cluster-key", testKey, "--demo"},
			map[string]string{"bootstrap-expect": "3", "join": `["10.0.0.2:8301", "10.0.0.3:8301"]`, "demo": "true"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(append([]string{"config", "example"}, c.args...), nil, nil, &out, &errb); code != 0 {
				t.Fatalf("example: exit %d %s", code, errb.String())
			}
			text := out.String()
			fs := flag.NewFlagSet("", flag.ContinueOnError)
			var cfg node.Config
			var a, b string
			serveFlags(fs, &cfg, &a, &b)
			var keys []string
			fs.VisitAll(func(f *flag.Flag) {
				keys = append(keys, f.Name)
				if !strings.Contains(text, "\n#"+f.Name+" = ") && !strings.Contains(text, "\n"+f.Name+" = ") {
					t.Errorf("flag %s has no key in the example", f.Name)
				}
			})
			for k, v := range c.set {
				if !strings.Contains(text, "\n"+k+" = "+v+"\n") {
					t.Errorf("want the line %s = %s in\n%s", k, v, text)
				}
			}
			path := writeFile(t, "ex.toml", text)
			if probs := checkConfig(path, ""); len(probs) > 0 {
				t.Fatalf("the example does not check: %v\n%s", probs, text)
			}
			// Uncommenting every key at its default still checks (the
			// defaults are valid values of the right TOML type).
			var all []string
			for _, l := range strings.Split(text, "\n") {
				for _, k := range keys {
					if strings.HasPrefix(l, "#"+k+" = ") {
						l = strings.TrimPrefix(l, "#")
					}
				}
				all = append(all, l)
			}
			path = writeFile(t, "all.toml", strings.Join(all, "\n"))
			probs := checkConfig(path, "")
			if slices.ContainsFunc(probs, func(p problem) bool { return !strings.Contains(p.msg, "--cluster-key is required") }) {
				t.Fatalf("uncommented defaults: %v", probs)
			}
		})
	}
}

func TestManPage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"man"}, nil, nil, &out, &errb); code != 0 {
		t.Fatalf("man: exit %d %s", code, errb.String())
	}
	page := out.String()
	for _, want := range []string{".TH OIDCD 1", ".SH SERVE OPTIONS", `\-\-config`, `\-\-cluster\-key`, "OIDCD_CLUSTER_KEY", ".SH ADMIN COMMANDS", "Exit codes", ".SH CONFIGURATION FILE"} {
		if !strings.Contains(page, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
	for i, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "'") || (strings.HasPrefix(l, ".") && !isRequest(l)) {
			t.Errorf("line %d starts a roff request by accident: %q", i+1, l)
		}
	}
}

func isRequest(l string) bool {
	for _, r := range []string{".TH ", ".SH ", ".TP", ".B ", ".I ", ".PP", ".nf", ".fi"} {
		if strings.HasPrefix(l, r) {
			return true
		}
	}
	return false
}

func TestConfigCheckWithEnvFile(t *testing.T) {
	cases := []struct {
		name      string
		file, env string
		want      []string // problems, as printed, with FILE and ENV for the paths
	}{
		{"the key in the environment file", "bootstrap-expect = 3\n", "# secrets\nOIDCD_CLUSTER_KEY=" + testKey + "\n", nil},
		{"quoted values and other variables", "bootstrap-expect = 3\n", "LANG=C\nOIDCD_CLUSTER_KEY=\"" + testKey + "\"\n; comment\n", nil},
		{"the environment wins over the file", "log-level = \"loud\"\n", "OIDCD_LOG_LEVEL=debug\n", nil},
		{"a bad key in the environment file", "bootstrap-expect = 3\n", "\nOIDCD_CLUSTER_KEY=c2hvcnQ=\n", []string{"ENV:2: --cluster-key"}},
		{"a bad duration in the environment file", "", "OIDCD_SESSION_IDLE=soon\n", []string{"ENV:1: OIDCD_SESSION_IDLE: "}},
		{"unknown variable and a bad line", "", "OIDCD_BOGUS=1\nnot a setting\n", []string{"ENV:1: unknown variable OIDCD_BOGUS", "ENV:2: want VARIABLE=value"}},
		{"still required without it", "bootstrap-expect = 3\n", "OIDCD_LOG_LEVEL=info\n", []string{"FILE:1: --cluster-key is required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "oidcd.toml", c.file)
			env := writeFile(t, "oidcd.env", c.env)
			var out, errb bytes.Buffer
			code := run([]string{"config", "check", "--env-file", env, path}, nil, nil, &out, &errb)
			if len(c.want) == 0 {
				if code != 0 {
					t.Fatalf("got exit %d, stderr %q; want 0", code, errb.String())
				}
				return
			}
			if code != 1 {
				t.Fatalf("got exit %d, want 1 (stderr %q)", code, errb.String())
			}
			got := strings.NewReplacer(path, "FILE", env, "ENV").Replace(errb.String())
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("stderr %q lacks %q", got, w)
				}
			}
			if n := strings.Count(got, "\n") - 1; n != len(c.want) {
				t.Errorf("got %d problems in %q, want %d", n, got, len(c.want))
			}
		})
	}
	var out, errb bytes.Buffer
	if code := run([]string{"config", "check", "--env-file", "/nonexistent.env", writeFile(t, "x.toml", "")}, nil, nil, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "/nonexistent.env: cannot read") {
		t.Errorf("missing env file: got %d %q", code, errb.String())
	}
}
