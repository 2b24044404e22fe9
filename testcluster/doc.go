// Package testcluster starts real oidcd nodes inside a test: real raft, real
// bbolt files in temporary directories, real HTTP on 127.0.0.1 ports. Every
// node is built through package node (node.New, then Start), as `oidcd
// serve` builds it; Options.Configure adjusts each node's Config first.
//
//	c := testcluster.New(t, testcluster.Options{Size: 3})
//	resp, _ := c.Client().Get(c.URL(0) + "/.well-known/openid-configuration")
//
// New returns once the cluster has a leader. With more than one node, a
// load balancer owns the issuer address and spreads requests over the
// running nodes (PinHeader sends one to a given node); URL(i) reaches node
// i directly. Every node accepts AdminToken unless GeneratedAdminToken
// asks for a generated one (AdminTokenFromFile).
//
// Faults: node-to-node traffic (raft, forwarded writes) is dialed through a
// fabric the test controls, so Partition cuts a group of nodes off the
// others and Heal joins them again, and LinkLatency delays chosen links;
// client HTTP is never cut. Kill stops a node as a crash would look to its
// peers (its files stay); Restart and RestartTogether start nodes again on
// the same data directory and wait for a leader, Launch starts one without
// waiting (a wiped node catching up from a large store). Leader,
// Followers, WaitLeader and WaitNewLeader follow the elections. NonVoters
// makes the last nodes edge replicas, and Gossip runs memberlist as a
// production cluster does. Browser is a person's browser (cookies, no
// redirects followed, the sign-in pages' forms).
//
// Nodes are closed with t.Cleanup. Their logs go to the test's output
// with Options.Verbose or TESTCLUSTER_VERBOSE; otherwise each node's last
// lines are kept and printed only when the test has failed.
package testcluster
