package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

type fakeKeys struct{ rotated []admin.KeyInfo }

func (k *fakeKeys) Rotate(_ context.Context, immediate bool) (admin.KeyInfo, error) {
	state := "next"
	if immediate {
		state = "active"
	}
	ki := admin.KeyInfo{Kid: "kid-2", State: state, CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	k.rotated = append(k.rotated, ki)
	return ki, nil
}

func (k *fakeKeys) List() ([]admin.KeyInfo, error) { return k.rotated, nil }

// fakeCluster backs up the FSM of the test; Restore records what it got
// and answers restoreErr.
type fakeCluster struct {
	fsm        *fsm.FSM
	backupErr  error
	restored   []byte
	restoreErr error
}

func (c *fakeCluster) Backup(_ context.Context, w io.Writer) error {
	if c.backupErr != nil {
		return c.backupErr
	}
	_, err := c.fsm.WriteTo(w)
	return err
}

func (c *fakeCluster) Restore(_ context.Context, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if c.restoreErr != nil {
		return c.restoreErr
	}
	c.restored = b
	return nil
}

func (*fakeCluster) Status(context.Context) (admin.ClusterStatus, error) {
	return admin.ClusterStatus{Leader: "n1", Members: []admin.ClusterMember{
		{ID: "n1", RaftAddr: "127.0.0.1:8300", GossipAddr: "127.0.0.1:8301", HTTPAddr: "127.0.0.1:8080", State: "alive", Voter: true},
	}}, nil
}

func (*fakeCluster) RemoveNode(context.Context, string) error     { return nil }
func (*fakeCluster) SetVoter(context.Context, string, bool) error { return nil }

// cliHarness runs `oidcd admin` against a real admin API over a fresh FSM, with
// the token in a token file as `oidcd serve` leaves it.
type cliHarness struct {
	t       *testing.T
	env     map[string]string
	file    string
	cluster *fakeCluster
	state   *fsm.State
}

func newCLI(t *testing.T) *cliHarness {
	t.Helper()
	return newCLIWith(t, nil)
}

// newCLIWith is newCLI with the admin API wrapped by wrap (nil: as it is).
func newCLIWith(t *testing.T, wrap func(http.Handler) http.Handler) *cliHarness {
	t.Helper()
	return newCLIConfig(t, wrap, nil)
}

// newCLIConfig is newCLIWith with the admin API's configuration changed
// by configure (nil: as it is).
func newCLIConfig(t *testing.T, wrap func(http.Handler) http.Handler, configure func(*admin.Config)) *cliHarness {
	t.Helper()
	app := fsmtest.New(t)
	cluster := &fakeCluster{fsm: app.FSM}
	token := admin.GenerateToken()
	cfg := admin.Config{
		State:     app.State(),
		Applier:   app,
		Keys:      &fakeKeys{},
		Cluster:   cluster,
		Hasher:    password.New(password.Params{Memory: 64, Time: 1, Threads: 1}, 2),
		TokenHash: func() string { return admin.HashToken(token) },
	}
	if configure != nil {
		configure(&cfg)
	}
	h := admin.New(cfg)
	h = httpx.Correlation(h)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &cliHarness{t: t, env: map[string]string{"OIDCD_ADDR": strings.TrimPrefix(srv.URL, "http://")}, file: file, cluster: cluster, state: app.State()}
}

// run runs one command and fails the test unless it exits with want.
func (c *cliHarness) run(want int, stdin string, args ...string) (stdout, stderr string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"--token-file", c.file}, args...)
	code := cli.Run(context.Background(), args, func(k string) string { return c.env[k] }, strings.NewReader(stdin), &out, &errb)
	if code != want {
		c.t.Fatalf("%q: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// field runs a --json command and returns the named field of its answer.
func (c *cliHarness) field(name, stdin string, args ...string) string {
	c.t.Helper()
	out, _ := c.run(cli.ExitOK, stdin, append(args, "--json")...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		c.t.Fatalf("%q: output is not JSON: %v\n%s", args, err, out)
	}
	v, _ := m[name].(string)
	if v == "" {
		c.t.Fatalf("%q: no %s in %s", args, name, out)
	}
	return v
}

func contains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s %q does not contain %q", what, got, w)
		}
	}
}

// TestAgainstAdminAPI drives the real admin API of package admin through
// the CLI: the requests the CLI builds are the ones the server accepts.
func TestAgainstAdminAPI(t *testing.T) {
	c := newCLI(t)

	org := c.field("id", "", "org", "create", "--slug", "acme", "--name", "Acme Inc.")
	out, _ := c.run(cli.ExitOK, "", "org", "list")
	contains(t, "org list", out, "ID", "SLUG", org, "acme", "Acme Inc.", "active", "page 1/1, 1 item\n")

	user := c.field("id", "correct horse battery staple\n", "user", "create", "--email", "ann@example.com", "--email-verified", "--password-stdin")
	_ = c.field("id", "", "user", "update", user, "--phone", "+15551234567")
	out, _ = c.run(cli.ExitOK, "", "user", "get", user)
	contains(t, "user get", out, "ann@example.com", "true", "+15551234567")
	out, _ = c.run(cli.ExitOK, "", "user", "factors", user)
	contains(t, "user factors", out, "authenticator app", "false", "passkeys")
	out, _ = c.run(cli.ExitOK, "", "user", "unlock", user)
	contains(t, "user unlock", out, "removed lockouts of user "+user)
	out, _ = c.run(cli.ExitOK, "", "lockout", "list")
	contains(t, "lockout list", out, "no lockouts")
	_, errOut := c.run(cli.ExitServerError, "", "lockout", "clear", "pw:nobody@example.com")
	contains(t, "lockout clear of nothing", errOut, "error: NOT_FOUND: ")

	m := c.field("id", "", "membership", "create", "--user", user, "--org", org)
	out, _ = c.run(cli.ExitOK, "", "membership", "update", m, "--status", "suspended")
	contains(t, "membership update", out, m, "suspended")
	out, _ = c.run(cli.ExitOK, "", "membership", "list", "--user", user)
	contains(t, "membership list", out, m, user, org, "suspended", "page 1/1, 1 item")

	out, errOut = c.run(cli.ExitOK, "", "client", "create", "--name", "Portal", "--org", org,
		"--redirect-uri", "https://portal.example.com/cb", "--scope", "openid,email", "--access-token-ttl", "15m", "--client-id", "portal")
	contains(t, "client create", out, "client_id           portal", "access_token_ttl    900", "\nclient_secret: ")
	contains(t, "client create stderr", errOut, "shown only this once")
	out, _ = c.run(cli.ExitOK, "", "client", "update", "portal", "--suspended", "--scope", "openid", "--json")
	contains(t, "client update", out, `"suspended": true`, `"scopes": [`+"\n"+`    "openid"`+"\n  ]")
	out, errOut = c.run(cli.ExitOK, "", "client", "get", "portal")
	if strings.Contains(out, "client_secret") || errOut != "" {
		t.Errorf("client get shows a secret: %q %q", out, errOut)
	}
	out, _ = c.run(cli.ExitOK, "", "client", "delete", "portal")
	contains(t, "client delete", out, "deleted client portal")

	_, errOut = c.run(cli.ExitServerError, "", "client", "get", "portal")
	contains(t, "client get after delete", errOut, "error: NOT_FOUND: ", "(correlation id ")
	_, errOut = c.run(cli.ExitServerError, "", "org", "create", "--slug", "Not A Slug", "--name", "x")
	contains(t, "bad slug", errOut, "error: VALIDATION_ERROR: ", "\n  slug: ")
	_, errOut = c.run(cli.ExitServerError, "", "org", "create", "--slug", "acme", "--name", "Again")
	contains(t, "taken slug", errOut, "error: CONFLICT: ")

	out, _ = c.run(cli.ExitOK, "", "keys", "rotate", "--immediate")
	contains(t, "keys rotate", out, "kid-2", "active")
	out, _ = c.run(cli.ExitOK, "", "cluster", "status")
	contains(t, "cluster status", out, "leader: n1", "127.0.0.1:8300")
	out, _ = c.run(cli.ExitOK, "", "status")
	contains(t, "status", out, "leader", "n1", "signing keys", "1 active", "pending back-channel deliveries", "127.0.0.1:8300")

	out, _ = c.run(cli.ExitOK, "", "membership", "delete", m)
	contains(t, "membership delete", out, "deleted membership "+m)
	out, _ = c.run(cli.ExitOK, "", "user", "delete", user)
	contains(t, "user delete", out, "deleted user "+user)
	out, _ = c.run(cli.ExitOK, "", "org", "delete", org)
	contains(t, "org delete", out, "deleted organization "+org)

	c.file = filepath.Join(t.TempDir(), "wrong-token")
	if err := os.WriteFile(c.file, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut = c.run(cli.ExitAuth, "", "org", "list")
	contains(t, "wrong token", errOut, "error: UNAUTHORIZED: ")
}
