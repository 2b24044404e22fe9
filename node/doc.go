// Package node assembles one complete oidcd node from a Config: the bbolt
// state machine, raft, signing keys, the OIDC surface, the admin API, health
// and metrics, and the leader-only loops. cmd/oidcd and testcluster both
// build nodes through it, so tests run exactly what operators run.
package node
