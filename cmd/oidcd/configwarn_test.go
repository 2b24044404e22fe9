package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestConfigCheckWarnsAboutTheIssuer: a file that checks but keeps the
// default issuer (as the packaged one does until it is edited), or names
// a plain-http issuer that other machines would use, draws a warning at
// the line that sets it, in the file or the environment file; the check
// still passes (exit 0, "ok"). An https issuer, or http on loopback for a
// node that listens on loopback only, draws none.
func TestConfigCheckWarnsAboutTheIssuer(t *testing.T) {
	cases := []struct {
		name, file, env string
		want            string // the warning as printed, FILE and ENV for the paths; "" for none
	}{
		{"the default issuer, unset", "data-dir = \"/var/lib/oidcd\"\n", "", "FILE: warning: --issuer is the default, http://127.0.0.1:8080"},
		{"the default issuer, set", "\nissuer = \"http://127.0.0.1:8080\"\n", "", "FILE:2: warning: --issuer is the default"},
		{"the default issuer on a public listener", "http-addr = \"0.0.0.0:8080\"\n", "", "FILE: warning: --issuer is the default"},
		{"plain http on a name", "issuer = \"http://id.example.com\"\n", "", `FILE:1: warning: --issuer "http://id.example.com" is not https`},
		{"plain http on an address", "issuer = \"http://10.0.0.1:8080\"\nhttp-addr = \"10.0.0.1:8080\"\n", "", `FILE:1: warning: --issuer "http://10.0.0.1:8080" is not https`},
		{"plain http from the environment file", "issuer = \"https://id.example.com\"\n", "# public\nOIDCD_ISSUER=http://id.example.com\n", "ENV:2: warning: --issuer \"http://id.example.com\" is not https"},
		{"loopback issuer, public listener", "issuer = \"http://localhost:9000\"\nhttp-addr = \":9000\"\n", "", `FILE:1: warning: --issuer "http://localhost:9000" is plain http on this machine while --http-addr ":9000" listens beyond it`},
		{"https", "issuer = \"https://id.example.com\"\nhttp-addr = \"10.0.0.1:8080\"\n", "", ""},
		{"https from the environment file", "", "OIDCD_ISSUER=https://id.example.com\n", ""},
		{"loopback http, loopback listener", "issuer = \"http://127.0.0.1:9000\"\nhttp-addr = \"127.0.0.1:9000\"\n", "", ""},
		{"localhost, IPv6 loopback listener", "issuer = \"http://localhost:9000\"\nhttp-addr = \"[::1]:9000\"\n", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "oidcd.toml", c.file)
			args := []string{"config", "check", path}
			env := ""
			if c.env != "" {
				env = writeFile(t, "oidcd.env", c.env)
				args = []string{"config", "check", "--env-file", env, path}
			}
			var out, errb bytes.Buffer
			if code := run(args, nil, nil, &out, &errb); code != 0 || out.String() != path+": ok\n" {
				t.Fatalf("got exit %d, stdout %q, stderr %q; want 0 and ok", code, out.String(), errb.String())
			}
			r := strings.NewReplacer(path, "FILE")
			if env != "" {
				r = strings.NewReplacer(path, "FILE", env, "ENV")
			}
			got := r.Replace(errb.String())
			switch {
			case c.want == "" && got != "":
				t.Errorf("got warnings %q, want none", got)
			case c.want != "" && (!strings.HasPrefix(got, c.want) || strings.Count(got, "\n") != 1):
				t.Errorf("got %q, want one warning starting %q", got, c.want)
			}
		})
	}
}

// TestConfigCheckWarnsOnlyAboutAFileThatChecks: a file with problems
// reports those alone (exit 1); the issuer warning waits for a file that
// works.
func TestConfigCheckWarnsOnlyAboutAFileThatChecks(t *testing.T) {
	path := writeFile(t, "oidcd.toml", "session-idle = \"soon\"\n")
	var out, errb bytes.Buffer
	if code := run([]string{"config", "check", path}, nil, nil, &out, &errb); code != 1 || strings.Contains(errb.String(), "warning") {
		t.Errorf("got exit %d, stderr %q; want 1 without a warning", code, errb.String())
	}
}
