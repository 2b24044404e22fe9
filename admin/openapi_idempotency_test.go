package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/oidcd/oidcd/docs"
	"github.com/oidcd/oidcd/fsm"
)

// idempotentCreates are the routes that take an Idempotency-Key: every
// create of a record under a new id. POST /users/import is idempotent by
// address, and POST /keys/rotate makes a key whose kid package keys
// chooses.
var idempotentCreates = []string{
	"POST /admins", "POST /api-keys", "POST /clients", "POST /directories", "POST /invitations",
	"POST /memberships", "POST /organizations", "POST /users", "POST /identity-providers",
}

// TestIdempotencyKeyIsDocumentedOnEveryCreate: docs/openapi/admin.json
// offers the Idempotency-Key header on exactly the creates that take it,
// and every other create is one that needs none.
func TestIdempotencyKeyIsDocumentedOnEveryCreate(t *testing.T) {
	var doc struct {
		Components struct {
			Parameters map[string]struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"components"`
		Paths map[string]map[string]struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(docs.Admin, &doc); err != nil {
		t.Fatal(err)
	}
	if p := doc.Components.Parameters["idempotencyKey"]; p.Name != HeaderIdempotencyKey || p.In != "header" {
		t.Fatalf("components.parameters.idempotencyKey: got %+v, want the header %q", p, HeaderIdempotencyKey)
	}
	for _, r := range Routes() {
		m, path, _ := strings.Cut(r, " ")
		offered := false
		for _, p := range doc.Paths[path][strings.ToLower(m)].Parameters {
			offered = offered || p["$ref"] == "#/components/parameters/idempotencyKey"
		}
		takes := slices.Contains(idempotentCreates, r)
		switch {
		case takes && !offered:
			t.Errorf("%s takes an Idempotency-Key: the document does not offer it", r)
		case !takes && offered:
			t.Errorf("%s: the document offers an Idempotency-Key it ignores", r)
		}
		if d := declarations[r]; d.op == opCreate && !takes && r != "POST /users/import" && r != "POST /keys/rotate" {
			t.Errorf("%s creates a record: take an Idempotency-Key (idempotency.go), or say here why it needs none", r)
		}
	}
}

// TestIdempotencyAndGateAnswersMatchTheDocument checks the answers this
// work adds against docs/openapi/admin.json with libopenapi-validator, as
// docs' TestOpenAPIDocumentsMatchTheNode checks a real node's: a create
// with a key and its replay, a reused key, a malformed one, the 409 of a
// secret shown once, the maybe-applied 503, the format gate's 409, and
// the versions and formats of GET /cluster and GET /status.
func TestIdempotencyAndGateAnswersMatchTheDocument(t *testing.T) {
	lossy := &lossyApplier{}
	e := newEnv(t, func(c *Config) { lossy.next = c.Applier; c.Applier = lossy })
	org := e.createOrg("doc")
	e.cluster.status = ClusterStatus{Leader: "n1", StateFormat: 1, Mixed: true, Members: []ClusterMember{
		{ID: "n1", RaftAddr: "127.0.0.1:8300", State: "leader", Voter: true, Version: "0.4.0", StateFormat: 2},
		{ID: "n2", RaftAddr: "127.0.0.1:8310", State: "follower", Voter: true, Version: "0.3.0", StateFormat: 1},
	}}
	type exchange struct {
		method, path, body string
		hdr                []string
		status             int
	}
	var xs []exchange
	add := func(status int, method, path, body string, hdr ...string) {
		xs = append(xs, exchange{method, path, body, hdr, status})
	}
	add(201, "POST", "/organizations", `{"slug":"keyed","name":"Keyed"}`, HeaderIdempotencyKey, "k1")
	add(201, "POST", "/organizations", `{"slug":"keyed","name":"Keyed"}`, HeaderIdempotencyKey, "k1")
	add(422, "POST", "/organizations", `{"slug":"other","name":"Other"}`, HeaderIdempotencyKey, "k1")
	add(400, "POST", "/organizations", `{"slug":"spaced","name":"Spaced"}`, HeaderIdempotencyKey, "a key")
	add(201, "POST", "/api-keys", `{"name":"ci","role":"auditor","expires_in":60}`, HeaderIdempotencyKey, "k2")
	add(409, "POST", "/api-keys", `{"name":"ci","role":"auditor","expires_in":60}`, HeaderIdempotencyKey, "k2")
	add(201, "POST", "/clients", clientJSON(org.ID, nil), HeaderIdempotencyKey, "k3")
	add(409, "POST", "/clients", clientJSON(org.ID, nil), HeaderIdempotencyKey, "k3")
	add(201, "POST", "/clients", clientJSON(org.ID, map[string]any{"type": "public"}), HeaderIdempotencyKey, "k4")
	add(201, "POST", "/clients", clientJSON(org.ID, map[string]any{"type": "public"}), HeaderIdempotencyKey, "k4")
	add(200, "GET", "/cluster", "")
	add(200, "GET", "/status", "")
	v := adminValidator(t)
	check := func(x exchange) {
		t.Helper()
		w := e.do(x.method, Prefix+x.path, x.body, x.hdr...)
		if w.Code != x.status {
			t.Fatalf("%s %s: got %d %s, want %d", x.method, x.path, w.Code, w.Body, x.status)
		}
		for _, msg := range validate(v, x.method, x.path, x.body, x.hdr, w) {
			t.Errorf("%s %s (%d): %s", x.method, x.path, w.Code, msg)
		}
	}
	for _, x := range xs {
		check(x)
	}
	lossy.lose.Store(true)
	check(exchange{"POST", "/organizations", `{"slug":"lost","name":"Lost"}`, []string{HeaderIdempotencyKey, "k5"}, 503})
	check(exchange{"PATCH", "/organizations/" + org.ID, `{"name":"Lost"}`, nil, 503})
	lossy.lose.Store(false)
	e.app.Fail = &fsm.FormatError{Feature: "set_state_format", Need: 2, Have: 1, Members: []string{"n2 (0.3.0)"}}
	check(exchange{"POST", "/organizations", `{"slug":"gated","name":"Gated"}`, nil, 409})
	check(exchange{"DELETE", "/organizations/" + org.ID, "", nil, 409})
	check(exchange{"POST", "/api-keys", `{"name":"gated","role":"auditor","expires_in":60}`, nil, 409})
}

// adminValidator is docs/openapi/admin.json's validator, for paths
// without the Prefix (as docs' newValidator makes it).
func adminValidator(t *testing.T) validator.Validator {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(docs.Admin, &raw); err != nil {
		t.Fatal(err)
	}
	raw["servers"] = []map[string]string{{"url": "/"}}
	patched, _ := json.Marshal(raw)
	doc, err := libopenapi.NewDocument(patched)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("the document is not valid OpenAPI: %s: %s", e.Message, e.Reason)
		}
	}
	return v
}

// validate checks one exchange; a request refused on purpose (400) is not
// one the document allows, so only its answer is checked.
func validate(v validator.Validator, method, path, body string, hdr []string, w *httptest.ResponseRecorder) []string {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer x")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp := w.Result()
	resp.Body = io.NopCloser(bytes.NewReader(w.Body.Bytes()))
	check := v.ValidateHttpRequestResponse
	if w.Code == http.StatusBadRequest {
		check = v.ValidateHttpResponse
	}
	var out []string
	if ok, errs := check(req, resp); !ok {
		for _, e := range errs {
			out = append(out, fmt.Sprintf("%s: %s", e.Message, e.Reason))
			for _, se := range e.SchemaValidationErrors {
				out = append(out, "    "+se.FieldPath+": "+se.Reason)
			}
		}
	}
	return out
}
