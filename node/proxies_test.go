package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// tokenStatus posts a token request (a code that does not exist) for
// client, as if from the client address xff, and returns the status.
func tokenStatus(t *testing.T, c *testcluster.Cluster, client, xff string, extra ...string) int {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {"nope"}, "client_id": {client},
		"redirect_uri": {"https://app.example/cb"}, "code_verifier": {strings.Repeat("v", 43)}}
	req, _ := http.NewRequest("POST", c.URL(0)+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Add(extra[i], extra[i+1])
	}
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestTrustedProxiesDecideTheClientAddress: behind a trusted balancer
// (127.0.0.1 here), the default token rate limit (5 per 60 s per
// client and address) counts each client address apart, so six people
// signing in to one application in a minute all get through, while the
// sixth request from one address gets 429. Without --trusted-proxies the
// same header is ignored: spoofing it changes nothing.
func TestTrustedProxiesDecideTheClientAddress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted string
	}{{"trusted balancer", "127.0.0.1/32"}, {"untrusted sender", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) {
				cfg.RateLimit = "5/60s"
				cfg.TrustedProxies = tc.trusted
			}})
			limited := 0
			for i := range 6 {
				if tokenStatus(t, c, "app-x", "198.51.100."+string(rune('1'+i))) == http.StatusTooManyRequests {
					limited++
				}
			}
			want := 0
			if tc.trusted == "" {
				want = 1 // all six count as one address, the peer's
			}
			if limited != want {
				t.Fatalf("six addresses: %d answered 429, want %d", limited, want)
			}
			if tc.trusted != "" {
				for range 5 {
					tokenStatus(t, c, "app-x", "198.51.100.99")
				}
				if got := tokenStatus(t, c, "app-x", "198.51.100.99"); got != http.StatusTooManyRequests {
					t.Fatalf("the sixth request from one address: got %d, want 429", got)
				}
				// A Forwarded header the balancer passed through from the
				// client names nothing (--proxy-header x-forwarded-for):
				// six requests from one address, each with its own, and
				// the sixth is refused.
				status := 0
				for i := range 6 {
					status = tokenStatus(t, c, "app-y", "198.51.100.98", "Forwarded", fmt.Sprintf("for=203.0.113.%d", i+1))
				}
				if status != http.StatusTooManyRequests {
					t.Fatalf("the sixth request from one address naming others in Forwarded: got %d, want 429", status)
				}
			}
		})
	}
}

// TestProxyHeaderConfig: --proxy-header takes the three ways and no
// other, and proxy-protocol without --trusted-proxies is refused (nobody
// could send the header it requires).
func TestProxyHeaderConfig(t *testing.T) {
	cases := []struct {
		way, trusted string
		ok           bool
	}{
		{"", "", true},
		{"x-forwarded-for", "10.0.0.0/8", true},
		{"forwarded", "10.0.0.0/8", true},
		{"proxy-protocol", "10.0.0.0/8", true},
		{"proxy-protocol", "", false},
		{"x-real-ip", "10.0.0.0/8", false},
	}
	for _, c := range cases {
		t.Run(c.way+"/"+c.trusted, func(t *testing.T) {
			cfg := node.Config{ProxyHeader: c.way, TrustedProxies: c.trusted}
			err := cfg.Validate()
			mentions := err != nil && strings.Contains(err.Error(), "--proxy-header")
			if mentions == c.ok {
				t.Fatalf("got %v, want ok=%v", err, c.ok)
			}
		})
	}
}

// TestForwardedChainThatNamesNoClientIsRefused: from a trusted balancer,
// a chain that does not name a client gets 400 with the envelope instead
// of being counted as the balancer's own address (a bucket every such
// client would share); with --proxy-header forwarded, Forwarded is read
// and X-Forwarded-For is not.
func TestForwardedChainThatNamesNoClientIsRefused(t *testing.T) {
	for _, tc := range []struct {
		way, header, value string
		want               int
	}{
		{"x-forwarded-for", "X-Forwarded-For", ",", http.StatusBadRequest},
		{"x-forwarded-for", "X-Forwarded-For", "not-an-address", http.StatusBadRequest},
		{"x-forwarded-for", "Forwarded", "for=unknown", http.StatusOK}, // not read: the balancer's own
		{"forwarded", "Forwarded", "for=unknown", http.StatusBadRequest},
		{"forwarded", "Forwarded", "for=_hidden", http.StatusBadRequest},
		{"forwarded", "X-Forwarded-For", ",", http.StatusOK},
	} {
		t.Run(tc.way+"/"+tc.header+"="+tc.value, func(t *testing.T) {
			c := testcluster.New(t, testcluster.Options{Size: 1, Configure: func(_ int, cfg *node.Config) {
				cfg.TrustedProxies = "127.0.0.1/32"
				cfg.ProxyHeader = tc.way
			}})
			req, _ := http.NewRequest("GET", c.URL(0)+"/.well-known/openid-configuration", nil)
			req.Header.Set(tc.header, tc.value)
			resp, err := c.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusBadRequest {
				var env struct {
					Error struct{ Code string } `json:"error"`
				}
				if json.NewDecoder(resp.Body).Decode(&env); env.Error.Code != "BAD_REQUEST" {
					t.Fatalf("envelope code %q, want BAD_REQUEST", env.Error.Code)
				}
			}
		})
	}
}
