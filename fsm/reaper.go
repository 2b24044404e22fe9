package fsm

import (
	"context"
	"log/slog"
	"time"
)

// Reaper is the leader's reap: every Every it proposes a Reap of what
// stopped mattering Grace ago (ReapLimit records a bucket at a time) and
// a prune of the audit events older than AuditRetention, and goes on
// while either left work behind (reapOn). The node builds one and runs it
// on leadership.
type Reaper struct {
	Applier Applier
	Now     func() time.Time
	// Every is the period of the reap.
	Every time.Duration
	// Grace: a record is reaped this long after it stopped mattering, so
	// a node whose clock runs a little behind never sees a live record
	// vanish.
	Grace time.Duration
	// AuditRetention is how long audit events are kept; zero keeps them.
	AuditRetention time.Duration
	// Skew, when set, reports how far this node's clock is off the
	// cluster's and whether that is too far: a leader whose clock is off
	// would reap what is still live (or keep what is long dead), so it
	// skips its reaps until NTP, or a leader with a good clock, fixes it.
	Skew   func() (skew time.Duration, off bool)
	Logger *slog.Logger
}

// Run reaps until ctx ends. Its audit events (the logouts of the sessions
// a reap ends) are the system's, stamped with ctx's base.
func (r Reaper) Run(ctx context.Context) {
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(r.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.Skew != nil {
			if skew, off := r.Skew(); off {
				log.Warn("reap skipped: this leader's clock is off the cluster's", "skew", skew.Round(time.Second))
				continue
			}
		}
		now := r.Now().UTC()
		reap := Reap{Before: now.Add(-r.Grace), Limit: ReapLimit}
		if r.AuditRetention > 0 {
			reap.AuditBefore = now.Add(-r.AuditRetention)
		}
		cmd := StampIn(ctx, MustCommand(TypeReap, reap), now, Audit{Actor: ActorSystem})
		res, err := r.Applier.Apply(ctx, cmd)
		if err != nil {
			log.Warn("reap failed", "error", err)
			continue
		}
		if st, ok := res.Value.(ReapStats); ok && st != (ReapStats{}) {
			log.Debug("reaped", "codes", st.Codes, "revocations", st.Revocations, "sso_sessions", st.SSOSessions, "app_sessions", st.AppSessions,
				"audit_events", st.AuditEvents, "more", st.More)
			reapOn(ctx, reap, st, func(next Reap) (ReapStats, error) {
				res, err := r.Applier.Apply(ctx, MustCommand(TypeReap, next))
				if err != nil {
					log.Warn("reap failed", "error", err)
					return ReapStats{}, err
				}
				st, _ := res.Value.(ReapStats)
				return st, nil
			})
		}
	}
}

const (
	// reapRounds bounds the limited reaps of one tick: each examines at
	// most ReapLimit records a bucket, so a tick examines at most
	// reapRounds*ReapLimit (about 100,000), and a larger store is swept
	// over several minutes, a few milliseconds of apply at a time.
	reapRounds = 24
	// auditPruneRounds bounds the audit prunes of one tick after the
	// first: a site that records more events a minute than one batch
	// (AuditPruneBatch) still keeps its trail at --audit-retention, up to
	// 21 batches a tick.
	auditPruneRounds = 20
)

// reapOn goes on with one tick's reap, given what its first reap (reap)
// did (st), through apply: while a reap left records its Limit did not
// reach (More) and while a prune filled its audit batch, each bounded
// by its rounds; both go in the same reap. It stops at apply's first
// error or when the context ends.
func reapOn(ctx context.Context, reap Reap, st ReapStats, apply func(Reap) (ReapStats, error)) {
	for round := 1; ctx.Err() == nil; round++ {
		var next Reap
		if st.More && round < reapRounds {
			next.Before, next.Limit = reap.Before, reap.Limit
		}
		if st.AuditEvents == AuditPruneBatch && round <= auditPruneRounds {
			next.AuditBefore = reap.AuditBefore
		}
		if next.Before.IsZero() && next.AuditBefore.IsZero() {
			return
		}
		var err error
		if st, err = apply(next); err != nil {
			return
		}
	}
}
