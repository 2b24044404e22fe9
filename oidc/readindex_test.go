package oidc

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

// TestReadIndexGuardsLivenessChecks: when the cluster cannot vouch that the
// local state is current, no liveness decision is made from it: every
// endpoint answers its documented 503 shape. Garbage tokens are still refused
// without asking the cluster. The token endpoint decides in its
// redemption write, on the leader, so a code found here needs no read
// index; one not found here asks for one before it says invalid_grant.
func TestReadIndexGuardsLivenessChecks(t *testing.T) {
	var fail atomic.Bool
	var calls atomic.Int32
	h := newHarness(t, func(c *Config) {
		c.ReadIndex = func(context.Context) error {
			calls.Add(1)
			if fail.Load() {
				return errors.New("no leader")
			}
			return nil
		}
	})
	tok := bcTokens(t, h, hConfidential, hSecret)
	code := h.signedInCode(hConfidential, hUser, hOrgA, []string{"openid"}, "", bcVerifier)
	fail.Store(true)

	cases := []struct {
		name     string
		req      bcReq
		wantBody string
	}{
		{"userinfo GET", bcReq{method: "GET", path: PathUserinfo, bearer: tok.AccessToken}, `{"error":"temporarily_unavailable","error_description":"try again shortly"}`},
		{"userinfo POST", bcReq{method: "POST", path: PathUserinfo, bearer: tok.AccessToken}, ``},
		{"memberships", bcReq{method: "GET", path: "/api/v1/me/memberships", bearer: tok.AccessToken}, `{"error":"temporarily_unavailable","error_description":"try again shortly"}`},
		{"introspect", bcReq{method: "POST", path: PathIntrospect, user: hConfidential, pass: hSecret, form: url.Values{"token": {tok.AccessToken}}}, `{"error":"temporarily_unavailable","error_description":"try again shortly"}`},
		{"token of a code not applied here", bcReq{method: "POST", path: PathToken, user: hConfidential, pass: hSecret, form: bcTokenForm("not-applied-here-yet-0123456789abcdefghijklm")}, `{"error":"temporarily_unavailable","error_description":"try again shortly"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := bcDo(t, h, c.req)
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("status: got %d %s, want 503", rec.Code, rec.Body)
			}
			if got := rec.Body.String(); got != c.wantBody {
				t.Fatalf("body: got %q, want %q", got, c.wantBody)
			}
		})
	}

	before := calls.Load()
	if rec := bcDo(t, h, bcReq{method: "GET", path: PathUserinfo, bearer: "not-a-token"}); rec.Code != http.StatusUnauthorized {
		t.Fatalf("garbage token: got %d, want 401", rec.Code)
	}
	if calls.Load() != before {
		t.Fatal("a malformed token cost a read index")
	}

	before = calls.Load()
	if rec := bcDo(t, h, bcReq{method: "POST", path: PathToken, user: hConfidential, pass: hSecret, form: bcTokenForm(code)}); rec.Code != http.StatusOK {
		t.Fatalf("a code found here: got %d %s, want 200 (the redemption write decides)", rec.Code, rec.Body)
	}
	if calls.Load() != before {
		t.Fatal("a code found here cost a read index")
	}

	fail.Store(false)
	if rec := bcDo(t, h, bcReq{method: "GET", path: PathUserinfo, bearer: tok.AccessToken}); rec.Code != http.StatusOK {
		t.Fatalf("after recovery: got %d %s, want 200", rec.Code, rec.Body)
	}
}

// TestFormPostedToALaggingNodeCatchesUp: a sign-in form reaches a node
// that has not yet applied what made the client valid (an edge replica
// far from the core, behind a balancer): it catches up once before it
// refuses, as GET /authorize does, and the sign-in goes on.
func TestFormPostedToALaggingNodeCatchesUp(t *testing.T) {
	var h *harness
	var lagging atomic.Bool
	h = newHarness(t, func(c *Config) {
		c.ReadIndex = func(context.Context) error {
			if lagging.CompareAndSwap(true, false) { // catching up brings the client back
				h.updateClient(hConfidential, func(c *fsm.Client) { c.Suspended = false })
			}
			return nil
		}
	})
	b := h.browser()
	p := b.get(authzPath(authzQuery(hConfidential, map[string]string{"scope": "openid email"})))
	wantH1(t, p, "Sign in")
	// This node's view: the client suspended (the state before the one the
	// node that showed the form had).
	h.updateClient(hConfidential, func(c *fsm.Client) { c.Suspended = true })
	lagging.Store(true)
	p = b.signIn(p, hEmail, hPassword)
	if p.status != http.StatusOK {
		t.Fatalf("sign-in posted to a lagging node: got %d, want the consent page:\n%s", p.status, p.body)
	}
	wantH1(t, p, "Allow access?")
	if lagging.Load() {
		t.Fatal("no catch-up was asked for")
	}
}
