package node

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is the oidcd_build_info gauge: always 1, labelled with the
// build's version (Config.Version: what cmd/oidcd was stamped with, from
// tools/version.sh; RELEASES explains the scheme) and the Go release that
// built it, like Prometheus' own go_build_info. A dashboard groups nodes by
// version with it during a rolling upgrade; docs/metrics.md lists it.
func buildInfo(version string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "oidcd_build_info",
		Help:        "Always 1; version is the build's version (VERSION, see RELEASES), goversion the Go release that built it.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}
