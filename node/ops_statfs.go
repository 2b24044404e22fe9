//go:build linux || darwin || freebsd

package node

import "syscall"

// freeBytes is the space an unprivileged user may still write on the file
// system holding path, or -1.
func freeBytes(path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return -1
	}
	// #nosec G115 -- free bytes of a file system stay far below 2^63
	return int64(uint64(st.Bavail) * uint64(st.Bsize))
}
