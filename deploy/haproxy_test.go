package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEShowsTheBalancerConfigsAsTheyAre: each HAProxy configuration
// in haproxy/ (the files the node tests run) appears in the README whole,
// in a code block of its own, so the recipe an operator copies is the one
// that was tested.
func TestREADMEShowsTheBalancerConfigsAsTheyAre(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("haproxy", "*.cfg"))
	if len(files) == 0 {
		t.Fatal("no configuration in deploy/haproxy")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), "```\n"+string(b)+"```\n") {
			t.Errorf("README.md does not show deploy/%s as it is, in a code block of its own", filepath.ToSlash(f))
		}
	}
}
