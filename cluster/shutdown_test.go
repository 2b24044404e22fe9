package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
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

// TestHandOverThenShutdownFailsNoCaller: what SIGTERM does to a leader
// (hand leadership over, quiesce, stop) while both followers keep writing
// and reading through it. Requests that reach the old leader after the
// hand-over did nothing there, so they go to the new leader; those it
// took before are settled and answered before it stops. No caller sees
// an error (before, a few writes and reads each such restart answered
// "leader is shutting down", a 503).
func TestHandOverThenShutdownFailsNoCaller(t *testing.T) {
	mc := newMCluster(t, 3, nil, steadyTiming)
	leader, followers := mc.roles()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var done int
	var failed []error
	for w := range 12 {
		n := followers[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if w%3 == 0 {
					err = n.c.ReadIndex(withTimeout(t, 10*time.Second))
				} else {
					var res fsm.Result
					id := fmt.Sprintf("w%d-%d", w, i)
					res, err = n.c.Apply(withTimeout(t, 10*time.Second), org(id, id))
					if err == nil {
						err = res.Err
					}
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Errorf("%s: %w", n.id, err))
				}
				done++
				mu.Unlock()
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if err := leader.c.HandOver(withTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("hand-over: %v", err)
	}
	leader.c.Quiesce(withTimeout(t, 5*time.Second)) // as Node.Close does
	leader.stop()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d requests failed across a hand-over and shutdown, first: %v", len(failed), done, failed[0])
	}
	t.Logf("%d requests, none failed", done)
}

// TestStoppedLeaderRefusesWithoutTouchingRaft: a forwarded write that
// reaches a node whose raft has shut down is answered "not the leader"
// (nothing done: the sender tries the next leader), not "shutting down"
// (outcome unknown: the sender gives up).
func TestStoppedLeaderRefusesWithoutTouchingRaft(t *testing.T) {
	mc := newMCluster(t, 3, nil, steadyTiming)
	leader, _ := mc.roles()
	if err := leader.c.raft.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	_, err := leader.c.serveOp(withTimeout(t, 5*time.Second), opApply, org("late", "late").Encode())
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("forwarded write on a shut-down raft: %v, want ErrNotLeader", err)
	}
	if got := classify(err); got != classNotLeader {
		t.Fatalf("its reply class is %d, want classNotLeader (%d)", got, classNotLeader)
	}
}
