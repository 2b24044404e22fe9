package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
)

func (c *Console) routes() {
	m := c.mux
	m.HandleFunc("GET "+Prefix+"static/console.css", serveStyle)
	m.HandleFunc("GET "+Prefix+"signin", c.signInPage)
	m.HandleFunc("POST "+Prefix+"signin", c.signIn)
	m.HandleFunc("POST "+Prefix+"signout", c.signOut)
	m.HandleFunc("GET "+Prefix+"signin/provider", c.startProvider)
	m.HandleFunc("GET "+callbackPath, c.callback)

	auth := func(pattern string, h http.HandlerFunc) { m.Handle(pattern, c.authenticated(h)) }
	auth("GET "+Prefix+"{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"cluster", http.StatusSeeOther)
	})
	auth("GET "+Prefix+"cluster", c.clusterPage)
	orgEntity().register(c, auth)
	personEntity().register(c, auth)
	membershipEntity().register(c, auth)
	clientEntity().register(c, auth)
	auth("GET "+Prefix+"people/{id}", c.personPage)
	auth("POST "+Prefix+"people/{id}", c.updatePerson)
	auth("POST "+Prefix+"people/{id}/totp", c.enrollTOTP)
	auth("POST "+Prefix+"people/{id}/totp/delete", c.removeTOTP)
	auth("POST "+Prefix+"people/{id}/lockouts/delete", c.clearLockouts)
	auth("POST "+Prefix+"people/{id}/recovery-codes", c.recoveryCodes)
	auth("POST "+Prefix+"people/{id}/verify-email", c.verifyEmail)
	auth("GET "+Prefix+"organizations/{id}", c.orgPage)
	auth("POST "+Prefix+"organizations/{id}", c.updateOrg(false))
	auth("POST "+Prefix+"organizations/{id}/registration", c.updateOrg(true))
	auth("GET "+Prefix+"branding", c.brandingPage)
	auth("POST "+Prefix+"branding", c.updateBranding)
	auth("GET "+Prefix+"branding/logo", c.brandingLogo)
	auth("GET "+Prefix+"branding/preview.css", brandingPreviewStyle)
	auth("POST "+Prefix+"organizations/{id}/branding", c.updateOrgBranding)
	auth("GET "+Prefix+"organizations/{id}/branding/logo", c.brandingLogo)
	auth("GET "+Prefix+"invitations", c.invitationsPage)
	auth("POST "+Prefix+"invitations", c.createInvitation)
	auth("POST "+Prefix+"invitations/{id}/delete", c.deleteInvitation)
	auth("POST "+Prefix+"memberships/{id}/status", c.setMembershipStatus)
	auth("POST "+Prefix+"clients/{id}/suspended", c.setClientSuspended)
	auth("POST "+Prefix+"clients/{id}/rate-limit", c.setClientRateLimit)
	auth("POST "+Prefix+"clients/{id}/web-origins", c.setClientWebOrigins)
	auth("GET "+Prefix+"keys", listAll[admin.KeyInfo](c, "Signing keys", "keys", "/keys", "keys"))
	auth("GET "+Prefix+"directories", listAll[admin.Directory](c, "Directories", "directories", "/directories", "directories"))
	idpEntity().register(c, auth)
	auth("GET "+Prefix+"identity-providers/{id}", c.idpPage)
	auth("POST "+Prefix+"identity-providers/{id}", c.updateIdP)
	auth("POST "+Prefix+"people/{id}/identities/{identity_id}/delete", c.unlinkIdentity)
	auth("GET "+Prefix+"audit", c.auditPage)
	auth("POST "+Prefix+"keys/rotate", c.rotateKey)
	grantEntity().register(c, auth)
	apiKeyEntity().register(c, auth)
	m.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		c.message(w, r, http.StatusNotFound, "Not found", "There is no such console page.")
	})
}

// authenticated lets through requests of a signed-in browser, with a valid
// CSRF token on every POST; others are sent to the sign-in page (GET) or
// refused (POST). It bounds the request's work and parses its form.
func (c *Console) authenticated(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, cancel := ctxTimeout(r)
		defer cancel()
		s, ok := c.currentSession(r)
		if !ok {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
				return
			}
			c.message(w, r, http.StatusUnauthorized, "Signed out", "Your console session has ended. Sign in again.")
			return
		}
		if r.Method == http.MethodPost {
			if !c.parseForm(w, r) {
				return
			}
			if !c.checkCSRF(r) {
				c.log.Info("console: csrf mismatch", "path", r.URL.Path, "correlation_id", httpx.CorrelationID(r.Context()))
				c.message(w, r, http.StatusForbidden, "Request refused", "The form was stale or did not come from this console. Go back, reload the page and try again.")
				return
			}
		}
		rs := &reqSession{s: s}
		r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, rs))
		if s.person() {
			c.personSession(w, r, rs, h)
			return
		}
		h(w, r)
	})
}

func (c *Console) parseForm(w http.ResponseWriter, r *http.Request) bool {
	if (r.URL.Path == Prefix+"branding" || strings.HasPrefix(r.URL.Path, Prefix+"organizations/") && strings.HasSuffix(r.URL.Path, "/branding")) &&
		strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		// The branding page's logo upload, the one multipart form.
		r.Body = http.MaxBytesReader(w, r.Body, maxBrandingForm)
		if err := r.ParseMultipartForm(maxBrandingForm); err != nil {
			c.message(w, r, http.StatusBadRequest, "Bad request", "The form could not be read: a logo is at most 64 KiB.")
			return false
		}
		return true
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.message(w, r, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return false
	}
	return true
}

// newView starts a page's data for a signed-in browser.
func (c *Console) newView(w http.ResponseWriter, r *http.Request, title, nav string) *view {
	v := &view{Title: title, Nav: nav, CSRF: c.csrfToken(w, r), SignedIn: true}
	v.who(requestSession(r.Context()))
	if msg, ok := doneMessages[r.URL.Query().Get("done")]; ok {
		v.Flash = msg
	}
	return v
}

// fail puts an API error on the page: its message and field problems.
// It returns the status to answer with.
func (c *Console) fail(r *http.Request, v *view, err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		v.Error = ae.Message
		v.Problems = ae.Details
		if ae.Status >= 500 {
			c.log.Warn("console: admin API failed", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		}
		return ae.Status
	}
	c.log.Error("console: admin API call", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
	v.Error = "Something went wrong; try again."
	return http.StatusInternalServerError
}

// message renders a plain notice page.
func (c *Console) message(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	s, signedIn := c.currentSession(r)
	v := &view{Title: title, CSRF: c.csrfToken(w, r), SignedIn: signedIn, Data: text}
	if signedIn {
		v.who(&reqSession{s: s})
	}
	c.render(w, status, "message", v)
}

// done redirects after a successful change (post/redirect/get).
func done(w http.ResponseWriter, r *http.Request, to, key string) {
	// #nosec G710 -- to is a console path: Prefix plus a constant or an escaped id, or returnTo, which keeps only paths under Prefix (TestReturnTo)
	http.Redirect(w, r, to+"?done="+key, http.StatusSeeOther)
}

// pageQuery is the admin API's page query for the console's ?page=.
func pageQuery(r *http.Request) (int, string) {
	page, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	return page, "page=" + strconv.Itoa(page) + "&page_size=20"
}

// ----- sign-in -----

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.currentSession(r); ok {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	c.render(w, 0, "signin", &view{Title: "Sign in to the console", CSRF: c.csrfToken(w, r)})
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !c.parseForm(w, r) {
		return
	}
	if !c.checkCSRF(r) {
		c.message(w, r, http.StatusForbidden, "Request refused", "The form was stale. Reload the sign-in page and try again.")
		return
	}
	v := &view{Title: "Sign in to the console", CSRF: c.csrfToken(w, r)}
	// The node's guard, shared with the admin API: the attempt is counted
	// per address before the token is compared, and given back only when
	// it matched.
	if !c.guard.Reserve(r) {
		c.log.Info("console: too many admin token attempts", "remote", httpx.ClientAddr(r), "correlation_id", httpx.CorrelationID(r.Context()))
		w.Header().Set("Retry-After", c.guard.RetryAfter())
		v.Error = "Too many admin token attempts from this address. Wait a minute, then try again."
		c.render(w, http.StatusTooManyRequests, "signin", v)
		return
	}
	if !password.VerifySecret(r.PostForm.Get("token"), c.tokenHash()) {
		c.log.Info("console: rejected admin token", "remote", httpx.ClientAddr(r), "correlation_id", httpx.CorrelationID(r.Context()))
		v.Error = "That is not the admin token."
		c.render(w, http.StatusUnauthorized, "signin", v)
		return
	}
	c.guard.Release(r)
	if err := c.startSession(w, r, v.CSRF); err != nil {
		c.log.Warn("console: start session", "err", err)
		v.Error = "The cluster is not ready yet; try again in a moment."
		c.render(w, http.StatusServiceUnavailable, "signin", v)
		return
	}
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if !c.parseForm(w, r) {
		return
	}
	if !c.checkCSRF(r) {
		c.message(w, r, http.StatusForbidden, "Request refused", "The form was stale. Reload the page and try again.")
		return
	}
	c.endSession(w, r)
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// ----- cluster -----

// clusterView is the cluster page's data: GET /status, and for a cluster
// of mixed versions (a rolling upgrade) what waits for whom.
type clusterView struct {
	admin.Status
	Newest int      // the newest state format a member applies
	Behind []string // the members that apply an older one: to upgrade first
}

func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(w, r, "Cluster health", "cluster")
	status := 0
	var st admin.Status
	if err := c.call(r, "GET", "/status", nil, &st); err != nil {
		status = c.fail(r, v, err)
	}
	cv := clusterView{Status: st, Newest: st.StateFormat}
	for _, m := range st.Members {
		cv.Newest = max(cv.Newest, m.StateFormat)
	}
	for _, m := range st.Members {
		if m.StateFormat < cv.Newest {
			cv.Behind = append(cv.Behind, m.ID)
		}
	}
	v.Data = cv
	c.render(w, status, "cluster", v)
}

// listPage reads the page the request asks for of the admin API list at
// apiPath, with the pager of the console page pagePath. A failed call puts
// its error on v and returns the status to answer with.
func listPage[T any](c *Console, r *http.Request, v *view, status int, apiPath, pagePath string) ([]T, pager, int) {
	page, q := pageQuery(r)
	var list flexList[T]
	if err := c.call(r, "GET", apiPath+"?"+q, nil, &list); err != nil {
		status = c.fail(r, v, err)
	}
	p := list.Pagination
	return list.Data, newPager(Prefix+pagePath, page, p.TotalPages, p.TotalItems, p.HasPrevious, p.HasNext), status
}

// ----- organizations -----

type orgsData struct {
	Orgs  []admin.Org
	Pager pager
}

func orgEntity() *entity[admin.Org] {
	return &entity[admin.Org]{api: "/organizations", path: "organizations", nav: "orgs", title: "Organizations", page: "orgs", key: "org",
		data: func(_ *Console, _ *http.Request, orgs []admin.Org, pg pager) any {
			return orgsData{Orgs: orgs, Pager: pg}
		},
		body: func(f url.Values) (any, []httpx.Detail) {
			return map[string]string{"slug": strings.TrimSpace(f.Get("slug")), "name": strings.TrimSpace(f.Get("name"))}, nil
		},
		what:        "organization",
		consequence: "Its members' sessions in its apps end at once and those apps get back-channel logout tokens. This cannot be undone.",
		name:        func(o admin.Org) (string, string) { return o.ID, o.Name + " (" + o.Slug + ")" },
	}
}

// apiMessage shows an API error on a page of its own (for actions without
// a form to re-show).
func (c *Console) apiMessage(w http.ResponseWriter, r *http.Request, err error) {
	v := &view{}
	status := c.fail(r, v, err)
	msg := v.Error
	for _, d := range v.Problems {
		msg += " " + d.Field + ": " + d.Message + "."
	}
	c.message(w, r, status, "Not done", msg)
}

// ----- people -----

type peopleData struct {
	People []admin.User
	Pager  pager
}

func personEntity() *entity[admin.User] {
	return &entity[admin.User]{api: "/users", path: "people", nav: "people", title: "People", page: "people", key: "person",
		data: func(_ *Console, _ *http.Request, people []admin.User, pg pager) any {
			return peopleData{People: people, Pager: pg}
		},
		body: func(f url.Values) (any, []httpx.Detail) {
			body := map[string]any{"email": strings.TrimSpace(f.Get("email")), "email_verified": f.Get("email_verified") != ""}
			if pw := f.Get("password"); pw != "" {
				body["password"] = pw
			}
			if ph := strings.TrimSpace(f.Get("phone")); ph != "" {
				body["phone"] = ph
			}
			return body, nil
		},
		reshow: withoutPassword,
		created: func(_ *Console, w http.ResponseWriter, r *http.Request, u admin.User) {
			done(w, r, Prefix+"people/"+url.PathEscape(u.ID), "person-created")
		},
		what:        "person",
		consequence: "Every session of this person ends at once and their apps get back-channel logout tokens. The account is erased; this cannot be undone.",
		name:        func(u admin.User) (string, string) { return u.ID, u.Email },
		back:        func(id string) string { return Prefix + "people/" + url.PathEscape(id) },
	}
}

// withoutPassword drops password fields from a form being re-shown.
func withoutPassword(f url.Values) url.Values {
	out := url.Values{}
	for k, vs := range f {
		if k != "password" {
			out[k] = vs
		}
	}
	return out
}

type personData struct {
	Mail        bool // the provider sends mail: the address check's button
	User        admin.User
	Memberships []membershipRow
	Orgs        []admin.Org   // for the "add to organization" form
	Factors     *factors      // nil when the API could not say
	Identities  []identityRow // the person's links to identity providers; nil when the API could not say
}

// factors is the admin API's GET /users/{id}/factors.
type factors struct {
	TOTP          bool `json:"totp"`
	RecoveryCodes int  `json:"recovery_codes_left"`
	Passkeys      []struct {
		Name       string     `json:"name"`
		CreatedAt  time.Time  `json:"created_at"`
		LastUsedAt *time.Time `json:"last_used_at"`
	} `json:"passkeys"`
}

type membershipRow struct {
	admin.Membership
	Email, OrgName string
}

func (c *Console) personPage(w http.ResponseWriter, r *http.Request) {
	c.renderPerson(w, r, c.newView(w, r, "Person", "people"), 0)
}

func (c *Console) renderPerson(w http.ResponseWriter, r *http.Request, v *view, status int) {
	id := r.PathValue("id")
	var d personData
	if err := c.call(r, "GET", "/users/"+pathID(id), nil, &d.User); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	v.Title = d.User.Email
	if v.Form == nil {
		v.Form = url.Values{"email": {d.User.Email}, "phone": {d.User.Phone}}
		if d.User.EmailVerified {
			v.Form.Set("email_verified", "on")
		}
	}
	var ms admin.List[admin.Membership]
	if err := c.call(r, "GET", "/memberships?page_size=100&user_id="+url.QueryEscape(d.User.ID), nil, &ms); err != nil {
		status = c.fail(r, v, err)
	}
	names := c.names(r)
	for _, m := range ms.Data {
		d.Memberships = append(d.Memberships, membershipRow{Membership: m, Email: d.User.Email, OrgName: names.org(m.OrgID)})
	}
	d.Orgs = c.firstOrgs(r)
	d.Mail = c.mail
	var f factors
	if err := c.call(r, "GET", "/users/"+pathID(d.User.ID)+"/factors", nil, &f); err == nil {
		d.Factors = &f
	}
	d.Identities = c.identitiesOf(r, d.User.ID)
	v.Data = d
	c.render(w, status, "person", v)
}

func (c *Console) updatePerson(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	body := map[string]any{
		"email":          strings.TrimSpace(f.Get("email")),
		"email_verified": f.Get("email_verified") != "",
		"phone":          strings.TrimSpace(f.Get("phone")),
	}
	if pw := f.Get("password"); pw != "" {
		body["password"] = pw
	}
	id := r.PathValue("id")
	if err := c.call(r, "PATCH", "/users/"+pathID(id), body, nil); err != nil {
		v := c.newView(w, r, "Person", "people")
		v.Form = withoutPassword(f)
		c.renderPerson(w, r, v, c.fail(r, v, err))
		return
	}
	done(w, r, Prefix+"people/"+url.PathEscape(id), "person-updated")
}

// shownOnce is a secret shown on this page only.
type shownOnce struct {
	Heading, Note string
	Secret        string   // a single secret, or
	Codes         []string // a list of codes
	URI           string   // an otpauth:// URI
	Back          string
}

func (c *Console) enrollTOTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var out struct {
		Secret string `json:"secret"`
		URI    string `json:"uri"`
	}
	if err := c.call(r, "POST", "/users/"+pathID(id)+"/totp", nil, &out); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	v := c.newView(w, r, "Authenticator app enrolled", "people")
	v.Data = shownOnce{Heading: "Secret", Note: "Give this secret (or the URI, as a QR code) to the person now. It is not shown again.",
		Secret: out.Secret, URI: out.URI, Back: Prefix + "people/" + url.PathEscape(id)}
	c.render(w, 0, "shown_once", v)
}

func (c *Console) recoveryCodes(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var out struct {
		Codes []string `json:"codes"`
	}
	if err := c.call(r, "POST", "/users/"+pathID(id)+"/recovery-codes", nil, &out); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	v := c.newView(w, r, "Recovery codes", "people")
	v.Data = shownOnce{Heading: "Codes", Note: "Give these codes to the person now; each works once and earlier codes no longer work. They are not shown again.",
		Codes: out.Codes, Back: Prefix + "people/" + url.PathEscape(id)}
	c.render(w, 0, "shown_once", v)
}

func (c *Console) removeTOTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := c.call(r, "DELETE", "/users/"+pathID(id)+"/totp", nil, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, Prefix+"people/"+url.PathEscape(id), "totp-removed")
}

func (c *Console) clearLockouts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := c.call(r, "DELETE", "/users/"+pathID(id)+"/lockouts", nil, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, Prefix+"people/"+url.PathEscape(id), "lockouts-cleared")
}

// ----- memberships -----

type membershipsData struct {
	Rows   []membershipRow
	Pager  pager
	People []admin.User
	Orgs   []admin.Org
}

// maxChoices is how many people or organizations a form's select offers.
const maxChoices = 100

// membershipEntity: a membership is deleted without a confirmation page
// (the person and the organization stay), from its list or a person's
// page.
func membershipEntity() *entity[admin.Membership] {
	return &entity[admin.Membership]{api: "/memberships", path: "memberships", nav: "memberships", title: "Memberships", page: "memberships", key: "membership",
		data: func(c *Console, r *http.Request, ms []admin.Membership, pg pager) any {
			names := c.names(r)
			d := membershipsData{People: c.firstPeople(r), Orgs: c.firstOrgs(r), Pager: pg}
			for _, m := range ms {
				d.Rows = append(d.Rows, membershipRow{Membership: m, Email: names.user(m.UserID), OrgName: names.org(m.OrgID)})
			}
			return d
		},
		body: func(f url.Values) (any, []httpx.Detail) {
			body := map[string]string{"user_id": f.Get("user_id"), "org_id": f.Get("org_id")}
			if s := f.Get("status"); s != "" {
				body["status"] = s
			}
			return body, nil
		},
	}
}

func (c *Console) setMembershipStatus(w http.ResponseWriter, r *http.Request) {
	body := map[string]string{"status": r.PostForm.Get("status")}
	if err := c.call(r, "PATCH", "/memberships/"+pathID(r.PathValue("id")), body, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, returnTo(r.PostForm.Get("return"), Prefix+"memberships"), "membership-updated")
}

// returnTo accepts a console path to go back to, else def.
func returnTo(p, def string) string {
	if !strings.HasPrefix(p, Prefix) || strings.ContainsAny(p, "?#\\") || strings.Contains(p, "//") || strings.Contains(p, "..") {
		return def
	}
	return p
}

// names resolves ids to display names for one request, each at most once.
type nameCache struct {
	c     *Console
	r     *http.Request
	users map[string]string
	orgs  map[string]string
}

func (c *Console) names(r *http.Request) *nameCache {
	return &nameCache{c: c, r: r, users: map[string]string{}, orgs: map[string]string{}}
}

func (n *nameCache) user(id string) string {
	if s, ok := n.users[id]; ok {
		return s
	}
	var u admin.User
	s := id
	if n.c.call(n.r, "GET", "/users/"+pathID(id), nil, &u) == nil {
		s = u.Email
	}
	n.users[id] = s
	return s
}

func (n *nameCache) org(id string) string {
	if s, ok := n.orgs[id]; ok {
		return s
	}
	var o admin.Org
	s := id
	if n.c.call(n.r, "GET", "/organizations/"+pathID(id), nil, &o) == nil {
		s = o.Name
		if o.Status != "active" {
			s += " (" + o.Status + ")"
		}
	}
	n.orgs[id] = s
	return s
}

// firstOrgs lists up to maxChoices organizations for a select.
func (c *Console) firstOrgs(r *http.Request) []admin.Org {
	var list admin.List[admin.Org]
	_ = c.call(r, "GET", "/organizations?page_size="+strconv.Itoa(maxChoices), nil, &list)
	out := list.Data[:0:0]
	for _, o := range list.Data {
		if o.Status == "active" {
			out = append(out, o)
		}
	}
	return out
}

// firstPeople lists up to maxChoices people for a select.
func (c *Console) firstPeople(r *http.Request) []admin.User {
	var list admin.List[admin.User]
	_ = c.call(r, "GET", "/users?page_size="+strconv.Itoa(maxChoices), nil, &list)
	return list.Data
}

// ----- clients -----

type clientsData struct {
	Clients []clientRow
	Pager   pager
	Orgs    []admin.Org
}

type clientRow struct {
	admin.Client
	OrgName string
}

// clientEntity: a created client is shown once, with its secret.
func clientEntity() *entity[admin.Client] {
	return &entity[admin.Client]{api: "/clients", path: "clients", nav: "clients", title: "Clients", page: "clients", key: "client",
		defaults: url.Values{"type": {"confidential"}, "scopes": {"openid"}, "access_token_ttl": {"600"}},
		data: func(c *Console, r *http.Request, cls []admin.Client, pg pager) any {
			names := c.names(r)
			d := clientsData{Orgs: c.firstOrgs(r), Pager: pg}
			for _, cl := range cls {
				d.Clients = append(d.Clients, clientRow{Client: cl, OrgName: names.org(cl.OrganizationID)})
			}
			return d
		},
		body: clientBody,
		created: func(c *Console, w http.ResponseWriter, r *http.Request, cl admin.Client) {
			v := c.newView(w, r, "Client created", "clients")
			v.Data = cl
			c.render(w, http.StatusCreated, "client_created", v)
		},
		what:        "client",
		consequence: "The app can no longer sign anyone in, and its tokens stop being accepted. This cannot be undone.",
		name:        func(cl admin.Client) (string, string) { return cl.ClientID, cl.Name + " (" + cl.ClientID + ")" },
	}
}

// clientBody turns the create form into the admin API's body. Fields the
// operator left empty are left out, so the API's defaults apply; values
// are passed on as typed, so the API's validation speaks for them.
func clientBody(f url.Values) (any, []httpx.Detail) {
	body := map[string]any{
		"name":               strings.TrimSpace(f.Get("name")),
		"type":               f.Get("type"),
		"organization_id":    f.Get("organization_id"),
		"skip_consent":       f.Get("skip_consent") != "",
		"multi_organization": f.Get("multi_organization") != "",
		"redirect_uris":      lines(f.Get("redirect_uris")),
	}
	if id := strings.TrimSpace(f.Get("client_id")); id != "" {
		body["client_id"] = id
	}
	if s := f["scopes"]; len(s) > 0 {
		body["scopes"] = s
	}
	if o := f["organizations"]; len(o) > 0 {
		body["organizations"] = o
	}
	if u := strings.TrimSpace(f.Get("backchannel_logout_uri")); u != "" {
		body["backchannel_logout_uri"] = u
	}
	if l := strings.TrimSpace(f.Get("rate_limit")); l != "" {
		body["rate_limit"] = l
	}
	if a := f.Get("application_type"); a != "" {
		body["application_type"] = a
	}
	if o, ok := originsField(f.Get("web_origins")); ok {
		body["web_origins"] = o
	}
	var bad []httpx.Detail
	if t := strings.TrimSpace(f.Get("access_token_ttl")); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			bad = append(bad, httpx.Detail{Field: "access_token_ttl", Message: "must be a whole number of seconds", Code: "invalid"})
		}
		body["access_token_ttl"] = n
	}
	return body, bad
}

// originsField reads a web origins field as the admin API's web_origins:
// origins separated by lines, commas or spaces; empty is the default
// (ok false on a create, which leaves the field out; null on a row's
// form), and "none" alone allows no origin ([]).
func originsField(s string) (origins []string, ok bool) {
	list := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	switch {
	case len(list) == 0:
		return nil, false
	case len(list) == 1 && strings.EqualFold(list[0], "none"):
		return []string{}, true
	}
	return list, true
}

// lines splits a textarea into its non-empty trimmed lines.
func lines(s string) []string {
	out := []string{}
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func (c *Console) setClientSuspended(w http.ResponseWriter, r *http.Request) {
	body := map[string]bool{"suspended": r.PostForm.Get("suspended") == "true"}
	if err := c.call(r, "PATCH", "/clients/"+pathID(r.PathValue("id")), body, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, Prefix+"clients", "client-updated")
}

// setClientRateLimit sets a client's own rate limit (its rate_limit);
// empty goes back to the node's --rate-limit. The admin API validates
// it, and its detail is shown as it is.
func (c *Console) setClientRateLimit(w http.ResponseWriter, r *http.Request) {
	body := map[string]string{"rate_limit": strings.TrimSpace(r.PostForm.Get("rate_limit"))}
	if err := c.call(r, "PATCH", "/clients/"+pathID(r.PathValue("id")), body, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, Prefix+"clients", "client-updated")
}

// setClientWebOrigins sets the browser origins a client's pages may call
// the provider from (its web_origins): empty goes back to the default,
// which follows its redirect URIs, "none" allows none. The admin API
// validates them, and its detail is shown as it is.
func (c *Console) setClientWebOrigins(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"web_origins": nil}
	if o, ok := originsField(r.PostForm.Get("web_origins")); ok {
		body["web_origins"] = o
	}
	if err := c.call(r, "PATCH", "/clients/"+pathID(r.PathValue("id")), body, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, Prefix+"clients", "client-updated")
}

// ----- keys -----

func (c *Console) rotateKey(w http.ResponseWriter, r *http.Request) {
	body := map[string]bool{"immediate": r.PostForm.Get("immediate") != ""}
	if err := c.call(r, "POST", "/keys/rotate", body, nil); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	done(w, r, Prefix+"keys", "key-rotated")
}
