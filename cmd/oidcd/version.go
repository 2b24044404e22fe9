package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...": make
// build and make package stamp what tools/version.sh prints (RELEASES
// explains the scheme: 0.2.0, 0.2.0+git.5.1a2b3c4). A plain go build says
// dev.
var version = "dev"

// versionLine is what `oidcd version` prints: the version, then the Go
// release and platform it was built for, and for a dev build the commit
// Go recorded, if any.
func versionLine() string {
	extra := ""
	if version == "dev" {
		extra = vcsNote()
	}
	return fmt.Sprintf("oidcd %s (%s %s/%s%s)", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, extra)
}

// vcsNote names the commit a plain go build was made from, as Go stamped
// it (-buildvcs), or "".
func vcsNote() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return ""
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		return ", commit " + rev + " with changes"
	}
	return ", commit " + rev
}
