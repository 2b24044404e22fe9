// Command oidcd is the OpenID Connect provider: `oidcd serve` runs a node,
// `oidcd admin` drives the admin API, `oidcd config check|example` checks
// and prints a configuration, `oidcd keygen` prints a cluster key or KEK,
// and `oidcd version` prints the version. The demo relying party is its
// own binary, oidcd-demo-rp (cmd/oidcd-demo-rp).
//
// This package only turns flags, OIDCD_* environment variables and the
// TOML file (in that order of precedence, over the defaults of
// node.Config) into a node.Config, and handles signals: SIGINT and SIGTERM
// close the node. Everything a node does is in package node and below.
// Exit codes: 0 success, 1 a runtime failure, 2 a usage or configuration
// error.
package main
