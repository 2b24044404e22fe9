package node

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/admin"
)

// maxDataDirEntries bounds the walk behind oidcd_data_dir_bytes.
const maxDataDirEntries = 100000

// adminNodeInfo describes this node for GET /admin/v1/status.
func (n *Node) adminNodeInfo() admin.NodeInfo {
	stats := n.cluster.Stats()
	commit, _ := strconv.ParseUint(stats["commit_index"], 10, 64)
	return admin.NodeInfo{
		ID:          n.cfg.NodeID,
		Version:     n.cfg.Version,
		State:       strings.ToLower(stats["state"]),
		CommitIndex: commit,
	}
}

// registerOpsMetrics adds the gauges that the alert rules and the
// dashboard in deploy/ need beyond the packages' own metrics: build,
// leader, key-age and disk gauges. docs/metrics.md lists them all.
func (n *Node) registerOpsMetrics() {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	boolGauge := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	n.registry.MustRegister(n.keys.Collectors()...)
	n.registry.MustRegister(
		buildInfo(n.cfg.Version),
		gauge("oidcd_tls_certificate_not_after_seconds", "When the --tls-cert certificate being served expires, as a Unix time; 0 without TLS on the node.",
			func() float64 {
				if n.certs == nil {
					return 0
				}
				return float64(n.certs.NotAfter().Unix())
			}),
		gauge("oidcd_raft_has_leader", "1 while this node knows a leader (what /readyz answers 200 for).",
			func() float64 { return boolGauge(n.cluster.Ready()) }),
		gauge("oidcd_raft_voters", "Voters in the raft configuration as this node sees it.", func() float64 {
			ms, err := n.cluster.Members()
			if err != nil {
				return 0
			}
			c := 0
			for _, m := range ms {
				if m.Suffrage == raft.Voter {
					c++
				}
			}
			return float64(c)
		}),
		gauge("oidcd_data_dir_bytes", "Bytes in the data directory: raft log, snapshots and the state file.",
			func() float64 { return float64(dirBytes(n.cfg.DataDir)) }),
		gauge("oidcd_state_file_bytes", "Size of the bbolt state file (state.db).", func() float64 {
			return float64(fileBytes(filepath.Join(n.cfg.DataDir, "state.db")))
		}),
		gauge("oidcd_data_dir_free_bytes", "Bytes free for an unprivileged user on the data directory's file system (-1 when unknown).",
			func() float64 { return float64(freeBytes(n.cfg.DataDir)) }),
	)
}

// dirBytes sums the sizes of the regular files under dir, visiting at most
// maxDataDirEntries entries.
func dirBytes(dir string) int64 {
	var total int64
	seen := 0
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed during the walk (a compacted segment)
		}
		if seen++; seen > maxDataDirEntries {
			return filepath.SkipAll
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

func fileBytes(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}
