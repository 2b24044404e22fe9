package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// readyz is node i's /readyz answer.
func readyz(t *testing.T, c *testcluster.Cluster, i int) (int, string) {
	t.Helper()
	resp, err := c.Client().Get(c.URL(i) + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body json.RawMessage
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, string(body)
}

// TestClockSkewTakesTheNodeOutOfService: of three nodes, one whose clock
// runs 5 minutes fast (through its Now) sees itself far from the
// cluster's median clock from gossip's probes: it reports not ready with
// the reason (so a load balancer sends it nothing: it would refuse codes
// the others issued as expired), shows the skew in its metrics, while the
// two others stay ready and a sign-in through them works. The leader
// with a good clock keeps reaping.
func TestClockSkewTakesTheNodeOutOfService(t *testing.T) {
	for _, skew := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			c := testcluster.New(t, testcluster.Options{Size: 3, Gossip: true, Configure: func(i int, cfg *node.Config) {
				cfg.RateLimit = "off"
				if i == 2 {
					cfg.Now = func() time.Time { return time.Now().Add(skew) }
				}
			}})
			w := provision(t, c)
			waitUntil(t, "the skewed node reports not ready", 15*time.Second, func() bool {
				status, body := readyz(t, c, 2)
				return status == http.StatusServiceUnavailable && strings.Contains(body, `"name":"clock","ok":false`)
			})
			_, body := readyz(t, c, 2)
			if !strings.Contains(body, "clock is") || !strings.Contains(body, "synchronise it") {
				t.Fatalf("the reason: %s", body)
			}
			if got := metricOf(t, c, 2, "oidcd_clock_skew_seconds"); got < skew.Seconds()-10 || got > skew.Seconds()+10 {
				t.Fatalf("oidcd_clock_skew_seconds on the skewed node: %v, want about %v", got, skew.Seconds())
			}
			for i := range 2 {
				if status, body := readyz(t, c, i); status != http.StatusOK {
					t.Fatalf("node %d (a good clock): %d %s", i, status, body)
				}
				if got := metricOf(t, c, i, "oidcd_clock_skew_seconds"); got < -1 || got > 1 {
					t.Fatalf("node %d's skew: %v, want about 0", i, got)
				}
			}
			// A sign-in on a node with a good clock works (the balancer of a
			// real site, checking /readyz, sends nothing to node 2).
			r := newRP(t, c, w.publicID, "", w.cb, "openid")
			for _, i := range []int{0, 1} {
				pin := pinned(c, i)
				b := testcluster.NewBrowser(t)
				b.Client.Transport = pin.Transport
				pkce := oauth2.GenerateVerifier()
				q := signIn(t, c, b, r, w, pkce, "nonce-0123456789")
				ctx := context.WithValue(context.Background(), oauth2.HTTPClient, pin)
				if _, err := r.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce)); err != nil {
					t.Fatalf("sign-in on node %d: %v", i, err)
				}
			}
		})
	}
}
