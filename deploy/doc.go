// Package deploy holds what an operator deploys beside the binary: the
// Grafana dashboard (grafana/oidcd.json) and the Prometheus alert rules
// (prometheus/alerts.yml). Its test starts a real node, scrapes /metrics
// and fails if either names a metric the node does not export, or if
// docs/metrics.md and the exported metrics disagree.
package deploy
