package directory

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
)

// The leader's directory sync (docs/operators/directories.md): every directory is
// re-read every sync_interval, in pages; the people it knows here are
// compared with what the directory says, and the differences go out as
// replicated DirectorySyncBatch commands. A person disabled or removed
// there loses their sessions (logout tokens with sid) and the memberships
// the directory granted; a person dropped from a group loses that
// membership. The schedule comes from each directory's replicated
// last_sync, so a new leader carries on where the old one stopped.

// Applier is the sync's write path (fsm.Applier): cluster.Cluster in
// production, fsmtest.Applier in tests.
type Applier = fsm.Applier

// SyncConfig wires a Syncer to one node.
type SyncConfig struct {
	State   *fsm.State
	Applier Applier
	// KEK opens the directories' bind passwords (nil: they are stored in
	// kek's clear form).
	KEK *kek.KEK
	Now func() time.Time
	// Node names this node in each directory's last_sync.
	Node       string
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Syncer runs the directory sync on the leader (Run).
type Syncer struct {
	cfg     SyncConfig
	log     *slog.Logger
	metrics syncMetrics
	tick    time.Duration // how often Run looks for a directory due (SyncTick)
}

// SyncTick is how often the leader looks for a directory due.
const SyncTick = time.Second

// syncBatch bounds the people of one DirectorySyncBatch.
const syncBatch = 500

type syncMetrics struct {
	syncs    *prometheus.CounterVec
	duration prometheus.Histogram
	lastOK   *prometheus.GaugeVec
}

// NewSyncer returns a Syncer. It registers the sync's metrics on
// cfg.Registerer when set.
func NewSyncer(cfg SyncConfig) (*Syncer, error) {
	if cfg.State == nil || cfg.Applier == nil {
		return nil, errors.New("directory: State and Applier are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Syncer{cfg: cfg, log: cfg.Logger, tick: SyncTick, metrics: syncMetrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_directory_syncs_total", Help: "Directory syncs run by this node as leader, by directory and outcome (ok, failed).",
		}, []string{"directory", "outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "oidcd_directory_sync_seconds", Help: "Time of one directory sync: reading the directory and applying the differences.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}),
		lastOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "oidcd_directory_last_sync_success_timestamp_seconds", Help: "When this node last synced the directory successfully (Unix time).",
		}, []string{"directory"}),
	}}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.metrics.syncs, s.metrics.duration, s.metrics.lastOK} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// Run syncs each directory when it is due, on the leader, until ctx ends.
func (s *Syncer) Run(ctx context.Context) {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		dirs, err := s.cfg.State.Directories()
		if err != nil {
			continue
		}
		now := s.cfg.Now().UTC()
		for _, d := range dirs {
			if d.LastSync != nil && now.Sub(d.LastSync.At) < d.SyncInterval {
				continue
			}
			s.sync(ctx, d)
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// sync runs one sync of d and records its outcome.
func (s *Syncer) sync(ctx context.Context, d fsm.Directory) {
	start := time.Now()
	people, status, err := s.diff(ctx, d)
	status.At, status.Node = s.cfg.Now().UTC(), s.cfg.Node
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		status.OK, status.Error = false, err.Error()
		s.log.Warn("directory sync failed", "directory", d.ID, "err", err)
		people = nil
	} else {
		status.OK = true
	}
	for {
		batch := people[:min(len(people), syncBatch)]
		people = people[len(batch):]
		cmd := fsm.DirectorySyncBatch{DirectoryID: d.ID, People: batch, At: status.At}
		if len(people) == 0 {
			cmd.Status = &status
		}
		stamped := fsm.StampIn(ctx, fsm.MustCommand(fsm.TypeDirectorySyncBatch, cmd), status.At, fsm.Audit{Actor: fsm.ActorSystem})
		res, aerr := s.cfg.Applier.Apply(ctx, stamped)
		if aerr == nil {
			aerr = res.Err
		}
		if aerr != nil {
			s.log.Warn("directory sync: apply", "directory", d.ID, "err", aerr)
			s.metrics.syncs.WithLabelValues(d.ID, "failed").Inc()
			return
		}
		if len(people) == 0 {
			break
		}
	}
	s.metrics.duration.Observe(time.Since(start).Seconds())
	if status.OK {
		s.metrics.syncs.WithLabelValues(d.ID, "ok").Inc()
		s.metrics.lastOK.WithLabelValues(d.ID).Set(float64(status.At.Unix()))
		if status.Changed > 0 || status.Ended > 0 {
			s.log.Info("directory synced", "directory", d.ID, "people", status.People, "changed", status.Changed, "ended", status.Ended)
		}
	} else {
		s.metrics.syncs.WithLabelValues(d.ID, "failed").Inc()
	}
}

// diff reads d and returns the people whose state here differs from what
// it says.
func (s *Syncer) diff(ctx context.Context, d fsm.Directory) ([]fsm.DirectoryPerson, fsm.DirectorySync, error) {
	var status fsm.DirectorySync
	pw, err := s.cfg.KEK.Open(d.BindPassword, fsm.DirectoryAAD(d.ID))
	if err != nil {
		return nil, status, err
	}
	c, err := New(ConfigOf(d, string(pw)))
	if err != nil {
		return nil, status, err
	}
	defer c.Close()
	known, err := s.cfg.State.DirectoryUsers(d.ID)
	if err != nil {
		return nil, status, err
	}
	status.People = len(known)
	seen := map[string]bool{}
	var out []fsm.DirectoryPerson
	err = c.People(ctx, func(id string) bool { _, ok := known[id]; return ok }, func(p Person) error {
		u, ok := known[p.ID]
		if !ok {
			return nil // never signed in here
		}
		seen[p.ID] = true
		want := Record(d, p, u.Email)
		if changed, err := s.differs(u, want); err != nil {
			return err
		} else if changed {
			out = append(out, want)
		}
		return nil
	})
	if err != nil {
		return nil, status, err
	}
	for uid, u := range known {
		if seen[uid] {
			continue
		}
		gone := fsm.DirectoryPerson{UID: uid, Email: u.Email, Gone: true}
		if changed, err := s.differs(u, gone); err != nil {
			return nil, status, err
		} else if changed {
			out = append(out, gone)
		}
	}
	for _, p := range out {
		if p.Gone {
			status.Ended++
		} else {
			status.Changed++
		}
	}
	return out, status, nil
}

// differs reports whether applying want to u would change anything: a
// Gone person with a live session or a membership of the directory, an
// address or phone that moved, or memberships that differ from the
// groups.
func (s *Syncer) differs(u fsm.User, want fsm.DirectoryPerson) (bool, error) {
	st := s.cfg.State
	ms, err := st.MembershipsOfUser(u.ID)
	if err != nil {
		return false, err
	}
	var have []string
	all := map[string]bool{}
	for _, m := range ms {
		all[m.OrgID] = true
		if m.DirectoryID == u.DirectoryID {
			have = append(have, m.OrgID)
		}
	}
	if want.Gone {
		if len(have) > 0 {
			return true, nil
		}
		sessions, _, err := st.SSOSessionsOf(u.ID, s.cfg.Now())
		return len(sessions) > 0, err
	}
	if want.Email != u.Email || want.Phone != u.Phone {
		return true, nil
	}
	for _, h := range have {
		if !slices.Contains(want.OrgIDs, h) {
			return true, nil
		}
	}
	for _, w := range want.OrgIDs {
		if !all[w] {
			return true, nil
		}
	}
	return false, nil
}
