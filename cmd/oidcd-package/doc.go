// Command oidcd-package builds the Debian package of oidcd (see package
// internal/packaging): `make package` runs it on bin/oidcd.
//
//	go run ./cmd/oidcd-package --binary bin/oidcd --version "$(git describe --tags --always --dirty)" --out dist/
package main
