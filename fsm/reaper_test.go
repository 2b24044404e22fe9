package fsm

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReapOn: after a tick's first reap, the leader goes on while a
// limited reap left records behind (at most reapRounds reaps a tick) and
// while a prune filled its audit batch (at most auditPruneRounds more),
// both in the same reaps, and stops at an error.
func TestReapOn(t *testing.T) {
	before, auditBefore := time.Unix(1000, 0), time.Unix(500, 0)
	first := Reap{Before: before, Limit: ReapLimit, AuditBefore: auditBefore}
	full := AuditPruneBatch
	tests := []struct {
		name        string
		st          ReapStats
		more, audit int // how many more reaps report More, a full batch
		failAt      int // the call that fails (1-based); 0 none
		wantCalls   int
		wantSweeps  int // calls that carry Before
		wantPrunes  int // calls that carry AuditBefore
	}{
		{"nothing left", ReapStats{}, 0, 0, 0, 0, 0, 0},
		{"one more sweep", ReapStats{More: true}, 0, 0, 0, 1, 1, 0},
		{"the sweep never ends: bounded", ReapStats{More: true}, 1000, 0, 0, reapRounds - 1, reapRounds - 1, 0},
		{"one more prune", ReapStats{AuditEvents: full}, 0, 0, 0, 1, 0, 1},
		{"the backlog never ends: bounded", ReapStats{AuditEvents: full}, 0, 1000, 0, auditPruneRounds, 0, auditPruneRounds},
		{"both, in the same reaps", ReapStats{More: true, AuditEvents: full}, 2, 1, 0, 3, 3, 2},
		{"both, each to its bound", ReapStats{More: true, AuditEvents: full}, 1000, 1000, 0, reapRounds - 1, reapRounds - 1, auditPruneRounds},
		{"an error stops it", ReapStats{More: true, AuditEvents: full}, 1000, 1000, 2, 2, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls, sweeps, prunes int
			reapOn(context.Background(), first, tt.st, func(r Reap) (ReapStats, error) {
				calls++
				if !r.Before.IsZero() {
					sweeps++
					if !r.Before.Equal(before) || r.Limit != ReapLimit {
						t.Errorf("call %d: sweep %v limit %d, want the first reap's", calls, r.Before, r.Limit)
					}
				}
				if !r.AuditBefore.IsZero() {
					prunes++
					if !r.AuditBefore.Equal(auditBefore) {
						t.Errorf("call %d: prune before %v, want the first reap's", calls, r.AuditBefore)
					}
				}
				if calls == tt.failAt {
					return ReapStats{}, errors.New("no leader")
				}
				var st ReapStats
				st.More = calls <= tt.more
				if calls <= tt.audit {
					st.AuditEvents = full
				}
				return st, nil
			})
			if calls != tt.wantCalls || sweeps != tt.wantSweeps || prunes != tt.wantPrunes {
				t.Errorf("calls %d, sweeps %d, prunes %d; want %d, %d, %d", calls, sweeps, prunes, tt.wantCalls, tt.wantSweeps, tt.wantPrunes)
			}
		})
	}
	t.Run("a context that ends stops it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		reapOn(ctx, first, ReapStats{More: true}, func(Reap) (ReapStats, error) {
			calls++
			cancel()
			return ReapStats{More: true}, nil
		})
		if calls != 1 {
			t.Errorf("%d calls after the context ended, want 1", calls)
		}
	})
}
