package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/internal/httpx"
)

// TestClientRateLimitValidation: rate_limit on POST and PATCH
// /admin/v1/clients is empty or N/duration within the bounds, for a
// confidential client; every refusal is a VALIDATION_ERROR detail on the
// field.
func TestClientRateLimitValidation(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "app"}))
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "spa", "type": "public"}))
	const path = "/admin/v1/clients"
	post := func(name string, limit any, status int, dcode string) tc {
		c := tc{name: "POST " + name, method: "POST", path: path, body: clientJSON(o.ID, map[string]any{"rate_limit": limit}), status: status}
		if status == 400 {
			c.code, c.field, c.dcode = httpx.CodeValidation, "rate_limit", dcode
		}
		return c
	}
	patch := func(name, id, limit string, status int, dcode string) tc {
		b, _ := json.Marshal(map[string]string{"rate_limit": limit})
		c := tc{name: "PATCH " + name, method: "PATCH", path: path + "/" + id, body: string(b), status: status}
		if status == 400 {
			c.code, c.field, c.dcode = httpx.CodeValidation, "rate_limit", dcode
		}
		return c
	}
	e.run(t, []tc{
		post("20/60s", "20/60s", 201, ""),
		post("600/1m", "600/1m", 201, ""),
		post("empty: the default", "", 201, ""),
		post("the bounds", "10000/24h", 201, ""),
		post("one a second", "1/1s", 201, ""),
		post("off", "off", 400, codeInvalid),
		post("no duration", "20", 400, codeInvalid),
		post("no unit", "20/60", 400, codeInvalid),
		post("zero", "0/60s", 400, codeInvalid),
		post("negative", "-1/60s", 400, codeInvalid),
		post("fraction", "2.5/60s", 400, codeInvalid),
		post("words", "20 per minute", 400, codeInvalid),
		post("signed N", "+20/60s", 400, codeInvalid),
		post("signed duration", "20/+60s", 400, codeInvalid),
		post("no leading digit", "20/.5m", 400, codeInvalid),
		post("spaces inside", "20 / 60s", 400, codeInvalid),
		post("fractional duration", "20/1.5m", 201, ""),
		post("N too high", "10001/60s", 400, codeOutOfRange),
		post("window too short", "20/500ms", 400, codeOutOfRange),
		post("window too long", "20/25h", 400, codeOutOfRange),
		post("a number", 20, 400, "invalid_type"),
		{name: "POST public client", method: "POST", path: path, body: clientJSON(o.ID, map[string]any{"type": "public", "rate_limit": "20/60s"}),
			status: 400, code: httpx.CodeValidation, field: "rate_limit", dcode: codeInvalid},
		patch("set", "app", "20/60s", 200, ""),
		patch("bad", "app", "lots", 400, codeInvalid),
		patch("public client", "spa", "20/60s", 400, codeInvalid),
		patch("public client, empty", "spa", "", 200, ""),
	})
}

// TestClientRateLimitRoundTrip: POST stores the normalized form, GET and
// the list show it, PATCH changes it, "" removes it (and the answer then
// has no rate_limit: the node's applies), and a PATCH of another field
// keeps it.
func TestClientRateLimitRoundTrip(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	c := e.createClient(clientJSON(o.ID, map[string]any{"client_id": "app", "rate_limit": " 020/60s "}))
	if c.RateLimit != "20/60s" {
		t.Fatalf("POST: got %q, want %q", c.RateLimit, "20/60s")
	}
	const path = "/admin/v1/clients/app"
	steps := []struct {
		name, method, body string
		want               string
	}{
		{"GET", "GET", "", "20/60s"},
		{"PATCH another field keeps it", "PATCH", `{"name":"Busy"}`, "20/60s"},
		{"PATCH a new one", "PATCH", `{"rate_limit":"600/1m"}`, "600/1m"},
		{"PATCH empty removes it", "PATCH", `{"rate_limit":""}`, ""},
		{"GET after", "GET", "", ""},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			w := e.must(200, s.method, path, s.body)
			got := decodeAs[Client](t, w)
			if got.RateLimit != s.want {
				t.Errorf("rate_limit: got %q, want %q", got.RateLimit, s.want)
			}
			if has := strings.Contains(w.Body.String(), `"rate_limit"`); has != (s.want != "") {
				t.Errorf("body %s: rate_limit present %v, want %v", w.Body, has, s.want != "")
			}
			if stored, _ := e.state.Client("app"); stored.RateLimit != s.want {
				t.Errorf("stored: got %q, want %q", stored.RateLimit, s.want)
			}
		})
	}
	e.must(200, "PATCH", path, `{"rate_limit":"20/60s"}`)
	if list := e.must(200, "GET", "/admin/v1/clients", "").Body.String(); !strings.Contains(list, `"rate_limit":"20/60s"`) {
		t.Errorf("list: got %s, want the client's rate_limit", list)
	}
}
