package node

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/directory"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/signin"
)

// The leader's directory sync (docs/operators/directories.md): every directory is
// re-read every sync_interval, in pages; the people it knows here are
// compared with what the directory says, and the differences go out as
// replicated DirectorySyncBatch commands. A person disabled or removed
// there loses their sessions (logout tokens with sid) and the memberships
// the directory granted; a person dropped from a group loses that
// membership. The schedule comes from each directory's replicated
// last_sync, so a new leader carries on where the old one stopped.

// directoryTick is how often the leader looks for a directory due.
const directoryTick = time.Second

// syncBatch bounds the people of one DirectorySyncBatch.
const syncBatch = 500

type directoryMetrics struct {
	syncs    *prometheus.CounterVec
	duration prometheus.Histogram
	lastOK   *prometheus.GaugeVec
}

func (n *Node) initDirectoryMetrics() {
	n.dirMetrics = directoryMetrics{
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
	}
	n.registry.MustRegister(n.dirMetrics.syncs, n.dirMetrics.duration, n.dirMetrics.lastOK)
}

// directorySyncLoop runs on the leader until ctx ends.
func (n *Node) directorySyncLoop(ctx context.Context) {
	t := time.NewTicker(directoryTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		dirs, err := n.fsm.State().Directories()
		if err != nil {
			continue
		}
		now := n.cfg.Now().UTC()
		for _, d := range dirs {
			if d.LastSync != nil && now.Sub(d.LastSync.At) < d.SyncInterval {
				continue
			}
			n.syncDirectory(ctx, d)
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// syncDirectory runs one sync of d and records its outcome.
func (n *Node) syncDirectory(ctx context.Context, d fsm.Directory) {
	start := time.Now()
	people, status, err := n.directoryDiff(ctx, d)
	status.At, status.Node = n.cfg.Now().UTC(), n.cfg.NodeID
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		status.OK, status.Error = false, err.Error()
		n.log.Warn("directory sync failed", "directory", d.ID, "err", err)
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
		res, aerr := n.cluster.Apply(ctx, stamped)
		if aerr == nil {
			aerr = res.Err
		}
		if aerr != nil {
			n.log.Warn("directory sync: apply", "directory", d.ID, "err", aerr)
			n.dirMetrics.syncs.WithLabelValues(d.ID, "failed").Inc()
			return
		}
		if len(people) == 0 {
			break
		}
	}
	n.dirMetrics.duration.Observe(time.Since(start).Seconds())
	if status.OK {
		n.dirMetrics.syncs.WithLabelValues(d.ID, "ok").Inc()
		n.dirMetrics.lastOK.WithLabelValues(d.ID).Set(float64(status.At.Unix()))
		if status.Changed > 0 || status.Ended > 0 {
			n.log.Info("directory synced", "directory", d.ID, "people", status.People, "changed", status.Changed, "ended", status.Ended)
		}
	} else {
		n.dirMetrics.syncs.WithLabelValues(d.ID, "failed").Inc()
	}
}

// directoryDiff reads d and returns the people whose state here differs
// from what it says.
func (n *Node) directoryDiff(ctx context.Context, d fsm.Directory) ([]fsm.DirectoryPerson, fsm.DirectorySync, error) {
	var status fsm.DirectorySync
	pw, err := n.kek.Open(d.BindPassword, fsm.DirectoryAAD(d.ID))
	if err != nil {
		return nil, status, err
	}
	c, err := directory.New(signin.DirectoryConfig(d, string(pw)))
	if err != nil {
		return nil, status, err
	}
	defer c.Close()
	st := n.fsm.State()
	known, err := st.DirectoryUsers(d.ID)
	if err != nil {
		return nil, status, err
	}
	status.People = len(known)
	seen := map[string]bool{}
	var out []fsm.DirectoryPerson
	err = c.People(ctx, func(id string) bool { _, ok := known[id]; return ok }, func(p directory.Person) error {
		u, ok := known[p.ID]
		if !ok {
			return nil // never signed in here
		}
		seen[p.ID] = true
		want := signin.DirectoryPerson(d, p, u.Email)
		if changed, err := n.personDiffers(u, want); err != nil {
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
		if changed, err := n.personDiffers(u, gone); err != nil {
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

// personDiffers reports whether applying want to u would change anything:
// a Gone person with a live session or a membership of the directory, an
// address or phone that moved, or memberships that differ from the groups.
func (n *Node) personDiffers(u fsm.User, want fsm.DirectoryPerson) (bool, error) {
	st := n.fsm.State()
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
		sessions, _, err := st.SSOSessionsOf(u.ID, n.cfg.Now())
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
