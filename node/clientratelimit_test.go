package node_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/testcluster"
)

// TestClientRateLimitIsThatClientsAlone: the default limit allows 5 token
// requests a minute per client and address, which stops a server-side app
// (all its exchanges come from one address) at its sixth sign-in. A client
// registered with rate_limit "20/60s" signs ten people in through three
// nodes from one address without a 429; a client with the default gets
// 429 at its sixth exchange; an unknown client_id, and the raised client
// with a wrong secret, get the default; and once failures have used up
// the default, the right secret is refused too (the 429 never tells a
// right secret from a wrong one).
func TestClientRateLimitIsThatClientsAlone(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	w := provision(t, c)
	var busy map[string]any
	resp := do(t, c, "POST", "/admin/v1/clients", testcluster.AdminToken, map[string]any{"name": "Busy Server App",
		"redirect_uris": []string{w.cb}, "scopes": []string{"openid", "email"}, "organization_id": w.orgA, "rate_limit": "20/60s"}, &busy)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a client with rate_limit: got %d %v, want 201", resp.StatusCode, busy)
	}
	busyID, busySecret := busy["client_id"].(string), busy["client_secret"].(string)
	var got map[string]any
	if resp := doOn(t, c, 2, "GET", "/admin/v1/clients/"+busyID, testcluster.AdminToken, nil, &got); resp.StatusCode != http.StatusOK || got["rate_limit"] != "20/60s" {
		t.Fatalf("GET on another node: got %d %v, want 200 and rate_limit %q", resp.StatusCode, got, "20/60s")
	}

	// exchange signs one person in with clientID and exchanges the code on
	// node i, answering the exchange's status.
	b := testcluster.NewBrowser(t)
	exchange := func(i int, clientID, secret string) int {
		t.Helper()
		r := rpOn(t, c, (i+1)%3, i, clientID, secret, w.cb)
		pkce := oauth2.GenerateVerifier()
		q := signIn(t, c, b, r, w, pkce, "nonce-0123456789")
		form := url.Values{"grant_type": {"authorization_code"}, "code": {q.Get("code")}, "redirect_uri": {w.cb}, "code_verifier": {pkce}}
		status, body := clientPostOn(t, c, i, "/oauth2/token", clientID, secret, form)
		if status == http.StatusOK && body["access_token"] == nil {
			t.Fatalf("exchange answered 200 without an access token: %v", body)
		}
		return status
	}
	for i := 1; i <= 10; i++ {
		if status := exchange(i%3, busyID, busySecret); status != http.StatusOK {
			t.Fatalf("busy client, sign-in %d: got %d, want 200 (its own limit is 20/60s)", i, status)
		}
	}
	for i := 1; i <= 6; i++ {
		want := http.StatusOK
		if i == 6 {
			want = http.StatusTooManyRequests
		}
		if status := exchange(i%3, w.confID, w.confSecret); status != want {
			t.Fatalf("default client, sign-in %d: got %d, want %d", i, status, want)
		}
	}

	bogus := url.Values{"grant_type": {"authorization_code"}, "code": {"nope"}, "redirect_uri": {w.cb}, "code_verifier": {strings.Repeat("v", 43)}}
	for _, cr := range []struct{ name, id, secret string }{
		{"unknown client_id", "no-such-client", "whatever"},
		{"busy client with a wrong secret", busyID, "wrong"},
	} {
		for i := 1; i <= 6; i++ {
			want := http.StatusUnauthorized
			if i == 6 {
				want = http.StatusTooManyRequests
			}
			if status, body := clientPostOn(t, c, i%3, "/oauth2/token", cr.id, cr.secret, bogus); status != want {
				t.Fatalf("%s, request %d: got %d %v, want %d (the default, 5/60s)", cr.name, i, status, body, want)
			}
		}
	}
	// The busy client used 10 of its 20, but failures naming it have used
	// up the default: its right secret is refused as a wrong one is.
	if status, body := clientPostOn(t, c, 0, "/oauth2/token", busyID, busySecret, bogus); status != http.StatusTooManyRequests {
		t.Fatalf("busy client's right secret after five failures: got %d %v, want 429", status, body)
	}
}
