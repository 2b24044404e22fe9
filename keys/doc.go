// Package keys owns oidcd's token signing keys: generation, the rotation
// policy, the published key set (JWKS), signing and verification of our own
// tokens.
//
// Keys live in the replicated state (fsm.Key: kid, PKCS#8 private key,
// creation and activation times). Package keys writes them only through an
// Applier (fsm.AddKey, fsm.RemoveKey) and never imports package cluster.
// The private key is sealed with the operator's KEK (Config.KEK, package
// internal/kek, additional data PrivateKeyAAD(kid)) before it is proposed,
// so the raft log, the state file and snapshots never hold it in the clear
// when a KEK is configured; bare DER written by older versions still reads.
//
// Invariants:
//   - A key's state is never stored. At time t, in activation order (by
//     ActivatesAt, then kid), the active key is the last one with
//     ActivatesAt <= t; keys with ActivatesAt > t are next (published, not
//     signing); earlier keys are retired, retired at the ActivatesAt of the
//     key that follows them. A retired key is published until
//     retired_at + Retention. Every node derives the same states from the
//     replicated keys and its clock.
//   - Only the active key signs, always RS256 with a kid header. A key is
//     published at least PublishLead (> the 300 s JWKS cache lifetime)
//     before it signs, unless an operator asks for an immediate rotation,
//     and stays published at least Retention (>= 60 min) after it stops
//     signing.
//   - Keys are immutable once written, so parsed keys are cached per kid and
//     the cache is keyed by the version of the key set (the raft index of
//     its last change). Time alone changes the active key and the published
//     set; both are recomputed from the cached set and Config.Now on each
//     call, and the encoded JWKS is reused until the next retention boundary.
//   - Only the leader runs the rotation loop (Run); any node may Rotate on
//     an operator's request. The private key is generated on the node that
//     proposes it and travels in the command.
//   - No package-level state: everything hangs off a Manager built from a
//     Config.
package keys
