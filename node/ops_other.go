//go:build !(linux || darwin || freebsd)

package node

// freeBytes is not measured on this platform.
func freeBytes(string) int64 { return -1 }
