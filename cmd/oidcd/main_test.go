package main

import (
	"bytes"
	"encoding/base64"
	"flag"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/node"
)

func TestFlagWinsOverEnvWhichWinsOverDefault(t *testing.T) {
	env := map[string]string{
		"OIDCD_HTTP_ADDR":        "127.0.0.1:9000",
		"OIDCD_ISSUER":           "https://env.example",
		"OIDCD_BOOTSTRAP_EXPECT": "1",
		"OIDCD_KEY_ROTATION":     "48h",
	}
	cases := []struct {
		name  string
		args  []string
		check func(node.Config) string
	}{
		{"env over default", nil, func(c node.Config) string {
			if c.HTTPAddr != "127.0.0.1:9000" || c.Issuer != "https://env.example" || c.KeyRotation.Hours() != 48 {
				return "env not applied"
			}
			return ""
		}},
		{"flag over env", []string{"--http-addr", "127.0.0.1:9100", "--key-rotation=72h"}, func(c node.Config) string {
			if c.HTTPAddr != "127.0.0.1:9100" || c.KeyRotation.Hours() != 72 {
				return "flag did not win"
			}
			if c.Issuer != "https://env.example" {
				return "env lost for a flag not given"
			}
			return ""
		}},
		{"default", nil, func(c node.Config) string {
			if c.DataDir != node.DefaultDataDir || c.RaftAddr != node.DefaultRaftAddr {
				return "defaults not kept"
			}
			return ""
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			var cfg node.Config
			var lvl, join string
			serveFlags(fs, &cfg, &lvl, &join)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			if err := applyEnv(fs, func(k string) string { return env[k] }); err != nil {
				t.Fatal(err)
			}
			if msg := c.check(cfg); msg != "" {
				t.Fatalf("%s: %+v", msg, cfg)
			}
		})
	}
}

func TestBadEnvValueIsAUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"serve"}, func(k string) string {
		if k == "OIDCD_BOOTSTRAP_EXPECT" {
			return "three"
		}
		return ""
	}, nil, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "OIDCD_BOOTSTRAP_EXPECT") {
		t.Fatalf("got exit %d, stderr %q; want 2 naming the variable", code, errb.String())
	}
}

func TestCommands(t *testing.T) {
	cases := []struct {
		args     []string
		wantCode int
		wantOut  string
	}{
		{[]string{"version"}, 0, "oidcd "},
		{[]string{"help"}, 0, "oidcd serve"},
		{nil, 2, ""},
		{[]string{"bogus"}, 2, ""},
		{[]string{"serve", "--bootstrap-expect", "3"}, 1, ""},
		{[]string{"serve", "extra"}, 2, ""},
		{[]string{"recover"}, 2, ""},
		{[]string{"recover", "-h"}, 0, ""},
		{[]string{"recover", "--data-dir", t.TempDir()}, 1, ""},
		{[]string{"recover", "--data-dir", t.TempDir(), "extra"}, 2, ""},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(c.args, func(string) string { return "" }, nil, &out, &errb)
		if code != c.wantCode || !strings.Contains(out.String(), c.wantOut) {
			t.Errorf("%v: got %d %q, want %d containing %q (stderr %q)", c.args, code, out.String(), c.wantCode, c.wantOut, errb.String())
		}
	}
	var out bytes.Buffer
	if code := run([]string{"keygen"}, nil, nil, &out, &out); code != 0 {
		t.Fatalf("keygen exit %d", code)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out.String()))
	if err != nil || len(key) != 32 {
		t.Fatalf("keygen: got %q (%v), want base64 of 32 bytes", out.String(), err)
	}
}

// TestSecretOnTheCommandLineIsWarnedAbout: --admin-token or --cluster-key
// given as a flag draws a warning that names the environment variable;
// the same secret from the environment draws none.
func TestSecretOnTheCommandLineIsWarnedAbout(t *testing.T) {
	token := strings.Repeat("t", 40)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		warn bool
	}{
		{"flag", []string{"serve", "--admin-token", token, "--bootstrap-expect", "-1"}, nil, true},
		{"environment", []string{"serve", "--bootstrap-expect", "-1"}, map[string]string{"OIDCD_ADMIN_TOKEN": token}, false},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		run(c.args, func(k string) string { return c.env[k] }, nil, &out, &errb)
		if got := strings.Contains(errb.String(), "OIDCD_ADMIN_TOKEN"); got != c.warn {
			t.Errorf("%s: warning %v, want %v; stderr %q", c.name, got, c.warn, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--admin-token", "short"}, func(string) string { return "" }, nil, &out, &errb); code == 0 ||
		!strings.Contains(errb.String(), "want at least 32") {
		t.Errorf("a short admin token: exit %d, stderr %q", code, errb.String())
	}
}
