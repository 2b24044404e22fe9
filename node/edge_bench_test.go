package node_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// edgeBenchCluster is 3 voters and edges edge replicas, each edge a site
// of its own siteLatency (40 ms) one way from the core, with production
// password parameters and no rate limit (benchmarks only).
func edgeBenchCluster(b *testing.B, edges int) (*testcluster.Cluster, world) {
	c := testcluster.New(b, testcluster.Options{Size: coreSize + edges, NonVoters: edges,
		LinkLatency: func(from, to int) time.Duration {
			if siteOf(from) != siteOf(to) {
				return siteLatency
			}
			return 0
		},
		Configure: func(_ int, cfg *node.Config) {
			cfg.PasswordParams = password.DefaultParams()
			cfg.RateLimit = "off"
		}})
	return c, provisionTB(b, c)
}

// latencies collects request times and reports their percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	at := func(p float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(p*float64(len(l.d))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkEdgeCommit: the commit latency of the core (writes proposed on
// the leader, one at a time) with no edge replica and with five, each
// 40 ms away. Non-voters are replicated to but not waited for.
func BenchmarkEdgeCommit(b *testing.B) {
	for _, edges := range []int{0, 5} {
		b.Run(fmt.Sprintf("nonvoters=%d", edges), func(b *testing.B) {
			c, _ := edgeBenchCluster(b, edges)
			l := c.Node(c.Leader()).Cluster()
			var lat latencies
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
				start := time.Now()
				res, err := l.Apply(context.Background(), fsm.MustCommand(fsm.TypeCreateOrg, fsm.CreateOrg{ID: id, Slug: fmt.Sprintf("b%d", i), Name: "Bench"}))
				if err == nil {
					err = res.Err
				}
				if err != nil {
					b.Fatal(err)
				}
				lat.add(time.Since(start))
			}
			lat.report(b)
		})
	}
}

// BenchmarkEdgeUserinfo: GET /userinfo on an edge replica 40 ms from the
// core; each call takes a read index from the leader (one round trip).
// serial: one request at a time (latency); parallel: 16 at once.
func BenchmarkEdgeUserinfo(b *testing.B) {
	c, w := edgeBenchCluster(b, 1)
	token := benchToken(b, c, w)
	get := func(client *http.Client) time.Duration {
		req, _ := http.NewRequest("GET", c.URL(edgeA)+"/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("userinfo on the edge: %v %v", err, resp)
		}
		resp.Body.Close()
		return time.Since(start)
	}
	b.Run("serial", func(b *testing.B) {
		var lat latencies
		client := &http.Client{}
		for b.Loop() {
			lat.add(get(client))
		}
		lat.report(b)
	})
	b.Run("parallel", func(b *testing.B) {
		var lat latencies
		b.SetParallelism(8) // 16 on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			client := &http.Client{}
			for pb.Next() {
				lat.add(get(client))
			}
		})
		lat.report(b)
	})
}

// BenchmarkEdgeSilentSignIn: silent sign-ins (a session exists) entirely
// on an edge replica 40 ms from the core: authorize, code exchange, ID
// token verified; 4 browsers at once.
func BenchmarkEdgeSilentSignIn(b *testing.B) {
	c, w := edgeBenchCluster(b, 1)
	var lat latencies
	b.SetParallelism(2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rpOn(b, c, edgeA, edgeA, w.publicID, "", w.cb)
		br := testcluster.NewBrowser(b)
		pkce := oauth2.GenerateVerifier()
		benchSignIn(b, c, br, r, w, pkce)
		for pb.Next() {
			start := time.Now()
			pkce := oauth2.GenerateVerifier()
			exchangeAndVerify(b, r, benchSignIn(b, c, br, r, w, pkce), pkce)
			lat.add(time.Since(start))
		}
	})
	lat.report(b)
}
