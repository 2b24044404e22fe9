package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/oidcd/oidcd/tools/packaging"
	"github.com/oidcd/oidcd/tools/sbom"
)

func main() {
	binary := flag.String("binary", "bin/oidcd", "the built oidcd `binary` to describe")
	root := flag.String("root", ".", "the source `tree` of the main module (for its licence file)")
	out := flag.String("out", "", "the `file` to write (default standard output)")
	version := flag.String("version", "", "the build's `version`, for the main module where the binary records none (a -trimpath build)")
	license := flag.String("license", packaging.License, "the `licence` the project declares for its own module, as the package does; empty to detect it like any other")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "oidcd-sbom: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	o := sbom.Options{Binary: *binary, MainDir: *root, MainLicense: *license, Time: packaging.SourceDate(), Version: *version}
	var err error
	if *out == "" {
		var bom = must(sbom.Generate(o))
		err = sbom.Write(os.Stdout, bom)
	} else if err = sbom.WriteFile(*out, o); err == nil {
		fmt.Println(*out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidcd-sbom:", err)
		os.Exit(1)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidcd-sbom:", err)
		os.Exit(1)
	}
	return v
}
