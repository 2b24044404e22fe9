package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
)

// TestWriteOutcomeClasses: a failed write whose fate is unknown (it may
// have been applied) says so with fsm.ErrMaybeApplied, still wrapping the
// sentinel it always did; one refused before it was sent or appended
// does not, so that a caller may send it again as it is.
func TestWriteOutcomeClasses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T) error // on a cluster of its own
		want  error                    // wrapped besides, or not, fsm.ErrMaybeApplied
		maybe bool
	}{
		{
			name: "deadline passed before anything was proposed",
			write: func(t *testing.T) error {
				mc := newMCluster(t, 3, nil)
				_, fs := mc.roles()
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				_, err := fs[0].c.Apply(ctx, org("late", "late"))
				return err
			},
			want: context.Canceled,
		},
		{
			name: "refused by the format gate",
			write: func(t *testing.T) error {
				mc := newMCluster(t, 3, nil, oldN3) // n3 holds the format at 1
				_, fs := mc.roles()
				_, err := fs[0].c.Apply(withTimeout(t, 5*time.Second), raiseTo(fsm.FormatGate))
				return err
			},
			want: fsm.ErrFormat,
		},
		{
			// The follower never reaches the leader: every attempt fails
			// to dial, so nothing was sent.
			name: "forwarded from a follower cut off",
			write: func(t *testing.T) error {
				mc := newMCluster(t, 3, nil)
				_, fs := mc.roles()
				mc.net.isolate(fs[0].addr)
				_, err := fs[0].c.Apply(withTimeout(t, time.Second), org("cut", "cut"))
				return err
			},
			want: ErrNoLeader,
		},
		{
			// The leader read the request, then the follower lost it (as
			// when it dies): the write may have been appended.
			name: "forwarded, the leader gone after reading it",
			write: func(t *testing.T) error {
				var held atomic.Int32
				mc := newMCluster(t, 3, nil, func(c *Config) {
					// The leader holds every forwarded write it reads,
					// unanswered, until its deadline or the node stops.
					c.onLeaderApply = func(ctx context.Context) {
						held.Add(1)
						<-ctx.Done()
					}
				})
				leader, fs := mc.roles()
				done := make(chan error, 1)
				go func() {
					_, err := fs[0].c.Apply(withTimeout(t, 10*time.Second), org("held", "held"))
					done <- err
				}()
				waitFor(t, 5*time.Second, "the leader to read the write", func() bool { return held.Load() > 0 })
				mc.net.isolate(leader.addr)
				leader.stop()
				return <-done
			},
			want:  ErrNoLeader,
			maybe: true,
		},
		{
			// Appended on the leader, and never committed within the
			// deadline: the followers' disks refuse the entry while they
			// keep answering heartbeats, so the leader keeps leading.
			name: "appended on the leader, no quorum to commit it",
			write: func(t *testing.T) error {
				mc := newMCluster(t, 3, nil)
				leader, fs := mc.roles()
				for _, f := range fs {
					f.failLogWrites(syscall.EIO)
				}
				_, err := leader.c.Apply(withTimeout(t, time.Second), org("stuck", "stuck"))
				for _, f := range fs {
					f.failLogWrites(nil)
				}
				return err
			},
			want:  ErrNoLeader,
			maybe: true,
		},
		{
			// Appended and stuck as above, then the leader is cut off and
			// steps down: settling it needs the next leader's log, which
			// does not reach it before the deadline.
			name: "appended on a leader that then lost its leadership",
			write: func(t *testing.T) error {
				mc := newMCluster(t, 3, nil)
				leader, fs := mc.roles()
				for _, f := range fs {
					f.failLogWrites(syscall.EIO)
				}
				last := leader.c.raft.LastIndex()
				done := make(chan error, 1)
				go func() {
					_, err := leader.c.Apply(withTimeout(t, 3*time.Second), org("lost", "lost"))
					done <- err
				}()
				waitFor(t, 2*time.Second, "the entry appended", func() bool { return leader.c.raft.LastIndex() > last })
				mc.net.isolate(leader.addr)
				err := <-done
				for _, f := range fs {
					f.failLogWrites(nil)
				}
				if leader.c.IsLeader() {
					t.Fatal("the cut-off leader still leads: its leadership was not lost")
				}
				return err
			},
			want:  ErrNoLeader,
			maybe: true,
		},
		{
			name: "forwarded, appended on the leader, no quorum to commit it",
			write: func(t *testing.T) error {
				mc := newMCluster(t, 3, nil)
				_, fs := mc.roles()
				for _, f := range fs {
					f.failLogWrites(syscall.EIO)
				}
				_, err := fs[0].c.Apply(withTimeout(t, time.Second), org("stuck", "stuck"))
				for _, f := range fs {
					f.failLogWrites(nil)
				}
				return err
			},
			want:  ErrNoLeader,
			maybe: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write(t)
			if err == nil {
				t.Fatal("the write succeeded")
			}
			t.Logf("got %v", err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want it to wrap %v", err, tc.want)
			}
			if maybe := errors.Is(err, fsm.ErrMaybeApplied); maybe != tc.maybe {
				t.Fatalf("got %v: maybe applied %v, want %v", err, maybe, tc.maybe)
			}
		})
	}
}
