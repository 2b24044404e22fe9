package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
)

// Versions and state formats (DESIGN.md, "Versions and the state format").
// Each node announces in gossip its version and the newest state format
// its build applies, and answers the same to a node that asks it over the
// node-to-node RPC (announce.go), which every node does of a member gossip
// does not see (static peers: all of them). From those the leader raises
// the cluster's format
// (the one its state holds) once every member of the raft configuration
// applies the higher one, and Apply refuses a command newer than the
// cluster's format before anything is proposed.

const (
	// formatEvery is how often the leader looks whether it can raise the
	// cluster's format, besides whenever gossip changes or an ask's
	// answer does.
	formatEvery = 3 * time.Second
	// formatGap is the least time between two looks: every member
	// advertises its progress in gossip every couple of seconds, and a
	// failed raise is not tried again at once.
	formatGap = 200 * time.Millisecond
)

// format is the state format m announces: fsm.FormatBase when it
// announces none (a release before the gate).
func (m nodeMeta) format() fsm.Format { return announcedFormat(m.Format) }

// announcedFormat reads a format announced as n (in gossip or in an
// answer to opAnnounce): fsm.FormatBase for none.
func announcedFormat(n int) fsm.Format {
	switch {
	case n <= 0:
		return fsm.FormatBase
	case n > math.MaxUint16:
		return math.MaxUint16
	}
	return fsm.Format(n)
}

// selfAnnounced is this node's own version and format, as it announces
// them in gossip (which takes them from the same configuration). It reads
// no gossip state: opAnnounce is served from before gossip starts, and
// c.gossip is set while the forwarding server already runs.
func (c *Cluster) selfAnnounced() (string, fsm.Format) {
	if r := c.reannounced.Load(); r != nil {
		return r.version, r.format
	}
	return c.cfg.Gossip.Version, c.announceFormat()
}

// selfAnnouncement is what a test's reannounce makes this node announce.
type selfAnnouncement struct {
	version string
	format  fsm.Format
}

// announceFormat is the format this node announces: fsm.CurrentFormat
// unless a test plays an older release (Config.announceFormat).
func (c *Cluster) announceFormat() fsm.Format {
	if c.cfg.announceFormat != 0 {
		return c.cfg.announceFormat
	}
	return fsm.CurrentFormat
}

// announcement is what one server of the raft configuration counts as
// for the format checks: the raise, the gate's list and the join check.
type announcement struct {
	id      string
	version string
	format  fsm.Format
	// state says why a member counts as fsm.FormatBase whatever it last
	// announced: "" while it is alive (or is this node), "not seen" when
	// neither gossip nor an ask ever showed it, "down" when it failed,
	// left or is stopping, or no longer answers asks.
	state string
}

// counted lists what every server of the configuration counts as. This
// node counts as what it announces; another member as what it announces
// while gossip sees it alive, or, when gossip has no entry for it (no
// gossip at all: static peers), as what it lately answered an ask
// (announce.go). One that is down, stopping, not answering or never seen
// counts as fsm.FormatBase: it may come back on any release, an older
// one included, and must not find a format it cannot apply.
func (c *Cluster) counted(servers []raft.Server, gossip map[string]member) []announcement {
	out := make([]announcement, 0, len(servers))
	for _, s := range servers {
		a := announcement{id: string(s.ID), format: fsm.FormatBase}
		g, seen := gossip[a.id]
		switch {
		case a.id == c.cfg.NodeID:
			a.version, a.format = c.selfAnnounced()
		case !seen:
			a.version, a.format, a.state = c.askedNow(a.id)
		case !g.alive() || g.meta.Stopping || g.meta.Leaving:
			a.version, a.state = g.meta.Version, "down"
		default:
			a.version, a.format = g.meta.Version, g.meta.format()
		}
		out = append(out, a)
	}
	return out
}

// lowest is the lowest format the members count as, capped at
// fsm.CurrentFormat, and the lowest version they announce (as recorded
// with a raised format, so that a node that does not apply it can say
// which release it needs).
func lowest(members []announcement) (fsm.Format, string) {
	low, version := fsm.CurrentFormat, ""
	for _, a := range members {
		low = min(low, a.format)
		if a.version != "" && (version == "" || versionLess(a.version, version)) {
			version = a.version
		}
	}
	return low, version
}

// behind names the members that count as a format below need, for the
// gate's refusal: "id (version)", "id (no version announced)", or why a
// member is not counted ("id (down, last announced 0.4.0)", "id (not
// seen)").
func behind(members []announcement, need fsm.Format) []string {
	var out []string
	for _, a := range members {
		if a.format >= need {
			continue
		}
		switch {
		case a.state == "down" && a.version != "":
			out = append(out, a.id+" (down, last announced "+a.version+")")
		case a.state != "":
			out = append(out, a.id+" ("+a.state+")")
		case a.version == "":
			out = append(out, a.id+" (no version announced)")
		default:
			out = append(out, a.id+" ("+a.version+")")
		}
	}
	return out
}

// shown is the version and format Status shows for member id: what it
// announces, or last announced while it is down; without a gossip entry,
// what it last answered an ask; "" and fsm.FormatBase when neither ever
// showed it.
func (c *Cluster) shown(id string, gossip map[string]member) (string, int) {
	if id == c.cfg.NodeID {
		v, f := c.selfAnnounced()
		return v, int(f)
	}
	if g, seen := gossip[id]; seen {
		return g.meta.Version, int(g.meta.format())
	}
	if a, ok := c.asked.get(id); ok && a.ever {
		return a.version, int(a.format)
	}
	return "", int(fsm.FormatBase)
}

// mixed reports whether the servers of the raft configuration do not all
// announce the same version and format, as Status shows them.
func (c *Cluster) mixed(servers []raft.Server, gossip map[string]member) bool {
	if len(servers) == 0 {
		return false
	}
	v0, f0 := c.shown(string(servers[0].ID), gossip)
	for _, s := range servers[1:] {
		if v, f := c.shown(string(s.ID), gossip); v != v0 || f != f0 {
			return true
		}
	}
	return false
}

// mixedNow is mixed for the configuration and gossip of this moment
// (the oidcd_cluster_mixed_versions gauge).
func (c *Cluster) mixedNow() bool {
	servers, err := c.Members()
	return err == nil && c.mixed(servers, c.gossip.snapshot())
}

// nameBehind fills a *fsm.FormatError's Members with the members of the
// raft configuration that count as a format below the one it needs.
func (c *Cluster) nameBehind(err error) error {
	var fe *fsm.FormatError
	if errors.As(err, &fe) && fe.Members == nil {
		if servers, merr := c.Members(); merr == nil {
			fe.Members = behind(c.counted(servers, c.gossip.snapshot()), fe.Need)
		}
	}
	return err
}

// versionLess orders release versions ("0.3.0", "v0.4.1-rc.1",
// "0.2.0+git.5.1a2b3c4") by their numbers, a pre-release before its
// release; a version that does not start with a number ("dev") sorts
// after every release, and two such by their text.
func versionLess(a, b string) bool {
	na, pa, oka := parseVersion(a)
	nb, pb, okb := parseVersion(b)
	switch {
	case oka != okb:
		return oka
	case !oka:
		return a < b
	}
	for i := range na {
		if na[i] != nb[i] {
			return na[i] < nb[i]
		}
	}
	switch {
	case pa == pb:
		return false
	case pa == "" || pb == "":
		return pb == "" // a pre-release comes before its release
	}
	return pa < pb
}

// parseVersion reads "v?MAJOR[.MINOR[.PATCH]][-pre][+build]".
func parseVersion(v string) (nums [3]uint64, pre string, ok bool) {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexByte(v, '+'); i >= 0 {
		v = v[:i]
	}
	if i := strings.IndexByte(v, '-'); i >= 0 {
		v, pre = v[:i], v[i+1:]
	}
	parts := strings.Split(v, ".")
	if len(parts) > 3 {
		return nums, "", false
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nums, "", false
		}
		nums[i] = n
	}
	return nums, pre, true
}

// formatLoop runs while this node leads (OnLeader): it raises the
// cluster's state format when it can, every formatEvery and whenever
// gossip membership or metadata changes or an ask's answer does
// (askLoop), at most once every formatGap. It sends no ask itself: it
// reads what askLoop found.
// A failed raise is logged at its first attempt and every twentieth.
func (c *Cluster) formatLoop(ctx context.Context) {
	t := time.NewTicker(formatEvery)
	defer t.Stop()
	failures := 0
	for {
		if err := c.raiseFormat(ctx); err != nil && ctx.Err() == nil {
			level := slog.LevelDebug
			if failures++; failures == 1 || failures%20 == 0 {
				level = slog.LevelWarn
			}
			c.log.Log(ctx, level, "cannot raise the state format yet", "attempts", failures, "error", err)
		} else if err == nil {
			failures = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.formatCh:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(formatGap):
		}
	}
}

// raiseFormat raises the cluster's state format to the lowest format the
// members of the raft configuration count as (counted: a member down,
// never seen or not answering counts as fsm.FormatBase), when that is
// above the state's.
// It holds formatMu, as reconcile does while it adds members, so that no
// member of an older format joins between the look and the raise.
func (c *Cluster) raiseFormat(ctx context.Context) error {
	c.formatMu.Lock()
	defer c.formatMu.Unlock()
	have := c.state.StateFormat()
	if have >= fsm.CurrentFormat || ctx.Err() != nil {
		return nil
	}
	servers, err := c.Members()
	if err != nil {
		return err
	}
	to, version := lowest(c.counted(servers, c.gossip.snapshot()))
	if to <= have {
		return nil
	}
	// Past the gate: set_state_format is itself of the format it sets.
	// Should this node have lost leadership meanwhile, the next leader's
	// gate refuses it unless that leader's state holds the format already.
	res, err := c.propose(ctx, fsm.MustCommand(fsm.TypeSetStateFormat, fsm.SetStateFormat{Format: to, Version: version}))
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("from %d to %d: %w", have, to, err)
	}
	c.log.Info("state format raised", "from", int(have), "to", int(to), "version", version)
	return nil
}
