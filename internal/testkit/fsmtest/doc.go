// Package fsmtest gives package tests a real bbolt FSM and an Applier that
// applies commands to it directly, as a one-node raft would, without raft.
package fsmtest
