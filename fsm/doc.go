// Package fsm is oidcd's replicated state machine: a bbolt database that every
// node changes only by applying raft log entries.
//
// Invariants:
//   - Every write is a Command (a one-byte type, a flag byte and a JSON
//     payload). Apply dispatches through a table filled at init; each apply
//     function runs inside the single bbolt transaction that also records the
//     applied raft index, so data and index never disagree.
//   - Apply is deterministic: the proposing node stamps ids, hashes and times
//     into the command. Apply never reads the clock, draws randomness, starts
//     goroutines or touches the network.
//   - Every command type and record field declares the state format that
//     introduced it (format.go); a command newer than the state's format is
//     never proposed (State.CheckFormat), and a state, snapshot or entry of
//     a format newer than this build stops the replica before it changes
//     anything (NewerFormatError).
//   - An undecodable entry or an unknown command type panics (the log is
//     corrupt), unless the command carries FlagIgnorable, which lets an older
//     node skip a newer optional command during a rolling upgrade.
//   - Domain outcomes (conflict, not found, already used) are returned as the
//     Result of Apply, never as panics.
//   - Reads for request handling go straight to bbolt through State.
package fsm
