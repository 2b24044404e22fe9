package node_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// BenchmarkLeaderRestartWriteStall: the longest pause in a stream of
// writes while the leader of three nodes is stopped, with the hand-over a
// SIGTERM does (Node.Drain: raft leadership transfer) and without it (the
// node just closes, and the others wait out an election timeout). The
// nodes run raft's production timings, not testcluster's short ones.
// Writes enter at a follower that stays up, so they are forwarded to
// whoever leads; the stall is the longest gap between two acknowledged
// writes, from shortly before the stop until 50 writes after it.
func BenchmarkLeaderRestartWriteStall(b *testing.B) {
	for _, transfer := range []bool{true, false} {
		b.Run(fmt.Sprintf("transfer=%t", transfer), func(b *testing.B) {
			c := testcluster.New(b, testcluster.Options{Size: 3, Configure: func(_ int, cfg *node.Config) {
				cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLease = 0, 0, 0
				cfg.ShutdownDrain = 0
			}})
			var stalls []time.Duration
			for range b.N {
				old := c.Leader()
				firstReady(b, c, old)
				via := (old + 1) % 3
				stalls = append(stalls, writeStall(b, c.Node(via), func() {
					if transfer {
						c.Node(old).Drain(context.Background())
					}
					c.Kill(old)
				}))
				c.Restart(old)
				firstReady(b, c, old)
			}
			slices.Sort(stalls)
			b.ReportMetric(float64(stalls[len(stalls)/2].Microseconds())/1000, "ms-median-stall")
			b.ReportMetric(float64(stalls[len(stalls)-1].Microseconds())/1000, "ms-max-stall")
		})
	}
}

// writeStall writes through n without pause, runs stop once 200 ms of
// writes have gone by, and returns the longest gap between two
// acknowledged writes once 50 more have been acknowledged after stop
// returned (or 20 s passed).
func writeStall(b *testing.B, n *node.Node, stop func()) time.Duration {
	var (
		mu      sync.Mutex
		acks    []time.Time
		stopped = -1
	)
	done := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			id := uuid.NewString()
			res, err := n.Cluster().Apply(ctx, fsm.MustCommand(fsm.TypeCreateOrg, fsm.CreateOrg{ID: id, Slug: "s" + id[:8], Name: "Stall"}))
			cancel()
			if err != nil || res.Err != nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			mu.Lock()
			acks = append(acks, time.Now())
			mu.Unlock()
		}
	}()
	time.Sleep(200 * time.Millisecond)
	stop()
	mu.Lock()
	stopped = len(acks)
	mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		after := len(acks) - stopped
		mu.Unlock()
		if after >= 50 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(quit)
	<-done
	if len(acks)-stopped < 50 {
		b.Fatalf("only %d writes acknowledged in the 20 s after the leader stopped", len(acks)-stopped)
	}
	var longest time.Duration
	for i := 1; i < len(acks); i++ {
		longest = max(longest, acks[i].Sub(acks[i-1]))
	}
	return longest
}
