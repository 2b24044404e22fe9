package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
)

// clientJSON builds a client body from a base that is valid for org,
// changed by set (a nil value deletes the field).
func clientJSON(org string, set map[string]any) string {
	b := map[string]any{
		"name":            "App",
		"redirect_uris":   []string{"https://app.example/cb"},
		"organization_id": org,
	}
	for k, v := range set {
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
	}
	out, _ := json.Marshal(b)
	return string(out)
}

func TestCreateClient(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	o2 := e.createOrg("globex")
	const path = "/admin/v1/clients"
	good := func(name string, set map[string]any) tc {
		return tc{name: name, method: "POST", path: path, body: clientJSON(o.ID, set), status: 201}
	}
	bad := func(name string, set map[string]any, field, code string) tc {
		return tc{name: name, method: "POST", path: path, body: clientJSON(o.ID, set), status: 400, code: httpx.CodeValidation, field: field, dcode: code}
	}
	twenty := make([]string, 21)
	for i := range twenty {
		twenty[i] = fmt.Sprintf("https://app.example/cb%d", i)
	}
	e.run(t, []tc{
		good("minimal", nil),
		good("public", map[string]any{"type": "public"}),
		good("http loopback v4", map[string]any{"redirect_uris": []string{"http://127.0.0.1:9000/cb"}}),
		good("http localhost", map[string]any{"redirect_uris": []string{"http://localhost/cb?x=1"}}),
		good("http loopback v6", map[string]any{"redirect_uris": []string{"http://[::1]:8080/cb"}}),
		good("twenty uris", map[string]any{"redirect_uris": twenty[:20]}),
		good("given client_id", map[string]any{"client_id": "my.App_1-x"}),
		good("client_id of 128", map[string]any{"client_id": strings.Repeat("c", 128)}),
		good("every field", map[string]any{"scopes": []string{"openid", "email", "profile"}, "multi_organization": true,
			"organizations": []string{o.ID, o2.ID}, "access_token_ttl": 86400, "backchannel_logout_uri": "https://app.example/logout",
			"skip_consent": true, "suspended": true}),
		good("ttl 60", map[string]any{"access_token_ttl": 60}),
		{name: "duplicate client_id", method: "POST", path: path, body: clientJSON(o.ID, map[string]any{"client_id": "my.App_1-x"}), status: 409, code: httpx.CodeConflict, field: "client_id"},
		{name: "unknown organization", method: "POST", path: path, body: clientJSON(unknownID, nil), status: 422, code: httpx.CodeValidation, field: "organization_id", dcode: "not_found"},
		{name: "unknown served organization", method: "POST", path: path, body: clientJSON(o.ID, map[string]any{"multi_organization": true, "organizations": []string{unknownID}}), status: 422, code: httpx.CodeValidation, field: "organizations", dcode: "not_found"},
		bad("missing name", map[string]any{"name": nil}, "name", codeRequired),
		bad("name too long", map[string]any{"name": strings.Repeat("n", 201)}, "name", codeTooLong),
		bad("missing redirect_uris", map[string]any{"redirect_uris": nil}, "redirect_uris", codeRequired),
		bad("empty redirect_uris", map[string]any{"redirect_uris": []string{}}, "redirect_uris", codeRequired),
		bad("21 redirect_uris", map[string]any{"redirect_uris": twenty}, "redirect_uris", codeTooMany),
		bad("http elsewhere", map[string]any{"redirect_uris": []string{"http://app.example/cb"}}, "redirect_uris[0]", codeInvalidURI),
		bad("http other loopback", map[string]any{"redirect_uris": []string{"http://127.0.0.2/cb"}}, "redirect_uris[0]", codeInvalidURI),
		bad("fragment", map[string]any{"redirect_uris": []string{"https://app.example/cb#x"}}, "redirect_uris[0]", codeInvalidURI),
		bad("empty fragment", map[string]any{"redirect_uris": []string{"https://app.example/cb#"}}, "redirect_uris[0]", codeInvalidURI),
		bad("relative", map[string]any{"redirect_uris": []string{"https://app.example/cb", "/cb"}}, "redirect_uris[1]", codeInvalidURI),
		bad("custom scheme", map[string]any{"redirect_uris": []string{"com.example.app:/cb"}}, "redirect_uris[0]", codeInvalidURI),
		bad("no host", map[string]any{"redirect_uris": []string{"https:///cb"}}, "redirect_uris[0]", codeInvalidURI),
		bad("user info", map[string]any{"redirect_uris": []string{"https://u:p@app.example/cb"}}, "redirect_uris[0]", codeInvalidURI),
		bad("not a uri", map[string]any{"redirect_uris": []string{"https://app example/%zz"}}, "redirect_uris[0]", codeInvalidURI),
		bad("uri too long", map[string]any{"redirect_uris": []string{"https://app.example/" + strings.Repeat("a", 2048)}}, "redirect_uris[0]", codeTooLong),
		bad("redirect_uris string", map[string]any{"redirect_uris": "https://app.example/cb"}, "redirect_uris", "invalid_type"),
		bad("unknown scope", map[string]any{"scopes": []string{"openid", "admin"}}, "scopes[1]", codeInvalid),
		bad("empty scopes", map[string]any{"scopes": []string{}}, "scopes", codeRequired),
		bad("missing organization", map[string]any{"organization_id": nil}, "organization_id", codeRequired),
		bad("bad organization", map[string]any{"organization_id": "acme"}, "organization_id", codeInvalidUUID),
		bad("organizations without multi", map[string]any{"organizations": []string{o.ID}}, "organizations", codeInvalid),
		bad("organizations bad uuid", map[string]any{"multi_organization": true, "organizations": []string{o.ID, "x"}}, "organizations[1]", codeInvalidUUID),
		bad("ttl 59", map[string]any{"access_token_ttl": 59}, "access_token_ttl", codeOutOfRange),
		bad("ttl 86401", map[string]any{"access_token_ttl": 86401}, "access_token_ttl", codeOutOfRange),
		bad("ttl fraction", map[string]any{"access_token_ttl": 600.5}, "access_token_ttl", "invalid_type"),
		bad("ttl string", map[string]any{"access_token_ttl": "600"}, "access_token_ttl", "invalid_type"),
		bad("logout uri relative", map[string]any{"backchannel_logout_uri": "/logout"}, "backchannel_logout_uri", codeInvalidURI),
		bad("logout uri fragment", map[string]any{"backchannel_logout_uri": "https://app.example/logout#f"}, "backchannel_logout_uri", codeInvalidURI),
		bad("client_id chars", map[string]any{"client_id": "my app"}, "client_id", codeInvalid),
		bad("client_id empty", map[string]any{"client_id": ""}, "client_id", codeInvalid),
		bad("client_id too long", map[string]any{"client_id": strings.Repeat("c", 129)}, "client_id", codeTooLong),
		bad("type", map[string]any{"type": "private"}, "type", codeInvalid),
		bad("client_secret", map[string]any{"client_secret": "mine"}, "client_secret", codeImmutable),
		bad("multi bool string", map[string]any{"multi_organization": "yes"}, "multi_organization", "invalid_type"),
	})

	t.Run("confidential", func(t *testing.T) {
		c := e.createClient(clientJSON(o.ID, nil))
		want := Client{ClientID: c.ClientID, Name: "App", Type: fsm.ClientConfidential,
			RedirectURIs: []string{"https://app.example/cb"}, Scopes: []string{"openid"}, OrganizationID: o.ID,
			Organizations: []string{}, AccessTokenTTL: 600, ApplicationType: "web", WebOrigins: []string{}, WebOriginsDefault: true,
			CreatedAt: c.CreatedAt, UpdatedAt: c.CreatedAt}
		secret := c.ClientSecret
		c.ClientSecret = ""
		if !reflect.DeepEqual(c, want) || !isUUID(c.ClientID) || c.CreatedAt.IsZero() {
			t.Errorf("got %+v, want %+v", c, want)
		}
		if len(secret) != 43 {
			t.Errorf("secret: got %q, want 43 base64url characters", secret)
		}
		stored, err := e.state.Client(c.ClientID)
		if err != nil {
			t.Fatal(err)
		}
		if !password.VerifySecret(secret, stored.SecretHash) || stored.SecretHash == secret {
			t.Errorf("stored hash %q does not verify the secret shown once", stored.SecretHash)
		}
		if body := e.must(200, "GET", path+"/"+c.ClientID, "").Body.String(); strings.Contains(body, secret) {
			t.Errorf("got %s, want no secret after creation", body)
		}
	})
	t.Run("public", func(t *testing.T) {
		w := e.must(201, "POST", path, clientJSON(o.ID, map[string]any{"type": "public"}))
		if strings.Contains(w.Body.String(), "client_secret") {
			t.Errorf("got %s, want no client_secret", w.Body)
		}
		c := decodeAs[Client](t, w)
		stored, _ := e.state.Client(c.ClientID)
		if stored.SecretHash != "" || c.Type != fsm.ClientPublic {
			t.Errorf("got %+v / hash %q, want a public client without hash", c, stored.SecretHash)
		}
	})
	t.Run("normalized", func(t *testing.T) {
		c := e.createClient(clientJSON(strings.ToUpper(o.ID), map[string]any{
			"scopes": []string{"openid", "email", "openid"}, "multi_organization": true,
			"organizations": []string{strings.ToUpper(o2.ID), o2.ID},
			"redirect_uris": []string{"https://a.example/cb", "https://a.example/cb"}}))
		if c.OrganizationID != o.ID || !reflect.DeepEqual(c.Organizations, []string{o2.ID}) ||
			!reflect.DeepEqual(c.Scopes, []string{"openid", "email"}) || len(c.RedirectURIs) != 1 {
			t.Errorf("got %+v, want lower-case ids and no duplicates", c)
		}
	})
	t.Run("all problems at once", func(t *testing.T) {
		env := checkEnvelope(t, e.do("POST", path, `{"type":"x","scopes":["nope"],"access_token_ttl":1}`), 400, httpx.CodeValidation)
		for _, f := range []string{"name", "type", "redirect_uris", "scopes[0]", "organization_id", "access_token_ttl"} {
			if !hasDetail(env, f, "") {
				t.Errorf("details %+v: want %q", env.Details, f)
			}
		}
	})
	t.Run("failed validation wrote nothing", func(t *testing.T) {
		_, before, _ := e.state.Clients(fsm.Page{Page: 1, PageSize: 100})
		e.do("POST", path, clientJSON(o.ID, map[string]any{"client_id": "never", "redirect_uris": []string{"http://evil.example/"}}))
		if _, err := e.state.Client("never"); err == nil {
			t.Errorf("got a client, want none")
		}
		_, after, _ := e.state.Clients(fsm.Page{Page: 1, PageSize: 100})
		if after != before {
			t.Errorf("got %d clients, want %d", after, before)
		}
	})
}

func TestUpdateClient(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	o2 := e.createOrg("globex")
	c := e.createClient(clientJSON(o.ID, map[string]any{"client_id": "app", "backchannel_logout_uri": "https://app.example/logout"}))
	path := "/admin/v1/clients/app"
	bad := func(name, body, field, code string) tc {
		return tc{name: name, method: "PATCH", path: path, body: body, status: 400, code: httpx.CodeValidation, field: field, dcode: code}
	}
	e.run(t, []tc{
		{name: "unknown", method: "PATCH", path: "/admin/v1/clients/nope", body: `{"name":"X"}`, status: 404, code: httpx.CodeNotFound},
		{name: "bad id", method: "PATCH", path: "/admin/v1/clients/bad%20id", body: `{"name":"X"}`, status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalid},
		{name: "unknown organization", method: "PATCH", path: path, body: `{"organization_id":"` + unknownID + `"}`, status: 422, code: httpx.CodeValidation, field: "organization_id"},
		bad("client_secret", `{"client_secret":"x"}`, "client_secret", codeImmutable),
		bad("client_id", `{"client_id":"other"}`, "client_id", codeImmutable),
		bad("type", `{"type":"public"}`, "type", codeImmutable),
		bad("empty name", `{"name":""}`, "name", codeRequired),
		bad("empty redirects", `{"redirect_uris":[]}`, "redirect_uris", codeRequired),
		bad("http redirect", `{"redirect_uris":["http://app.example/cb"]}`, "redirect_uris[0]", codeInvalidURI),
		bad("organizations without multi", `{"organizations":["`+o2.ID+`"]}`, "organizations", codeInvalid),
		bad("ttl", `{"access_token_ttl":0}`, "access_token_ttl", codeOutOfRange),
		bad("unknown field", `{"secret_hash":"x"}`, "secret_hash", "unknown_field"),
	})
	stored, _ := e.state.Client("app")
	if stored.Name != "App" || !stored.UpdatedAt.Equal(c.UpdatedAt) {
		t.Fatalf("got %+v, want the client untouched by failed patches", stored)
	}

	steps := []struct {
		name  string
		body  string
		check func(Client) bool
	}{
		{"same client_id and type", `{"client_id":"app","type":"confidential"}`, func(c Client) bool { return c.ClientID == "app" }},
		{"rename", `{"name":"App 2"}`, func(c Client) bool { return c.Name == "App 2" && c.Scopes[0] == "openid" }},
		{"suspend", `{"suspended":true}`, func(c Client) bool { return c.Suspended && c.Name == "App 2" }},
		{"multi", `{"multi_organization":true,"organizations":["` + o2.ID + `"]}`, func(c Client) bool {
			return c.MultiOrganization && len(c.Organizations) == 1
		}},
		{"clear logout uri", `{"backchannel_logout_uri":""}`, func(c Client) bool { return c.BackchannelLogoutURI == "" }},
		{"scopes", `{"scopes":["openid","email"]}`, func(c Client) bool { return len(c.Scopes) == 2 }},
		{"move", `{"organization_id":"` + o2.ID + `"}`, func(c Client) bool { return c.OrganizationID == o2.ID }},
	}
	last := c.UpdatedAt
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			got := decodeAs[Client](t, e.must(200, "PATCH", path, s.body))
			if !s.check(got) {
				t.Errorf("got %+v", got)
			}
			if !got.UpdatedAt.After(last) || !got.CreatedAt.Equal(c.CreatedAt) {
				t.Errorf("updated_at: got %v, want after %v; created_at kept", got.UpdatedAt, last)
			}
			last = got.UpdatedAt
			if got.ClientSecret != "" {
				t.Errorf("got a secret %q, want none", got.ClientSecret)
			}
		})
	}
	after, _ := e.state.Client("app")
	if after.SecretHash != stored.SecretHash {
		t.Errorf("secret hash changed by PATCH")
	}
}

// TestUpdateClientConflict slips a change in between the handler's read
// and its write: the write must be refused, not lose the other change.
func TestUpdateClientConflict(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "app"}))
	e.hook.before = func() {
		cur, _ := e.state.Client("app")
		cur.Suspended = true
		cur.UpdatedAt = cur.UpdatedAt.Add(time.Minute)
		res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeUpdateClient, fsm.PutClient{Client: cur}))
		if err != nil || res.Err != nil {
			t.Errorf("concurrent update: %v %v", err, res.Err)
		}
	}
	env := checkEnvelope(t, e.do("PATCH", "/admin/v1/clients/app", `{"name":"Mine"}`), 409, httpx.CodeConflict)
	if !hasDetail(env, "updated_at", "conflict") {
		t.Errorf("got %+v, want a detail on updated_at", env.Details)
	}
	got, _ := e.state.Client("app")
	if got.Name != "App" || !got.Suspended {
		t.Errorf("got %+v, want the concurrent change kept and ours refused", got)
	}
	// A retry reads the new version and succeeds.
	if c := decodeAs[Client](t, e.must(200, "PATCH", "/admin/v1/clients/app", `{"name":"Mine"}`)); c.Name != "Mine" || !c.Suspended {
		t.Errorf("got %+v, want both changes", c)
	}
}

// TestUpdateClientFrozenClock checks that updated_at moves even when the
// clock does not, so optimistic concurrency still tells versions apart.
func TestUpdateClientFrozenClock(t *testing.T) {
	e := newEnv(t)
	e.clock.step = 0
	o := e.createOrg("acme")
	c := e.createClient(clientJSON(o.ID, map[string]any{"client_id": "app"}))
	got := decodeAs[Client](t, e.must(200, "PATCH", "/admin/v1/clients/app", `{"name":"B"}`))
	if !got.UpdatedAt.After(c.UpdatedAt) {
		t.Errorf("got %v, want after %v", got.UpdatedAt, c.UpdatedAt)
	}
}

func TestGetListDeleteClient(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "app"}))
	e.createClient(clientJSON(o.ID, map[string]any{"client_id": "other", "type": "public"}))
	list := decodeAs[List[Client]](t, e.must(200, "GET", "/admin/v1/clients?page_size=1", ""))
	if len(list.Data) != 1 || list.Data[0].ClientID != "app" || list.Pagination.TotalItems != 2 || !list.Pagination.HasNext {
		t.Errorf("got %+v, want app first of 2", list)
	}
	e.run(t, append(paginationErrors("/admin/v1/clients"), []tc{
		{name: "get", method: "GET", path: "/admin/v1/clients/app", status: 200},
		{name: "get unknown", method: "GET", path: "/admin/v1/clients/nope", status: 404, code: httpx.CodeNotFound},
		{name: "get bad id", method: "GET", path: "/admin/v1/clients/" + strings.Repeat("x", 129), status: 400, code: httpx.CodeValidation, field: "id"},
		{name: "get bad chars", method: "GET", path: "/admin/v1/clients/a%2Fb", status: 400, code: httpx.CodeValidation, field: "id"},
		{name: "delete", method: "DELETE", path: "/admin/v1/clients/app", status: 204},
		{name: "delete again", method: "DELETE", path: "/admin/v1/clients/app", status: 404, code: httpx.CodeNotFound},
		{name: "delete bad id", method: "DELETE", path: "/admin/v1/clients/a%20b", status: 400, code: httpx.CodeValidation, field: "id"},
		{name: "get deleted", method: "GET", path: "/admin/v1/clients/app", status: 404, code: httpx.CodeNotFound},
	}...))
}
