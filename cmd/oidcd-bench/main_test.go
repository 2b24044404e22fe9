package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

func TestFlagErrors(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte("tok-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--admin-token", "t", "--scenario", "jwks"}
	cases := []struct {
		name string
		args []string
		want string // "" = accepted
	}{
		{"defaults", base, ""},
		{"token from file", []string{"--admin-token-file", tokenFile, "--scenario", "jwks"}, ""},
		{"missing token file", []string{"--admin-token-file", filepath.Join(t.TempDir(), "none"), "--scenario", "jwks"}, "no admin token"},
		{"no scenario", []string{"--admin-token", "t"}, "--scenario"},
		{"unknown scenario", []string{"--admin-token", "t", "--scenario", "login"}, "want one of"},
		{"remote target", append([]string{"--target", "http://203.0.113.7:8080"}, base...), "not a loopback address"},
		{"one remote among loopback", append([]string{"--target", "http://127.0.0.1:1,http://db.internal:8080"}, base...), "not a loopback address"},
		{"unbounded", append([]string{"--duration", "0"}, base...), "must be bounded"},
		{"requests only", append([]string{"--duration", "0", "--requests", "10"}, base...), ""},
		{"zero workers", append([]string{"--concurrency", "0"}, base...), "--concurrency"},
		{"data dir without soak", append([]string{"--data-dir", t.TempDir()}, base...), "go with --soak"},
		{"soak without figures", append([]string{"--soak"}, base...), "--soak needs"},
		{"soak with a missing dir", append([]string{"--soak", "--data-dir", filepath.Join(t.TempDir(), "none")}, base...), "--data-dir"},
		{"soak on this process", append([]string{"--soak", "--pid", fmt.Sprint(os.Getpid()), "--data-dir", t.TempDir()}, base...), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseFlags(c.args, io.Discard)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error about %q", err, c.want)
			}
			if c.name == "defaults" && (cfg.targets[0] != defaultTarget || cfg.issuer != defaultTarget || cfg.concurrency != 32 || cfg.users != 16) {
				t.Errorf("defaults: %+v", cfg)
			}
			if c.name == "token from file" && cfg.adminToken != "tok-from-file" {
				t.Errorf("token: got %q, want %q", cfg.adminToken, "tok-from-file")
			}
		})
	}
	if code := run(context.Background(), append([]string{"--target", "http://203.0.113.7"}, base...), io.Discard, io.Discard); code != 2 {
		t.Errorf("run with a remote target: exit %d, want 2", code)
	}
}

// benchJSON runs the tool and decodes its JSON report.
func benchJSON(t *testing.T, args ...string) report {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append(args, "--json"), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	return rep
}

func TestScenariosAgainstARealNode(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	common := []string{"--target", c.URL(0), "--admin-token", testcluster.AdminToken, "--concurrency", "2", "--users", "3", "--duration", "1s"}
	for _, name := range scenarioNames {
		t.Run(name, func(t *testing.T) {
			rep := benchJSON(t, append(common, "--scenario", name)...)
			if rep.Ops == 0 || len(rep.Errors) != 0 {
				t.Fatalf("ops %d, errors %v; want ops > 0 and no error", rep.Ops, rep.Errors)
			}
			if rep.Scenario != name || rep.Concurrency != 2 || rep.DurationS < 0.9 || rep.OpsPerS <= 0 || rep.Latency.Max < rep.Latency.P50 {
				t.Errorf("report: %+v", rep)
			}
			if name == mixedName && len(rep.Scenarios) != len(mixedWeights) {
				t.Errorf("mixed: %d scenarios reported, want %d", len(rep.Scenarios), len(mixedWeights))
			}
			if name == federatedName {
				checkFederated(t, c, rep)
			}
		})
	}
	t.Run("a grown store", func(t *testing.T) {
		rep := benchJSON(t, append(common, "--scenario", "userinfo", "--preload", "1500")...)
		if rep.Ops == 0 || len(rep.Errors) != 0 {
			t.Fatalf("ops %d, errors %v; want ops > 0 and no error", rep.Ops, rep.Errors)
		}
		var page struct {
			Pagination struct {
				TotalItems int `json:"total_items"`
			} `json:"pagination"`
		}
		a := &admin{base: c.URL(0) + "/admin/v1", token: testcluster.AdminToken, hc: http.DefaultClient}
		if err := a.do(context.Background(), "GET", "/users?page_size=1", nil, &page, 200); err != nil {
			t.Fatal(err)
		}
		if page.Pagination.TotalItems < 1500 {
			t.Errorf("%d people in the store after a preload of 1,500", page.Pagination.TotalItems)
		}
	})
	t.Run("request count", func(t *testing.T) {
		rep := benchJSON(t, append(common, "--scenario", "userinfo", "--duration", "0", "--requests", "25")...)
		if rep.Ops != 25 || len(rep.Errors) != 0 {
			t.Fatalf("ops %d, errors %v; want exactly 25 and no error", rep.Ops, rep.Errors)
		}
	})
	t.Run("cleaned up", func(t *testing.T) {
		req, _ := http.NewRequest("GET", c.URL(0)+"/admin/v1/organizations?page_size=100", nil)
		req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list struct {
			Data []struct{ Slug, Status string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, o := range list.Data {
			if strings.HasPrefix(o.Slug, "bench-") {
				seen++
				if o.Status != "deleted" {
					t.Errorf("organization %s left %s, want deleted", o.Slug, o.Status)
				}
			}
		}
		if seen == 0 {
			t.Error("no bench- organization listed")
		}
	})
}

// checkFederated checks federated-signin's split and that the run took
// its identity provider away again: while it is there the people's
// passwords typed here go to the upstream.
func checkFederated(t *testing.T, c *testcluster.Cluster, rep report) {
	t.Helper()
	f := rep.Federation
	if f == nil {
		t.Fatal("no federation figures in the report")
	}
	if f.Warm.People != 3 || f.Warm.Linked != 3 || f.LinksMadeInRun != 0 || f.Ops != rep.Ops {
		t.Errorf("links: %+v; want 3 people linked before the run, none during it, %d ops", f, rep.Ops)
	}
	if !f.WaitKnown || f.Exchanges < f.Ops || f.UpstreamWaitMs <= 0 || f.UpstreamBrowserMs <= 0 || f.UpstreamRequests < 2 || f.DownstreamRequests < 2 {
		t.Errorf("split: %+v; want the downstream's wait on the upstream and the browser's requests on both sides", f)
	}
	if f.UpstreamMs+f.OwnMs < f.TotalMs-0.01 || f.UpstreamMs+f.OwnMs > f.TotalMs+0.01 {
		t.Errorf("split: the upstream's %v and oidcd's own %v do not add up to %v", f.UpstreamMs, f.OwnMs, f.TotalMs)
	}
	var ips struct {
		Data []struct{ Slug string } `json:"data"`
	}
	a := &admin{base: c.URL(0) + "/admin/v1", token: testcluster.AdminToken, hc: http.DefaultClient}
	if err := a.do(context.Background(), "GET", "/identity-providers", nil, &ips, 200); err != nil {
		t.Fatal(err)
	}
	if len(ips.Data) != 0 {
		t.Errorf("identity providers left after the run: %+v", ips.Data)
	}
}

// TestSpreadOverACluster: three targets behind an issuer that is none of
// them (the test balancer), sign-ins on one node and exchanges on the next.
func TestSpreadOverACluster(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	targets := strings.Join([]string{c.URL(0), c.URL(1), c.URL(2)}, ",")
	// federated-signin: the upstream sends the browser back to the issuer,
	// the balancer, and the downstream's cookie set on one node goes to the next.
	for _, name := range []string{"silent-signin", "introspect", federatedName} {
		t.Run(name, func(t *testing.T) {
			rep := benchJSON(t, "--target", targets, "--issuer", c.Issuer(), "--admin-token", testcluster.AdminToken,
				"--concurrency", "2", "--users", "2", "--duration", "1s", "--scenario", name)
			if rep.Ops == 0 || len(rep.Errors) != 0 || len(rep.Targets) != 3 {
				t.Fatalf("ops %d, errors %v, targets %v; want ops > 0, no error, 3 targets", rep.Ops, rep.Errors, rep.Targets)
			}
		})
	}
	t.Run("wrong issuer", func(t *testing.T) {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"--target", c.URL(0), "--admin-token", testcluster.AdminToken,
			"--scenario", "jwks", "--duration", "1s"}, io.Discard, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "pass --issuer") {
			t.Errorf("exit %d, %s; want 1 and a hint to pass --issuer", code, stderr.String())
		}
	})
}
