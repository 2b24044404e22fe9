// Package cluster runs raft for one node: raft-boltdb/v2 as log and stable
// store, file snapshots, a TCP transport, and the single write path Apply.
//
// Invariants:
//   - Every replicated write goes through Cluster.Apply. It returns once the
//     entry is committed and applied by this node's FSM, so the answer the
//     caller gives afterwards is the truth on this node.
//   - A nil error from Apply means committed. An error wrapping
//     fsm.ErrMaybeApplied means the write may or may not have happened; any
//     other error means it did not. A *fsm.FormatError refuses, before
//     anything is proposed, a command that needs a newer state format than
//     the cluster runs (format.go).
//   - Loops that only the leader runs are registered with OnLeader and are
//     started and stopped in one place, on leadership changes.
//   - New opens the stores and listens; Start starts raft. Between the two
//     the node hands the Cluster (Apply, ReadIndex, RateLimiter) to the
//     packages that use it and hooks them to the FSM, so nothing applied on
//     start-up reaches a consumer that does not exist yet.
package cluster
