package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
)

// The people's own way in, from the console: the Invitations page (the
// admin API's /invitations), the "send a link to prove the address"
// button of a person's page, and an organization's page with its
// registration settings. When the provider sends no mail (admin.Config
// Mail), the forms and buttons that would send some are not shown and the
// pages say why.

// invitationChoices are the lifetimes the invitation form offers (the
// API takes an hour to 30 days).
var invitationChoices = []expiryChoice{
	{86400, "1 day"},
	{3 * 86400, "3 days"},
	{7 * 86400, "7 days"},
	{14 * 86400, "14 days"},
	{30 * 86400, "30 days"},
}

var invitationStatuses = []string{admin.InvitationPending, admin.InvitationAccepted, admin.InvitationExpired}

type invitationRow struct {
	admin.Invitation
	OrgName string
}

type invitationsData struct {
	Rows     []invitationRow
	Pager    pager
	Orgs     []admin.Org
	Expiry   []expiryChoice
	Statuses []string
	Mail     bool
	// The list's filter.
	OrgID, Status string
}

// invitationsPage is GET /console/invitations: newest first, filtered by
// organization and status, with the form that invites.
func (c *Console) invitationsPage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(w, r, "Invitations", "invitations")
	v.Form = url.Values{"expires_in": {strconv.Itoa(7 * 86400)}}
	c.renderInvitations(w, r, v, 0)
}

func (c *Console) renderInvitations(w http.ResponseWriter, r *http.Request, v *view, status int) {
	in := r.URL.Query()
	d := invitationsData{Orgs: c.firstOrgs(r), Expiry: invitationChoices, Statuses: invitationStatuses, Mail: c.mail,
		OrgID: in.Get("organization_id"), Status: in.Get("status")}
	page, q := pageQuery(r)
	filter := url.Values{}
	if d.OrgID != "" {
		filter.Set("organization_id", d.OrgID)
	}
	if d.Status != "" {
		filter.Set("status", d.Status)
	}
	apiQuery := q
	if len(filter) > 0 {
		apiQuery += "&" + filter.Encode()
	}
	var list admin.List[admin.Invitation]
	if err := c.call(r, "GET", "/invitations?"+apiQuery, nil, &list); err != nil {
		status = c.fail(r, v, err)
	}
	names := c.names(r)
	for _, inv := range list.Data {
		d.Rows = append(d.Rows, invitationRow{Invitation: inv, OrgName: names.org(inv.OrgID)})
	}
	p := list.Pagination
	d.Pager = newPager(Prefix+"invitations", page, p.TotalPages, p.TotalItems, p.HasPrevious, p.HasNext)
	if len(filter) > 0 {
		// The pager keeps the filter.
		for _, u := range []*string{&d.Pager.PrevURL, &d.Pager.NextURL} {
			if *u != "" {
				*u += "&" + filter.Encode()
			}
		}
	}
	v.Data = d
	c.render(w, status, "invitations", v)
}

// createInvitation is POST /console/invitations.
func (c *Console) createInvitation(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	body := map[string]any{"email": strings.TrimSpace(f.Get("email")), "organization_id": f.Get("organization_id")}
	if l := f.Get("locale"); l != "" {
		body["locale"] = l
	}
	var err error
	if n, perr := strconv.ParseInt(f.Get("expires_in"), 10, 64); perr != nil {
		err = &apiError{Status: http.StatusBadRequest, Code: httpx.CodeValidation, Message: "request validation failed",
			Details: []httpx.Detail{{Field: "expires_in", Message: "choose how long the link works", Code: "invalid"}}}
	} else {
		body["expires_in"] = n
		err = c.call(r, "POST", "/invitations", body, nil)
	}
	if err != nil {
		v := c.newView(w, r, "Invitations", "invitations")
		v.Form = f
		c.renderInvitations(w, r, v, c.fail(r, v, err))
		return
	}
	done(w, r, Prefix+"invitations", "invitation-created")
}

// deleteInvitation is POST /console/invitations/{id}/delete: the
// invitation is withdrawn (its link stops working), or, accepted or
// expired, removed from the list.
func (c *Console) deleteInvitation(w http.ResponseWriter, r *http.Request) {
	if err := c.call(r, "DELETE", "/invitations/"+pathID(r.PathValue("id")), nil, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, returnTo(r.PostForm.Get("return"), Prefix+"invitations"), "invitation-deleted")
}

// verifyEmail is POST /console/people/{id}/verify-email.
func (c *Console) verifyEmail(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body any
	if l := r.PostForm.Get("locale"); l != "" {
		body = map[string]any{"locale": l}
	}
	if err := c.call(r, "POST", "/users/"+pathID(id)+"/verify-email", body, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, Prefix+"people/"+url.PathEscape(id), "verify-sent")
}

// ----- one organization -----

type orgData struct {
	Org  admin.Org
	Mail bool
	// The preview of the organization's own branding (brandingData).
	Brand brandingData
}

// orgPage is GET /console/organizations/{id}: the organization, its name
// and who may register themselves into it.
func (c *Console) orgPage(w http.ResponseWriter, r *http.Request) {
	c.renderOrg(w, r, c.newView(w, r, "Organization", "orgs"), 0, nil, false)
}

// renderOrg renders the organization's page; after a failed change,
// posted is the form that failed (its name, or its registration when
// registration), shown as sent, and the other form as stored.
func (c *Console) renderOrg(w http.ResponseWriter, r *http.Request, v *view, status int, posted url.Values, registration bool) {
	var o admin.Org
	if err := c.call(r, "GET", "/organizations/"+pathID(r.PathValue("id")), nil, &o); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	v.Title = o.Name
	v.Form = url.Values{"name": {o.Name}, "email_domains": {strings.Join(o.Registration.EmailDomains, "\n")}}
	if o.Registration.Enabled {
		v.Form.Set("enabled", "on")
	}
	b := o.Branding
	v.Form.Set("display_name", b.DisplayName)
	v.Form.Set("primary_color", b.PrimaryColor)
	v.Form.Set("support_url", b.SupportURL)
	v.Form.Set("support_email", b.SupportEmail)
	switch {
	case posted == nil:
	case posted.Has("display_name") || posted.Has("primary_color"): // the branding form
		for _, k := range []string{"display_name", "primary_color", "support_url", "support_email"} {
			v.Form.Set(k, posted.Get(k))
		}
	case registration:
		v.Form.Set("email_domains", posted.Get("email_domains"))
		v.Form.Del("enabled")
		if posted.Get("enabled") != "" {
			v.Form.Set("enabled", "on")
		}
	default:
		v.Form.Set("name", posted.Get("name"))
	}
	v.Data = orgData{Org: o, Mail: c.mail, Brand: previewOf(o.Branding, Prefix+"organizations/"+url.PathEscape(o.ID)+"/branding/logo")}
	c.render(w, status, "org", v)
}

// updateOrg is POST /console/organizations/{id} (its name) and POST
// /console/organizations/{id}/registration (who may register): a PATCH of
// the admin API either way.
func (c *Console) updateOrg(registration bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f := r.PostForm
		body := map[string]any{}
		if registration {
			body["registration"] = map[string]any{"enabled": f.Get("enabled") != "", "email_domains": domainList(f.Get("email_domains"))}
		} else {
			body["name"] = strings.TrimSpace(f.Get("name"))
		}
		id := r.PathValue("id")
		if err := c.call(r, "PATCH", "/organizations/"+pathID(id), body, nil); err != nil {
			v := c.newView(w, r, "Organization", "orgs")
			c.renderOrg(w, r, v, c.fail(r, v, err), f, registration)
			return
		}
		done(w, r, Prefix+"organizations/"+url.PathEscape(id), "org-updated")
	}
}

// domainList splits a textarea of domains on lines, commas and spaces.
func domainList(s string) []string {
	sep := func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\r' || r == '\n' }
	return append([]string{}, strings.FieldsFunc(s, sep)...)
}
