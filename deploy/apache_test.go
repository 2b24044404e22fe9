package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsShowTheApacheRecipeAsItIs: the mod_auth_openidc recipe in
// apache/ (the file node's TestApacheModAuthOpenIDC runs) appears whole in
// docs/application-developers.md, in a code block of its own, so the
// configuration an operator copies is the one that was tested.
func TestDocsShowTheApacheRecipeAsItIs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "application-developers.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("apache", "*.conf"))
	if len(files) == 0 {
		t.Fatal("no configuration in deploy/apache")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "```apache\n"+string(b)+"```\n") {
			t.Errorf("docs/application-developers.md does not show deploy/%s as it is, in a code block of its own", filepath.ToSlash(f))
		}
	}
}
