package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/kek"
)

const idpPath = "/admin/v1/identity-providers"

// idpJSON is a provider's body: a good one, with set's fields replacing
// (nil: removing) its own.
func idpJSON(set map[string]any) string {
	b := map[string]any{
		"slug":          "corp",
		"display_name":  "Corp SSO",
		"issuer":        "https://login.corp.example/realms/staff",
		"client_id":     "oidcd",
		"client_secret": "upstream-s3cret",
	}
	for k, v := range set {
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
	}
	j, _ := json.Marshal(b)
	return string(j)
}

// withIssuer is the admin API of a node whose issuer is https://id.example.
func withIssuer(c *Config) { c.Issuer = "https://id.example/" }

// federated raises e's state format, as a cluster of one build does a
// moment after it starts: every write of identityproviders.go needs it.
func (e *env) federated() *env {
	e.t.Helper()
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		e.t.Fatal(err)
	}
	return e
}

// TestIdentityProviderValidation: every field's rule, each problem on its
// field, nothing proposed; an unknown organization is 422 on its field,
// a taken slug 409.
func TestIdentityProviderValidation(t *testing.T) {
	e := newEnv(t, withIssuer).federated()
	org := e.createOrg("acme")
	bad := func(name string, set map[string]any, field, code string) tc {
		return tc{name: name, method: "POST", path: idpPath, body: idpJSON(set), status: 400, code: httpx.CodeValidation, field: field, dcode: code}
	}
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	e.run(t, []tc{
		bad("no slug", map[string]any{"slug": nil}, "slug", codeRequired),
		bad("slug in capitals", map[string]any{"slug": "Corp"}, "slug", codeInvalid),
		bad("slug with a dot", map[string]any{"slug": "corp.sso"}, "slug", codeInvalid),
		bad("slug with a slash", map[string]any{"slug": "a/b"}, "slug", codeInvalid),
		bad("slug of 41", map[string]any{"slug": strings.Repeat("a", 41)}, "slug", codeTooLong),
		bad("no display name", map[string]any{"display_name": "  "}, "display_name", codeRequired),
		bad("display name of 101", map[string]any{"display_name": strings.Repeat("é", 101)}, "display_name", codeTooLong),
		bad("display name with a newline", map[string]any{"display_name": "Corp\nSSO"}, "display_name", codeInvalid),
		bad("no issuer", map[string]any{"issuer": nil}, "issuer", codeRequired),
		bad("relative issuer", map[string]any{"issuer": "/realms/staff"}, "issuer", codeInvalidURI),
		bad("plain http issuer", map[string]any{"issuer": "http://login.corp.example"}, "issuer", codeInvalidURI),
		bad("plain http at another loopback address", map[string]any{"issuer": "http://127.0.0.2:8080"}, "issuer", codeInvalidURI),
		bad("issuer with a query", map[string]any{"issuer": "https://login.corp.example/?tenant=1"}, "issuer", codeInvalidURI),
		bad("issuer with an empty query", map[string]any{"issuer": "https://login.corp.example/?"}, "issuer", codeInvalidURI),
		bad("issuer with a fragment", map[string]any{"issuer": "https://login.corp.example/#x"}, "issuer", codeInvalidURI),
		bad("issuer with user info", map[string]any{"issuer": "https://me:pw@login.corp.example"}, "issuer", codeInvalidURI),
		bad("issuer of another scheme", map[string]any{"issuer": "ldaps://login.corp.example"}, "issuer", codeInvalidURI),
		bad("no client id", map[string]any{"client_id": ""}, "client_id", codeRequired),
		bad("client id of 257", map[string]any{"client_id": strings.Repeat("c", 257)}, "client_id", codeTooLong),
		bad("no client secret", map[string]any{"client_secret": nil}, "client_secret", codeRequired),
		bad("empty client secret", map[string]any{"client_secret": ""}, "client_secret", codeRequired),
		bad("client secret of 1025", map[string]any{"client_secret": strings.Repeat("s", 1025)}, "client_secret", codeTooLong),
		bad("scopes without openid", map[string]any{"scopes": []string{"email"}}, "scopes", codeRequired),
		bad("a scope with a space", map[string]any{"scopes": []string{"openid", "a b"}}, "scopes[1]", codeInvalid),
		bad("a scope with a quote", map[string]any{"scopes": []string{"openid", `a"b`}}, "scopes[1]", codeInvalid),
		bad("21 scopes", map[string]any{"scopes": many(21, func(i int) string { return fmt.Sprint("openid", i) })}, "scopes", codeTooMany),
		bad("a domain with @", map[string]any{"email_domains": []string{"@corp.example"}}, "email_domains[0]", codeInvalid),
		bad("a wildcard domain", map[string]any{"email_domains": []string{"*.corp.example"}}, "email_domains[0]", codeInvalid),
		bad("a domain of one label", map[string]any{"email_domains": []string{"corp"}}, "email_domains[0]", codeInvalid),
		bad("a domain twice", map[string]any{"email_domains": []string{"corp.example", "CORP.example"}}, "email_domains[1]", "duplicate"),
		bad("101 domains", map[string]any{"email_domains": many(101, func(i int) string { return fmt.Sprintf("d%d.example", i) })}, "email_domains", codeTooMany),
		bad("unknown provisioning", map[string]any{"provisioning": "maybe"}, "provisioning", codeInvalid),
		bad("organization not a uuid", map[string]any{"organization_id": "acme"}, "organization_id", codeInvalidUUID),
		bad("membership organization not a uuid", map[string]any{"memberships": map[string]any{"organization_id": "acme"}}, "memberships.organization_id", codeInvalidUUID),
		bad("groups without a claim", map[string]any{"memberships": map[string]any{"group_organizations": map[string]string{"staff": org.ID}}}, "memberships.groups_claim", codeRequired),
		bad("a group's organization not a uuid", map[string]any{"memberships": map[string]any{"groups_claim": "groups", "group_organizations": map[string]string{"staff": "acme"}}},
			"memberships.group_organizations[staff]", codeInvalidUUID),
		{name: "an unknown field", method: "POST", path: idpPath, body: idpJSON(map[string]any{"redirect_uri": "https://x.example"}), status: 400, code: httpx.CodeValidation, field: "redirect_uri"},
		{name: "email_domains not a list", method: "POST", path: idpPath, body: idpJSON(map[string]any{"email_domains": "corp.example"}), status: 400, code: httpx.CodeValidation, field: "email_domains"},
		{name: "unknown organization", method: "POST", path: idpPath, body: idpJSON(map[string]any{"organization_id": unknownID}), status: 422,
			code: httpx.CodeValidation, field: "organization_id", dcode: "not_found"},
		{name: "unknown membership organization", method: "POST", path: idpPath, body: idpJSON(map[string]any{"memberships": map[string]any{"organization_id": unknownID}}),
			status: 422, code: httpx.CodeValidation, field: "memberships", dcode: "not_found"},
		{name: "unknown group organization", method: "POST", path: idpPath,
			body:   idpJSON(map[string]any{"memberships": map[string]any{"groups_claim": "groups", "group_organizations": map[string]string{"staff": unknownID}}}),
			status: 422, code: httpx.CodeValidation, field: "memberships", dcode: "not_found"},
		{name: "loopback https is fine", method: "POST", path: idpPath, body: idpJSON(map[string]any{"slug": "lo", "issuer": "http://127.0.0.1:8080/realms/dev"}), status: 201},
		{name: "[::1] too", method: "POST", path: idpPath, body: idpJSON(map[string]any{"slug": "lo6", "issuer": "http://[::1]:8080"}), status: 201},
		{name: "localhost too", method: "POST", path: idpPath, body: idpJSON(map[string]any{"slug": "lo-name", "issuer": "http://LocalHost:8080/"}), status: 201},
		{name: "the slug taken", method: "POST", path: idpPath, body: idpJSON(map[string]any{"issuer": "https://other.example"}), status: 201},
		{name: "the slug again", method: "POST", path: idpPath, body: idpJSON(nil), status: 409, code: httpx.CodeConflict, field: "slug", dcode: "conflict"},
	})
}

// TestIdentityProviders: a provider made, shown (never its secret, the
// three addresses to register upstream), changed field by field with
// PATCH, its secret kept unless given, and deleted.
func TestIdentityProviders(t *testing.T) {
	e := newEnv(t, withIssuer).federated()
	org := e.createOrg("acme")
	w := e.must(201, "POST", idpPath, idpJSON(map[string]any{"issuer": "https://login.corp.example/realms/staff/",
		"email_domains": []string{"Corp.Example", "xn--bcher-kva.example."}, "scopes": []string{"openid", "groups", "openid"},
		"memberships": map[string]any{"organization_id": strings.ToUpper(org.ID), "groups_claim": "groups", "group_organizations": map[string]string{"staff": org.ID}}}))
	if strings.Contains(w.Body.String(), "upstream-s3cret") {
		t.Fatalf("the client secret is shown: %s", w.Body)
	}
	ip := decodeAs[IdentityProvider](t, w)
	want := IdentityProvider{ID: ip.ID, Slug: "corp", DisplayName: "Corp SSO", Issuer: "https://login.corp.example/realms/staff/", ClientID: "oidcd",
		ClientSecretSet: true, Scopes: []string{"openid", "groups"}, EmailDomains: []string{"corp.example", "xn--bcher-kva.example"},
		Provisioning: "create", Memberships: ProviderMemberships{OrganizationID: org.ID, GroupsClaim: "groups", GroupOrganizations: map[string]string{"staff": org.ID}},
		BackchannelLogout: true, Enabled: true,
		RedirectURI: "https://id.example/federation/corp/callback", BackchannelLogoutURI: "https://id.example/federation/corp/backchannel-logout",
		PostLogoutRedirectURI: "https://id.example/federation/corp/logged-out", CreatedAt: ip.CreatedAt, UpdatedAt: ip.UpdatedAt}
	if got, _ := json.Marshal(ip); string(got) != mustJSON(want) {
		t.Fatalf("created:\n got %s\nwant %s", got, mustJSON(want))
	}
	for _, body := range []string{e.must(200, "GET", idpPath+"/"+ip.ID, "").Body.String(), e.must(200, "GET", idpPath, "").Body.String()} {
		if strings.Contains(body, "upstream-s3cret") || !strings.Contains(body, `"client_secret_set":true`) {
			t.Fatalf("a read shows the secret, or not that one is set: %s", body)
		}
	}
	if got := storedSecret(t, e, ip.ID); got != "upstream-s3cret" {
		t.Fatalf("stored secret: %q", got)
	}
	stored, _ := e.state.IdentityProvider(ip.ID)

	// PATCH: absent fields keep their values, the secret included.
	patch := func(body string) IdentityProvider {
		t.Helper()
		return decodeAs[IdentityProvider](t, e.must(200, "PATCH", idpPath+"/"+ip.ID, body))
	}
	got := patch(`{"display_name":"Corp","enabled":false,"trust_mfa":true,"provisioning":"create_or_link"}`)
	if got.DisplayName != "Corp" || got.Enabled || !got.TrustMFA || got.Provisioning != "create_or_link" || got.Slug != "corp" ||
		len(got.EmailDomains) != 2 || got.Memberships.GroupsClaim != "groups" || !got.ClientSecretSet || !got.CreatedAt.Equal(ip.CreatedAt) || !got.UpdatedAt.After(ip.UpdatedAt) {
		t.Fatalf("patched: %+v", got)
	}
	if after, _ := e.state.IdentityProvider(ip.ID); string(after.ClientSecret) != string(stored.ClientSecret) {
		t.Fatal("a PATCH without client_secret changed it")
	}
	e.must(400, "PATCH", idpPath+"/"+ip.ID, `{"client_secret":""}`)
	patch(`{"client_secret":"rotated"}`)
	if got := storedSecret(t, e, ip.ID); got != "rotated" {
		t.Fatalf("a PATCH with client_secret stored %q", got)
	}
	// The slug moves the addresses; {} clears the memberships, null the
	// domains and the organization.
	got = patch(`{"slug":"corp-2","memberships":{},"email_domains":null,"backchannel_logout":false}`)
	if got.RedirectURI != "https://id.example/federation/corp-2/callback" || got.Memberships.GroupsClaim != "" || len(got.EmailDomains) != 0 ||
		got.EmailDomains == nil || got.BackchannelLogout {
		t.Fatalf("patched: %+v", got)
	}
	if _, err := e.state.IdentityProviderBySlug("corp"); err == nil {
		t.Fatal("the old slug still names the provider")
	}
	got = patch(`{"organization_id":"` + org.ID + `"}`)
	if got.OrganizationID != org.ID {
		t.Fatalf("organization: %+v", got)
	}
	if got = patch(`{"organization_id":null}`); got.OrganizationID != "" {
		t.Fatalf("organization after null: %+v", got)
	}
	e.run(t, []tc{
		{name: "patch a bad issuer", method: "PATCH", path: idpPath + "/" + ip.ID, body: `{"issuer":"http://corp.example"}`, status: 400, code: httpx.CodeValidation, field: "issuer", dcode: codeInvalidURI},
		{name: "patch openid away", method: "PATCH", path: idpPath + "/" + ip.ID, body: `{"scopes":["email"]}`, status: 400, code: httpx.CodeValidation, field: "scopes", dcode: codeRequired},
		{name: "patch a missing one", method: "PATCH", path: idpPath + "/" + unknownID, body: `{"display_name":"X"}`, status: 404, code: httpx.CodeNotFound},
		{name: "get one not a uuid", method: "GET", path: idpPath + "/corp", status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
		{name: "get a missing one", method: "GET", path: idpPath + "/" + unknownID, status: 404, code: httpx.CodeNotFound},
	})
	e.must(204, "DELETE", idpPath+"/"+ip.ID, "")
	e.must(404, "GET", idpPath+"/"+ip.ID, "")
	e.must(404, "DELETE", idpPath+"/"+ip.ID, "")
	if body := e.must(200, "GET", idpPath, "").Body.String(); body != `{"data":[]}`+"\n" && body != `{"data":[]}` {
		t.Fatalf("list after delete: %s", body)
	}
}

// storedSecret is the provider's client secret as the state holds it,
// opened under the KEK (none in tests: the clear marker).
func storedSecret(t *testing.T, e *env, id string) string {
	t.Helper()
	ip, err := e.state.IdentityProvider(id)
	if err != nil {
		t.Fatal(err)
	}
	s, err := (*kek.KEK)(nil).Open(ip.ClientSecret, fsm.IdentityProviderAAD(id))
	if err != nil {
		t.Fatal(err)
	}
	return string(s)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestIdentityProviderIdempotency: a create retried with its key answers
// the provider it made, and makes no second; the key used for another
// provider is 422.
func TestIdentityProviderIdempotency(t *testing.T) {
	e := newEnv(t).federated()
	first := e.do("POST", idpPath, idpJSON(nil), HeaderIdempotencyKey, "job-1")
	if first.Code != 201 {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	again := e.do("POST", idpPath, idpJSON(nil), HeaderIdempotencyKey, "job-1")
	if again.Code != 201 || again.Header().Get(HeaderIdempotentReplayed) != "true" ||
		decodeAs[IdentityProvider](t, again).ID != decodeAs[IdentityProvider](t, first).ID {
		t.Fatalf("retry: %d %s", again.Code, again.Body)
	}
	checkEnvelope(t, e.do("POST", idpPath, idpJSON(map[string]any{"slug": "other"}), HeaderIdempotencyKey, "job-1"), 422, httpx.CodeUnprocessble)
	if ips, _ := e.state.IdentityProviders(); len(ips) != 1 {
		t.Fatalf("%d providers, want 1", len(ips))
	}
}

// TestIdentityProvidersWhileMixed: while the cluster runs the older state
// format (a rolling upgrade), every write of a provider or a link is
// refused before it is proposed, 409 naming the feature; nothing is made.
func TestIdentityProvidersWhileMixed(t *testing.T) {
	e := newEnv(t)
	u := e.createUser(`{"email":"ann@example.com"}`)
	for _, r := range []struct{ method, path, body string }{
		{"POST", idpPath, idpJSON(nil)},
		{"DELETE", idpPath + "/" + unknownID, ""},
		{"DELETE", "/admin/v1/users/" + u.ID + "/identities/" + unknownID, ""},
	} {
		before := e.app.FSM.Applied()
		env := checkEnvelope(t, e.do(r.method, r.path, r.body), 409, httpx.CodeConflict)
		if !strings.Contains(env.Message, "identity providers (federation) needs state format") {
			t.Errorf("%s %s: message %q", r.method, r.path, env.Message)
		}
		if e.app.FSM.Applied() != before {
			t.Errorf("%s %s: something was applied", r.method, r.path)
		}
	}
	e.must(200, "GET", idpPath, "")
	e.must(200, "GET", "/admin/v1/users/"+u.ID+"/identities", "")
}

// idpScene is the authorization scene with three providers: the site's,
// O's and P's.
type idpScene struct {
	*scene
	site, ofO, ofP IdentityProvider
}

func newIdPScene(t *testing.T) *idpScene {
	s := &idpScene{scene: newScene(t)}
	s.federated()
	mk := func(slug string, set map[string]any) IdentityProvider {
		set["slug"] = slug
		return decodeAs[IdentityProvider](t, s.must(201, "POST", idpPath, idpJSON(set)))
	}
	s.site = mk("site", map[string]any{"email_domains": []string{"example.com"}})
	s.ofO = mk("acme-sso", map[string]any{"organization_id": s.o.ID})
	s.ofP = mk("globex-sso", map[string]any{"organization_id": s.p.ID})
	return s
}

// orgIdP is the id of a provider of O for TestAuthorizeEveryRouteEveryRole.
func (s *scene) orgIdP(t *testing.T) string {
	s.federated()
	return decodeAs[IdentityProvider](t, s.must(201, "POST", idpPath, idpJSON(map[string]any{"slug": "o-sso", "organization_id": s.o.ID}))).ID
}

// TestIdentityProviderAuthorization: what an org_admin of O may do with
// providers, with the real handlers: O's alone, never another's (404 as a
// missing one) or the site's, never naming email_domains, and never
// granting memberships outside O (403); an auditor reads. Nothing refused
// is applied.
func TestIdentityProviderAuthorization(t *testing.T) {
	s := newIdPScene(t)
	o := orgAdmin(s.o.ID)
	one := func(ip IdentityProvider) string { return idpPath + "/" + ip.ID }
	oBody := func(set map[string]any) string {
		set["slug"], set["organization_id"] = "o-new", s.o.ID
		return idpJSON(set)
	}
	for _, at := range []struct {
		name, method, path, body string
		c                        Credential
		status                   int
		why                      string // in a 403's message
	}{
		{"create a site provider", "POST", idpPath, idpJSON(map[string]any{"slug": "mine"}), o, 403, "own organization"},
		{"create another org's", "POST", idpPath, idpJSON(map[string]any{"slug": "mine", "organization_id": s.p.ID}), o, 403, "own organization"},
		{"create one granting another org", "POST", idpPath, oBody(map[string]any{"memberships": map[string]any{"organization_id": s.p.ID}}), o, 403, "own organization"},
		{"create one whose group grants another org", "POST", idpPath,
			oBody(map[string]any{"memberships": map[string]any{"groups_claim": "groups", "group_organizations": map[string]string{"a": s.o.ID, "b": s.p.ID}}}), o, 403, "own organization"},
		{"create one with email domains", "POST", idpPath, oBody(map[string]any{"email_domains": []string{"acme.example"}}), o, 403, "email_domains"},
		{"create one with no email domains", "POST", idpPath, oBody(map[string]any{"email_domains": []string{}}), o, 403, "email_domains"},
		{"create one with email domains null", "POST", idpPath, strings.Replace(oBody(map[string]any{}), "{", `{"email_domains":null,`, 1), o, 403, "email_domains"},
		{"read the site's", "GET", one(s.site), "", o, 404, ""},
		{"read another org's", "GET", one(s.ofP), "", o, 404, ""},
		{"change the site's", "PATCH", one(s.site), `{"display_name":"Mine"}`, o, 404, ""},
		{"change another org's", "PATCH", one(s.ofP), `{"display_name":"Mine"}`, o, 404, ""},
		{"change another org's with a bad body", "PATCH", one(s.ofP), `{"display_name":`, o, 404, ""},
		{"delete the site's", "DELETE", one(s.site), "", o, 404, ""},
		{"delete another org's", "DELETE", one(s.ofP), "", o, 404, ""},
		{"move its own to another org", "PATCH", one(s.ofO), `{"organization_id":"` + s.p.ID + `"}`, o, 403, "own organization"},
		{"make its own the site's", "PATCH", one(s.ofO), `{"organization_id":null}`, o, 403, "own organization"},
		{"make its own grant another org", "PATCH", one(s.ofO), `{"memberships":{"organization_id":"` + s.p.ID + `"}}`, o, 403, "own organization"},
		{"set its own's email domains", "PATCH", one(s.ofO), `{"email_domains":["acme.example"]}`, o, 403, "email_domains"},
		{"clear its own's email domains", "PATCH", one(s.ofO), `{"email_domains":[]}`, o, 403, "email_domains"},
		{"an auditor creates", "POST", idpPath, idpJSON(map[string]any{"slug": "audit"}), asAuditor, 403, "only read"},
		{"an auditor changes", "PATCH", one(s.site), `{"display_name":"X"}`, asAuditor, 403, "only read"},
		{"an auditor deletes", "DELETE", one(s.site), "", asAuditor, 403, "only read"},
	} {
		t.Run(at.name, func(t *testing.T) {
			before := s.app.FSM.Applied()
			code := map[int]string{403: httpx.CodeForbidden, 404: httpx.CodeNotFound}[at.status]
			env := checkEnvelope(t, s.as(at.c, at.method, at.path, at.body), at.status, code)
			if !strings.Contains(env.Message, at.why) {
				t.Errorf("message %q, want it to say %q", env.Message, at.why)
			}
			if got := s.app.FSM.Applied(); got != before {
				t.Errorf("applied index moved from %d to %d", before, got)
			}
		})
	}

	// What it may do: its own organization's providers.
	list := decodeAs[struct{ Data []IdentityProvider }](t, s.as(o, "GET", idpPath, ""))
	if len(list.Data) != 1 || list.Data[0].ID != s.ofO.ID {
		t.Fatalf("org_admin's list: %+v", list.Data)
	}
	if all := decodeAs[struct{ Data []IdentityProvider }](t, s.as(asAuditor, "GET", idpPath, "")); len(all.Data) != 3 {
		t.Fatalf("auditor's list: %d providers", len(all.Data))
	}
	mustAs := func(c Credential, status int, method, path, body string) *httptest.ResponseRecorder {
		t.Helper()
		w := s.as(c, method, path, body)
		if w.Code != status {
			t.Fatalf("%s %s: got %d, want %d: %s", method, path, w.Code, status, w.Body)
		}
		return w
	}
	mustAs(asAuditor, 200, "GET", one(s.ofP), "")
	mustAs(o, 200, "GET", one(s.ofO), "")
	made := decodeAs[IdentityProvider](t, mustAs(o, 201, "POST", idpPath, oBody(map[string]any{
		"memberships": map[string]any{"organization_id": s.o.ID, "groups_claim": "groups", "group_organizations": map[string]string{"staff": s.o.ID}}})))
	if made.OrganizationID != s.o.ID {
		t.Fatalf("made: %+v", made)
	}
	ev := lastAdminEvent(t, s.env)
	if ev.OrgID != s.o.ID || ev.Detail["target"] != made.ID || ev.Detail["action"] != "POST /identity-providers" {
		t.Errorf("the create's admin event: %+v", ev)
	}
	mustAs(o, 200, "PATCH", one(made), `{"display_name":"Acme staff","client_secret":"new"}`)
	// The audit events name O and the provider.
	ev = lastAdminEvent(t, s.env)
	if ev.OrgID != s.o.ID || ev.Detail["target"] != made.ID || ev.Detail["action"] != "PATCH /identity-providers/{id}" {
		t.Errorf("the update's admin event: %+v", ev)
	}
	mustAs(o, 204, "DELETE", one(made), "")
	// A provider of O that an admin made to grant P too is O's to read
	// and delete, not to change: that would be granting P.
	shared := decodeAs[IdentityProvider](t, s.must(200, "PATCH", one(s.ofO), `{"memberships":{"groups_claim":"g","group_organizations":{"p":"`+s.p.ID+`"}}}`))
	mustAs(o, 200, "GET", one(shared), "")
	checkEnvelope(t, s.as(o, "PATCH", one(shared), `{"display_name":"Mine"}`), 403, httpx.CodeForbidden)
	mustAs(o, 204, "DELETE", one(shared), "")
}

// lastAdminEvent is the newest admin event of e's audit trail.
func lastAdminEvent(t *testing.T, e *env) fsm.Event {
	t.Helper()
	evs, err := e.state.AuditEvents(fsm.AuditQuery{Type: fsm.EventAdmin, Newest: true, Limit: 1})
	if err != nil || len(evs) != 1 {
		t.Fatalf("audit: %v %v", evs, err)
	}
	return evs[0]
}

// signInThrough records a federated sign-in of a new person through
// provider with an SSO session, and an app session of client under it
// (sid "sid-"+sso); it returns the person's id and the link's.
func signInThrough(t *testing.T, e *env, provider, subject, address, sso, client, org string, n int) (string, string) {
	t.Helper()
	at := e.clock.now().UTC()
	in := fsm.FederatedSignIn{ProviderID: provider, Subject: subject, Email: address, EmailVerified: true,
		IdentityID: fmt.Sprintf("00000000-0000-4000-a000-%012d", n), UserID: fmt.Sprintf("00000000-0000-4000-b000-%012d", n), At: at,
		Session: &fsm.StartSSOSession{TokenHash: "tok-" + sso, Session: fsm.SSOSession{ID: sso, AuthTime: at, AMR: []string{"fed"}, ACR: "fed",
			CreatedAt: at, LastSeen: at, IdleExpiresAt: at.Add(time.Hour), ExpiresAt: at.Add(8 * time.Hour), UpstreamSID: "up-" + sso}}}
	res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeFederatedSignIn, in))
	if err != nil || res.Err != nil {
		t.Fatalf("federated sign-in: %v %v", err, res.Err)
	}
	r := res.Value.(fsm.FederatedSignInResult)
	res, err = e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeIssueCode, fsm.IssueCode{NewSID: "sid-" + sso, IdleExpiresAt: at.Add(time.Hour),
		Code: fsm.Code{Hash: "code-" + sso, ClientID: client, UserID: r.User.ID, OrgID: org, SSOSessionID: sso, IssuedAt: at, ExpiresAt: at.Add(time.Minute)}}))
	if err != nil || res.Err != nil {
		t.Fatalf("issue code: %v %v", err, res.Err)
	}
	return r.User.ID, r.Identity.ID
}

// pendingSIDs are the sids of the back-channel logout tokens owed.
func pendingSIDs(t *testing.T, e *env) []string {
	t.Helper()
	ds, err := e.state.PendingDeliveries(100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, d.SID)
	}
	return out
}

// TestIdentities: a person's links are listed, and one unlinked ends the
// sessions opened through it with a logout token carrying sid; deleting
// a provider ends every session opened through it alike. Who may list or
// unlink is who may read or change the person.
func TestIdentities(t *testing.T) {
	s := newIdPScene(t)
	app := s.createClient(clientJSON(s.o.ID, map[string]any{"client_id": "bcl-app", "backchannel_logout_uri": "https://rp.example/bcl"}))
	ann, annLink := signInThrough(t, s.env, s.site.ID, "ann-at-site", "ann@example.com", "sso-ann", app.ClientID, s.o.ID, 1)
	// Ann is a person of O alone.
	s.createMembership(ann, s.o.ID)
	path := "/admin/v1/users/" + ann + "/identities"
	list := decodeAs[struct{ Data []map[string]any }](t, s.must(200, "GET", path, ""))
	if len(list.Data) != 1 || list.Data[0]["id"] != annLink || list.Data[0]["provider_id"] != s.site.ID || list.Data[0]["subject"] != "ann-at-site" ||
		list.Data[0]["email"] != "ann@example.com" || list.Data[0]["linked_at"] == nil || list.Data[0]["last_used_at"] == nil || len(list.Data[0]) != 6 {
		t.Fatalf("identities: %+v", list.Data)
	}
	o, p := orgAdmin(s.o.ID), orgAdmin(s.p.ID)
	if w := s.as(o, "GET", path, ""); w.Code != 200 {
		t.Fatalf("O's org_admin reads ann's links: %d %s", w.Code, w.Body)
	}
	checkEnvelope(t, s.as(p, "GET", path, ""), 404, httpx.CodeNotFound)
	checkEnvelope(t, s.as(p, "DELETE", path+"/"+annLink, ""), 404, httpx.CodeNotFound)
	checkEnvelope(t, s.as(asAuditor, "DELETE", path+"/"+annLink, ""), 403, httpx.CodeForbidden)
	e := s.env
	e.run(t, []tc{
		{name: "unlink an id not a uuid", method: "DELETE", path: path + "/link", status: 400, code: httpx.CodeValidation, field: "identity_id", dcode: codeInvalidUUID},
		{name: "unlink a missing link", method: "DELETE", path: path + "/" + unknownID, status: 404, code: httpx.CodeNotFound},
		{name: "unlink another person's link", method: "DELETE", path: "/admin/v1/users/" + s.alice.ID + "/identities/" + annLink, status: 404, code: httpx.CodeNotFound},
		{name: "the links of no one", method: "GET", path: "/admin/v1/users/" + unknownID + "/identities", status: 404, code: httpx.CodeNotFound},
	})
	if w := s.as(o, "DELETE", path+"/"+annLink, ""); w.Code != 204 {
		t.Fatalf("unlink: %d %s", w.Code, w.Body)
	}
	if sso, _ := e.state.SSOSession("sso-ann"); sso.EndedAt.IsZero() {
		t.Fatal("the session opened through the link is live")
	}
	if got := pendingSIDs(t, e); len(got) != 1 || got[0] != "sid-sso-ann" {
		t.Fatalf("logout tokens owed: %v, want one with sid sid-sso-ann", got)
	}
	ev := lastAdminEvent(t, e)
	if ev.Detail["action"] != "DELETE /users/{id}/identities/{identity_id}" || ev.Detail["target"] != ann || ev.Detail["identity_id"] != annLink {
		t.Errorf("unlink's audit event: %+v", ev)
	}
	if body := s.must(200, "GET", path, "").Body.String(); !strings.Contains(body, `"data":[]`) {
		t.Fatalf("links after the unlink: %s", body)
	}

	// Deleting O's provider ends the sessions opened through it.
	bob, _ := signInThrough(t, e, s.ofO.ID, "bob-at-o", "bob2@example.com", "sso-bob", app.ClientID, s.o.ID, 2)
	if w := s.as(o, "DELETE", idpPath+"/"+s.ofO.ID, ""); w.Code != 204 {
		t.Fatalf("delete O's provider: %d %s", w.Code, w.Body)
	}
	if sso, _ := e.state.SSOSession("sso-bob"); sso.EndedAt.IsZero() {
		t.Fatal("the session opened through the deleted provider is live")
	}
	if got := pendingSIDs(t, e); len(got) != 2 || got[1] != "sid-sso-bob" {
		t.Fatalf("logout tokens owed: %v", got)
	}
	if ids, _ := e.state.Identities(bob); len(ids) != 0 {
		t.Fatalf("links to the deleted provider: %+v", ids)
	}
}

// TestFederationURIs: the addresses to register follow the issuer, with
// or without its trailing slash.
func TestFederationURIs(t *testing.T) {
	for _, iss := range []string{"https://id.example", "https://id.example/"} {
		r, b, l := FederationURIs(iss, "corp")
		if got := fmt.Sprint(r, " ", b, " ", l); got != "https://id.example/federation/corp/callback https://id.example/federation/corp/backchannel-logout https://id.example/federation/corp/logged-out" {
			t.Errorf("%s: %s", iss, got)
		}
	}
}
