package node_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// benchNode is a real node with production password parameters and the
// rate limit off (--rate-limit off: benchmarks only), provisioned through the
// admin API.
func benchNode(b *testing.B) (*testcluster.Cluster, world) { return benchCluster(b, 1) }

func benchCluster(b *testing.B, size int) (*testcluster.Cluster, world) {
	c := testcluster.New(b, testcluster.Options{Size: size, Configure: func(_ int, cfg *node.Config) {
		cfg.PasswordParams = password.DefaultParams()
		cfg.RateLimit = "off"
	}})
	return c, provisionTB(b, c)
}

// benchSignIn is signIn for benchmarks: password form, no consent (the public
// app skips it), callback query returned.
func benchSignIn(b *testing.B, c *testcluster.Cluster, br *testcluster.Browser, r *rp, w world, pkce string) string {
	page := br.Follow(br.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce), gooidc.Nonce("nonce-0123456789"))), r.authBase())
	if page.Location() == "" {
		page = br.Follow(br.Submit(page, map[string]string{"email": w.email, "password": w.password}, "method", "password"), r.authBase())
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
	base := r.authBase()
	page := br.Follow(br.Get(r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(pkce))), base)
	page = br.Follow(br.Submit(page, map[string]string{"email": w.email, "password": w.password}, "method", "password"), base)
	page = br.Follow(br.Submit(page, nil, "decision", "allow"), base)
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

// BenchmarkCluster3SilentSignIn: silent sign-ins on a 3-node cluster, the
// browser on one node and the exchange on the next (round robin), so most
// writes are forwarded to the leader.
func BenchmarkCluster3SilentSignIn(b *testing.B) {
	c, w := benchCluster(b, 3)
	var next atomic.Int32
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1))
		r := rpOn(b, c, i%3, (i+1)%3, w.publicID, "", w.cb)
		br := testcluster.NewBrowser(b)
		pkce := oauth2.GenerateVerifier()
		benchSignIn(b, c, br, r, w, pkce)
		for pb.Next() {
			pkce := oauth2.GenerateVerifier()
			exchangeAndVerify(b, r, benchSignIn(b, c, br, r, w, pkce), pkce)
		}
	})
}

// BenchmarkCluster3Userinfo: userinfo spread over the three nodes; every
// call pays a read index (on followers an RPC to the leader, coalesced).
func BenchmarkCluster3Userinfo(b *testing.B) {
	c, w := benchCluster(b, 3)
	token := benchToken(b, c, w)
	var next atomic.Int32
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		base := c.URL(int(next.Add(1)) % 3)
		client := &http.Client{}
		for pb.Next() {
			req, _ := http.NewRequest("GET", base+"/userinfo", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("userinfo: %v %v", err, resp)
			}
			resp.Body.Close()
		}
	})
}

// BenchmarkAuditTrail: the silent sign-in (authorize, exchange: one token
// event) with the audit trail and without it (FSM.SetAuditForBenchmark)
// on the same node in one run, and what the trail stores per password
// sign-in (its signin and token events, with their index entries).
func BenchmarkAuditTrail(b *testing.B) {
	c, w := benchNode(b)
	f := c.Node(0).FSM()
	r := newRPTB(b, c, w.publicID, "", w.cb, gooidc.ScopeOpenID)
	for _, trail := range []bool{true, false} {
		name := map[bool]string{true: "trail", false: "no-trail"}[trail]
		b.Run("silent-signin/"+name, func(b *testing.B) {
			f.SetAuditForBenchmark(trail)
			defer f.SetAuditForBenchmark(true)
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				br := testcluster.NewBrowser(b)
				benchSignIn(b, c, br, r, w, oauth2.GenerateVerifier())
				for pb.Next() {
					pkce := oauth2.GenerateVerifier()
					exchangeAndVerify(b, r, benchSignIn(b, c, br, r, w, pkce), pkce)
				}
			})
		})
	}
	b.Run("password-signin-bytes", func(b *testing.B) {
		before, err := f.State().AuditStats()
		if err != nil {
			b.Fatal(err)
		}
		for range b.N {
			pkce := oauth2.GenerateVerifier()
			exchangeAndVerify(b, r, benchSignIn(b, c, testcluster.NewBrowser(b), r, w, pkce), pkce)
		}
		after, err := f.State().AuditStats()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(after.Bytes-before.Bytes)/float64(b.N), "trail-B/signin")
		b.ReportMetric(float64(after.Events-before.Events)/float64(b.N), "events/signin")
	})
}
