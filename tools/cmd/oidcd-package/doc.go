// Command oidcd-package builds the Debian package of oidcd (see package
// tools/packaging): `make package` runs it on bin/oidcd. It lives in the
// tools module with the linters, so nfpm and what it pulls in stay out of
// the product's go.mod and go.sum. From tools/:
//
//	go run ./cmd/oidcd-package --binary ../bin/oidcd --root .. --version "$(sh version.sh)" --out ../dist/
//
// --version is the build's version from version.sh (RELEASES explains
// it); the package's version is the same string (packaging.DebVersion).
// It prints the paths it wrote: the .deb, its bill of materials beside it
// and the SHA256SUMS that lists both.
package main
