package cli

import (
	"strings"
	"testing"
)

// TestClientAppsFlags: --application-type and --web-origins send
// application_type and web_origins as given, and only when given;
// --web-origins= sends [] (none) and --web-origins default null (the
// default, which follows the redirect URIs). A value the API cannot take
// is a usage error, and nothing is sent.
func TestClientAppsFlags(t *testing.T) {
	create := []string{"client", "create", "--name", "CLI", "--org", "o1", "--type", "public", "--redirect-uri", "com.example.app:/cb"}
	const created = `"name":"CLI","organization_id":"o1","type":"public","redirect_uris":["com.example.app:/cb"]`
	for _, c := range []struct {
		name   string
		args   []string
		method string
		path   string
		body   string
	}{
		{"create native", append(create, "--application-type", "native"), "POST", "/admin/v1/clients", `{` + created + `,"application_type":"native"}`},
		{"create with origins", append(create, "--web-origins", "https://a.example, https://b.example", "--web-origins", "http://127.0.0.1:5173"),
			"POST", "/admin/v1/clients", `{` + created + `,"web_origins":["https://a.example","https://b.example","http://127.0.0.1:5173"]}`},
		{"create without either", create, "POST", "/admin/v1/clients", `{` + created + `}`},
		{"update to web", []string{"client", "update", "cli", "--application-type", "web"}, "PATCH", "/admin/v1/clients/cli", `{"application_type":"web"}`},
		{"update to none", []string{"client", "update", "cli", "--web-origins="}, "PATCH", "/admin/v1/clients/cli", `{"web_origins":[]}`},
		{"update to the default", []string{"client", "update", "cli", "--web-origins", "default"}, "PATCH", "/admin/v1/clients/cli", `{"web_origins":null}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAPI(t)
			f.answer(200, `{"client_id":"cli"}`)
			if r := run(t, f.env(), "", c.args...); r.code != ExitOK {
				t.Fatalf("exit %d, want %d: %s", r.code, ExitOK, r.stderr)
			}
			req := f.only(t)
			if req.Method != c.method || req.Path != c.path || !sameJSON(t, req.Body, c.body) {
				t.Errorf("got %s %s %s, want %s %s %s", req.Method, req.Path, req.Body, c.method, c.path, c.body)
			}
		})
	}
	for _, c := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"unknown application type", []string{"client", "update", "cli", "--application-type", "desktop"}, "--application-type must be one of web, native"},
		{"default among origins", []string{"client", "update", "cli", "--web-origins", "default,https://a.example"}, "--web-origins default stands alone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAPI(t)
			if r := run(t, f.env(), "", c.args...); r.code != ExitUsage || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, ExitUsage, c.stderr)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("sent %d requests, want none", n)
			}
		})
	}
}

// TestClientAppsShown: client get shows the application type and the
// effective web origins in one field, marked when they are the default;
// an older server's answer, with neither, shows as before.
func TestClientAppsShown(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		want, not    []string
	}{
		{"the default", `{"client_id":"spa","application_type":"web","web_origins":["https://spa.example"],"web_origins_default":true}`,
			[]string{"application_type  web\n", "web_origins       https://spa.example\n                  (default: from the redirect URIs)\n"}, []string{"web_origins_default"}},
		{"none by default", `{"client_id":"app","application_type":"web","web_origins":[],"web_origins_default":true}`,
			[]string{"web_origins       none\n                  (default: from the redirect URIs)\n"}, nil},
		{"none", `{"client_id":"spa","application_type":"web","web_origins":[],"web_origins_default":false}`,
			[]string{"web_origins       none\n"}, []string{"default"}},
		{"its own", `{"client_id":"cli","application_type":"native","web_origins":["https://a.example","https://b.example"],"web_origins_default":false}`,
			[]string{"application_type  native\n", "web_origins       https://a.example\n                  https://b.example\n"}, []string{"default"}},
		{"an older server", `{"client_id":"old","name":"Old"}`, []string{"client_id  old\n"}, []string{"web_origins", "application_type"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAPI(t)
			f.answer(200, c.answer)
			r := run(t, f.env(), "", "client", "get", "x")
			if r.code != ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("got %q, want %q", r.stdout, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(r.stdout, n) {
					t.Errorf("got %q, want no %q", r.stdout, n)
				}
			}
		})
	}
}
