package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestShutdownWithWritesInFlight: the chaos test's hang. A leader is
// stopped while local writes and writes forwarded from both followers
// are in flight, some of them queued behind a cut link so that they
// cannot commit. Shutdown returns within its bound, and every caller
// gets an answer (a result, or an error that says the outcome is unknown
// or the node is stopping) instead of waiting on a raft future nobody
// will answer.
func TestShutdownWithWritesInFlight(t *testing.T) {
	for _, cut := range []bool{false, true} {
		t.Run(fmt.Sprintf("leader cut off=%v", cut), func(t *testing.T) {
			mc := newMCluster(t, 3, nil, fastTiming)
			leader, followers := mc.roles()
			if cut {
				mc.net.isolate(leader.addr) // its entries cannot commit any more
			}
			var wg sync.WaitGroup
			answered := make(chan error, 300)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := range 300 {
				n := leader
				if i%3 != 0 {
					n = followers[i%2]
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := n.c.Apply(ctx, org(fmt.Sprintf("o%d", i), fmt.Sprintf("s%d", i)))
					answered <- err
				}()
			}
			time.Sleep(20 * time.Millisecond) // let writes reach raft and the wire
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- leader.c.Shutdown() }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("Shutdown had not returned after 15 s")
			}
			t.Logf("leader shut down in %s", time.Since(start).Round(time.Millisecond))
			all := make(chan struct{})
			go func() { wg.Wait(); close(all) }()
			select {
			case <-all:
			case <-time.After(20 * time.Second):
				t.Fatalf("writes still waiting 20 s after the leader stopped")
			}
			close(answered)
			ok, failed := 0, 0
			for err := range answered {
				if err == nil {
					ok++
				} else {
					failed++
				}
			}
			t.Logf("%d writes answered ok, %d with an error", ok, failed)
			mc.net.heal()
		})
	}
}
