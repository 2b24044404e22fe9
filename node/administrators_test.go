package node_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/oidc"
	"github.com/oidcd/oidcd/testcluster"
)

// TestAdministratorsAcrossTheCluster: people and keys administer a
// three-node cluster, and a credential taken away through one node is
// refused on another by the very next request. A person signs in through
// the built-in client on node 1 (password and authenticator app, code
// flow with PKCE) and administers through node 2; an API key made on
// node 0 works on node 2; the grant removed through node 0 and the key
// through node 1 are refused on node 2 at once; and the break-glass token
// replaced through node 0 is refused on node 2 at once while its
// replacement works there.
func TestAdministratorsAcrossTheCluster(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	c.WaitLeader()
	call := func(i int, bearer, method, path string, body any, out any) int {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, c.URL(i)+"/admin/v1"+path, rd)
		req.Header.Set("Authorization", "Bearer "+bearer)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s on node %d: %v", method, path, i, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode/100 == 2 {
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatalf("%s %s: %v %s", method, path, err, raw)
			}
		}
		return resp.StatusCode
	}
	must := func(i int, method, path string, body any, want int, out any) {
		t.Helper()
		if got := call(i, testcluster.AdminToken, method, path, body, out); got != want {
			t.Fatalf("%s %s on node %d: got %d, want %d", method, path, i, got, want)
		}
	}

	const email, password = "ops@example.com", "a long and proper passphrase"
	var ops struct{ ID string }
	must(0, "POST", "/users", map[string]any{"email": email, "password": password}, http.StatusCreated, &ops)
	var totp struct{ Secret string }
	must(0, "POST", "/users/"+ops.ID+"/totp", nil, http.StatusCreated, &totp)
	var grant struct{ ID string }
	must(0, "POST", "/admins", map[string]any{"user_id": ops.ID, "role": "admin"}, http.StatusCreated, &grant)
	var key struct{ ID, Key string }
	must(0, "POST", "/api-keys", map[string]any{"name": "nightly", "role": "auditor", "expires_in": 3600}, http.StatusCreated, &key)

	token := signInAsAdministrator(t, c, 1, email, password, totp.Secret)
	if got := call(2, token, "GET", "/organizations", nil, nil); got != http.StatusOK {
		t.Fatalf("the person's token on node 2: got %d, want 200", got)
	}
	if got := call(2, key.Key, "GET", "/organizations", nil, nil); got != http.StatusOK {
		t.Fatalf("the API key on node 2: got %d, want 200", got)
	}
	if got := call(2, key.Key, "POST", "/organizations", map[string]any{"slug": "nope", "name": "Nope"}, nil); got != http.StatusForbidden {
		t.Errorf("the auditor key writing on node 2: got %d, want 403", got)
	}

	must(0, "DELETE", "/admins/"+grant.ID, nil, http.StatusNoContent, nil)
	if got := call(2, token, "GET", "/organizations", nil, nil); got != http.StatusForbidden {
		t.Errorf("the person's token on node 2 right after the grant went through node 0: got %d, want 403", got)
	}
	must(1, "DELETE", "/api-keys/"+key.ID, nil, http.StatusNoContent, nil)
	if got := call(2, key.Key, "GET", "/organizations", nil, nil); got != http.StatusUnauthorized {
		t.Errorf("the API key on node 2 right after it was deleted through node 1: got %d, want 401", got)
	}

	var replaced struct{ Token string }
	must(0, "POST", "/admin-token", nil, http.StatusCreated, &replaced)
	if got := call(2, testcluster.AdminToken, "POST", "/organizations", map[string]any{"slug": "old", "name": "Old"}, nil); got != http.StatusUnauthorized {
		t.Errorf("the old break-glass token on node 2 right after it was replaced through node 0: got %d, want 401", got)
	}
	if got := call(2, replaced.Token, "GET", "/organizations", nil, nil); got != http.StatusOK {
		t.Errorf("the new break-glass token on node 2: got %d, want 200", got)
	}
}

// signInAsAdministrator signs a person in through the built-in client on
// node i as the CLI does: the code flow with PKCE to a loopback redirect,
// the password and authenticator-app pages, and the code redeemed at the
// token endpoint. It returns the access token.
func signInAsAdministrator(t *testing.T, c *testcluster.Cluster, i int, email, password, totpSecret string) string {
	t.Helper()
	raw := make([]byte, 32)
	rand.Read(raw)
	verifier := base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(verifier))
	const redirect = "http://127.0.0.1:49152/callback"
	base := c.URL(i)
	q := url.Values{"client_id": {oidc.AdminClientID}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"state-0123456789"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	b := testcluster.NewBrowser(t)
	page := b.Follow(b.Get(base+"/authorize?"+q.Encode()), base)
	page = b.Follow(b.Submit(page, map[string]string{"email": email, "password": password}, "method", "password"), base)
	code, err := factor.TOTPCode(totpSecret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	page = b.Follow(b.Submit(page, map[string]string{"code": code}, "method", "otp"), base)
	loc, err := url.Parse(page.Location())
	if err != nil || !strings.HasPrefix(page.Location(), redirect+"?") || loc.Query().Get("code") == "" {
		t.Fatalf("want a redirect to %s with a code, got %d %q:\n%s", redirect, page.Status, page.Location(), page.Body)
	}
	resp, err := c.Client().PostForm(base+oidc.PathToken, url.Values{"grant_type": {"authorization_code"},
		"code": {loc.Query().Get("code")}, "redirect_uri": {redirect}, "client_id": {oidc.AdminClientID}, "code_verifier": {verifier}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	return tok.AccessToken
}
