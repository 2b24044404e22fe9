package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/freeport"
	"github.com/oidcd/oidcd/testcluster"
)

// TestThreeNodesFromConfigFiles is the operator guide's path as a test:
// build the binary, write three configuration files (bootstrap-expect 3,
// join, 127.0.0.1 ports) and environment files with a cluster key and an
// admin token from `oidcd keygen`, check them with `oidcd config check
// --env-file`, start three `oidcd serve --config` processes,
// wait for a leader with `oidcd admin status`, provision with `oidcd
// admin`, and sign a person in: the browser on node 3, the code exchange
// and the keys on node 1 (the issuer), userinfo on node 2.
func TestThreeNodesFromConfigFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts three processes")
	}
	start := time.Now()
	dir := t.TempDir()
	bin := filepath.Join(dir, "oidcd")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built in %s", time.Since(start).Round(time.Millisecond))

	// Two secrets, as the operator guide makes them; they go into an
	// environment file per node (the unit's EnvironmentFile), not into the
	// configuration files.
	key := strings.TrimSpace(oidcd(t, bin, 0, "keygen"))
	token := strings.TrimSpace(oidcd(t, bin, 0, "keygen"))
	secrets := []string{"OIDCD_CLUSTER_KEY=" + key, "OIDCD_ADMIN_TOKEN=" + token}
	type nodeAddrs struct{ http, raft, gossip string }
	var nodes [3]nodeAddrs
	ports := freePorts(t, 9)
	for i := range nodes {
		nodes[i] = nodeAddrs{http: ports[3*i], raft: ports[3*i+1], gossip: ports[3*i+2]}
	}
	issuer := "http://" + nodes[0].http
	var configs, envFiles [3]string
	for i, n := range nodes {
		var join []string
		for j, o := range nodes {
			if j != i {
				join = append(join, fmt.Sprintf("%q", o.gossip))
			}
		}
		configs[i] = filepath.Join(dir, fmt.Sprintf("node%d.toml", i+1))
		text := fmt.Sprintf(`# node %d of three
issuer           = %q
http-addr        = %q
raft-addr        = %q
gossip-addr      = %q
data-dir         = %q
bootstrap-expect = 3
join             = [%s]
`, i+1, issuer, n.http, n.raft, n.gossip, filepath.Join(dir, fmt.Sprintf("data%d", i+1)), strings.Join(join, ", "))
		if err := os.WriteFile(configs[i], []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		envFiles[i] = filepath.Join(dir, fmt.Sprintf("node%d.env", i+1))
		if err := os.WriteFile(envFiles[i], []byte("# secrets\n"+strings.Join(secrets, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// Without its secrets the file is incomplete; with them it is valid.
		if out := oidcd(t, bin, 1, "config", "check", configs[i]); !strings.Contains(out, ":7: --cluster-key is required") {
			t.Fatalf("config check without the environment file: %q", out)
		}
		if out := oidcd(t, bin, 0, "config", "check", "--env-file", envFiles[i], configs[i]); !strings.Contains(out, ": ok") {
			t.Fatalf("config check: %q", out)
		}
	}

	var procs [3]*exec.Cmd
	for i := range nodes {
		procs[i] = startNode(t, bin, configs[i], secrets, filepath.Join(dir, fmt.Sprintf("node%d.log", i+1)))
	}

	// Wait for a leader, and for all three as voters, through the CLI.
	admin := func(i int, want int, args ...string) string {
		t.Helper()
		return oidcd(t, bin, want, append([]string{"admin", "--addr", nodes[i].http, "--token", token, "--timeout", "3s"}, args...)...)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := oidcdCode(t, bin, "admin", "--addr", nodes[2].http, "--token", token, "--timeout", "2s", "status", "--json")
		var st struct {
			Leader  string `json:"leader"`
			Members []struct {
				Voter bool   `json:"voter"`
				State string `json:"state"`
			} `json:"members"`
		}
		voters := 0
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil {
			for _, m := range st.Members {
				if m.Voter && (m.State == "leader" || m.State == "follower") {
					voters++
				}
			}
		}
		if code == 0 && st.Leader != "" && voters == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader with three voters within 30 s: exit %d, %s\nlogs:\n%s", code, out, logs(dir))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("leader after %s", time.Since(start).Round(time.Millisecond))
	if out := admin(0, 0, "status"); !strings.Contains(out, "3 (3 voters, 3 leader or follower)") {
		t.Errorf("status:\n%s", out)
	}

	// Provision through a follower-or-leader: whichever node 2 is.
	field := func(out, name string) string {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		s, _ := m[name].(string)
		if s == "" {
			t.Fatalf("no %s in %s", name, out)
		}
		return s
	}
	org := field(admin(1, 0, "org", "create", "--slug", "acme", "--name", "Acme", "--json"), "id")
	const email, password = "ann@example.com", "correct horse battery staple"
	user := field(admin(1, 0, "user", "create", "--email", email, "--email-verified", "--password", password, "--json"), "id")
	admin(1, 0, "membership", "create", "--user", user, "--org", org)
	const cb = "http://127.0.0.1:9/callback"
	client := field(admin(1, 0, "client", "create", "--name", "Portal", "--org", org, "--type", "public", "--skip-consent",
		"--redirect-uri", cb, "--scope", "openid,email", "--json"), "client_id")

	// Node 3 applies the new client a moment after node 2 answered (a
	// follower's reads are local); /authorize there reads it locally, so
	// wait until node 3 shows it, as an operator would.
	for until := time.Now().Add(5 * time.Second); ; {
		if _, code := oidcdCode(t, bin, "admin", "--addr", nodes[2].http, "--token", token, "client", "get", client); code == 0 {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("node 3 did not apply the new client within 5 s\n%s", logs(dir))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Sign in as an application does.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := gooidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatal(err)
	}
	oc := oauth2.Config{ClientID: client, Endpoint: p.Endpoint(), RedirectURL: cb, Scopes: []string{gooidc.ScopeOpenID, "email"}}
	verifier := oauth2.GenerateVerifier()
	authURL, _ := url.Parse(oc.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier), gooidc.Nonce("nonce-0123456789")))
	authURL.Host = nodes[2].http // the browser's load balancer picked node 3
	b := testcluster.NewBrowser(t)
	page := b.Get(authURL.String())
	// One wrong password first (an audit event of its own).
	if strings.Contains(page.Body, `name="password"`) {
		if p := b.Submit(page, map[string]string{"email": email, "password": "not the password"}, "method", "password"); p.Status != http.StatusBadRequest {
			t.Fatalf("wrong password: %d", p.Status)
		}
	}
	for i := 0; i < 8 && !strings.HasPrefix(page.Location(), cb); i++ {
		switch {
		case page.Location() != "":
			page = b.Get(page.Location())
		case strings.Contains(page.Body, `name="password"`):
			page = b.Submit(page, map[string]string{"email": email, "password": password}, "method", "password")
		default:
			t.Fatalf("unexpected page %d at %s:\n%s\nlogs:\n%s", page.Status, page.URL, page.Body, logs(dir))
		}
	}
	loc, err := url.Parse(page.Location())
	if err != nil || !strings.HasPrefix(page.Location(), cb) {
		t.Fatalf("sign-in ended at %d %q, want %s", page.Status, page.Location(), cb)
	}
	tok, err := oc.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	idt, err := p.Verifier(&gooidc.Config{ClientID: client}).Verify(ctx, tok.Extra("id_token").(string))
	if err != nil {
		t.Fatalf("go-oidc rejected the ID token: %v", err)
	}
	var claims struct {
		Nonce string `json:"nonce"`
		Org   string `json:"organization_id"`
	}
	idt.Claims(&claims)
	if idt.Subject != user || claims.Nonce != "nonce-0123456789" || claims.Org != org {
		t.Fatalf("ID token: sub %q %+v, want %s in %s", idt.Subject, claims, user, org)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+nodes[1].http+"/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ui struct {
		Sub   string `json:"sub"`
		Email string `json:"email"`
	}
	json.NewDecoder(resp.Body).Decode(&ui)
	resp.Body.Close()
	if resp.StatusCode != 200 || ui.Sub != user || ui.Email != email {
		t.Fatalf("userinfo on node 2: %d %+v", resp.StatusCode, ui)
	}
	t.Logf("signed in after %s", time.Since(start).Round(time.Millisecond))

	// A replay of the code, then a sign-out.
	if _, err := oc.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("a replayed code was exchanged")
	}
	if resp, err := b.Client.PostForm("http://"+nodes[0].http+"/logout", url.Values{"id_token_hint": {tok.Extra("id_token").(string)}}); err != nil || resp.StatusCode >= 400 {
		t.Fatalf("logout: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}

	// The audit trail through the binary's CLI: each action's event is in
	// it with its fields (docs/operators/audit.md), no secret is, tail
	// prints JSON lines, and verify asks the three processes (found
	// through gossip) and finds them in agreement.
	if out := admin(0, 0, "audit", "list", "--type", "signin", "--subject", user); !strings.Contains(out, "success") || !strings.Contains(out, "failure") || !strings.Contains(out, client) {
		t.Errorf("audit list of the sign-in and the wrong password:\n%s", out)
	}
	all := admin(2, 0, "audit", "tail", "--after", "0")
	var events []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(all), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("tail line %q: %v", line, err)
		}
		events = append(events, e)
	}
	detail := func(e map[string]any, k string) string {
		d, _ := e["detail"].(map[string]any)
		s, _ := d[k].(string)
		return s
	}
	for _, want := range []struct {
		what  string
		match func(e map[string]any) bool
	}{
		{"admin: the client created", func(e map[string]any) bool {
			return e["type"] == "admin" && detail(e, "action") == "POST /clients" && detail(e, "target") == client
		}},
		{"signin failure", func(e map[string]any) bool {
			return e["type"] == "signin" && e["outcome"] == "failure" && e["subject"] == user && detail(e, "reason") == "wrong_password"
		}},
		{"token success", func(e map[string]any) bool {
			return e["type"] == "token" && e["outcome"] == "success" && e["subject"] == user && e["client_id"] == client && e["sid"] != nil
		}},
		{"token replay", func(e map[string]any) bool {
			return e["type"] == "token" && e["outcome"] == "failure" && detail(e, "reason") == "replay"
		}},
		{"logout", func(e map[string]any) bool {
			return e["type"] == "logout" && e["subject"] == user && detail(e, "cause") != ""
		}},
	} {
		found := false
		for _, e := range events {
			if e["seq"] != nil && e["hash"] != nil && e["node"] != nil && e["time"] != nil {
				found = found || want.match(e)
			}
		}
		if !found {
			t.Errorf("no audit event for %s in:\n%s", want.what, all)
		}
	}
	for _, secret := range []string{password, "not the password", token, tok.AccessToken, loc.Query().Get("code")} {
		if strings.Contains(all, secret) {
			t.Errorf("a secret is in the audit trail: %.10s...", secret)
		}
	}
	if out := admin(1, 0, "audit", "verify"); !strings.Contains(out, "the nodes agree") || strings.Count(out, "  yes  ") != 3 {
		t.Errorf("audit verify:\n%s", out)
	}

	// Every node stops cleanly on SIGTERM.
	for i, cmd := range procs {
		if code := stop(t, cmd); code != 0 {
			t.Errorf("node %d exited %d after SIGTERM\n%s", i+1, code, logs(dir))
		}
	}
	// Nothing a node wrote (raft log, snapshots, state file) is readable
	// by anyone else, whatever the umask it was started under.
	for i := range nodes {
		filepath.WalkDir(filepath.Join(dir, fmt.Sprintf("data%d", i+1)), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Error(err)
				return nil
			}
			if info, err := d.Info(); err == nil && info.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s has mode %v, want no group or other access", path, info.Mode().Perm())
			}
			return nil
		})
	}
}

// oidcd runs the binary and fails unless it exits with want.
func oidcd(t testing.TB, bin string, want int, args ...string) string {
	t.Helper()
	out, code := oidcdCode(t, bin, args...)
	if code != want {
		t.Fatalf("oidcd %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
	}
	return out
}

// oidcdCode runs the binary (for at most 20 s) with an environment free of
// OIDCD_* variables and returns its output and exit code.
func oidcdCode(t testing.TB, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("oidcd %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), 0
}

// startNode starts `oidcd serve --config FILE` with env (as systemd's
// EnvironmentFile would), its output in logFile; the process is stopped at
// the end of the test.
func startNode(t testing.TB, bin, config string, env []string, logFile string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", config)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Dir(logFile)}, env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		f.Close()
	})
	return cmd
}

// stop sends SIGTERM and waits (at most 25 s) for the exit code.
func stop(t testing.TB, cmd *exec.Cmd) int {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(25 * time.Second):
		cmd.Process.Kill()
		<-done
		return -1
	}
}

// freePorts is n distinct 127.0.0.1 addresses free for both TCP and UDP
// (memberlist uses both on its gossip port), for the nodes a test runs.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", freeport.TCPAndUDP(t))
	}
	return out
}

// logs returns the tail of every node log of dir, for failure messages.
func logs(dir string) string {
	var sb strings.Builder
	for i := 1; i <= 3; i++ {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d.log", i)))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		fmt.Fprintf(&sb, "--- node %d\n%s\n", i, strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return sb.String()
}
