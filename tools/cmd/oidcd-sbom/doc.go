// Command oidcd-sbom writes the software bill of materials of a built
// oidcd binary (see package tools/sbom): CycloneDX JSON of every module
// the binary links, from its own build record, with the licences found in
// the module cache. `make sbom` runs it on bin/oidcd; `make package`
// makes the same document of the packaged binary itself. From tools/:
//
//	go run ./cmd/oidcd-sbom --binary ../bin/oidcd --root .. --out ../bin/oidcd.cdx.json
//
// It reads only local files (the binary, the source tree, GOMODCACHE)
// and opens no connection.
package main
