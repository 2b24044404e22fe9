package docs_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/docs"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/testcluster"
)

// TestOpenAPIClientApps: a client's application_type and web_origins as
// a real node takes and shows them match docs/openapi/admin.json (null
// and [] included), and what the node refuses the document refuses too
// where its schema can say so.
func TestOpenAPIClientApps(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	rec := &recorder{next: c.Client().Transport}
	if rec.next == nil {
		rec.next = http.DefaultTransport
	}
	a := api{t: t, base: c.URL(0), hc: &http.Client{Transport: rec}}
	// The leader raises the state format a moment after it starts: the
	// two fields need it.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st := a.call("GET", "/cluster", nil, 200); st["state_format"] == float64(fsm.CurrentFormat) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the state format was not raised within 15 s")
		}
	}
	org := a.call("POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, 201)
	cl := a.call("POST", "/clients", map[string]any{"name": "Desktop", "type": "public", "application_type": "native",
		"redirect_uris": []string{"com.example.app:/callback", "http://127.0.0.1/callback"}, "organization_id": org["id"]}, 201)
	if cl["application_type"] != "native" || cl["web_origins_default"] != true {
		t.Fatalf("POST: got %v", cl)
	}
	id := cl["client_id"].(string)
	a.call("GET", "/clients/"+id, nil, 200)
	a.call("GET", "/clients", nil, 200)
	a.call("PATCH", "/clients/"+id, map[string]any{"web_origins": []string{"https://app.example"}}, 200)
	a.call("PATCH", "/clients/"+id, map[string]any{"web_origins": []string{}}, 200)
	if got := a.call("PATCH", "/clients/"+id, map[string]any{"web_origins": nil}, 200); !sameList(got["web_origins"], "http://127.0.0.1") {
		t.Errorf("after null: web_origins %v, want the default again", got["web_origins"])
	}
	a.call("PATCH", "/clients/"+id, map[string]any{"application_type": "desktop"}, 400)
	a.call("PATCH", "/clients/"+id, map[string]any{"web_origins": "https://app.example"}, 400)
	a.call("PATCH", "/clients/"+id, map[string]any{"web_origins": strings.Split(strings.Repeat("https://a.example,", 21)[:18*21-1], ",")}, 400)

	v := newValidator(t, docs.Admin, "/admin/v1")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, x := range rec.log {
		if x.resp.StatusCode >= 400 {
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

// sameList reports whether v, a decoded JSON array, holds exactly want.
func sameList(v any, want ...string) bool {
	b, _ := json.Marshal(v)
	w, _ := json.Marshal(want)
	return bytes.Equal(b, w)
}
