package oidc

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/ratelimit"
)

// Clients with a rate_limit of their own in their registration.
const (
	hBusy          = "busy-app" // confidential, rate_limit 20/60s
	hBusySecret    = "busy-secret-0123456789"
	hBusySuspended = "busy-suspended" // as busy-app, suspended
	hBusyPublic    = "busy-public"    // public, rate_limit 20/60s
)

var busyLimit = ratelimit.Limit{N: 20, Per: time.Minute}

// seedBusy registers the clients above.
func seedBusy(h *harness) {
	now := h.clock.Now()
	for _, c := range []fsm.Client{
		{ID: hBusy, Type: fsm.ClientConfidential, SecretHash: password.HashSecret(hBusySecret)},
		{ID: hBusySuspended, Type: fsm.ClientConfidential, SecretHash: password.HashSecret(hBusySecret), Suspended: true},
		{ID: hBusyPublic, Type: fsm.ClientPublic},
	} {
		c.Name, c.OrganizationID, c.Scopes = c.ID, hOrgA, []string{"openid"}
		c.RedirectURIs, c.AccessTokenTTL, c.RateLimit = []string{hRedirect}, 600, "20/60s"
		c.CreatedAt, c.UpdatedAt = now, now
		h.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: c})
	}
}

func TestOwnLimit(t *testing.T) {
	for _, c := range []struct {
		name   string
		client fsm.Client
		want   ratelimit.Limit
		ok     bool
	}{
		{"confidential with one", fsm.Client{Type: fsm.ClientConfidential, RateLimit: "20/60s"}, busyLimit, true},
		{"confidential with another", fsm.Client{Type: fsm.ClientConfidential, RateLimit: "600/1h"}, ratelimit.Limit{N: 600, Per: time.Hour}, true},
		{"confidential without", fsm.Client{Type: fsm.ClientConfidential}, ratelimit.Limit{}, false},
		{"suspended", fsm.Client{Type: fsm.ClientConfidential, RateLimit: "20/60s", Suspended: true}, ratelimit.Limit{}, false},
		{"public: it has no secret to prove", fsm.Client{Type: fsm.ClientPublic, RateLimit: "20/60s"}, ratelimit.Limit{}, false},
		{"unknown: the zero client", fsm.Client{}, ratelimit.Limit{}, false},
		{"malformed", fsm.Client{Type: fsm.ClientConfidential, RateLimit: "lots"}, ratelimit.Limit{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ownLimit(c.client)
			if got != c.want || ok != c.ok {
				t.Errorf("got %v %v, want %v %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// keyRecorder is a shared limiter that allows everything and keeps the
// keys it was asked about.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) Allow(_ context.Context, key string) (bool, time.Duration, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, key)
	return true, 0, nil
}

// TestLimitChoice: the key each request is counted under. Only a request
// that authenticates as a confidential client with a limit of its own
// counts under that limit (ratelimit.Own); every other request, whatever
// client_id it names, counts under the plain key and so the default.
func TestLimitChoice(t *testing.T) {
	rec := &keyRecorder{}
	h := newHarness(t, func(c *Config) { c.RateLimit, c.RateLimiter = "5/60s", rec })
	seedBusy(h)
	key := func(endpoint, clientID string) string { return endpoint + "\x00192.0.2.1\x00" + clientID }
	own := func(endpoint, clientID string) string { return ratelimit.Own(key(endpoint, clientID), busyLimit) }
	token := func(user, pass string) bcReq {
		return bcReq{method: "POST", path: PathToken, user: user, pass: pass, form: bcTokenForm("unknown-code")}
	}
	repeated := token(hBusy, hBusySecret)
	repeated.form = bcWith(repeated.form)
	repeated.form["code"] = []string{"a", "b"}
	inForm := bcReq{method: "POST", path: PathToken, form: bcWith(bcTokenForm("unknown-code"), "client_id", hBusy, "client_secret", hBusySecret)}
	twoIDs := token(hBusy, hBusySecret)
	twoIDs.form = bcWith(twoIDs.form, "client_id", hConfidential)
	back := func(path, user, pass string) bcReq {
		return bcReq{method: "POST", path: path, user: user, pass: pass, form: url.Values{"token": {"x"}}}
	}
	for _, c := range []struct {
		name    string
		req     bcReq
		status  int
		wantKey string
	}{
		{"token: raised client, right secret", token(hBusy, hBusySecret), http.StatusBadRequest, own("token", hBusy)},
		{"token: raised client, secret in the form", inForm, http.StatusBadRequest, own("token", hBusy)},
		{"token: raised client, wrong secret", token(hBusy, "wrong"), http.StatusUnauthorized, key("token", hBusy)},
		{"token: raised client, no secret", bcReq{method: "POST", path: PathToken, form: bcWith(bcTokenForm("c"), "client_id", hBusy)},
			http.StatusUnauthorized, key("token", hBusy)},
		{"token: raised client, malformed request", repeated, http.StatusBadRequest, key("token", hBusy)},
		{"token: raised client, two client_ids", twoIDs, http.StatusBadRequest, key("token", hBusy)},
		{"token: raised client, suspended", token(hBusySuspended, hBusySecret), http.StatusUnauthorized, key("token", hBusySuspended)},
		{"token: raised public client", bcReq{method: "POST", path: PathToken, form: bcWith(bcTokenForm("c"), "client_id", hBusyPublic)},
			http.StatusBadRequest, key("token", hBusyPublic)},
		{"token: unknown client_id", token("no-such-app", "x"), http.StatusUnauthorized, key("token", "no-such-app")},
		{"token: client with the default", token(hConfidential, hSecret), http.StatusBadRequest, key("token", hConfidential)},
		{"introspect: raised client", back(PathIntrospect, hBusy, hBusySecret), http.StatusOK, own("introspect", hBusy)},
		{"introspect: raised client, wrong secret", back(PathIntrospect, hBusy, "wrong"), http.StatusUnauthorized, key("introspect", hBusy)},
		{"revoke: raised client", back(PathRevoke, hBusy, hBusySecret), http.StatusOK, own("revoke", hBusy)},
		{"revoke: client with the default", back(PathRevoke, hConfidential, hSecret), http.StatusOK, key("revoke", hConfidential)},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec.mu.Lock()
			rec.keys = nil
			rec.mu.Unlock()
			if got := bcDo(t, h, c.req); got.Code != c.status {
				t.Errorf("status: got %d, want %d (%s)", got.Code, c.status, got.Body)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.keys) != 1 || rec.keys[0] != c.wantKey {
				t.Errorf("keys: got %q, want [%q]", rec.keys, c.wantKey)
			}
		})
	}
}

// TestClientRateLimitCounts: against a node limit of 5/60s, the raised
// client gets 20 token requests from one address; a wrong secret naming
// it, an unknown client_id and a client with the default get 5; once
// failures used up the default, the right secret is refused as well; and
// failures cannot spend the raised client's own budget.
func TestClientRateLimitCounts(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RateLimit = "5/60s" })
	seedBusy(h)
	token := func(user, pass, ip string) bcReq {
		return bcReq{method: "POST", path: PathToken, user: user, pass: pass, remote: ip + ":4000", form: bcTokenForm("unknown-code")}
	}
	type step struct {
		req    bcReq
		times  int
		status int // of each
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"raised client: 20, then its own limit", []step{
			{token(hBusy, hBusySecret, "198.51.100.1"), 20, http.StatusBadRequest},
			{token(hBusy, hBusySecret, "198.51.100.1"), 1, http.StatusTooManyRequests},
			{token(hBusy, "wrong", "198.51.100.1"), 5, http.StatusUnauthorized}, // failures have a budget apart
			{token(hBusy, "wrong", "198.51.100.1"), 1, http.StatusTooManyRequests},
		}},
		{"raised client from another address", []step{
			{token(hBusy, hBusySecret, "198.51.100.2"), 20, http.StatusBadRequest},
		}},
		{"wrong secrets get the default, then the right one is refused too", []step{
			{token(hBusy, "wrong", "198.51.100.3"), 5, http.StatusUnauthorized},
			{token(hBusy, "wrong", "198.51.100.3"), 1, http.StatusTooManyRequests},
			{token(hBusy, hBusySecret, "198.51.100.3"), 1, http.StatusTooManyRequests},
		}},
		{"unknown client_id gets the default", []step{
			{token("no-such-app", "x", "198.51.100.4"), 5, http.StatusUnauthorized},
			{token("no-such-app", "x", "198.51.100.4"), 1, http.StatusTooManyRequests},
		}},
		{"client with the default", []step{
			{token(hConfidential, hSecret, "198.51.100.5"), 5, http.StatusBadRequest},
			{token(hConfidential, hSecret, "198.51.100.5"), 1, http.StatusTooManyRequests},
		}},
		{"suspended raised client gets the default", []step{
			{token(hBusySuspended, hBusySecret, "198.51.100.6"), 5, http.StatusUnauthorized},
			{token(hBusySuspended, hBusySecret, "198.51.100.6"), 1, http.StatusTooManyRequests},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i, s := range c.steps {
				for n := 1; n <= s.times; n++ {
					if got := bcDo(t, h, s.req); got.Code != s.status {
						t.Fatalf("step %d, request %d of %d: got %d, want %d (%s)", i+1, n, s.times, got.Code, s.status, got.Body)
					}
				}
			}
		})
	}
	t.Run("a minute later", func(t *testing.T) {
		h.clock.Add(time.Minute)
		if got := bcDo(t, h, token(hBusy, hBusySecret, "198.51.100.3")); got.Code != http.StatusBadRequest {
			t.Errorf("got %d, want 400", got.Code)
		}
	})
}
