package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/oidcd/oidcd/tools/packaging"
)

func main() {
	binary := flag.String("binary", "bin/oidcd", "the oidcd `binary` to package (built for linux/--arch)")
	tool := flag.String("tool", "", "an oidcd `binary` this machine runs, to generate the configuration file and the manual (default --binary)")
	version := flag.String("version", "dev", "the build's `version`; turned into a Debian version")
	arch := flag.String("arch", runtime.GOARCH, "the Go `architecture` of --binary")
	root := flag.String("root", ".", "the source `tree`, for deploy/ and docs/")
	out := flag.String("out", "dist/", "the .deb `file` to write, or a directory (ending in /) to write oidcd_<version>_<arch>.deb into")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "oidcd-package: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	o := packaging.Options{Binary: *binary, Tool: *tool, Version: *version, Arch: *arch, RepoRoot: *root}
	if strings.HasSuffix(*out, "/") {
		// #nosec G301 -- an output directory for public package files
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "oidcd-package:", err)
			os.Exit(1)
		}
		o.Out = filepath.Join(*out, fmt.Sprintf("%s_%s_%s.deb", packaging.PackageName, packaging.DebVersion(*version), *arch))
	} else {
		o.Out = *out
	}
	path, err := packaging.Build(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidcd-package:", err)
		os.Exit(1)
	}
	fmt.Println(path)
	fmt.Println(packaging.SBOMBeside(path))
	fmt.Println(filepath.Join(filepath.Dir(path), packaging.SumsFile))
}
