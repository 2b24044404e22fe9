package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpCitesNoUnshippedDocument: what the binary prints about itself
// (serve -h, the usage, the manual page) never cites the specification,
// contract, style or measurement files, which the project does not ship.
// The names are built from parts so that this file does not cite them
// either (docs TestNoFileCitesUnshippedDocument scans it).
func TestHelpCitesNoUnshippedDocument(t *testing.T) {
	for _, args := range [][]string{{"serve", "-h"}, {"-h"}, {"help"}, {"man"}} {
		var out, errb bytes.Buffer
		run(args, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
		text := out.String() + errb.String()
		if text == "" {
			t.Errorf("oidcd %s printed nothing", strings.Join(args, " "))
		}
		for _, base := range []string{"SPEC", "CONTRACT", "STYLE", "MEASURED"} {
			if missing := base + "." + "md"; strings.Contains(text, missing) {
				t.Errorf("oidcd %s cites %s, which the project does not ship", strings.Join(args, " "), missing)
			}
		}
	}
}
