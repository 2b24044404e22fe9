package main

import (
	"bytes"
	"runtime"
	"testing"
)

// TestVersionCommand: `oidcd version` prints the stamped version (make
// build stamps tools/version.sh's, RELEASES), the Go release and the
// platform; the version comes first, so `oidcd version | cut -d' ' -f2`
// is the version alone.
func TestVersionCommand(t *testing.T) {
	saved := version
	t.Cleanup(func() { version = saved })
	version = "0.2.0+git.5.1a2b3c4"
	want := "oidcd 0.2.0+git.5.1a2b3c4 (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	for _, arg := range []string{"version", "--version", "-version"} {
		var out, errb bytes.Buffer
		if code := run([]string{arg}, nil, nil, &out, &errb); code != 0 || out.String() != want {
			t.Errorf("oidcd %s: got exit %d %q, want 0 %q", arg, code, out.String(), want)
		}
	}
}
