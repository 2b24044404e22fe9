package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/fsm"
)

// withMail is a provider that sends mail.
func withMail(c *admin.Config) { c.Mail, c.Issuer = true, "https://id.example.test" }

// personID creates a person through the console and returns their id.
func (e *env) personID(addr string) string {
	e.t.Helper()
	r := e.post(Prefix+"people", url.Values{"email": {addr}})
	if r.Status != http.StatusSeeOther {
		e.t.Fatalf("create person: %d\n%s", r.Status, r.Body)
	}
	return strings.TrimSuffix(strings.TrimPrefix(r.Location, Prefix+"people/"), "?done=person-created")
}

func TestInvitationsPage(t *testing.T) {
	e := newEnv(t, withMail)
	e.signIn()
	e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	org := firstOrg(t, e.state)

	r := e.get(Prefix + "invitations")
	wantStatus(t, "invitations", r, http.StatusOK)
	wantBody(t, "invitations", r, `<a href="/console/invitations" aria-current="page">Invitations</a>`, "No invitations.",
		`action="/console/invitations" class="narrow"`, `<option value="604800" selected>7 days</option>`, "Acme (acme)")

	r = e.post(Prefix+"invitations", url.Values{"email": {"Ann <ann@example.com>"}, "organization_id": {org.ID}, "expires_in": {"86400"}})
	wantStatus(t, "display name", r, http.StatusBadRequest)
	wantBody(t, "display name", r, `role="alert"`, `aria-invalid="true"`, `class="field-error" id="i-email-error"`, `value="Ann &lt;ann@example.com&gt;"`,
		`<option value="86400" selected>1 day</option>`)
	r = e.post(Prefix+"invitations", url.Values{"email": {"ann@example.com"}, "organization_id": {org.ID}, "expires_in": {"forever"}})
	wantStatus(t, "no lifetime", r, http.StatusBadRequest)
	wantBody(t, "no lifetime", r, "choose how long the link works")
	r = e.post(Prefix+"invitations", url.Values{"email": {"ann@example.com"}, "organization_id": {org.ID}, "expires_in": {"86400"},
		"csrf_token": {"0123456789abcdef0123456789abcdef"}})
	wantStatus(t, "without the CSRF token", r, http.StatusForbidden)
	if l, _, _ := e.state.Invitations(fsm.Page{Page: 1, PageSize: 10}); len(l) != 0 {
		t.Fatalf("invitations after refusals: %+v", l)
	}

	r = e.post(Prefix+"invitations", url.Values{"email": {"ann@example.com"}, "organization_id": {org.ID}, "expires_in": {"86400"}, "locale": {"klingon"}})
	wantStatus(t, "a language the mail is not in", r, http.StatusBadRequest)
	wantBody(t, "a language the mail is not in", r, `role="alert"`, "locale")

	r = e.post(Prefix+"invitations", url.Values{"email": {" ann@example.com "}, "organization_id": {org.ID}, "expires_in": {"259200"}, "locale": {"ja"}})
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"invitations?done=invitation-created" {
		t.Fatalf("create: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	l, _, _ := e.state.Invitations(fsm.Page{Page: 1, PageSize: 10})
	if len(l) != 1 || l[0].Email != "ann@example.com" || l[0].OrgID != org.ID || l[0].ExpiresAt.Sub(l[0].CreatedAt).Hours() != 72 {
		t.Fatalf("stored %+v", l)
	}
	if p, _ := e.state.PendingEmails(10); len(p) != 1 || p[0].Kind != fsm.EmailInvitation || p[0].To != "ann@example.com" || p[0].Locale != "ja" {
		t.Errorf("outbox %+v", p)
	}
	r = e.get(r.Location)
	wantBody(t, "after create", r, "Invitation sent.", "ann@example.com", "Acme", "pending", "Withdraw<span class=\"visually-hidden\"> the invitation of ann@example.com")

	// The filter, and the pager keeping it.
	wantBody(t, "filtered", e.get(Prefix+"invitations?organization_id="+org.ID+"&status=pending"), "ann@example.com", `<option value="pending" selected>`)
	wantBody(t, "filtered out", e.get(Prefix+"invitations?status=accepted"), "No invitations that match.")
	r = e.get(Prefix + "invitations?status=withdrawn")
	wantStatus(t, "bad filter", r, http.StatusBadRequest)
	wantBody(t, "bad filter", r, `role="alert"`, "status")

	r = e.post(Prefix+"invitations/"+l[0].ID+"/delete", nil)
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"invitations?done=invitation-deleted" {
		t.Fatalf("withdraw: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	if _, err := e.state.Invitation(l[0].ID); err == nil {
		t.Error("the invitation outlived its withdrawal")
	}
	if _, err := e.state.Link(l[0].LinkHash); err == nil {
		t.Error("the link outlived its withdrawal")
	}
	wantBody(t, "after withdraw", e.get(Prefix+"invitations?done=invitation-deleted"), "Invitation withdrawn; its link no longer works.", "No invitations.")
	r = e.post(Prefix+"invitations/"+l[0].ID+"/delete", nil)
	wantStatus(t, "withdraw again", r, http.StatusNotFound)
	wantBody(t, "withdraw again", r, "Not done")
}

func TestVerifyEmailButton(t *testing.T) {
	e := newEnv(t, withMail)
	e.signIn()
	id := e.personID("ada@example.com")
	r := e.get(Prefix + "people/" + id)
	wantBody(t, "person page", r, "<code>ada@example.com</code> is <strong>not verified</strong>", `action="/console/people/`+id+`/verify-email"`, "Send a link to prove the address",
		`<option value="en" lang="en" selected>English</option>`, `<option value="de" lang="de">Deutsch</option>`)
	r = e.post(Prefix+"people/"+id+"/verify-email", url.Values{"locale": {"de"}})
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"people/"+id+"?done=verify-sent" {
		t.Fatalf("verify: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	if p, _ := e.state.PendingEmails(10); len(p) != 1 || p[0].Kind != fsm.EmailVerify || p[0].UserID != id || p[0].Locale != "de" {
		t.Errorf("outbox %+v", p)
	}
	wantBody(t, "after verify", e.get(r.Location), "A link to prove the address is on its way")
	r = e.post(Prefix+"people/5b0c8a43-0d33-4a57-a8ae-0c9d3c6d0c51/verify-email", nil)
	wantStatus(t, "unknown person", r, http.StatusNotFound)
}

func TestOrganizationPage(t *testing.T) {
	e := newEnv(t, withMail)
	e.signIn()
	e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	org := firstOrg(t, e.state)
	page := Prefix + "organizations/" + org.ID

	wantBody(t, "list", e.get(Prefix+"organizations"), `<a href="`+page+`">Acme</a>`, "<td>off</td>")
	r := e.get(page)
	wantStatus(t, "organization", r, http.StatusOK)
	wantBody(t, "organization", r, "<h1>Acme</h1>", "<code>acme</code>", `action="`+page+`/registration"`, `id="o-reg-enabled" name="enabled">`,
		`href="/console/invitations?organization_id=`+org.ID+`"`)
	if strings.Contains(r.Body, "sends no mail") {
		t.Error("a provider with mail is said to send none")
	}

	r = e.post(page+"/registration", url.Values{"enabled": {"on"}, "email_domains": {""}})
	wantStatus(t, "enabled without domains", r, http.StatusBadRequest)
	wantBody(t, "enabled without domains", r, `role="alert"`, `aria-invalid="true"`, "at least one domain", `id="o-reg-enabled" name="enabled" checked>`)
	r = e.post(page+"/registration", url.Values{"enabled": {"on"}, "email_domains": {"acme.example\n@bad.example"}})
	wantStatus(t, "a bad domain", r, http.StatusBadRequest)
	wantBody(t, "a bad domain", r, "registration.email_domains[1]", "without @", "acme.example\n@bad.example</textarea>", `name="name" autocomplete="off" required maxlength="200" value="Acme">`)

	r = e.post(page+"/registration", url.Values{"enabled": {"on"}, "email_domains": {"Acme.Example\r\nbücher.example, sub.acme.example."}})
	if r.Status != http.StatusSeeOther || r.Location != page+"?done=org-updated" {
		t.Fatalf("registration: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	o, _ := e.state.Org(org.ID)
	if o.Registration == nil || !o.Registration.Enabled || strings.Join(o.Registration.EmailDomains, " ") != "acme.example xn--bcher-kva.example sub.acme.example" {
		t.Fatalf("stored %+v", o.Registration)
	}
	wantBody(t, "after registration", e.get(r.Location), "Organization updated.", "acme.example\nxn--bcher-kva.example\nsub.acme.example</textarea>",
		`name="enabled" checked>`)
	wantBody(t, "list", e.get(Prefix+"organizations"), "open to acme.example, xn--bcher-kva.example, sub.acme.example")

	// Off keeps the domains the form still holds.
	e.post(page+"/registration", url.Values{"email_domains": {"acme.example"}})
	if o, _ := e.state.Org(org.ID); o.Registration.Enabled || strings.Join(o.Registration.EmailDomains, " ") != "acme.example" {
		t.Errorf("off: %+v", o.Registration)
	}

	r = e.post(page, url.Values{"name": {""}})
	wantStatus(t, "no name", r, http.StatusBadRequest)
	wantBody(t, "no name", r, `value="">`, ">acme.example</textarea>")
	r = e.post(page, url.Values{"name": {"Acme Corporation"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("rename: got %d\n%s", r.Status, r.Body)
	}
	if o, _ := e.state.Org(org.ID); o.Name != "Acme Corporation" {
		t.Errorf("name %q", o.Name)
	}
	r = e.get(Prefix + "organizations/5b0c8a43-0d33-4a57-a8ae-0c9d3c6d0c51")
	wantStatus(t, "unknown organization", r, http.StatusNotFound)

	// A deleted organization: its page, without forms.
	e.post(page+"/delete", nil)
	r = e.get(page)
	wantStatus(t, "deleted", r, http.StatusOK)
	if strings.Contains(r.Body, `action="`+page+`/registration"`) {
		t.Error("a deleted organization's page offers its forms")
	}
}

// TestWithoutMailHidesWhatSends: without mail the invitation form and the
// address check's button are not offered, and the pages say why.
func TestWithoutMailHidesWhatSends(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	org := firstOrg(t, e.state)
	id := e.personID("ada@example.com")
	for _, tt := range []struct {
		path, absent, present string
	}{
		{Prefix + "invitations", `action="/console/invitations" class="narrow"`, "sends no mail"},
		{Prefix + "people/" + id, "/verify-email", "sends no mail"},
		{Prefix + "organizations/" + org.ID, "", "registration stays off"},
	} {
		r := e.get(tt.path)
		wantStatus(t, tt.path, r, http.StatusOK)
		wantBody(t, tt.path, r, tt.present, "--email-outbox")
		if tt.absent != "" && strings.Contains(r.Body, tt.absent) {
			t.Errorf("%s offers %q without mail", tt.path, tt.absent)
		}
	}
	// A form posted all the same: the API's 409, shown.
	r := e.post(Prefix+"invitations", url.Values{"email": {"ann@example.com"}, "organization_id": {org.ID}, "expires_in": {"86400"}})
	wantStatus(t, "invite without mail", r, http.StatusConflict)
	wantBody(t, "invite without mail", r, "sends no mail")
}
