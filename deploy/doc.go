// Package deploy holds what an operator deploys beside the binary: the
// Grafana dashboard (grafana/oidcd.json), the Prometheus alert rules
// (prometheus/alerts.yml), the HAProxy configurations (haproxy/*.cfg,
// which the node package's balancer tests run and docs/operators/balancer.md shows) and
// the Apache mod_auth_openidc recipe (apache/, which the node package's
// Apache test runs and docs/application-developers.md shows). Its test starts a real node, scrapes /metrics
// and fails if either names a metric the node does not export, or if
// docs/metrics.md and the exported metrics disagree.
package deploy
