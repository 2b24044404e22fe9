package node_test

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// importedHashes returns n hashes of secret per scheme as other providers
// write them: bcrypt (Dex), PBKDF2-SHA256 and -SHA512 in a Keycloak
// export's base64, and argon2id of a lower cost than the node's.
func importedHashes(t testing.TB, secret string, n int) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	weak := password.New(password.Params{Memory: 32, Time: 1, Threads: 1}, 1)
	for range n {
		b, err := bcrypt.GenerateFromPassword([]byte(secret), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		out[password.SchemeBcrypt] = append(out[password.SchemeBcrypt], string(b))
		for scheme, alg := range map[string]string{password.SchemePBKDF2SHA256: "sha256", password.SchemePBKDF2SHA512: "sha512"} {
			salt := make([]byte, 16)
			rand.Read(salt)
			var key []byte
			if alg == "sha256" {
				key, _ = pbkdf2.Key(sha256.New, secret, salt, 1000, 32)
			} else {
				key, _ = pbkdf2.Key(sha512.New, secret, salt, 1000, 64)
			}
			out[scheme] = append(out[scheme], fmt.Sprintf("$pbkdf2-%s$i=1000$%s$%s", alg,
				base64.StdEncoding.EncodeToString(salt), base64.StdEncoding.EncodeToString(key)))
		}
		h, err := weak.Hash(context.Background(), secret)
		if err != nil {
			t.Fatal(err)
		}
		out[password.SchemeArgon2id] = append(out[password.SchemeArgon2id], h)
	}
	return out
}

// TestImportTenThousandThenSignIn: an operator imports 10,000 people with
// mixed bcrypt, PBKDF2 and argon2id hashes through `oidcd admin user
// import` against a follower of three nodes; one person of each scheme then
// signs in through go-oidc with their old password, and their hash is the
// node's argon2id afterwards, on every node; a second sign-in works with
// the new hash.
func TestImportTenThousandThenSignIn(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 10,000 people")
	}
	// Eight sign-ins of one app from one address: more than the
	// default token rate (5 a minute per client and address) allows.
	c := testcluster.New(t, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "100/60s" }})
	w := provision(t, c)
	const total = 10_000
	const secret = "imported people keep their passwords"
	schemes := []string{password.SchemeBcrypt, password.SchemePBKDF2SHA256, password.SchemePBKDF2SHA512, password.SchemeArgon2id}
	hashes := importedHashes(t, secret, 8)

	var file bytes.Buffer
	cw := csv.NewWriter(&file) // quotes the argon2id hashes, which hold commas
	cw.Write([]string{"email", "email_verified", "password_hash", "organizations"})
	for i := range total {
		scheme := schemes[i%len(schemes)]
		cw.Write([]string{fmt.Sprintf("person%05d@example.com", i), "true", hashes[scheme][i%8], w.orgA + ";" + w.orgB})
	}
	cw.Flush()
	path := filepath.Join(t.TempDir(), "people.csv")
	if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	follower := (c.Leader() + 1) % 3
	env := func(k string) string {
		if k == "OIDCD_ADMIN_TOKEN" {
			return testcluster.AdminToken
		}
		return ""
	}
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), []string{"--addr", c.URL(follower), "user", "import", path, "--batch", "1000"},
		env, strings.NewReader(""), &out, &errOut)
	if code != cli.ExitOK || !strings.Contains(out.String(), fmt.Sprintf("imported %d rows: %d created, 0 already there, 0 failed", total, total)) {
		t.Fatalf("import: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "5000/10000 rows (50%)") {
		t.Errorf("no progress line in %q", errOut.String())
	}
	var page struct {
		Pagination struct {
			TotalItems int `json:"total_items"`
		} `json:"pagination"`
	}
	// On the node that took the import: it answered each batch after its
	// own apply (another node may still be applying the last one).
	doOn(t, c, follower, "GET", "/admin/v1/users?page_size=1", testcluster.AdminToken, nil, &page)
	if page.Pagination.TotalItems != total+1 {
		t.Fatalf("users: %d, want %d imported and the provisioned one", page.Pagination.TotalItems, total+1)
	}

	ctx := context.Background()
	r := newRP(t, c, w.multiID, "", w.cb, gooidc.ScopeOpenID)
	for i, scheme := range schemes {
		email := fmt.Sprintf("person%05d@example.com", i) // person i has schemes[i]
		uid := userByEmail(t, c, email)
		if got := passwordScheme(t, c, 0, uid); got != scheme {
			t.Fatalf("%s before sign-in: password_scheme %q, want %q", email, got, scheme)
		}
		for attempt := 1; attempt <= 2; attempt++ {
			b := testcluster.NewBrowser(t)
			pw := world{email: email, password: secret, cb: w.cb, orgB: w.orgB}
			pkce := oauth2.GenerateVerifier()
			q := signIn(t, c, b, r, pw, pkce, "nonce-0123456789")
			tok, err := r.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
			if err != nil {
				t.Fatalf("%s sign-in %d: exchange: %v", scheme, attempt, err)
			}
			raw, _ := tok.Extra("id_token").(string)
			idt, err := r.verifier.Verify(ctx, raw)
			if err != nil || idt.Subject != uid {
				t.Fatalf("%s sign-in %d: ID token %v, want sub %q", scheme, attempt, err, uid)
			}
			for node := range 3 {
				waitUntil(t, fmt.Sprintf("%s after sign-in %d: argon2id on node %d", scheme, attempt, node), 5*time.Second, func() bool {
					return passwordScheme(t, c, node, uid) == password.SchemeArgon2id
				})
			}
		}
	}
}

// userByEmail finds a person's id with GET /admin/v1/users?email=.
func userByEmail(t *testing.T, c *testcluster.Cluster, email string) string {
	t.Helper()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	do(t, c, "GET", "/admin/v1/users?email="+url.QueryEscape(email), testcluster.AdminToken, nil, &list)
	if len(list.Data) != 1 {
		t.Fatalf("users with address %s: %d", email, len(list.Data))
	}
	return list.Data[0].ID
}

// passwordScheme reads the person's password_scheme on one node.
func passwordScheme(t *testing.T, c *testcluster.Cluster, node int, id string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", c.URL(node)+"/admin/v1/users/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var u struct {
		PasswordScheme string `json:"password_scheme"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET user %s on node %d: %d %v", id, node, resp.StatusCode, err)
	}
	return u.PasswordScheme
}
