// Package node assembles one complete oidcd node from a Config: the bbolt
// state machine, raft, signing keys, the OIDC surface, logout, the admin
// API, health and metrics. The domain's rules live in their packages,
// which take the cluster as their Applier and the state as their read
// view; the FSM's OnApply hook hands each the applied command types
// (keys, logout), and the leader-only loops are theirs too
// (keys.Manager.Run, fsm.Reaper, logout.Service.RunSender,
// directory.Syncer): node only starts them on leadership (onLeadership).
// What stays here is assembly and the node's own operation: listeners,
// TLS, readiness, draining, metrics of the process and its files, and
// what reads the node's own flags and files: the first leader's bootstrap
// (admin token, browser key, demo data) and the admin token's sources.
// cmd/oidcd and testcluster both build nodes through it, so tests run
// exactly what operators run.
package node
