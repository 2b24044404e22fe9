package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBalancerPageShowsTheConfigsAsTheyAre: each HAProxy configuration
// in haproxy/ (the files the node tests run) appears in the operator
// guide's balancer page, docs/operators/balancer.md, whole, in a code
// block of its own, so the recipe an operator copies is the one that was
// tested.
func TestBalancerPageShowsTheConfigsAsTheyAre(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "docs", "operators", "balancer.md"))
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
		if !strings.Contains(string(page), "```\n"+string(b)+"```\n") {
			t.Errorf("docs/operators/balancer.md does not show deploy/%s as it is, in a code block of its own", filepath.ToSlash(f))
		}
	}
}
