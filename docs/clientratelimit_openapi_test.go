package docs_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/docs"
	"github.com/oidcd/oidcd/testcluster"
)

// TestOpenAPIClientRateLimit: a client's rate_limit as a real node takes
// and shows it matches docs/openapi/admin.json (TestOpenAPIDocumentsMatch
// TheNode drives clients without one), and the document's pattern refuses
// what the node refuses.
func TestOpenAPIClientRateLimit(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	rec := &recorder{next: c.Client().Transport}
	if rec.next == nil {
		rec.next = http.DefaultTransport
	}
	a := api{t: t, base: c.URL(0), hc: &http.Client{Transport: rec}}
	org := a.call("POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, 201)
	cl := a.call("POST", "/clients", map[string]any{"name": "Busy", "redirect_uris": []string{"https://busy.example/cb"},
		"organization_id": org["id"], "rate_limit": "600/60s"}, 201)
	if cl["rate_limit"] != "600/60s" {
		t.Fatalf("POST: rate_limit %v, want 600/60s", cl["rate_limit"])
	}
	id := cl["client_id"].(string)
	a.call("GET", "/clients/"+id, nil, 200)
	a.call("GET", "/clients", nil, 200)
	a.call("PATCH", "/clients/"+id, map[string]any{"rate_limit": "20/1m30s"}, 200)
	a.call("PATCH", "/clients/"+id, map[string]any{"rate_limit": "lots"}, 400)
	if got := a.call("PATCH", "/clients/"+id, map[string]any{"rate_limit": ""}, 200); got["rate_limit"] != nil {
		t.Errorf("PATCH \"\": rate_limit %v, want none", got["rate_limit"])
	}

	v := newValidator(t, docs.Admin, "/admin/v1")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, x := range rec.log {
		if x.resp.StatusCode >= 400 {
			// Refused on purpose: the document must refuse it too.
			req := x.req.Clone(x.req.Context())
			req.Body = io.NopCloser(bytes.NewReader(x.reqBody))
			req.URL.Path = strings.TrimPrefix(req.URL.Path, v.prefix)
			if ok, _ := v.v.ValidateHttpRequest(req); ok {
				t.Errorf("%s %s %s: the node answered %d, the document allows it", x.method, x.path, x.reqBody, x.resp.StatusCode)
			}
		}
		for _, e := range checkExchange(v, x) {
			t.Errorf("%s %s (%d): %s", x.method, x.path, x.resp.StatusCode, e)
		}
	}
}
