// Package sbom writes the software bill of materials of a built oidcd
// binary: a CycloneDX JSON document (github.com/CycloneDX/cyclonedx-go)
// of every Go module the binary links, with its version and its licence.
//
// The list of modules is the binary's own: debug/buildinfo.ReadFile, the
// same record `go version -m` prints. The main module is the document's
// metadata.component, every dependency one component, no more and no
// fewer (a replaced module is listed as its replacement, the module the
// binary holds, naming what it replaces). Nothing is taken from go.mod,
// which lists more than one binary links.
//
// Each licence is read from the module's own files in the module cache
// (GOMODCACHE), the copy the build compiled: the sum the binary records
// is checked against the cache's before a file is read. The licence
// classifier is cyclonedx-gomod's (github.com/go-enry/go-license-detector
// underneath, at its 0.85 confidence). A licence it finds is recorded
// with acknowledgement "concluded" (found by analysis, not declared by
// the module); one it cannot match is recorded as the name "unknown" with
// the licence file's text beside it, so a reader sees what the file says;
// a module without a licence file is "unknown" with no text. A licence
// the project declares for its own module (Options.MainLicense) is
// "declared". Nothing is guessed.
//
// The document is reproducible: its serial number is derived from the
// binary's SHA-256 and its timestamp is Options.Time, so the same binary
// gives the same bytes.
package sbom
