// Command oidcd-demo-rp is the demo relying party (package
// internal/demorp): a tiny application, built on go-oidc and oauth2 as a
// real one would be, for trying the provider on 127.0.0.1. It is its own
// binary so that the provider's binary links no relying-party library.
//
//	oidcd-demo-rp --issuer http://127.0.0.1:8080 --addr 127.0.0.1:9090
//
// `make run` starts it beside a single node; -h lists the flags.
package main

import (
	"os"

	"github.com/oidcd/oidcd/internal/demorp"
)

func main() {
	os.Exit(demorp.Main(os.Args[1:], os.Stdout, os.Stderr))
}
