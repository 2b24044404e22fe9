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

// TestEndSessionWithTheBuiltInClientStopsItsAdminTokens: a person signed
// in to the console or the CLI (the built-in client oidcd-admin) ends
// that SSO session through the end-session endpoint like any
// application's user: the admin token working on node 2 is refused there
// right after the logout through node 1, a post-logout redirect is
// refused (the client registers none), and a second token of another
// sign-in of the same person still works.
func TestEndSessionWithTheBuiltInClientStopsItsAdminTokens(t *testing.T) {
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
	const email, password = "ops@example.com", "a long and proper passphrase"
	var ops, totp struct{ ID, Secret string }
	if got := call(0, testcluster.AdminToken, "POST", "/users", map[string]any{"email": email, "password": password}, &ops); got != http.StatusCreated {
		t.Fatalf("POST /users: %d", got)
	}
	if got := call(0, testcluster.AdminToken, "POST", "/users/"+ops.ID+"/totp", nil, &totp); got != http.StatusCreated {
		t.Fatalf("POST totp: %d", got)
	}
	if got := call(0, testcluster.AdminToken, "POST", "/admins", map[string]any{"user_id": ops.ID, "role": "admin"}, nil); got != http.StatusCreated {
		t.Fatalf("POST /admins: %d", got)
	}

	browser, access, idToken := signInThroughTheBuiltInClient(t, c, 1, email, password, totp.Secret, time.Now())
	// Another browser, with the next step's code (a code works once).
	_, otherAccess, _ := signInThroughTheBuiltInClient(t, c, 0, email, password, totp.Secret, time.Now().Add(30*time.Second))
	for _, tok := range []string{access, otherAccess} {
		if got := call(2, tok, "GET", "/organizations", nil, nil); got != http.StatusOK {
			t.Fatalf("a person's token on node 2 before the logout: got %d, want 200", got)
		}
	}

	// A post-logout redirect of any kind is refused and ends nothing.
	for _, uri := range []string{c.URL(1) + oidc.AdminCallbackPath, "http://127.0.0.1:49152/callback", "https://evil.example/"} {
		page := browser.Get(c.URL(1) + "/logout?" + url.Values{"id_token_hint": {idToken}, "post_logout_redirect_uri": {uri}}.Encode())
		if page.Status != http.StatusBadRequest || page.Location() != "" {
			t.Fatalf("logout redirecting to %s: got %d %q, want 400 without a Location", uri, page.Status, page.Location())
		}
	}
	if got := call(2, access, "GET", "/organizations", nil, nil); got != http.StatusOK {
		t.Fatalf("the token after a refused logout: got %d, want 200", got)
	}

	page := browser.Get(c.URL(1) + "/logout?" + url.Values{"id_token_hint": {idToken}, "client_id": {oidc.AdminClientID}}.Encode())
	if page.Status != http.StatusOK || !strings.Contains(page.Body, "You are signed out.") {
		t.Fatalf("GET /logout with the built-in client's ID token: got %d, want 200 and the signed-out page:\n%s", page.Status, page.Body)
	}
	if got := call(2, access, "GET", "/organizations", nil, nil); got != http.StatusUnauthorized {
		t.Errorf("the token of the ended session on node 2 right after the logout through node 1: got %d, want 401", got)
	}
	if got := call(0, access, "POST", "/organizations", map[string]any{"slug": "after", "name": "After"}, nil); got != http.StatusUnauthorized {
		t.Errorf("a write with the token of the ended session on node 0: got %d, want 401", got)
	}
	if got := call(2, otherAccess, "GET", "/organizations", nil, nil); got != http.StatusOK {
		t.Errorf("the token of the person's other session: got %d, want 200", got)
	}
}

// signInThroughTheBuiltInClient signs a person in through oidcd-admin on
// node i in a fresh browser (the code flow with PKCE to a loopback
// redirect, password and the authenticator app's code at codeAt) and
// returns the browser, the access token and the ID token.
func signInThroughTheBuiltInClient(t *testing.T, c *testcluster.Cluster, i int, email, password, totpSecret string, codeAt time.Time) (*testcluster.Browser, string, string) {
	t.Helper()
	raw := make([]byte, 32)
	rand.Read(raw)
	verifier := base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(verifier))
	const redirect = "http://127.0.0.1:49153/callback"
	base := c.URL(i)
	q := url.Values{"client_id": {oidc.AdminClientID}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"state-0123456789"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	b := testcluster.NewBrowser(t)
	page := b.Follow(b.Get(base+"/authorize?"+q.Encode()), base)
	page = b.Follow(b.Submit(page, map[string]string{"email": email, "password": password}, "method", "password"), base)
	code, err := factor.TOTPCode(totpSecret, codeAt)
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
		IDToken     string `json:"id_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK || tok.AccessToken == "" || tok.IDToken == "" {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	return b, tok.AccessToken, tok.IDToken
}
