package node_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// benchNode is a real node with production password parameters and the
// rate limit off (CONTRACT.md: benchmarks only), provisioned through the
// admin API.
func benchNode(b *testing.B) (*testcluster.Cluster, world) {
	c := testcluster.New(b, testcluster.Options{Configure: func(_ int, cfg *node.Config) {
		cfg.PasswordParams = password.DefaultParams
		cfg.RateLimit = "off"
	}})
	return c, provisionTB(b, c)
}

// benchSignIn is signIn for benchmarks: password form, no consent (the public
// app skips it), callback query returned.
func benchSignIn(b *testing.B, c *testcluster.Cluster, br *testcluster.Browser, r *rp, w world, pkce string) string {
	page := br.Follow(br.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce), gooidc.Nonce("nonce-0123456789"))), c.URL(0))
	if page.Location() == "" {
		page = br.Follow(br.Submit(page, map[string]string{"email": w.email, "password": w.password}, "method", "password"), c.URL(0))
	}
	loc, err := url.Parse(page.Location())
	if err != nil || loc.Query().Get("code") == "" {
		b.Fatalf("no code: %d %s", page.Status, page.Location())
	}
	return loc.Query().Get("code")
}

func exchangeAndVerify(b *testing.B, r *rp, code, pkce string) *oauth2.Token {
	tok, err := r.oauth.Exchange(context.Background(), code, oauth2.VerifierOption(pkce))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.verifier.Verify(context.Background(), tok.Extra("id_token").(string)); err != nil {
		b.Fatal(err)
	}
	return tok
}

// BenchmarkPasswordSignIn: a fresh browser per sign-in: authorize, the
// sign-in form (argon2id m=19 MiB t=2), code, token exchange, ID token
// verified by go-oidc.
func BenchmarkPasswordSignIn(b *testing.B) {
	c, w := benchNode(b)
	r := newRPTB(b, c, w.publicID, "", w.cb, gooidc.ScopeOpenID)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			br := testcluster.NewBrowser(b)
			pkce := oauth2.GenerateVerifier()
			exchangeAndVerify(b, r, benchSignIn(b, c, br, r, w, pkce), pkce)
		}
	})
}

// BenchmarkSilentSignIn: prompt=none with a live SSO session, then the
// exchange and verification.
func BenchmarkSilentSignIn(b *testing.B) {
	c, w := benchNode(b)
	r := newRPTB(b, c, w.publicID, "", w.cb, gooidc.ScopeOpenID)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		br := testcluster.NewBrowser(b)
		pkce := oauth2.GenerateVerifier()
		benchSignIn(b, c, br, r, w, pkce) // opens the SSO session
		for pb.Next() {
			pkce := oauth2.GenerateVerifier()
			exchangeAndVerify(b, r, benchSignIn(b, c, br, r, w, pkce), pkce)
		}
	})
}

func benchToken(b *testing.B, c *testcluster.Cluster, w world) string {
	r := newRPTB(b, c, w.confID, w.confSecret, w.cb, gooidc.ScopeOpenID, "email")
	br := testcluster.NewBrowser(b)
	pkce := oauth2.GenerateVerifier()
	page := br.Follow(br.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce))), c.URL(0))
	page = br.Follow(br.Submit(page, map[string]string{"email": w.email, "password": w.password}, "method", "password"), c.URL(0))
	page = br.Follow(br.Submit(page, nil, "decision", "allow"), c.URL(0))
	loc, _ := url.Parse(page.Location())
	return exchangeAndVerify(b, r, loc.Query().Get("code"), pkce).AccessToken
}

// BenchmarkUserinfo: GET /userinfo with a live token over loopback HTTP.
func BenchmarkUserinfo(b *testing.B) {
	c, w := benchNode(b)
	token := benchToken(b, c, w)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := &http.Client{}
		for pb.Next() {
			req, _ := http.NewRequest("GET", c.URL(0)+"/userinfo", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("userinfo: %v %v", err, resp)
			}
			resp.Body.Close()
		}
	})
}

// BenchmarkIntrospect: POST /oauth2/introspect by the confidential client
// (argon2id secret check at production parameters on every call).
func BenchmarkIntrospect(b *testing.B) {
	c, w := benchNode(b)
	token := benchToken(b, c, w)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := &http.Client{}
		for pb.Next() {
			req, _ := http.NewRequest("POST", c.URL(0)+"/oauth2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.SetBasicAuth(w.confID, w.confSecret)
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("introspect: %v %v", err, resp)
			}
			resp.Body.Close()
		}
	})
}
