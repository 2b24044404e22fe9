package main

import (
	"bytes"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/internal/testkit/testca"
	"github.com/oidcd/oidcd/node"
)

// relayPassword is the password of the relay URLs below: no message may
// show it.
const relayPassword = "Rel4y-s3cret"

// TestMailFlagsRefused: oidcd serve refuses every mail setting that
// docs/operators/email.md says it refuses, before it starts, naming the
// flag and never showing the relay's password.
func TestMailFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	junk := writeFile(t, "junk.pem", "not a certificate\n")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"relay without From", []string{"--smtp-url", "smtp://oidcd:" + relayPassword + "@relay.example.com"}, nil,
			[]string{"--smtp-url needs --smtp-from"}},
		{"relay without From, from the environment", nil, map[string]string{"OIDCD_SMTP_URL": "smtps://oidcd:" + relayPassword + "@relay.example.com"},
			[]string{"--smtp-url needs --smtp-from"}},
		{"not smtp or smtps", []string{"--smtp-url", "http://oidcd:" + relayPassword + "@relay.example.com", "--smtp-from", "id@example.com"}, nil,
			[]string{"--smtp-url", `scheme "http"`, "STARTTLS"}},
		{"STARTTLS cannot be turned off", []string{"--smtp-url", "smtp://oidcd:" + relayPassword + "@relay.example.com?starttls=false", "--smtp-from", "id@example.com"}, nil,
			[]string{"--smtp-url", "STARTTLS cannot be turned off"}},
		{"a URL that does not parse", []string{"--smtp-url", "smtp://oidcd:" + relayPassword + "@relay.example.com:port", "--smtp-from", "id@example.com"}, nil,
			[]string{"--smtp-url", "invalid port"}},
		{"no host", []string{"--smtp-url", "smtp://oidcd:" + relayPassword + "@", "--smtp-from", "id@example.com"}, nil,
			[]string{"--smtp-url", "no host"}},
		{"bad From", []string{"--smtp-url", "smtp://relay.example.com", "--smtp-from", "not an address"}, nil,
			[]string{`--smtp-from "not an address"`}},
		{"From with a line break", []string{"--smtp-url", "smtp://relay.example.com", "--smtp-from", "id@example.com\r\nBcc: all@example.com"}, nil,
			[]string{"--smtp-from", "line break"}},
		{"CA file that does not parse", []string{"--smtp-url", "smtp://relay.example.com", "--smtp-from", "id@example.com", "--smtp-ca-file", junk}, nil,
			[]string{"--smtp-ca-file", "holds no PEM certificate"}},
		{"CA file missing", []string{"--smtp-url", "smtp://relay.example.com", "--smtp-from", "id@example.com", "--smtp-ca-file", filepath.Join(dir, "none.pem")}, nil,
			[]string{"--smtp-ca-file", "no such file"}},
		{"From without a relay", []string{"--smtp-from", "id@example.com"}, nil, []string{"--smtp-from is set without --smtp-url"}},
		{"CA file without a relay", []string{"--smtp-ca-file", junk, "--email-outbox", filepath.Join(dir, "outbox.jsonl")}, nil,
			[]string{"--smtp-ca-file is set without --smtp-url"}},
		{"outbox in a missing directory", []string{"--email-outbox", filepath.Join(dir, "missing", "outbox.jsonl")}, nil,
			[]string{"--email-outbox", "does not exist"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"serve", "--data-dir", filepath.Join(t.TempDir(), "data")}, tc.args...)
			code := run(args, func(k string) string { return tc.env[k] }, nil, &out, &errb)
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr %q", code, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q lacks %q", errb.String(), w)
				}
			}
			if strings.Contains(errb.String()+out.String(), relayPassword) {
				t.Errorf("the output shows the relay's password: %q", errb.String())
			}
		})
	}
}

// TestMailFlagsAccepted: the documented forms parse, from flags, the
// environment and the configuration file, into node.Config.
func TestMailFlagsAccepted(t *testing.T) {
	ca := writeFile(t, "ca.pem", string(testca.New(t, "relay CA").CAPEM))
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want node.Config
	}{
		{"STARTTLS with a CA file", []string{"--smtp-url", "smtp://relay.example.com", "--smtp-from", "Example ID <id@example.com>", "--smtp-ca-file", ca},
			nil, node.Config{SMTPURL: "smtp://relay.example.com", SMTPFrom: "Example ID <id@example.com>", SMTPCAFile: ca}},
		{"smtps with its password from the environment, and an outbox", []string{"--smtp-from", "id@example.com", "--email-outbox", outbox},
			map[string]string{"OIDCD_SMTP_URL": "smtps://oidcd:" + relayPassword + "@relay.example.com:4650"},
			node.Config{SMTPURL: "smtps://oidcd:" + relayPassword + "@relay.example.com:4650", SMTPFrom: "id@example.com", EmailOutbox: outbox}},
		{"an outbox alone", []string{"--email-outbox", outbox}, nil, node.Config{EmailOutbox: outbox}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			var cfg node.Config
			var lvl, join string
			serveFlags(fs, &cfg, &lvl, &join)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := applyEnv(fs, func(k string) string { return tc.env[k] }); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Check(); err != nil {
				t.Fatalf("refused: %v", err)
			}
			if cfg.SMTPURL != tc.want.SMTPURL || cfg.SMTPFrom != tc.want.SMTPFrom || cfg.SMTPCAFile != tc.want.SMTPCAFile || cfg.EmailOutbox != tc.want.EmailOutbox ||
				!cfg.MailEnabled() {
				t.Fatalf("got %q %q %q %q, want %q %q %q %q", cfg.SMTPURL, cfg.SMTPFrom, cfg.SMTPCAFile, cfg.EmailOutbox,
					tc.want.SMTPURL, tc.want.SMTPFrom, tc.want.SMTPCAFile, tc.want.EmailOutbox)
			}
		})
	}
	file := writeFile(t, "oidcd.toml", "smtp-url = \"smtp://relay.example.com:2525\"\nsmtp-from = \"id@example.com\"\nsmtp-ca-file = \""+ca+"\"\nemail-outbox = \""+outbox+"\"\n")
	if probs := checkConfig(file, ""); len(probs) != 0 {
		t.Fatalf("config check: %v", probs)
	}
	bad := writeFile(t, "oidcd.toml", "email-outbox = \""+outbox+"\"\n\nsmtp-url = \"smtp://relay.example.com\"\n")
	if probs := checkConfig(bad, ""); len(probs) != 1 || probs[0].line != 3 || !strings.Contains(probs[0].msg, "--smtp-from") {
		t.Fatalf("config check of a relay without From: %v, want one problem on line 3", probs)
	}
}

// TestRelayPasswordOnTheCommandLineIsWarnedAbout: an --smtp-url with a
// password on the command line draws the process-list warning; one
// without a password, or from the environment, does not.
func TestRelayPasswordOnTheCommandLineIsWarnedAbout(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		warn bool
	}{
		{"password on the command line", []string{"--smtp-url", "smtp://oidcd:" + relayPassword + "@relay.example.com"}, nil, true},
		{"no password", []string{"--smtp-url", "smtp://relay.example.com"}, nil, false},
		{"password in the environment", nil, map[string]string{"OIDCD_SMTP_URL": "smtp://oidcd:" + relayPassword + "@relay.example.com"}, false},
	} {
		var out, errb bytes.Buffer
		// No --smtp-from: the node refuses to start after the warning.
		run(append([]string{"serve", "--data-dir", filepath.Join(t.TempDir(), "data")}, tc.args...), func(k string) string { return tc.env[k] }, nil, &out, &errb)
		if got := strings.Contains(errb.String(), "OIDCD_SMTP_URL"); got != tc.warn {
			t.Errorf("%s: warning %v, want %v; stderr %q", tc.name, got, tc.warn, errb.String())
		}
		if strings.Contains(errb.String(), relayPassword) {
			t.Errorf("%s: stderr shows the password: %q", tc.name, errb.String())
		}
	}
}
