package oidc

import (
	"net/url"
	"reflect"
	"testing"

	"github.com/oidcd/oidcd/internal/authn"
)

// TestResumeAsksForTheSameRequest: the query a registration goes on with
// passes the page checks again and yields the same request, less prompt
// and a max_age of 0 (the person has just signed in, and either would
// send them back to the sign-in page).
func TestResumeAsksForTheSameRequest(t *testing.T) {
	clients := fakeClients{"app": testClient}
	base := url.Values{
		"client_id": {"app"}, "redirect_uri": {"https://app.example/cb?x=1"}, "response_type": {"code"},
		"scope": {"openid email"}, "state": {"state & <more>"}, "code_challenge": {authn.S256("v")}, "code_challenge_method": {"S256"},
	}
	for _, tc := range []struct {
		name       string
		extra      map[string]string
		wantPrompt bool
		dropMaxAge bool
	}{
		{"bare", nil, false, false},
		{"everything", map[string]string{"nonce": "nonce-123456", "max_age": "300", "acr_values": "urn:service:sso:acr:mfa urn:service:sso:acr:pwd",
			"organization_hint": "0a000000-0000-4000-8000-000000000001"}, false, false},
		{"prompt login and max_age 0 are dropped", map[string]string{"prompt": "login select_account", "max_age": "0"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := url.Values{}
			for k, v := range base {
				q[k] = v
			}
			for k, v := range tc.extra {
				q.Set(k, v)
			}
			req, _, err := validateAuthorize(clients, q)
			if err != nil {
				t.Fatal(err)
			}
			rq, err := url.ParseQuery(req.resume())
			if err != nil {
				t.Fatal(err)
			}
			again, _, err := validateAuthorize(clients, rq)
			if err != nil {
				t.Fatalf("resume %q: %v", req.resume(), err)
			}
			if tc.wantPrompt {
				if rq.Has("prompt") || again.Prompt != 0 {
					t.Errorf("prompt kept: %q", rq.Get("prompt"))
				}
				req.Prompt = 0
			}
			if tc.dropMaxAge {
				if again.MaxAge != nil {
					t.Errorf("max_age kept: %d", *again.MaxAge)
				}
				req.MaxAge = nil
			}
			if !reflect.DeepEqual(req, again) {
				t.Errorf("resumed request differs:\n got %+v\nwant %+v", again, req)
			}
		})
	}
}
