package console

import (
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

// TestClientAppsOnTheClientsPage: the clients page says in a line each
// what the application type and web origins are, creates a native client
// and a public one with origins of its own, shows each client's effective
// origins (the default marked), sets a public client's on its row (empty
// for the default, "none" for none), and shows the admin API's detail for
// a refusal.
func TestClientAppsOnTheClientsPage(t *testing.T) {
	e := newEnv(t)
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	e.signIn()
	e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	org := firstOrg(t, e.state)
	form := func(id, typ, appType, redirect, origins string) url.Values {
		return url.Values{"name": {"App " + id}, "type": {typ}, "organization_id": {org.ID}, "client_id": {id},
			"redirect_uris": {redirect}, "scopes": {"openid"}, "application_type": {appType}, "web_origins": {origins}}
	}

	r := e.get(Prefix + "clients")
	wantBody(t, "clients page", r, `<label for="c-apptype">Application type</label>`, `<option value="native">native (desktop or mobile app)</option>`,
		"A native app is public and may also use a private-use scheme redirect", `<label for="c-origins">Web origins</label>`,
		"whose pages may call the token endpoint, userinfo and memberships")

	r = e.post(Prefix+"clients", form("desk", "public", "native", "com.example.app:/cb\nhttp://127.0.0.1/cb", ""))
	wantStatus(t, "create native", r, http.StatusCreated)
	wantBody(t, "create native", r, "<dt>Type</dt><dd>public, native application</dd>",
		`<dt>Web origins</dt><dd><code class="block">http://127.0.0.1</code> (the default: from the redirect URIs)</dd>`)
	r = e.post(Prefix+"clients", form("spa", "public", "web", "https://spa.example/cb", "https://SPA.example\nhttps://cdn.example:8443"))
	wantStatus(t, "create with origins", r, http.StatusCreated)
	if cl, _ := e.state.Client("spa"); !cl.WebOriginsSet || !slices.Equal(cl.WebOrigins, []string{"https://spa.example", "https://cdn.example:8443"}) {
		t.Errorf("stored: got %v %q", cl.WebOriginsSet, cl.WebOrigins)
	}
	r = e.post(Prefix+"clients", form("closed", "public", "web", "https://c.example/cb", "none"))
	wantStatus(t, "create with none", r, http.StatusCreated)
	wantBody(t, "create with none", r, "<dt>Web origins</dt><dd>none</dd>")
	r = e.post(Prefix+"clients", form("secret", "confidential", "native", "com.example.app:/cb", ""))
	wantStatus(t, "confidential native", r, http.StatusBadRequest)
	wantBody(t, "confidential native", r, "a native client must be of type public")
	r = e.post(Prefix+"clients", form("web", "public", "web", "com.example.app:/cb", ""))
	wantStatus(t, "web private-use", r, http.StatusBadRequest)
	wantBody(t, "web private-use", r, "application_type native")

	r = e.get(Prefix + "clients")
	wantBody(t, "list", r, `<th scope="col">Web origins</th>`, "public, native app",
		`<code class="block">http://127.0.0.1</code> (default)`, `action="/console/clients/spa/web-origins"`,
		`id="wo-spa" name="web_origins"`, `value="https://spa.example https://cdn.example:8443"`, `id="wo-closed" name="web_origins" size="18" autocomplete="off" spellcheck="false" autocapitalize="none" placeholder="default" value="none"`)

	for _, s := range []struct {
		name, id, origins string
		status            int
		set               bool
		stored            []string
	}{
		{"set", "desk", "https://a.example, https://b.example", http.StatusSeeOther, true, []string{"https://a.example", "https://b.example"}},
		{"bad", "desk", "https://a.example/path", http.StatusBadRequest, true, []string{"https://a.example", "https://b.example"}},
		{"none", "desk", "none", http.StatusSeeOther, true, nil},
		{"back to the default", "desk", " ", http.StatusSeeOther, false, nil},
	} {
		r := e.post(Prefix+"clients/"+s.id+"/web-origins", url.Values{"web_origins": {s.origins}})
		wantStatus(t, s.name, r, s.status)
		if s.status == http.StatusBadRequest {
			wantBody(t, s.name, r, "web_origins[0]: must be an origin")
		} else if r.Location != Prefix+"clients?done=client-updated" {
			t.Errorf("%s: got to %q", s.name, r.Location)
		}
		if cl, _ := e.state.Client(s.id); cl.WebOriginsSet != s.set || !slices.Equal(cl.WebOrigins, s.stored) {
			t.Errorf("%s: stored %v %q, want %v %q", s.name, cl.WebOriginsSet, cl.WebOrigins, s.set, s.stored)
		}
	}
}
