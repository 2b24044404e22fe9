//go:build unix

package main

import "syscall"

// restrictUmask makes every file the node creates (the raft log, snapshots,
// the state file, backups) readable by its own user only, whatever umask
// the node was started under: they hold tokens' hashes, sessions and, without
// --kek-file, secrets.
func restrictUmask() { syscall.Umask(0o077) }
