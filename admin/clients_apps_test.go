package admin

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// newAppsEnv is an API at the newest state format, which application_type
// native and web_origins of a client's own need, with an organization.
func newAppsEnv(t *testing.T) (*env, Org) {
	t.Helper()
	e := newEnv(t)
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	return e, e.createOrg("acme")
}

// TestClientAppsValidation: application_type and web_origins on POST and
// PATCH /admin/v1/clients: a native client is public and may register
// private-use scheme and loopback redirects (a web client may not, and is
// told why); web origins are origins, at most 20, of a public client; each
// refusal is a VALIDATION_ERROR detail on its field.
func TestClientAppsValidation(t *testing.T) {
	e, o := newAppsEnv(t)
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "conf"}))
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "spa", "type": "public"}))
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "cli", "type": "public", "application_type": "native",
		"redirect_uris": []string{"https://app.example/cb", "com.example.app:/callback"}}))
	const path = "/admin/v1/clients"
	native := func(set map[string]any) map[string]any {
		b := map[string]any{"type": "public", "application_type": "native"}
		for k, v := range set {
			b[k] = v
		}
		return b
	}
	good := func(name string, set map[string]any) tc {
		return tc{name: "POST " + name, method: "POST", path: path, body: clientJSON(o.ID, set), status: 201}
	}
	bad := func(name string, set map[string]any, field, code string) tc {
		return tc{name: "POST " + name, method: "POST", path: path, body: clientJSON(o.ID, set), status: 400, code: httpx.CodeValidation, field: field, dcode: code}
	}
	patch := func(name, id, body string, status int, field, code string) tc {
		c := tc{name: "PATCH " + name, method: "PATCH", path: path + "/" + id, body: body, status: status}
		if status == 400 {
			c.code, c.field, c.dcode = httpx.CodeValidation, field, code
		}
		return c
	}
	origins := make([]string, maxWebOrigins+1)
	for i := range origins {
		origins[i] = fmt.Sprintf("https://o%d.example", i)
	}
	e.run(t, []tc{
		good("web", map[string]any{"application_type": "web"}),
		good("native", native(map[string]any{"redirect_uris": []string{"com.example.app:/callback"}})),
		good("native loopback v4", native(map[string]any{"redirect_uris": []string{"http://127.0.0.1/callback"}})),
		good("native loopback v6", native(map[string]any{"redirect_uris": []string{"http://[::1]/callback"}})),
		good("native claimed https", native(nil)),
		good("public with origins", map[string]any{"type": "public", "web_origins": origins[:maxWebOrigins]}),
		good("public with no origins", map[string]any{"type": "public", "web_origins": []string{}}),
		good("public, null origins", map[string]any{"type": "public", "web_origins": nil}),
		good("confidential with no origins", map[string]any{"web_origins": []string{}}),
		bad("unknown application type", map[string]any{"application_type": "desktop"}, "application_type", codeInvalid),
		bad("application type in capitals", map[string]any{"application_type": "Native", "type": "public"}, "application_type", codeInvalid),
		bad("application type a number", map[string]any{"application_type": 1}, "application_type", "invalid_type"),
		bad("native confidential (the default type)", map[string]any{"application_type": "native"}, "application_type", codeInvalid),
		bad("native confidential", map[string]any{"application_type": "native", "type": "confidential"}, "application_type", codeInvalid),
		bad("web private-use scheme", map[string]any{"type": "public", "redirect_uris": []string{"https://app.example/cb", "com.example.app:/cb"}}, "redirect_uris[1]", codeInvalidURI),
		bad("native scheme without a dot", native(map[string]any{"redirect_uris": []string{"myapp:/callback"}}), "redirect_uris[0]", codeInvalidURI),
		bad("native javascript", native(map[string]any{"redirect_uris": []string{"javascript:alert(1)"}}), "redirect_uris[0]", codeInvalidURI),
		bad("native localhost", native(map[string]any{"redirect_uris": []string{"http://localhost/callback"}}), "redirect_uris[0]", codeInvalidURI),
		bad("native http elsewhere", native(map[string]any{"redirect_uris": []string{"http://app.example/cb"}}), "redirect_uris[0]", codeInvalidURI),
		bad("native fragment", native(map[string]any{"redirect_uris": []string{"com.example.app:/cb#x"}}), "redirect_uris[0]", codeInvalidURI),
		bad("21 origins", map[string]any{"type": "public", "web_origins": origins}, "web_origins", codeTooMany),
		bad("confidential with origins", map[string]any{"web_origins": []string{"https://app.example"}}, "web_origins", codeInvalid),
		bad("origin with a path", map[string]any{"type": "public", "web_origins": []string{"https://a.example", "https://app.example/cb"}}, "web_origins[1]", codeInvalid),
		bad("origin in plain http", map[string]any{"type": "public", "web_origins": []string{"http://app.example"}}, "web_origins[0]", codeInvalid),
		bad("origin *", map[string]any{"type": "public", "web_origins": []string{"*"}}, "web_origins[0]", codeInvalid),
		bad("origin null", map[string]any{"type": "public", "web_origins": []string{"null"}}, "web_origins[0]", codeInvalid),
		bad("origin of a private-use scheme", native(map[string]any{"web_origins": []string{"com.example.app://x"}}), "web_origins[0]", codeInvalid),
		bad("origins a string", map[string]any{"type": "public", "web_origins": "https://app.example"}, "web_origins", "invalid_type"),
		bad("origins of numbers", map[string]any{"type": "public", "web_origins": []int{1}}, "web_origins", "invalid_type"),
		patch("to native", "spa", `{"application_type":"native","redirect_uris":["http://127.0.0.1/cb"]}`, 200, "", ""),
		patch("back to web", "spa", `{"application_type":"web","redirect_uris":["https://app.example/cb"]}`, 200, "", ""),
		patch("confidential to native", "conf", `{"application_type":"native"}`, 400, "application_type", codeInvalid),
		patch("native to web with a private-use redirect", "cli", `{"application_type":"web"}`, 400, "redirect_uris[1]", codeInvalidURI),
		patch("web to native with a localhost redirect", "spa", `{"application_type":"native","redirect_uris":["http://localhost:5173/cb"]}`, 400, "redirect_uris[0]", codeInvalidURI),
		patch("a private-use redirect on a web client", "spa", `{"redirect_uris":["com.example.app:/cb"]}`, 400, "redirect_uris[0]", codeInvalidURI),
		patch("origins of a confidential client", "conf", `{"web_origins":["https://app.example"]}`, 400, "web_origins", codeInvalid),
		patch("no origins on a confidential client", "conf", `{"web_origins":[]}`, 200, "", ""),
		patch("a bad origin", "spa", `{"web_origins":["https://ok.example","ftp://x.example"]}`, 400, "web_origins[1]", codeInvalid),
		patch("unknown application type", "spa", `{"application_type":""}`, 400, "application_type", codeInvalid),
	})
	t.Run("the web client's message points to native", func(t *testing.T) {
		env := checkEnvelope(t, e.do("POST", path, clientJSON(o.ID, map[string]any{"type": "public", "redirect_uris": []string{"com.example.app:/cb"}})), 400, httpx.CodeValidation)
		if len(env.Details) != 1 || !strings.Contains(env.Details[0].Message, "application_type native") {
			t.Errorf("got %+v, want one detail that names application_type native", env.Details)
		}
	})
}

// TestClientAppsRoundTrip: what POST, GET, the list and PATCH show of a
// client's application type and web origins. The type is web unless
// native; web_origins is always the effective list (web_origins_default
// says whether it is the default, which follows the redirect URIs: the
// https and loopback origins of a public client, none for a confidential
// one); given origins are stored as a browser writes them, each once.
// PATCH: absent keeps, a list sets, [] is none, null is the default again.
func TestClientAppsRoundTrip(t *testing.T) {
	e, o := newAppsEnv(t)
	conf := e.createClient(clientJSON(o.ID, map[string]any{"client_id": "conf", "redirect_uris": []string{"https://conf.example/cb"}}))
	if conf.ApplicationType != "web" || conf.WebOrigins == nil || len(conf.WebOrigins) != 0 || !conf.WebOriginsDefault {
		t.Errorf("a confidential client: got %q %q default %v, want web, no origins, the default", conf.ApplicationType, conf.WebOrigins, conf.WebOriginsDefault)
	}
	cli := e.createClient(clientJSON(o.ID, map[string]any{"client_id": "cli", "type": "public", "application_type": "native",
		"redirect_uris": []string{"com.example.app:/callback", "http://127.0.0.1/callback"}}))
	if cli.ApplicationType != "native" || !slices.Equal(cli.WebOrigins, []string{"http://127.0.0.1"}) {
		t.Errorf("a native client: got %q %q, want native and its loopback origin", cli.ApplicationType, cli.WebOrigins)
	}
	if s, _ := e.state.Client("cli"); s.ApplicationType != fsm.ApplicationNative || s.WebOriginsSet || s.WebOrigins != nil {
		t.Errorf("a native client stored: got %+v", s)
	}

	const path = "/admin/v1/clients/spa"
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "spa", "type": "public", "application_type": "web",
		"redirect_uris": []string{"https://SPA.example:443/cb", "http://localhost:5173/cb", "https://spa.example/other"}}))
	steps := []struct {
		name, body  string
		want        []string
		wantDefault bool
		stored      []string // what the state holds when set
	}{
		{"created: the default", "", []string{"https://spa.example", "http://localhost:5173"}, true, nil},
		{"another field keeps the default", `{"name":"SPA"}`, []string{"https://spa.example", "http://localhost:5173"}, true, nil},
		{"the default follows the redirect URIs", `{"redirect_uris":["https://spa.example:8443/cb"]}`, []string{"https://spa.example:8443"}, true, nil},
		{"set, normalized, each once", `{"web_origins":["https://APP.example:443","https://app.example/","http://[::1]:3000"]}`,
			[]string{"https://app.example", "http://[::1]:3000"}, false, []string{"https://app.example", "http://[::1]:3000"}},
		{"absent keeps them", `{"redirect_uris":["https://spa.example/cb"]}`, []string{"https://app.example", "http://[::1]:3000"}, false,
			[]string{"https://app.example", "http://[::1]:3000"}},
		{"[] is none", `{"web_origins":[]}`, []string{}, false, nil},
		{"none stays none", `{"suspended":false}`, []string{}, false, nil},
		{"null is the default again", `{"web_origins":null}`, []string{"https://spa.example"}, true, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			var got Client
			if s.body == "" {
				got = decodeAs[Client](t, e.must(200, "GET", path, ""))
			} else {
				got = decodeAs[Client](t, e.must(200, "PATCH", path, s.body))
			}
			read := decodeAs[Client](t, e.must(200, "GET", path, ""))
			for _, c := range []Client{got, read} {
				if !slices.Equal(c.WebOrigins, s.want) || c.WebOrigins == nil || c.WebOriginsDefault != s.wantDefault || c.ApplicationType != "web" {
					t.Errorf("got %q default %v (%s), want %q default %v, web", c.WebOrigins, c.WebOriginsDefault, c.ApplicationType, s.want, s.wantDefault)
				}
			}
			st, _ := e.state.Client("spa")
			if st.WebOriginsSet == s.wantDefault || !slices.Equal(st.WebOrigins, s.stored) {
				t.Errorf("stored: got set %v %q, want set %v %q", st.WebOriginsSet, st.WebOrigins, !s.wantDefault, s.stored)
			}
		})
	}
	list := decodeAs[List[Client]](t, e.must(200, "GET", "/admin/v1/clients?page_size=100", ""))
	for _, c := range list.Data {
		if c.ClientID == "cli" && (c.ApplicationType != "native" || !slices.Equal(c.WebOrigins, []string{"http://127.0.0.1"})) {
			t.Errorf("the list shows %+v, want the native client's type and origins", c)
		}
	}
	// The JSON names the fields as docs/openapi/admin.json does, each always present.
	body := e.must(200, "GET", "/admin/v1/clients/conf", "").Body.String()
	for _, want := range []string{`"application_type":"web"`, `"web_origins":[]`, `"web_origins_default":true`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET: got %s, want %s", body, want)
		}
	}
}

// TestClientAppsWhileMixed: while the cluster runs the older state format
// (a rolling upgrade), a native client and a client's own web origins are
// refused, 409, naming the fields, and nothing is proposed; a client that
// names neither (application_type web included) and a PATCH that leaves
// them or goes back to the default are written as before. Once the format
// is raised, the same requests succeed.
func TestClientAppsWhileMixed(t *testing.T) {
	e := newEnv(t) // a fresh state: the base format
	o := e.createOrg("acme")
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "spa", "type": "public", "application_type": "web"}))
	gated := []struct{ name, method, path, body string }{
		{"a native client", "POST", "/admin/v1/clients", clientJSON(o.ID, map[string]any{"type": "public", "application_type": "native"})},
		{"a client with origins", "POST", "/admin/v1/clients", clientJSON(o.ID, map[string]any{"type": "public", "web_origins": []string{"https://app.example"}})},
		{"a client with no origins", "POST", "/admin/v1/clients", clientJSON(o.ID, map[string]any{"type": "public", "web_origins": []string{}})},
		{"to native", "PATCH", "/admin/v1/clients/spa", `{"application_type":"native"}`},
		{"origins", "PATCH", "/admin/v1/clients/spa", `{"web_origins":["https://app.example"]}`},
	}
	for _, g := range gated {
		t.Run(g.name, func(t *testing.T) {
			before := e.app.FSM.Applied()
			env := checkEnvelope(t, e.do(g.method, g.path, g.body), 409, httpx.CodeConflict)
			if !strings.Contains(env.Message, clientAppsFeature) || !strings.Contains(env.Message, "state format 2") || !strings.Contains(env.Message, "Nothing was written") {
				t.Errorf("message: got %q, want what needs which format, and that nothing was written", env.Message)
			}
			if got := e.app.FSM.Applied(); got != before {
				t.Errorf("applied index: got %d, want %d", got, before)
			}
		})
	}
	e.must(200, "PATCH", "/admin/v1/clients/spa", `{"name":"SPA","application_type":"web","web_origins":null}`)
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	for _, g := range gated {
		if w := e.do(g.method, g.path, g.body); w.Code != 200 && w.Code != 201 {
			t.Errorf("%s once upgraded: got %d %s", g.name, w.Code, w.Body)
		}
	}
}

// TestClientAppsOrgAdmin: an org_admin sets application_type and
// web_origins on its organization's clients as it sets their other
// fields.
func TestClientAppsOrgAdmin(t *testing.T) {
	e := newMakerEnv(t)
	w := e.do("POST", "/admin/v1/clients", clientJSON(e.org.ID, map[string]any{"client_id": "cli", "type": "public", "application_type": "native",
		"redirect_uris": []string{"com.example.app:/cb"}, "web_origins": []string{"https://app.example"}}), bearerHdr(olgaToken)...)
	if w.Code != 201 {
		t.Fatalf("POST as org_admin: got %d %s, want 201", w.Code, w.Body)
	}
	w = e.do("PATCH", "/admin/v1/clients/cli", `{"web_origins":null,"redirect_uris":["http://[::1]/cb"]}`, bearerHdr(olgaToken)...)
	if c := decodeAs[Client](t, w); w.Code != 200 || !slices.Equal(c.WebOrigins, []string{"http://[::1]"}) || !c.WebOriginsDefault {
		t.Errorf("PATCH as org_admin: got %d %s, want the default origins", w.Code, w.Body)
	}
}
