package packaging

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// operatorGuide is the operator guide's install page,
// docs/operators/install.md ("Installing: from the .deb to three
// signing-in nodes"), up to its next section if it grows one.
func operatorGuide(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operators", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, guide, ok := strings.Cut(string(b), "# Installing")
	if !ok {
		t.Fatal("docs/operators/install.md has no title \"Installing\"")
	}
	guide, _, _ = strings.Cut(guide, "\n## ")
	return guide
}

// fenced returns the bodies of the guide's ```lang blocks, unindented.
func fenced(guide, lang string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)\n( *)```"+lang+"\n(.*?)\n *```").FindAllStringSubmatch(guide, -1) {
		var lines []string
		for _, l := range strings.Split(m[2], "\n") {
			lines = append(lines, strings.TrimPrefix(l, m[1]))
		}
		out = append(out, strings.Join(lines, "\n"))
	}
	return out
}

// runOut runs name with args and returns its exit code, standard output
// and standard error apart.
func runOut(t *testing.T, env []string, name string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return 0, out.String(), errb.String()
}

// TestGuideCommandsWorkAgainstThePackagedConfig follows the operator
// guide's install page (docs/operators/install.md) on the package: every admin address it gives the CLI is
// the one the packaged file sets (AdminAddr); the secrets of step 3 and
// the settings of step 4, written into the packaged files the way an
// operator edits them, pass `oidcd config check` with no warning, while
// the untouched file warns about its default issuer; and the shipped
// binary on the packaged file, with the admin token in its environment as
// step 3 has it, answers step 6's status command and step 7's
// OIDCD_ADDR/OIDCD_ADMIN_TOKEN, and writes no token file.
func TestGuideCommandsWorkAgainstThePackagedConfig(t *testing.T) {
	guide := operatorGuide(t)
	_, root, _ := scratchPackage(t)
	shipped := filepath.Join(root, BinaryPath)

	// The admin address the guide gives the CLI is the packaged one.
	addrs := regexp.MustCompile(`(?:oidcd admin --addr |OIDCD_ADDR=)(\S+)`).FindAllStringSubmatch(guide, -1)
	if len(addrs) < 3 {
		t.Fatalf("the guide gives the CLI %d admin addresses, want those of steps 6, 7 and 10", len(addrs))
	}
	for _, a := range addrs {
		if a[1] != AdminAddr {
			t.Errorf("the guide has %q: the packaged file serves the admin API on %s", a[0], AdminAddr)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(root, ConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "\nadmin-addr = \""+AdminAddr+"\"\n") || !strings.Contains(guide, `admin-addr = "`+AdminAddr+`"`) {
		t.Errorf("the packaged file and the guide must both set admin-addr = %q", AdminAddr)
	}

	// Steps 3 and 4, into the packaged files.
	secrets := fenced(guide, "sh")
	settings := fenced(guide, "toml")
	if len(secrets) == 0 || len(settings) != 1 {
		t.Fatalf("the guide has %d sh and %d toml blocks; want step 3's secrets first and step 4's settings", len(secrets), len(settings))
	}
	key := strings.TrimSpace(command(t, shipped, "keygen"))
	token := strings.TrimSpace(command(t, shipped, "keygen"))
	envText := strings.NewReplacer("<the value of $KEY>", key, "<the value of $TOKEN>", token).Replace(secrets[0])
	if !strings.Contains(envText, "OIDCD_CLUSTER_KEY="+key) || !strings.Contains(envText, "OIDCD_ADMIN_TOKEN="+token) {
		t.Fatalf("step 3's block does not set OIDCD_CLUSTER_KEY and OIDCD_ADMIN_TOKEN:\n%s", secrets[0])
	}
	shippedEnv, err := os.ReadFile(filepath.Join(root, EnvPath))
	if err != nil {
		t.Fatal(err)
	}
	etc := t.TempDir()
	env := filepath.Join(etc, "oidcd.env")
	if err := os.WriteFile(env, append(shippedEnv, []byte("\n"+envText+"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	edited := string(cfg)
	for _, l := range strings.Split(settings[0], "\n") {
		k, _, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		line := regexp.MustCompile(`(?m)^#?` + regexp.QuoteMeta(k) + ` = .*$`)
		if !line.MatchString(edited) {
			t.Fatalf("step 4 sets %s, which the packaged file does not have", k)
		}
		edited = line.ReplaceAllLiteralString(edited, l)
	}
	conf := filepath.Join(etc, "oidcd.toml")
	if err := os.WriteFile(conf, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	check := regexp.MustCompile("`sudo (oidcd config check [^`]*)`").FindStringSubmatch(guide)
	if check == nil {
		t.Fatal("the guide has no `sudo oidcd config check ...`")
	}
	args := strings.Fields(strings.NewReplacer(EnvPath, env, ConfigPath, conf).Replace(check[1]))[1:]
	if code, out, errOut := runOut(t, nil, shipped, args...); code != 0 || out != conf+": ok\n" || errOut != "" {
		t.Errorf("step 4's check: got exit %d, stdout %q, stderr %q; want ok and no warning", code, out, errOut)
	}
	untouched := filepath.Join(etc, "untouched.toml")
	os.WriteFile(untouched, cfg, 0o644)
	if code, _, errOut := runOut(t, nil, shipped, "config", "check", "--env-file", env, untouched); code != 0 || !strings.Contains(errOut, "warning: --issuer is the default") {
		t.Errorf("the untouched packaged file: got exit %d, stderr %q; want ok with a warning about the default issuer", code, errOut)
	}

	// Steps 6 and 7 against the shipped binary on the packaged file.
	status := regexp.MustCompile("`(oidcd admin --addr [^`]* status)`").FindStringSubmatch(guide)
	if status == nil {
		t.Fatal("the guide has no `oidcd admin --addr ... status`")
	}
	runShipped(t, shipped, filepath.Join(root, ConfigPath), token, func(admin, data string) {
		args := strings.Fields(strings.NewReplacer(AdminAddr, admin, `"$TOKEN"`, token).Replace(status[1]))[1:]
		if out := command(t, shipped, args...); !strings.Contains(out, "1 (1 voters, 1 leader or follower)") {
			t.Errorf("step 6, %s:\n%s", status[1], out)
		}
		code, out, errOut := runOut(t, []string{"OIDCD_ADDR=" + admin, "OIDCD_ADMIN_TOKEN=" + token}, shipped, "admin", "org", "create", "--slug", "acme", "--name", "Acme")
		if code != 0 {
			t.Errorf("step 7 with OIDCD_ADDR and OIDCD_ADMIN_TOKEN: exit %d\n%s%s", code, out, errOut)
		}
		if _, err := os.Stat(filepath.Join(data, "admin-token")); !os.IsNotExist(err) {
			t.Errorf("with OIDCD_ADMIN_TOKEN set, the node wrote %s (%v); the guide and the postinst say it writes none", filepath.Join(data, "admin-token"), err)
		}
	})
}

// TestPostinstSaysWhereTheTokenIs runs the package's postinst in a
// scratch root (DPKG_ROOT, as dpkg --root does) holding the packaged
// files, changed as an operator might, and checks where it sends the
// operator: the admin address the files set, and the admin token where it
// really is: the environment file's when it sets one (no file is
// written then), the token file only when an earlier start wrote one,
// else both ways explained without claiming the file exists.
func TestPostinstSaysWhereTheTokenIs(t *testing.T) {
	_, pkgRoot, ctrl := scratchPackage(t)
	postinst := filepath.Join(ctrl, "postinst")
	cfg, err := os.ReadFile(filepath.Join(pkgRoot, ConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(filepath.Join(pkgRoot, EnvPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cfg, []byte("\nadmin-addr = ")) {
		t.Fatal("the packaged file does not set admin-addr")
	}
	tokenFile := DataDir + "/admin-token"
	cases := []struct {
		name       string
		config     string // the configuration file; "" for the packaged one
		env        string // appended to the packaged environment file
		tokenFile  bool   // an earlier start wrote the token file
		args       []string
		want, not  []string
		wantSilent bool
	}{
		{name: "fresh install", args: []string{"configure", ""},
			want: []string{"oidcd admin --addr " + AdminAddr + ` --token "$TOKEN" status`, "listen on " + AdminAddr, "admin-addr in " + ConfigPath,
				"OIDCD_ADMIN_TOKEN you put in " + EnvPath, "Without it", "writes it to " + tokenFile, "--token-file " + tokenFile},
			not: []string{"--token-file " + tokenFile + " status"}},
		{name: "token in the environment file", env: "OIDCD_ADMIN_TOKEN=\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\"\n", args: []string{"configure", ""},
			want: []string{`--token "$TOKEN" status`, "TOKEN the value of OIDCD_ADMIN_TOKEN in " + EnvPath, "no token file is written while it is set"},
			not:  []string{tokenFile}},
		{name: "token file from an earlier start", tokenFile: true, args: []string{"configure", ""},
			want: []string{"oidcd admin --addr " + AdminAddr + " --token-file " + tokenFile + " status", "generated"},
			not:  []string{"$TOKEN"}},
		{name: "environment token wins over an old token file", tokenFile: true, env: "OIDCD_ADMIN_TOKEN=abc\n", args: []string{"configure", ""},
			want: []string{`--token "$TOKEN" status`}, not: []string{"--token-file"}},
		{name: "admin-addr moved in the environment file", env: "OIDCD_ADMIN_ADDR=10.9.0.1:9443\n", args: []string{"configure", ""},
			want: []string{"--addr 10.9.0.1:9443 ", "OIDCD_ADMIN_ADDR in " + EnvPath}},
		{name: "no admin-addr", config: strings.Replace(string(cfg), "\nadmin-addr = ", "\n#admin-addr = ", 1) + "http-addr = \"0.0.0.0:8443\"\n", args: []string{"configure", ""},
			want: []string{"--addr 127.0.0.1:8443 ", "http-addr: no admin-addr is set"}},
		{name: "upgrade", args: []string{"configure", "0.1.0"}, want: []string{"upgraded from 0.1.0", "systemctl restart oidcd", "one node at a time"},
			not: []string{"installed but not started"}},
		{name: "deconfigure", args: []string{"abort-upgrade", "0.3.0"}, wantSilent: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "etc", "oidcd"), 0o755)
			config := c.config
			if config == "" {
				config = string(cfg)
			}
			os.WriteFile(filepath.Join(root, ConfigPath), []byte(config), 0o644)
			os.WriteFile(filepath.Join(root, EnvPath), append(append([]byte{}, env...), c.env...), 0o600)
			if c.tokenFile {
				os.MkdirAll(filepath.Join(root, DataDir), 0o700)
				os.WriteFile(filepath.Join(root, tokenFile), []byte("generated-token\n"), 0o600)
			}
			code, out, errOut := runOut(t, []string{"PATH=" + os.Getenv("PATH"), "DPKG_ROOT=" + root}, "sh", append([]string{postinst}, c.args...)...)
			if code != 0 || errOut != "" {
				t.Fatalf("postinst %v: exit %d, stderr %q", c.args, code, errOut)
			}
			if c.wantSilent && out != "" {
				t.Errorf("postinst %v: got %q, want nothing", c.args, out)
			}
			out = strings.Join(strings.Fields(out), " ") // the wanted texts ignore line breaks
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("postinst %v lacks %q:\n%s", c.args, w, out)
				}
			}
			for _, n := range c.not {
				if strings.Contains(out, n) {
					t.Errorf("postinst %v says %q:\n%s", c.args, n, out)
				}
			}
		})
	}
}
