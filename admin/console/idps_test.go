package console

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
)

// newFederatedEnv is the console of a node whose issuer is
// https://id.example, over a state of the current format (identity
// providers need it), signed in with the admin token.
func newFederatedEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, func(c *admin.Config) { c.Issuer = "https://id.example" })
	if err := e.app.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	e.signIn()
	return e
}

func onlyProvider(t *testing.T, e *env) fsm.IdentityProvider {
	t.Helper()
	ips, err := e.state.IdentityProviders()
	if err != nil || len(ips) != 1 {
		t.Fatalf("providers: %+v %v", ips, err)
	}
	return ips[0]
}

// TestIdentityProvidersRoundTrip: the list page and its create form, a
// provider's page with the addresses to register upstream, a change that
// keeps the secret, the API's problems shown on their fields (the secret
// never re-shown), and the deletion, confirmed.
func TestIdentityProvidersRoundTrip(t *testing.T) {
	e := newFederatedEnv(t)
	r := e.get(Prefix + "identity-providers")
	wantStatus(t, "empty list", r, http.StatusOK)
	wantBody(t, "empty list", r, "No identity providers", `action="/console/identity-providers"`, `name="email_domains"`,
		`<option value="">none: the site's</option>`, `id="idp-enabled" name="enabled" checked`, `id="idp-bcl" name="backchannel_logout" checked`,
		`aria-current="page">Identity providers</a>`)

	form := url.Values{"display_name": {"Staff account"}, "slug": {"Staff"}, "issuer": {"https://sso.example.com/realms/staff"},
		"client_id": {"oidcd"}, "client_secret": {"upstream-s3cret"}, "scopes": {"openid email groups"}, "provisioning": {"create_or_link"},
		"email_domains": {"staff.example.com\nStaff2.example.com"}, "groups_claim": {"groups"}, "enabled": {"on"}, "backchannel_logout": {"on"}}
	r = e.post(Prefix+"identity-providers", form)
	wantStatus(t, "bad slug", r, http.StatusBadRequest)
	wantBody(t, "bad slug", r, `role="alert"`, `class="field-error"`, `value="Staff"`)
	if strings.Contains(r.Body, "upstream-s3cret") {
		t.Fatal("the secret is shown again after a failed create")
	}
	form.Set("slug", "staff")
	form.Set("group_organizations", "no-equals-sign")
	r = e.post(Prefix+"identity-providers", form)
	wantStatus(t, "bad group line", r, http.StatusBadRequest)
	wantBody(t, "bad group line", r, "group=organization id")
	form.Del("group_organizations")
	r = e.post(Prefix+"identity-providers", form)
	if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, Prefix+"identity-providers/") || !strings.HasSuffix(r.Location, "?done=idp-created") {
		t.Fatalf("create: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	ip := onlyProvider(t, e)
	if ip.Slug != "staff" || ip.Provisioning != "create_or_link" || strings.Join(ip.Scopes, " ") != "openid email groups" ||
		strings.Join(ip.EmailDomains, " ") != "staff.example.com staff2.example.com" || ip.Memberships.GroupsClaim != "groups" ||
		!ip.Enabled || !ip.BackchannelLogout || ip.TrustMFA || ip.OrgID != "" {
		t.Fatalf("created: %+v", ip)
	}
	sealed := ip.ClientSecret
	r = e.get(r.Location)
	wantStatus(t, "provider page", r, http.StatusOK)
	wantBody(t, "provider page", r, "Identity provider created.", "<h1>Staff account</h1>", "Register at the upstream",
		"https:/<wbr>/<wbr>id.<wbr>example/<wbr>federation/<wbr>staff/<wbr>callback", "backchannel-logout", "logged-out",
		"(only needed when a logout here ends the upstream's session)", "set (never shown)", `value="https://sso.example.com/realms/staff"`)
	if strings.Contains(r.Body, "upstream-s3cret") {
		t.Fatal("the provider page shows the secret")
	}
	r = e.get(Prefix + "identity-providers")
	wantBody(t, "list", r, `<a href="/console/identity-providers/`+ip.ID+`">Staff account</a>`, "the site's", "create_or_link", "enabled")

	// A change: every field of the form, the empty secret kept.
	page := Prefix + "identity-providers/" + ip.ID
	edit := idpValues(admin.IdentityProvider{Slug: "staff", DisplayName: "Staff", Issuer: ip.Issuer, ClientID: "oidcd", Scopes: ip.Scopes,
		EmailDomains: ip.EmailDomains, Provisioning: "link", Memberships: admin.ProviderMemberships{GroupsClaim: "groups"}, TrustMFA: true, Enabled: false})
	r = e.post(page, edit)
	if r.Status != http.StatusSeeOther || r.Location != page+"?done=idp-updated" {
		t.Fatalf("update: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	after := onlyProvider(t, e)
	if after.DisplayName != "Staff" || after.Provisioning != "link" || !after.TrustMFA || after.Enabled || after.BackchannelLogout ||
		!bytes.Equal(after.ClientSecret, sealed) || len(after.EmailDomains) != 2 {
		t.Fatalf("updated: %+v", after)
	}
	edit.Set("client_secret", "rotated")
	edit.Set("issuer", "http://sso.example.com")
	r = e.post(page, edit)
	wantStatus(t, "bad issuer", r, http.StatusBadRequest)
	wantBody(t, "bad issuer", r, `class="field-error"`, "must use https", `value="http://sso.example.com"`)
	if strings.Contains(r.Body, "rotated") || !bytes.Equal(onlyProvider(t, e).ClientSecret, sealed) {
		t.Fatal("a failed change showed or stored the new secret")
	}
	edit.Set("issuer", ip.Issuer)
	wantStatus(t, "new secret", e.post(page, edit), http.StatusSeeOther)
	if s, err := (*kek.KEK)(nil).Open(onlyProvider(t, e).ClientSecret, fsm.IdentityProviderAAD(ip.ID)); err != nil || string(s) != "rotated" {
		t.Fatalf("secret after the change: %q %v", s, err)
	}

	r = e.get(page + "/delete")
	wantStatus(t, "confirm page", r, http.StatusOK)
	wantBody(t, "confirm page", r, "Staff (staff)", `action="/console/identity-providers/`+ip.ID+`/delete"`, "every session opened through it ends")
	r = e.post(page+"/delete", nil)
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"identity-providers?done=idp-deleted" {
		t.Fatalf("delete: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	if ips, _ := e.state.IdentityProviders(); len(ips) != 0 {
		t.Fatalf("after delete: %+v", ips)
	}
	wantStatus(t, "gone", e.get(page), http.StatusNotFound)
}

// TestPersonIdentities: a person's page lists their links and unlinks
// one, ending the sessions opened through it.
func TestPersonIdentities(t *testing.T) {
	e := newFederatedEnv(t)
	r := e.post(Prefix+"identity-providers", url.Values{"display_name": {"Corp"}, "slug": {"corp"}, "issuer": {"https://corp.example"},
		"client_id": {"oidcd"}, "client_secret": {"s"}, "provisioning": {"create"}, "enabled": {"on"}})
	wantStatus(t, "create", r, http.StatusSeeOther)
	ip := onlyProvider(t, e)
	at := time.Now().UTC()
	res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeFederatedSignIn, fsm.FederatedSignIn{ProviderID: ip.ID,
		Subject: "ann-at-corp", Email: "ann@corp.example", EmailVerified: true, IdentityID: "00000000-0000-4000-a000-000000000001",
		UserID: "00000000-0000-4000-b000-000000000001", At: at,
		Session: &fsm.StartSSOSession{TokenHash: "tok", Session: fsm.SSOSession{ID: "sso-ann", AuthTime: at, AMR: []string{"fed"}, ACR: "fed",
			CreatedAt: at, LastSeen: at, IdleExpiresAt: at.Add(time.Hour), ExpiresAt: at.Add(time.Hour)}}}))
	if err != nil || res.Err != nil {
		t.Fatalf("sign-in: %v %v", err, res.Err)
	}
	person := Prefix + "people/00000000-0000-4000-b000-000000000001"
	r = e.get(person)
	wantStatus(t, "person page", r, http.StatusOK)
	wantBody(t, "person page", r, "<h2>Identity providers</h2>", "Corp (corp)", "<code>ann-at-corp</code>", "ann@corp.example",
		`action="/console/people/00000000-0000-4000-b000-000000000001/identities/00000000-0000-4000-a000-000000000001/delete"`)
	r = e.post(person+"/identities/00000000-0000-4000-a000-000000000001/delete", nil)
	if r.Status != http.StatusSeeOther || r.Location != person+"?done=identity-unlinked" {
		t.Fatalf("unlink: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	if s, _ := e.state.SSOSession("sso-ann"); s.EndedAt.IsZero() {
		t.Fatal("the session opened through the link is live")
	}
	r = e.get(r.Location)
	wantBody(t, "after the unlink", r, "Link removed")
	if strings.Contains(r.Body, "<h2>Identity providers</h2>") {
		t.Fatal("the person page still lists a link")
	}
	r = e.post(person+"/identities/00000000-0000-4000-a000-000000000001/delete", nil)
	wantStatus(t, "unlink again", r, http.StatusNotFound)
}

// TestIdentityProviderFormsOfAnOrgAdmin: an org_admin's forms show no
// email domains and no site's provider, and send neither: the API
// refuses a body of an org_admin that names email_domains at all.
func TestIdentityProviderFormsOfAnOrgAdmin(t *testing.T) {
	orgs := []admin.Org{{ID: "00000000-0000-4000-8000-0000000000a1", Name: "Acme", Slug: "acme"}}
	for _, page := range []string{"idps", "idp"} {
		v := &view{Title: "t", SignedIn: true, Role: admin.RoleOrgAdmin, Form: url.Values{}}
		if page == "idps" {
			v.Data = idpsData{Orgs: orgs}
		} else {
			v.Data = idpData{Provider: admin.IdentityProvider{ID: "00000000-0000-4000-8000-0000000000b1", Slug: "acme-sso", OrganizationID: orgs[0].ID}, OrgName: "Acme", Orgs: orgs}
		}
		var b bytes.Buffer
		if err := pages[page].ExecuteTemplate(&b, "layout", v); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), `name="email_domains"`) || strings.Contains(b.String(), "none: the site") {
			t.Errorf("%s: an org_admin's form offers what only an admin sets", page)
		}
		if !strings.Contains(b.String(), `<option value="00000000-0000-4000-8000-0000000000a1"`) {
			t.Errorf("%s: the org_admin's organization is not offered", page)
		}
	}
	for _, create := range []bool{true, false} {
		body, _ := idpForm(url.Values{"slug": {"acme-sso"}, "organization_id": {orgs[0].ID}}, create)
		if _, ok := body.(map[string]any)["email_domains"]; ok {
			t.Errorf("create %v: a form without the field sends email_domains", create)
		}
	}
	if body, _ := idpForm(url.Values{"email_domains": {""}}, false); body.(map[string]any)["email_domains"] == nil {
		t.Error("an admin's change that empties the domains does not send them")
	}
}
