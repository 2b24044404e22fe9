package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/internal/testkit/testclock"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// do sends an admin API request and decodes the JSON answer into out.
func do(t testing.TB, c *testcluster.Cluster, method, path, token string, body any, out any) *http.Response {
	t.Helper()
	return doOn(t, c, 0, method, path, token, body, out)
}

// doOn is do against node i.
func doOn(t testing.TB, c *testcluster.Cluster, i int, method, path, token string, body any, out any) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.URL(i)+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
	return resp
}

func TestRelyingPartyVerifiesTokenSignedByNode(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx := t.Context()
	provider, err := gooidc.NewProvider(ctx, c.URL(0)) // fetches discovery, checks issuer
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := c.Node(0).Keys().Sign(map[string]any{
		"iss": c.URL(0), "sub": "s1", "aud": []string{"app"}, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(),
	}, keys.TypJWT)
	if err != nil {
		t.Fatal(err)
	}
	idt, err := provider.Verifier(&gooidc.Config{ClientID: "app"}).Verify(ctx, string(tok))
	if err != nil {
		t.Fatalf("go-oidc rejected the node's token: %v", err)
	}
	if idt.Subject != "s1" {
		t.Fatalf("sub: got %q, want s1", idt.Subject)
	}

	resp, err := c.Client().Get(c.URL(0) + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("Cache-Control"); got != "public, max-age=300" {
		t.Fatalf("Cache-Control: got %q, want %q", got, "public, max-age=300")
	}
	set, err := jwk.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jwt.Parse(tok, jwt.WithKeySet(set)); err != nil {
		t.Fatalf("jwx against served JWKS: %v", err)
	}
}

func TestRestartKeepsDataAndSigningKey(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	tok := testcluster.AdminToken
	var org, user, client map[string]any
	do(t, c, "POST", "/admin/v1/organizations", tok, map[string]any{"slug": "acme", "name": "Acme"}, &org)
	do(t, c, "POST", "/admin/v1/users", tok, map[string]any{"email": "ann@example.com", "password": "correct horse"}, &user)
	resp := do(t, c, "POST", "/admin/v1/clients", tok, map[string]any{
		"name": "App", "redirect_uris": []string{"https://app.example/cb"}, "organization_id": org["id"],
	}, &client)
	if resp.StatusCode != http.StatusCreated || client["client_secret"] == "" {
		t.Fatalf("create client: %d %v", resp.StatusCode, client)
	}
	kidsBefore := kids(t, c)

	c.Restart(0)

	for _, path := range []string{
		"/admin/v1/organizations/" + org["id"].(string),
		"/admin/v1/users/" + user["id"].(string),
		"/admin/v1/clients/" + client["client_id"].(string),
	} {
		if resp := do(t, c, "GET", path, tok, nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s after restart: got %d, want 200", path, resp.StatusCode)
		}
	}
	if got := kids(t, c); strings.Join(got, ",") != strings.Join(kidsBefore, ",") || len(got) != 1 {
		t.Fatalf("kids after restart: got %v, want %v", got, kidsBefore)
	}
}

func kids(t *testing.T, c *testcluster.Cluster) []string {
	t.Helper()
	resp, err := c.Client().Get(c.URL(0) + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	json.NewDecoder(resp.Body).Decode(&set)
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.Kid)
	}
	return out
}

func TestGeneratedAdminTokenIsStoredOnceAndSurvivesRestart(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{GeneratedAdminToken: true})
	var token string
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(c.Node(0).AdminTokenFile()); err == nil {
			token = c.AdminTokenFromFile(0)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("admin token file not written")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fi, _ := os.Stat(c.Node(0).AdminTokenFile())
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("token file mode: got %o, want 600", got)
	}
	check := func(tok string, want int) {
		t.Helper()
		if resp := do(t, c, "GET", "/admin/v1/organizations", tok, nil, nil); resp.StatusCode != want {
			t.Fatalf("token %q: got %d, want %d", tok, resp.StatusCode, want)
		}
	}
	check(token, 200)
	check("wrong", 401)
	check("", 401)
	c.Restart(0)
	time.Sleep(200 * time.Millisecond) // give a (wrong) regeneration the chance to happen
	if got := c.AdminTokenFromFile(0); got != token {
		t.Fatalf("token regenerated on restart: got %q, want %q", got, token)
	}
	check(token, 200)
}

func TestHealthReadinessMetricsAndCorrelation(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	cases := []struct {
		path, corr string
		wantStatus int
		wantEcho   bool
		wantBody   string
	}{
		{"/healthz", "", 200, false, `"ok"`},
		{"/readyz", "trace-1", 200, true, `"ready"`},
		{"/metrics", "", 200, false, "oidcd_raft_is_leader 1"},
		{"/.well-known/openid-configuration", strings.Repeat("a", 128), 200, true, `"issuer"`},
		{"/.well-known/openid-configuration", strings.Repeat("a", 129), 200, false, `"issuer"`},
		{"/nope", "x", 404, true, ""},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest("GET", c.URL(0)+tc.path, nil)
		if tc.corr != "" {
			req.Header.Set("X-Correlation-ID", tc.corr)
		}
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantStatus {
			t.Errorf("%s: status got %d, want %d", tc.path, resp.StatusCode, tc.wantStatus)
		}
		got := resp.Header.Get("X-Correlation-ID")
		if got == "" {
			t.Errorf("%s: no X-Correlation-ID", tc.path)
		}
		if echoed := got == tc.corr; echoed != tc.wantEcho {
			t.Errorf("%s: correlation id got %q, sent %q (echo want %v)", tc.path, got, tc.corr, tc.wantEcho)
		}
		if !strings.Contains(string(body), tc.wantBody) {
			t.Errorf("%s: body lacks %q", tc.path, tc.wantBody)
		}
	}
}

func TestDemoSeed(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Demo: true})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if resp := do(t, c, "GET", "/admin/v1/clients/"+node.DemoClientID, testcluster.AdminToken, nil, nil); resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("demo client not created")
		}
		time.Sleep(20 * time.Millisecond)
	}
	u, err := c.Node(0).FSM().State().UserByEmail(node.DemoEmail)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Node(0).FSM().State().MembershipsOfUser(u.ID); err != nil {
		t.Fatal(err)
	}
}

func TestAdminCLIAgainstLiveNode(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	env := func(k string) string {
		if k == "OIDCD_ADMIN_TOKEN" {
			return testcluster.AdminToken
		}
		return ""
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Run(context.Background(), append([]string{"--addr", c.URL(0)}, args...), env, strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errOut := run("--json", "org", "create", "--slug", "cli-org", "--name", "CLI Org")
	if code != 0 {
		t.Fatalf("org create: exit %d: %s", code, errOut)
	}
	var org map[string]any
	json.Unmarshal([]byte(out), &org)
	if org["slug"] != "cli-org" {
		t.Fatalf("org create answer: %s", out)
	}
	if code, _, errOut := run("org", "create", "--slug", "cli-org", "--name", "Again"); code != 1 || !strings.Contains(errOut, "CONFLICT") {
		t.Fatalf("duplicate slug: exit %d, stderr %q; want 1 and CONFLICT", code, errOut)
	}
	if code, out, _ := run("keys", "list"); code != 0 || !strings.Contains(out, "active") {
		t.Fatalf("keys list: exit %d: %s", code, out)
	}
}

func TestKeyRotationThroughAdminAPIOnInjectedClock(t *testing.T) {
	clk := testclock.New(time.Now())
	c := testcluster.New(t, testcluster.Options{Now: clk.Now})
	first := kids(t, c)
	var rotated struct {
		Kid, State string
	}
	if resp := do(t, c, "POST", "/admin/v1/keys/rotate", testcluster.AdminToken, map[string]any{}, &rotated); resp.StatusCode != 201 || rotated.State != "next" {
		t.Fatalf("rotate: %d %+v", resp.StatusCode, rotated)
	}
	if got := kids(t, c); len(got) != 2 {
		t.Fatalf("JWKS after rotate: got %v, want both keys published", got)
	}
	signedKid := func() string {
		tok, err := c.Node(0).Keys().Sign(map[string]any{"sub": "x"}, keys.TypJWT)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := jws.Parse(tok)
		if err != nil {
			t.Fatal(err)
		}
		return msg.Signatures()[0].ProtectedHeaders().KeyID()
	}
	if got := signedKid(); got != first[0] {
		t.Fatalf("signing kid before activation: got %s, want %s", got, first[0])
	}
	clk.Add(11 * time.Minute)
	if got := signedKid(); got != rotated.Kid {
		t.Fatalf("signing kid after activation: got %s, want %s", got, rotated.Kid)
	}
	clk.Add(61 * time.Minute)
	if got := kids(t, c); len(got) != 1 || got[0] != rotated.Kid {
		t.Fatalf("JWKS after retention: got %v, want only %s", got, rotated.Kid)
	}
}
