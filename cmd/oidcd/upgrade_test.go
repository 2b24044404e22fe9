package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/testcluster"
)

// previousRelease reads the newest release of ../../RELEASES and builds
// it with git worktree; it skips the test, saying why, where it cannot
// (a shallow clone, no git).
func previousRelease(t *testing.T) (version, bin string) {
	t.Helper()
	f, err := os.Open("../../RELEASES")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var commit string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 2 {
			version, commit = fields[0], fields[1]
		}
	}
	if commit == "" {
		t.Fatal("RELEASES names no release")
	}
	if out, err := exec.Command("git", "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("release %s (%s) is not in this clone (a shallow clone?): %v %s; fetch the history to run the upgrade test", version, commit, err, out)
	}
	wt := filepath.Join(t.TempDir(), "release")
	if out, err := exec.Command("git", "worktree", "add", "--detach", wt, commit).CombinedOutput(); err != nil {
		t.Skipf("git worktree add for %s: %v %s", version, err, out)
	}
	t.Cleanup(func() { exec.Command("git", "worktree", "remove", "--force", wt).Run() })
	bin = filepath.Join(t.TempDir(), "oidcd-"+version)
	build := exec.Command("go", "build", "-o", bin, "./cmd/oidcd")
	build.Dir = wt
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", version, err, out)
	}
	return version, bin
}

// balancer round-robins over the nodes that answer, as the site's load
// balancer does (a node being replaced answers nothing).
type upgradeBalancer struct {
	next    atomic.Uint64
	targets []*url.URL
}

func (b *upgradeBalancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := len(b.targets)
	start := int(b.next.Add(1))
	for k := 0; k < n; k++ {
		target := b.targets[(start+k)%n]
		resp, err := http.Get(target.String() + "/healthz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
		return
	}
	http.Error(w, "no node", http.StatusBadGateway)
}

// TestRollingUpgradeFromThePreviousRelease: three nodes of the previous
// release (RELEASES) serve sign-ins under load through a balancer; each
// node in turn is stopped and started again from this tree on the same
// data. The sign-ins go on; every organization acknowledged at any time is
// on every node at the end; the people signed in before the upgrade keep
// their sessions (a silent sign-in works); and the new version's writes
// (an import) work once every node runs it.
func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two versions and starts six processes")
	}
	version, oldBin := previousRelease(t)
	newBin := builtBinary(t)
	dir := t.TempDir()
	token := strings.TrimSpace(oidcd(t, newBin, 0, "keygen"))
	key := strings.TrimSpace(oidcd(t, newBin, 0, "keygen"))
	secrets := []string{"OIDCD_CLUSTER_KEY=" + key, "OIDCD_ADMIN_TOKEN=" + token}
	ports := freePorts(t, 10)
	lb := &upgradeBalancer{}
	issuer := "http://" + ports[9]
	srv := &http.Server{Addr: ports[9], Handler: lb}
	go srv.ListenAndServe()
	t.Cleanup(func() { srv.Close() })
	var configs [3]string
	var https [3]string
	for i := range 3 {
		https[i] = ports[3*i]
		u, _ := url.Parse("http://" + ports[3*i])
		lb.targets = append(lb.targets, u)
		var join []string
		for j := range 3 {
			if j != i {
				join = append(join, fmt.Sprintf("%q", ports[3*j+2]))
			}
		}
		configs[i] = filepath.Join(dir, fmt.Sprintf("node%d.toml", i))
		os.WriteFile(configs[i], []byte(fmt.Sprintf("issuer = %q\nhttp-addr = %q\nraft-addr = %q\ngossip-addr = %q\ndata-dir = %q\nbootstrap-expect = 3\njoin = [%s]\nrate-limit = \"off\"\n",
			issuer, ports[3*i], ports[3*i+1], ports[3*i+2], filepath.Join(dir, fmt.Sprintf("data%d", i)), strings.Join(join, ", "))), 0o644)
	}
	var procs [3]*exec.Cmd
	for i := range 3 {
		procs[i] = startNode(t, oldBin, configs[i], secrets, filepath.Join(dir, fmt.Sprintf("node%d-%s.log", i, version)))
	}
	ready := func(i int) bool {
		resp, err := http.Get("http://" + https[i] + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	waitReady := func(i int) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for !ready(i) {
			if time.Now().After(deadline) {
				t.Fatalf("node %d not ready within 45 s\n%s", i, logs(dir))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for i := range 3 {
		waitReady(i)
	}
	admin := func(method, path string, body any) (int, map[string]any) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, issuer+"/admin/v1"+path, strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	const cb = "http://127.0.0.1:9/callback"
	_, org := admin("POST", "/organizations", map[string]any{"slug": "acme", "name": "Acme"})
	_, user := admin("POST", "/users", map[string]any{"email": "ann@example.com", "email_verified": true, "password": "correct horse battery"})
	admin("POST", "/memberships", map[string]any{"user_id": user["id"], "org_id": org["id"]})
	_, cl := admin("POST", "/clients", map[string]any{"name": "SPA", "type": "public", "redirect_uris": []string{cb}, "organization_id": org["id"], "skip_consent": true})
	if cl["client_id"] == nil {
		t.Fatalf("provisioning on %s failed\n%s", version, logs(dir))
	}
	prov, err := gooidc.NewProvider(context.Background(), issuer)
	if err != nil {
		t.Fatal(err)
	}
	rp := oauth2.Config{ClientID: cl["client_id"].(string), Endpoint: prov.Endpoint(), RedirectURL: cb, Scopes: []string{"openid"}}
	verifier := prov.Verifier(&gooidc.Config{ClientID: rp.ClientID})
	signIn := func(b *testcluster.Browser) error {
		pkce := oauth2.GenerateVerifier()
		page := b.Follow(b.Get(rp.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce), gooidc.Nonce("nonce-0123456789"))), issuer)
		if strings.Contains(page.Body, `name="password"`) {
			page = b.Follow(b.Submit(page, map[string]string{"email": "ann@example.com", "password": "correct horse battery"}, "method", "password"), issuer)
		}
		loc, err := url.Parse(page.Location())
		if err != nil || loc.Query().Get("code") == "" {
			return fmt.Errorf("no code: %d", page.Status)
		}
		tok, err := rp.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkce))
		if err != nil {
			return err
		}
		_, err = verifier.Verify(context.Background(), tok.Extra("id_token").(string))
		return err
	}
	before := testcluster.NewBrowser(t)
	if err := signIn(before); err != nil {
		t.Fatalf("sign-in on %s: %v", version, err)
	}

	// Load: sign-ins and organization writes until the upgrade ends.
	var mu sync.Mutex
	var acked []string
	var signIns, failures atomic.Int64
	loadDone := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-loadDone:
					return
				default:
				}
				if err := signIn(testcluster.NewBrowser(t)); err == nil {
					signIns.Add(1)
				} else {
					failures.Add(1)
				}
				slug := fmt.Sprintf("w%d-%d", w, i)
				if status, _ := admin("POST", "/organizations", map[string]any{"slug": slug, "name": slug}); status == 201 {
					mu.Lock()
					acked = append(acked, slug)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range 3 {
		time.Sleep(time.Second)
		if code := stop(t, procs[i]); code != 0 {
			t.Errorf("node %d (%s) exited %d on SIGTERM", i, version, code)
		}
		procs[i] = startNode(t, newBin, configs[i], secrets, filepath.Join(dir, fmt.Sprintf("node%d-new.log", i)))
		waitReady(i)
		t.Logf("node %d upgraded", i)
	}
	time.Sleep(time.Second)
	close(loadDone)
	wg.Wait()
	t.Logf("during the upgrade: %d sign-ins, %d failed attempts, %d organizations acknowledged", signIns.Load(), failures.Load(), len(acked))
	if signIns.Load() == 0 {
		t.Fatal("no sign-in succeeded during the upgrade")
	}
	// Every acknowledged organization is on every node (admin reads are
	// local: a node may still be applying the last writes, so it gets a
	// few seconds).
	orgsOn := func(i int) map[string]bool {
		req, _ := http.NewRequest("GET", "http://"+https[i]+"/admin/v1/organizations?page_size=100", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		seen := map[string]bool{}
		for page := 1; ; page++ {
			req.URL.RawQuery = fmt.Sprintf("page_size=100&page=%d", page)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var list struct {
				Data []struct {
					Slug string `json:"slug"`
				} `json:"data"`
				Pagination struct {
					HasNext bool `json:"has_next"`
				} `json:"pagination"`
			}
			json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			for _, o := range list.Data {
				seen[o.Slug] = true
			}
			if !list.Pagination.HasNext {
				break
			}
		}
		return seen
	}
	for i := range 3 {
		deadline := time.Now().Add(15 * time.Second)
		for {
			seen := orgsOn(i)
			missing := ""
			for _, slug := range acked {
				if !seen[slug] {
					missing = slug
					break
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d lost the acknowledged organization %s", i, missing)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The session opened before the upgrade still signs in silently.
	if err := signIn(before); err != nil {
		t.Fatalf("the session from %s after the upgrade: %v", version, err)
	}
	// A write the new version brings (an import) works now.
	if status, out := admin("POST", "/users/import", map[string]any{"users": []map[string]any{{"email": "new@example.com"}}}); status != 200 || out["created"] != float64(1) {
		t.Fatalf("import after the upgrade: %d %v", status, out)
	}
}
