package admin

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/docs"
)

// TestEveryRouteIsDocumented: docs/openapi/admin.json describes exactly
// the routes the admin API serves (and its own, which the node serves).
// docs' TestOpenAPIDocumentsMatchTheNode checks the shapes.
func TestEveryRouteIsDocumented(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(docs.Admin, &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for p, ops := range doc.Paths {
		for m := range ops {
			if p != "/openapi.json" {
				documented = append(documented, strings.ToUpper(m)+" "+p)
			}
		}
	}
	slices.Sort(documented)
	served := Routes()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served but not in docs/openapi/admin.json", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("%s is in docs/openapi/admin.json but not served", r)
		}
	}
	if len(served) < 40 {
		t.Fatalf("only %d routes: %v", len(served), served)
	}
}
