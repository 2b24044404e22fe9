package packaging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestDebVersion(t *testing.T) {
	cases := []struct{ in, want string }{
		// tools/version.sh's versions are Debian versions already.
		{"0.2.0", "0.2.0"},
		{"0.2.0+git.5.1a2b3c4", "0.2.0+git.5.1a2b3c4"},
		{"0.2.0+git.5.1a2b3c4.dirty", "0.2.0+git.5.1a2b3c4.dirty"},
		{"0.2.0+shallow.1a2b3c4", "0.2.0+shallow.1a2b3c4"},
		{"0.2.0+nogit", "0.2.0+nogit"},
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v1.2.3-4-gabcdef0-dirty", "1.2.3+4+gabcdef0+dirty"},
		{"a6a0187-dirty", "0.0.0~a6a0187+dirty"},
		// A bare commit that starts with a digit is no release either.
		{"65a5750", "0.0.0~65a5750"},
		{"1234567", "0.0.0~1234567"},
		{"dev", "0.0.0~dev"},
		{"", "0.0.0~dev"},
		{"v2.0.0-rc.1", "2.0.0+rc.1"},
		{"1.0 beta/x", "1.0+beta+x"},
	}
	for _, c := range cases {
		if got := DebVersion(c.in); got != c.want {
			t.Errorf("DebVersion(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// buildBinary builds cmd/oidcd into dir, stamped with version.
func buildBinary(t *testing.T, dir, version string) string {
	t.Helper()
	bin := filepath.Join(dir, "oidcd")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// As make package builds it: -trimpath (which records no -ldflags in
	// the binary) and without cgo.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-X main.version="+version, "-o", bin, "./cmd/oidcd")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func needDpkgDeb(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("dpkg-deb is missing (apt-get install dpkg); CI must run the package test")
		}
		t.Skip("dpkg-deb is missing (apt-get install dpkg): the package cannot be unpacked here")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the package is for linux")
	}
}

func command(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// scratch is the package that TestPackageInstallsIntoAScratchRoot, the
// guide's and the postinst's tests look at: cmd/oidcd stamped v1.4.2,
// packaged, unpacked with dpkg-deb into root and its control files into
// ctrl, once for all of them (TestMain removes dir).
var scratch struct {
	once                 sync.Once
	dir, deb, root, ctrl string
	err                  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if scratch.dir != "" {
		os.RemoveAll(scratch.dir)
	}
	os.Exit(code)
}

// scratchPackage builds, or returns, the scratch package.
func scratchPackage(t *testing.T) (deb, root, ctrl string) {
	t.Helper()
	needDpkgDeb(t)
	scratch.once.Do(func() {
		scratch.err = errors.New("building the package failed in an earlier test")
		dir, err := os.MkdirTemp("", "oidcd-packaging-test-")
		if err != nil {
			t.Fatal(err)
		}
		scratch.dir = dir
		bin := buildBinary(t, dir, "v1.4.2")
		deb, err := Build(context.Background(), Options{
			Binary: bin, Version: "v1.4.2", RepoRoot: repoRoot, Out: filepath.Join(dir, "oidcd.deb"),
		})
		if err != nil {
			t.Fatal(err)
		}
		root, ctrl := filepath.Join(dir, "root"), filepath.Join(dir, "control")
		command(t, "dpkg-deb", "-x", deb, root)
		command(t, "dpkg-deb", "--control", deb, ctrl)
		scratch.deb, scratch.root, scratch.ctrl, scratch.err = deb, root, ctrl, nil
	})
	if scratch.err != nil {
		t.Fatal(scratch.err)
	}
	return scratch.deb, scratch.root, scratch.ctrl
}

// TestPackageInstallsIntoAScratchRoot builds the package, unpacks it with
// dpkg-deb into a throwaway root, and checks what an operator gets: the
// control data and conffiles, file modes, a unit that systemd accepts and
// that is hardened, a configuration file that `oidcd config check` (the
// shipped binary) accepts, warning that its issuer is still the default,
// and a manual; the shipped binary runs on the shipped file with the admin
// token it generates (TestGuideCommandsWorkAgainstThePackagedConfig runs
// it with one from the environment, as the guide has it).
func TestPackageInstallsIntoAScratchRoot(t *testing.T) {
	deb, root, ctrl := scratchPackage(t)

	fields := map[string]string{}
	for _, l := range strings.Split(command(t, "dpkg-deb", "--field", deb), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			fields[k] = v
		}
	}
	for k, want := range map[string]string{"Package": "oidcd", "Version": "1.4.2", "Architecture": runtime.GOARCH} {
		if fields[k] != want {
			t.Errorf("control %s: got %q, want %q", k, fields[k], want)
		}
	}
	conffiles, _ := os.ReadFile(filepath.Join(ctrl, "conffiles"))
	for _, want := range []string{ConfigPath, EnvPath} {
		if !strings.Contains(string(conffiles), want+"\n") {
			t.Errorf("conffiles %q lacks %s", conffiles, want)
		}
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		if st, err := os.Stat(filepath.Join(ctrl, s)); err != nil || st.Mode().Perm()&0o111 == 0 {
			t.Errorf("maintainer script %s: %v", s, err)
		}
	}

	modes := map[string]os.FileMode{
		BinaryPath: 0o755, UnitPath: 0o644, ConfigPath: 0o644, EnvPath: 0o600, ManPath: 0o644,
		SharePath + "/grafana/oidcd.json": 0o644, SharePath + "/prometheus/alerts.yml": 0o644, DocPath + "/metrics.md": 0o644,
	}
	for p, want := range modes {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", p, got, want)
		}
	}

	shipped := filepath.Join(root, BinaryPath)
	if out := command(t, shipped, "version"); !strings.Contains(out, "v1.4.2") {
		t.Errorf("oidcd version: got %q", out)
	}
	// The shipped files check, but their issuer is the default until the
	// operator sets it: config check says so.
	out := command(t, shipped, "config", "check", filepath.Join(root, ConfigPath))
	if !strings.Contains(out, ": ok") || !strings.Contains(out, "warning: --issuer is the default") {
		t.Errorf("config check of the shipped file: %q, want ok and a warning about the default issuer", out)
	}
	out = command(t, shipped, "config", "check", "--env-file", filepath.Join(root, EnvPath), filepath.Join(root, ConfigPath))
	if !strings.Contains(out, ": ok") || !strings.Contains(out, "warning: --issuer is the default") {
		t.Errorf("config check of the shipped files: %q, want ok and a warning about the default issuer", out)
	}
	cfg, _ := os.ReadFile(filepath.Join(root, ConfigPath))
	if !strings.Contains(string(cfg), "\ndata-dir = \""+DataDir+"\"\n") {
		t.Errorf("the shipped configuration does not set data-dir to %s:\n%s", DataDir, cfg)
	}

	checkUnit(t, root)
	checkManPage(t, filepath.Join(root, ManPath))
	// As installed, with no token set: the node generates one and
	// writes it to <data-dir>/admin-token (the guide's way, with
	// OIDCD_ADMIN_TOKEN, is TestGuideCommandsWorkAgainstThePackagedConfig).
	runShipped(t, shipped, filepath.Join(root, ConfigPath), "", func(admin, data string) {
		out := command(t, shipped, "admin", "--addr", admin, "--token-file", filepath.Join(data, "admin-token"), "status")
		if !strings.Contains(out, "1 (1 voters, 1 leader or follower)") {
			t.Errorf("admin status:\n%s", out)
		}
	})
}

// runShipped starts the unpacked binary on the unpacked configuration, as
// the unit does, with the data directory and addresses moved by flags
// (which win over the file) into the test's space, and with
// OIDCD_ADMIN_TOKEN=envToken in its environment unless it is empty; the
// node must become ready, keep the admin API off its public listener, pass
// check(its admin address, its data directory) and stop cleanly on
// SIGTERM.
func runShipped(t *testing.T, bin, config, envToken string, check func(adminAddr, dataDir string)) {
	t.Helper()
	data := t.TempDir()
	if b, err := os.ReadFile(config); err != nil || !strings.Contains(string(b), "\nadmin-addr = \""+AdminAddr+"\"\n") {
		t.Errorf("the shipped configuration does not bind the admin surface to %s (%v)", AdminAddr, err)
	}
	addrs := freeAddrs(t, 4)
	var logs syncBuffer
	cmd := exec.Command(bin, "serve", "--config", config, "--data-dir", data,
		"--http-addr", addrs[0], "--issuer", "http://"+addrs[0], "--raft-addr", addrs[1], "--gossip-addr", addrs[2], "--admin-addr", addrs[3])
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if envToken != "" {
		cmd.Env = append(cmd.Env, "OIDCD_ADMIN_TOKEN="+envToken)
	}
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	ready := false
	for deadline := time.Now().Add(20 * time.Second); !ready && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + addrs[0] + "/readyz")
		if err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == 200
		}
	}
	if !ready {
		t.Fatalf("the shipped binary and configuration did not become ready within 20 s:\n%s", logs.String())
	}
	// The shipped file keeps the admin surface off the public listener.
	if resp, err := http.Get("http://" + addrs[0] + "/admin/v1/status"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the admin API on the public listener: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	check(addrs[3], data)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(25 * time.Second):
		t.Errorf("no exit within 25 s of SIGTERM")
	}
}

// unitKeys are the unit's settings, by section, for a strict parse: any key
// not listed here fails the test, so a typo cannot pass unnoticed even
// where systemd-analyze is missing.
var unitKeys = map[string]map[string]bool{
	"Unit": {"Description": true, "Documentation": true, "After": true, "Wants": true},
	"Service": {"Type": true, "NotifyAccess": true, "WatchdogSec": true, "ExecStart": true, "EnvironmentFile": true, "Restart": true, "RestartSec": true, "RestartPreventExitStatus": true,
		"TimeoutStopSec": true, "KillSignal": true, "DynamicUser": true, "StateDirectory": true, "StateDirectoryMode": true,
		"WorkingDirectory": true, "UMask": true, "NoNewPrivileges": true, "CapabilityBoundingSet": true,
		"AmbientCapabilities": true, "ProtectSystem": true, "ProtectHome": true, "PrivateTmp": true, "PrivateDevices": true,
		"ProtectKernelTunables": true, "ProtectKernelModules": true, "ProtectKernelLogs": true, "ProtectControlGroups": true,
		"ProtectClock": true, "ProtectHostname": true, "ProtectProc": true, "ProcSubset": true, "RestrictAddressFamilies": true,
		"RestrictNamespaces": true, "RestrictRealtime": true, "RestrictSUIDSGID": true, "LockPersonality": true,
		"MemoryDenyWriteExecute": true, "RemoveIPC": true, "SystemCallArchitectures": true, "SystemCallFilter": true,
		"SystemCallErrorNumber": true, "LimitNOFILE": true},
	"Install": {"WantedBy": true},
}

func parseUnit(t *testing.T, text string) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
			if unitKeys[section] == nil {
				t.Errorf("unit line %d: unknown section %q", n, section)
			}
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" || strings.HasSuffix(l, "\\") {
				t.Errorf("unit line %d: not a key=value of a section: %q", n, l)
				continue
			}
			if !unitKeys[section][k] {
				t.Errorf("unit line %d: unexpected key %s in [%s]", n, k, section)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

func checkUnit(t *testing.T, root string) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root, UnitPath))
	if err != nil {
		t.Fatal(err)
	}
	u := parseUnit(t, string(text))
	want := map[string]string{
		"ExecStart":             BinaryPath + " serve --config " + ConfigPath,
		"EnvironmentFile":       "-" + EnvPath,
		"DynamicUser":           "yes",
		"StateDirectory":        "oidcd",
		"WorkingDirectory":      DataDir,
		"ProtectSystem":         "strict",
		"ProtectHome":           "yes",
		"NoNewPrivileges":       "yes",
		"PrivateTmp":            "yes",
		"CapabilityBoundingSet": "",
		"SystemCallErrorNumber": "EPERM",
	}
	for k, v := range want {
		got := u["Service"][k]
		if len(got) != 1 || got[0] != v {
			t.Errorf("[Service] %s: got %q, want %q", k, got, v)
		}
	}
	if got := u["Install"]["WantedBy"]; len(got) != 1 || got[0] != "multi-user.target" {
		t.Errorf("[Install] WantedBy: got %q", got)
	}

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is missing: the unit was checked by the strict parse only")
		return
	}
	// systemd-analyze checks that ExecStart's binary exists: point it at
	// the unpacked one. The manual is checked below, not through man(1).
	dir := t.TempDir()
	unit := filepath.Join(dir, "oidcd.service")
	os.WriteFile(unit, bytes.ReplaceAll(text, []byte("ExecStart="+BinaryPath), []byte("ExecStart="+filepath.Join(root, BinaryPath))), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, sa, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func checkManPage(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".TH OIDCD 1", "oidcd v1.4.2", ".SH SERVE OPTIONS", ".SH ADMIN COMMANDS", "/etc/oidcd/oidcd.toml"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("man page lacks %q", want)
		}
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
		cmd.Stdin = bytes.NewReader(page)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff warns about the man page: %v\n%s", err, out)
		}
	}
}

// freeAddrs returns n 127.0.0.1 addresses whose ports were free for TCP
// and UDP a moment ago (gossip uses both).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(out) < n && tries < 100; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		u, err := net.ListenPacket("udp", l.Addr().String())
		if err != nil {
			continue
		}
		u.Close()
		out = append(out, l.Addr().String())
	}
	if len(out) < n {
		t.Fatalf("found only %d free ports", len(out))
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for a child's two output streams and
// the test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
