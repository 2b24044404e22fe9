package console

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Identity providers (docs/operators/federation.md): the list with its
// create form, a provider's page (the addresses to register at the
// upstream, its fields to change, its deletion), and a person's links on
// their page. Every change is the admin API's PATCH or DELETE; an
// org_admin's forms never send email_domains, which only an admin sets
// (the API refuses a body that holds the field at all).

type idpsData struct {
	Providers   []idpRow
	Pager       pager
	Orgs        []admin.Org
	AdminFields bool // as idpData's
}

type idpRow struct {
	admin.IdentityProvider
	OrgName string
}

// idpEntity: a created provider opens its page, which shows the addresses
// to register upstream.
func idpEntity() *entity[admin.IdentityProvider] {
	return &entity[admin.IdentityProvider]{api: "/identity-providers", path: "identity-providers", nav: "idps", title: "Identity providers",
		page: "idps", key: "idp",
		defaults: url.Values{"provisioning": {"create"}, "backchannel_logout": {"on"}, "enabled": {"on"}},
		data: func(c *Console, r *http.Request, ips []admin.IdentityProvider, pg pager) any {
			names := c.names(r)
			rs := requestSession(r.Context())
			d := idpsData{Orgs: c.firstOrgs(r), Pager: pg, AdminFields: rs == nil || !rs.s.person() || rs.s.Role != admin.RoleOrgAdmin}
			for _, ip := range ips {
				row := idpRow{IdentityProvider: ip}
				if ip.OrganizationID != "" {
					row.OrgName = names.org(ip.OrganizationID)
				}
				d.Providers = append(d.Providers, row)
			}
			return d
		},
		body:   func(f url.Values) (any, []httpx.Detail) { return idpForm(f, true) },
		reshow: withoutSecret,
		created: func(_ *Console, w http.ResponseWriter, r *http.Request, ip admin.IdentityProvider) {
			done(w, r, Prefix+"identity-providers/"+url.PathEscape(ip.ID), "idp-created")
		},
		what: "identity provider",
		consequence: "Nobody signs in through it any more: its links to people go, every session opened through it ends at once " +
			"and the apps get back-channel logout tokens. This cannot be undone.",
		name: func(ip admin.IdentityProvider) (string, string) { return ip.ID, ip.DisplayName + " (" + ip.Slug + ")" },
		back: func(id string) string { return Prefix + "identity-providers/" + url.PathEscape(id) },
	}
}

// withoutSecret drops the client secret from a form being re-shown.
func withoutSecret(f url.Values) url.Values {
	out := url.Values{}
	for k, vs := range f {
		if k != "client_secret" {
			out[k] = vs
		}
	}
	return out
}

// idpForm turns a provider's form into the admin API's body. On create,
// fields left empty are left out, so the API's defaults apply; on a
// change every field of the form is sent, but for an empty client secret
// (kept) and the email domains when the form did not show them (an
// org_admin's). Values go as typed: the API's validation speaks for them.
func idpForm(f url.Values, create bool) (any, []httpx.Detail) {
	body := map[string]any{
		"slug":                 strings.TrimSpace(f.Get("slug")),
		"display_name":         strings.TrimSpace(f.Get("display_name")),
		"issuer":               strings.TrimSpace(f.Get("issuer")),
		"client_id":            strings.TrimSpace(f.Get("client_id")),
		"provisioning":         f.Get("provisioning"),
		"organization_id":      f.Get("organization_id"),
		"trust_mfa":            f.Get("trust_mfa") != "",
		"backchannel_logout":   f.Get("backchannel_logout") != "",
		"end_upstream_session": f.Get("end_upstream_session") != "",
		"enabled":              f.Get("enabled") != "",
	}
	if s := f.Get("client_secret"); s != "" {
		body["client_secret"] = s
	}
	scopes := domainList(f.Get("scopes"))
	switch {
	case len(scopes) > 0:
		body["scopes"] = scopes
	case !create:
		body["scopes"] = []string{} // the API says what is missing
	}
	if f.Has("email_domains") && (!create || strings.TrimSpace(f.Get("email_domains")) != "") {
		body["email_domains"] = domainList(f.Get("email_domains"))
	}
	m := map[string]any{}
	if o := f.Get("membership_org"); o != "" {
		m["organization_id"] = o
	}
	if g := strings.TrimSpace(f.Get("groups_claim")); g != "" {
		m["groups_claim"] = g
	}
	var bad []httpx.Detail
	groups := map[string]string{}
	for _, l := range lines(f.Get("group_organizations")) {
		i := strings.LastIndex(l, "=")
		if i <= 0 || i == len(l)-1 {
			bad = append(bad, httpx.Detail{Field: "memberships.group_organizations", Code: "invalid",
				Message: "each line must be group=organization id, got " + l})
			continue
		}
		groups[strings.TrimSpace(l[:i])] = strings.TrimSpace(l[i+1:])
	}
	if len(groups) > 0 {
		m["group_organizations"] = groups
	}
	if len(m) > 0 || !create {
		body["memberships"] = m
	}
	return body, bad
}

// idpData is a provider's page.
type idpData struct {
	Provider admin.IdentityProvider
	OrgName  string
	Orgs     []admin.Org
	// AdminFields: the form shows what only an admin sets, the email
	// domains and the site's provider (not to an org_admin).
	AdminFields bool
}

func (c *Console) idpPage(w http.ResponseWriter, r *http.Request) {
	c.renderIdP(w, r, c.newView(w, r, "Identity provider", "idps"), 0, nil)
}

// renderIdP renders a provider's page; after a failed change, posted is
// the form as it was sent.
func (c *Console) renderIdP(w http.ResponseWriter, r *http.Request, v *view, status int, posted url.Values) {
	var ip admin.IdentityProvider
	if err := c.call(r, "GET", "/identity-providers/"+pathID(r.PathValue("id")), nil, &ip); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	v.Title = ip.DisplayName
	d := idpData{Provider: ip, Orgs: c.firstOrgs(r), AdminFields: v.Role != admin.RoleOrgAdmin}
	if ip.OrganizationID != "" {
		d.OrgName = c.names(r).org(ip.OrganizationID)
		if !slices.ContainsFunc(d.Orgs, func(o admin.Org) bool { return o.ID == ip.OrganizationID }) {
			d.Orgs = append(d.Orgs, admin.Org{ID: ip.OrganizationID, Name: d.OrgName})
		}
	}
	v.Form = idpValues(ip)
	if posted != nil {
		v.Form = withoutSecret(posted)
	}
	v.Data = d
	c.render(w, status, "idp", v)
}

// idpValues fills a provider's form with its stored fields.
func idpValues(ip admin.IdentityProvider) url.Values {
	f := url.Values{
		"slug": {ip.Slug}, "display_name": {ip.DisplayName}, "issuer": {ip.Issuer}, "client_id": {ip.ClientID},
		"scopes": {strings.Join(ip.Scopes, " ")}, "organization_id": {ip.OrganizationID},
		"email_domains": {strings.Join(ip.EmailDomains, "\n")}, "provisioning": {ip.Provisioning},
		"membership_org": {ip.Memberships.OrganizationID}, "groups_claim": {ip.Memberships.GroupsClaim},
	}
	var groups []string
	for _, g := range slices.Sorted(maps.Keys(ip.Memberships.GroupOrganizations)) {
		groups = append(groups, g+"="+ip.Memberships.GroupOrganizations[g])
	}
	f.Set("group_organizations", strings.Join(groups, "\n"))
	for k, on := range map[string]bool{"trust_mfa": ip.TrustMFA, "backchannel_logout": ip.BackchannelLogout,
		"end_upstream_session": ip.EndUpstreamSession, "enabled": ip.Enabled} {
		if on {
			f.Set(k, "on")
		}
	}
	return f
}

// updateIdP is POST /console/identity-providers/{id}: a PATCH of every
// field of the form.
func (c *Console) updateIdP(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	id := r.PathValue("id")
	body, bad := idpForm(f, false)
	var err error
	if len(bad) > 0 {
		err = &apiError{Status: http.StatusBadRequest, Code: httpx.CodeValidation, Message: "request validation failed", Details: bad}
	} else {
		err = c.call(r, "PATCH", "/identity-providers/"+pathID(id), body, nil)
	}
	if err != nil {
		v := c.newView(w, r, "Identity provider", "idps")
		c.renderIdP(w, r, v, c.fail(r, v, err), f)
		return
	}
	done(w, r, Prefix+"identity-providers/"+url.PathEscape(id), "idp-updated")
}

// identityRow is one of a person's links on their page.
type identityRow struct {
	admin.Identity
	Provider string // the provider's name, or its id when it cannot be read
}

// identitiesOf lists a person's links with their providers' names (nil
// when the API could not say).
func (c *Console) identitiesOf(r *http.Request, userID string) []identityRow {
	var links struct {
		Data []admin.Identity `json:"data"`
	}
	if c.call(r, "GET", "/users/"+pathID(userID)+"/identities", nil, &links) != nil {
		return nil
	}
	var ips struct {
		Data []admin.IdentityProvider `json:"data"`
	}
	if len(links.Data) > 0 {
		_ = c.call(r, "GET", "/identity-providers", nil, &ips)
	}
	out := []identityRow{}
	for _, l := range links.Data {
		row := identityRow{Identity: l, Provider: l.ProviderID}
		for _, ip := range ips.Data {
			if ip.ID == l.ProviderID {
				row.Provider = ip.DisplayName + " (" + ip.Slug + ")"
			}
		}
		out = append(out, row)
	}
	return out
}

// unlinkIdentity is POST /console/people/{id}/identities/{identity_id}/delete.
func (c *Console) unlinkIdentity(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := c.call(r, "DELETE", "/users/"+pathID(id)+"/identities/"+pathID(r.PathValue("identity_id")), nil, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, Prefix+"people/"+url.PathEscape(id), "identity-unlinked")
}
