package node

import "github.com/oidcd/oidcd/fsm"

// WritePair lets the external tests (package node_test) make a TLS pair.
var WritePair = writePair

// StateMachine is the node's state machine, for tests that hand it a log
// entry raft would (a newer release's).
func (n *Node) StateMachine() *fsm.FSM { return n.fsm }

// HoldTrailFetch makes the node wait, before each fetch of a gap of its
// audit trail, until release is closed.
func HoldTrailFetch(cfg *Config, release <-chan struct{}) { cfg.trailGate = release }
