package docs_test

import (
	"net/http"
	"testing"

	"github.com/oidcd/oidcd/docs"
	"github.com/oidcd/oidcd/testcluster"
)

// TestOpenAPIStaleParameterMatchesTheNode: the admin document's stale
// parameter, both ways (true and false answer 200) and a refused value
// (400), checked against a real node's answers like
// TestOpenAPIDocumentsMatchTheNode checks the rest.
func TestOpenAPIStaleParameterMatchesTheNode(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	rec := &recorder{next: c.Client().Transport}
	hc := &http.Client{Transport: rec}
	a := api{t: t, base: c.URL(0), hc: hc}
	org := a.call("POST", "/organizations", map[string]any{"slug": "stale", "name": "Stale"}, 201)
	a.call("GET", "/organizations/"+org["id"].(string)+"?stale=true", nil, 200)
	a.call("GET", "/organizations?stale=false&page=1", nil, 200)
	a.call("GET", "/status?stale=true", nil, 200)
	a.call("GET", "/audit?stale=true&limit=1", nil, 200)
	a.call("GET", "/organizations?stale=maybe", nil, 400)

	v := newValidator(t, docs.Admin, "/admin/v1")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, x := range rec.log {
		if v.operation(x.method, x.path) == "" {
			t.Errorf("%s %s: not in the admin document", x.method, x.path)
			continue
		}
		for _, e := range checkExchange(v, x) {
			t.Errorf("%s %s (%d): %s", x.method, x.req.URL, x.resp.StatusCode, e)
		}
	}
}
