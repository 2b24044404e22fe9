package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Authorization. Every route declares what it touches (declarations,
// keyed like Routes: "METHOD /path"); authorize finds the touched record
// (its id in the path or the body, and the organizations it belongs to in
// the state) and decide, the one place the roles are written down,
// answers from the credential's role and organization:
//
//   - admin (the break-glass token acts as one) may do everything.
//   - auditor may read (every GET, the audit trail included) but not take
//     a backup (GET /snapshot is the whole state, secrets' hashes
//     included: backups are an admin's), and may write nothing.
//   - org_admin of O reads and changes O and what is in it: O's name,
//     registration settings and branding; its memberships and invitations; its
//     clients (a client is O's to change when every
//     organization it belongs to, its owner and those it serves, is O);
//     the people who belong to O alone (every membership they hold is in
//     O), whose address it may also ask them to prove, and their links to
//     identity providers; O's own identity providers (organization_id O,
//     memberships in O alone, never email_domains). It creates people,
//     who are made members of O in the same write, invitations to O,
//     and org_admin API keys for O. It adds to O only a person who is O's
//     already (every membership in O, no grant): anyone else joins O by
//     accepting an invitation, with their own sign-in (joiner). It may
//     not delete O (that ends every session of O and cannot be undone:
//     the site's decision, not the organization's), nor create
//     organizations, import people, or reach keys, the cluster,
//     directories, backups, lockouts by key, grants, other API keys or
//     the break-glass token. Its lists show only what is in O, and its
//     audit trail the events that name O.
//
// A refusal is 403 FORBIDDEN, except where the answer would tell an
// org_admin that a record outside O exists: a record it may not see (a
// person with no membership in O, another organization's membership or
// client, another organization) answers 404 NOT_FOUND exactly as a
// missing one, whatever the method. A record it sees but may not change
// (a person also in another organization, a client serving another
// too), and a change that would reach beyond O (moving a client, a
// membership in another organization, a key for another role), are 403.
// A membership in O for a person O cannot see answers 422 exactly as a
// user_id that names no one (hideUser): that route's not-found.
//
// The decision reads the state as the request finds it (after a read
// index, for a write of an org_admin); the write that follows is not
// conditioned on it, so a change made by someone else in between (an
// admin adding the person to another organization) is not seen.

// thing is the kind of record a route touches.
type thing uint8

const (
	thingOrg thing = iota + 1
	thingPerson
	thingMembership
	thingClient
	thingDirectory
	thingKey
	thingCluster
	thingSnapshot
	thingImport
	thingLockout
	thingAudit
	thingStatus
	thingGrant
	thingAPIKey
	thingAdminToken
	thingInvitation
	thingBranding
	thingIdentityProvider
)

// op is what a route does to what it touches.
type op uint8

const (
	opList op = iota + 1
	opRead
	opCreate
	opChange
	opErase
)

func (o op) writes() bool { return o == opCreate || o == opChange || o == opErase }

// declaration is what one route touches, and how the organizations of
// the touched record are found (nil: it belongs to none).
type declaration struct {
	touches thing
	op      op
	find    func(a *api, r *http.Request) (scope, error)
}

// readsCurrent reports whether an org_admin's decision on the route is
// made on the state as it is now, after a read index: a change or an
// erasure (where the record is now), and a new membership (whom the
// person belongs to now: a membership added anywhere a moment before
// counts).
func (d declaration) readsCurrent() bool {
	return d.op == opChange || d.op == opErase || (d.touches == thingMembership && d.op == opCreate)
}

// declarations are every route's, "METHOD /path" as in Routes. A route
// without one is refused to everybody (authorize).
var declarations = map[string]declaration{
	"GET /organizations":         {thingOrg, opList, nil},
	"POST /organizations":        {thingOrg, opCreate, nil},
	"GET /organizations/{id}":    {thingOrg, opRead, findOrgPath},
	"PATCH /organizations/{id}":  {thingOrg, opChange, findOrgPath}, // its name, its registration, its branding
	"DELETE /organizations/{id}": {thingOrg, opErase, findOrgPath},

	"GET /users":                         {thingPerson, opList, nil},
	"POST /users":                        {thingPerson, opCreate, nil}, // an org_admin's is made a member of O (createUser)
	"POST /users/import":                 {thingImport, opCreate, nil},
	"GET /users/{id}":                    {thingPerson, opRead, findPersonPath},
	"PATCH /users/{id}":                  {thingPerson, opChange, findPersonPath},
	"DELETE /users/{id}":                 {thingPerson, opErase, findPersonPath},
	"POST /users/{id}/totp":              {thingPerson, opChange, findPersonPath},
	"DELETE /users/{id}/totp":            {thingPerson, opChange, findPersonPath},
	"POST /users/{id}/recovery-codes":    {thingPerson, opChange, findPersonPath},
	"GET /users/{id}/factors":            {thingPerson, opRead, findPersonPath},
	"DELETE /users/{id}/lockouts":        {thingPerson, opChange, findPersonPath},
	"POST /users/{id}/verify-email":      {thingPerson, opChange, findPersonPath},
	"GET /lockouts":                      {thingLockout, opList, nil},
	"DELETE /lockouts/{key}":             {thingLockout, opErase, nil},
	"GET /memberships":                   {thingMembership, opList, nil},
	"POST /memberships":                  {thingMembership, opCreate, findMembershipBody},
	"GET /memberships/{id}":              {thingMembership, opRead, findMembershipPath},
	"PATCH /memberships/{id}":            {thingMembership, opChange, findMembershipPath},
	"DELETE /memberships/{id}":           {thingMembership, opErase, findMembershipPath},
	"GET /clients":                       {thingClient, opList, nil},
	"POST /clients":                      {thingClient, opCreate, findClientBody},
	"GET /clients/{id}":                  {thingClient, opRead, findClientPath},
	"PATCH /clients/{id}":                {thingClient, opChange, findClientChange},
	"DELETE /clients/{id}":               {thingClient, opErase, findClientPath},
	"GET /directories":                   {thingDirectory, opList, nil},
	"POST /directories":                  {thingDirectory, opCreate, nil},
	"GET /directories/{id}":              {thingDirectory, opRead, nil},
	"PATCH /directories/{id}":            {thingDirectory, opChange, nil},
	"DELETE /directories/{id}":           {thingDirectory, opErase, nil},
	"GET /keys":                          {thingKey, opList, nil},
	"POST /keys/rotate":                  {thingKey, opCreate, nil},
	"GET /cluster":                       {thingCluster, opRead, nil},
	"DELETE /cluster/nodes/{id}":         {thingCluster, opErase, nil},
	"POST /cluster/members/{id}/promote": {thingCluster, opChange, nil},
	"POST /cluster/members/{id}/demote":  {thingCluster, opChange, nil},
	"GET /snapshot":                      {thingSnapshot, opRead, nil},
	"POST /snapshot":                     {thingSnapshot, opChange, nil},
	"GET /status":                        {thingStatus, opRead, nil},
	"GET /audit":                         {thingAudit, opList, findOrgQuery},
	"GET /audit/verify":                  {thingAudit, opRead, nil},

	// Grants, API keys and the break-glass token (the routes of people
	// who administer).
	"POST /admins":          {thingGrant, opCreate, nil},
	"GET /admins":           {thingGrant, opList, nil},
	"DELETE /admins/{id}":   {thingGrant, opErase, nil},
	"POST /api-keys":        {thingAPIKey, opCreate, findAPIKeyBody},
	"GET /api-keys":         {thingAPIKey, opList, nil},
	"DELETE /api-keys/{id}": {thingAPIKey, opErase, nil},
	"POST /admin-token":     {thingAdminToken, opChange, nil},

	// The site's branding (an organization's own is PATCH
	// /organizations/{id}).
	"GET /branding": {thingBranding, opRead, nil},
	"PUT /branding": {thingBranding, opChange, nil},

	// Invitations: an organization's, like its memberships.
	"GET /invitations":         {thingInvitation, opList, findOrgQuery},
	"POST /invitations":        {thingInvitation, opCreate, findInvitationBody},
	"GET /invitations/{id}":    {thingInvitation, opRead, findInvitationPath},
	"DELETE /invitations/{id}": {thingInvitation, opErase, findInvitationPath},

	// Identity providers (identityproviders.go): an organization's own,
	// which its org_admins manage as they do its clients, or the site's,
	// an admin's. A person's links to them are the person's.
	"GET /identity-providers":                     {thingIdentityProvider, opList, nil},
	"POST /identity-providers":                    {thingIdentityProvider, opCreate, findIdPBody},
	"GET /identity-providers/{id}":                {thingIdentityProvider, opRead, findIdPPath},
	"PATCH /identity-providers/{id}":              {thingIdentityProvider, opChange, findIdPChange},
	"DELETE /identity-providers/{id}":             {thingIdentityProvider, opErase, findIdPPath},
	"GET /users/{id}/identities":                  {thingPerson, opRead, findPersonPath},
	"DELETE /users/{id}/identities/{identity_id}": {thingPerson, opChange, findPersonPath},
}

// scope is where a touched record is: the organizations it belongs to
// (a client's owner and those it serves, a person's memberships), and
// for a change that may move it, where the change leaves it.
type scope struct {
	orgs  []string
	every bool   // it serves every organization (a multi-organization client with no list)
	after *scope // where a change leaves the record; nil: where it is
	role  string // the role a new API key asks for
	// joiner is the person a new membership would add (POST
	// /memberships).
	joiner *joiner
	// grants are the administrator grants a person holds: one who
	// administers more than the org_admin does is not theirs to change.
	grants []grantRef
}

// grantRef is one administrator grant: its role and organization.
type grantRef struct{ role, org string }

// has reports whether the record belongs to org (among others).
func (s scope) has(org string) bool { return slices.Contains(s.orgs, org) }

// only reports whether org is the one organization the record belongs
// to.
func (s scope) only(org string) bool {
	if s.every || len(s.orgs) == 0 {
		return false
	}
	for _, o := range s.orgs {
		if o != org {
			return false
		}
	}
	return true
}

// one is the organization the record belongs to when there is exactly
// one, for the audit event of a write.
func (s scope) one() string {
	if s.every || len(s.orgs) == 0 || !s.only(s.orgs[0]) {
		return ""
	}
	return s.orgs[0]
}

// verdict is decide's answer.
type verdict uint8

const (
	allow verdict = iota + 1
	forbid
	hide      // 404, as for a missing record
	hideUser  // 422, as for a user_id that names no one (POST /memberships)
	needScope // decide needs the record's scope first
)

// decide is the authorization rule. s is nil until the record's scope
// has been found; decide asks for it (needScope) only when the answer
// depends on it. why explains a refusal.
func decide(c Credential, d declaration, s *scope) (v verdict, why string) {
	switch c.Role {
	case RoleAdmin:
		return allow, ""
	case RoleAuditor:
		if (d.op == opRead || d.op == opList) && d.touches != thingSnapshot {
			return allow, ""
		}
		if d.touches == thingSnapshot {
			return forbid, "a backup is for admins only"
		}
		return forbid, "an auditor may only read"
	case RoleOrgAdmin:
		if c.OrgID == "" {
			return forbid, "an org_admin credential without an organization"
		}
		// handled below
	default:
		return forbid, "unknown role"
	}
	const outside = "an org_admin administers its own organization only"
	switch d.touches {
	case thingOrg:
		if d.op == opCreate || d.op == opErase {
			return forbid, "only an admin creates or deletes organizations"
		}
	case thingPerson, thingMembership, thingClient, thingIdentityProvider:
	case thingInvitation:
		if d.op == opList {
			// ?organization_id= names no other organization.
			if s == nil {
				return needScope, ""
			}
			if len(s.orgs) > 0 && !s.only(c.OrgID) {
				return forbid, "an org_admin lists the invitations of its own organization only"
			}
			return allow, ""
		}
	case thingAudit:
		if d.op != opList {
			return forbid, "only an admin or auditor verifies the whole audit trail"
		}
		if s == nil {
			return needScope, ""
		}
		if len(s.orgs) > 0 && !s.only(c.OrgID) {
			return forbid, "an org_admin reads the audit events of its own organization only"
		}
		return allow, ""
	case thingAPIKey:
		if d.op != opCreate {
			return forbid, "an org_admin may only create API keys"
		}
		if s == nil {
			return needScope, ""
		}
		if s.role != RoleOrgAdmin || !s.only(c.OrgID) {
			return forbid, "an org_admin creates org_admin API keys for its own organization only"
		}
		return allow, ""
	default:
		return forbid, "only an admin may do this"
	}
	switch d.op {
	case opList:
		return allow, "" // the list shows only what is in O (orgScope)
	case opCreate:
		if d.touches == thingPerson {
			return allow, "" // made a member of O in the same write (createUser)
		}
		if s == nil {
			return needScope, ""
		}
		if !s.only(c.OrgID) {
			return forbid, outside
		}
		if d.touches == thingMembership {
			return s.joiner.decide(c.OrgID)
		}
		return allow, ""
	}
	if s == nil {
		return needScope, ""
	}
	if !s.has(c.OrgID) {
		return hide, ""
	}
	if d.op == opRead {
		return allow, ""
	}
	if !s.only(c.OrgID) {
		return forbid, "the record belongs to another organization too"
	}
	for _, g := range s.grants {
		// Resetting the password or factors of someone with a wider
		// grant would be a way into that grant.
		if g.role != RoleOrgAdmin || g.org != c.OrgID {
			return forbid, "the person administers more than this organization"
		}
	}
	if s.after != nil && !s.after.only(c.OrgID) {
		return forbid, outside
	}
	return allow, ""
}

// authorize wraps the handler of one route (method and path as in table)
// with the decision. A route without a declaration is refused.
func (a *api) authorize(method, path string, next http.HandlerFunc) http.HandlerFunc {
	d, ok := declarations[method+" "+path]
	if !ok {
		return func(w http.ResponseWriter, r *http.Request) {
			a.Logger.Error("admin: no authorization declared", "route", method+" "+path)
			httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden, "no authorization is declared for this route")
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		c := credentialOf(r)
		v, why := decide(c, d, nil)
		var s scope
		found := false
		if v == needScope || (v == allow && d.op.writes() && d.find != nil) {
			// An org_admin's change is decided on a current state, as its
			// reads are (read): the record's place is read from it. (A
			// create is decided from its body alone, but a membership's,
			// which looks at the person: readsCurrent.) An admin's write
			// only names the organization in its audit event, best
			// effort.
			if v == needScope && d.readsCurrent() && a.ReadIndex != nil {
				if err := a.ReadIndex(r.Context()); err != nil {
					a.unavailable(w, r, "read index", err)
					return
				}
			}
			var err error
			s, err = d.find(a, r)
			bodyErr := errors.As(err, new(*httpx.BodyError)) || errors.As(err, new(problemsError))
			switch {
			case err == nil:
				found = true
			case v == allow:
				// an admin's write: the handler answers for its body
			case !bodyErr, d.op == opCreate:
				a.scopeFailed(w, r, err)
				return
			}
			if v == needScope {
				// A change with a body that cannot be used is decided on
				// where the record is now: one the caller may not see
				// answers 404 before anything is said of the body.
				v, why = decide(c, d, &s)
				if v == allow && err != nil {
					a.scopeFailed(w, r, err)
					return
				}
			}
		}
		switch v {
		case allow:
		case hide:
			notFound(w, r)
			return
		case hideUser:
			unknownUser(w, r)
			return
		default:
			httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden, "forbidden: "+why)
			return
		}
		if found && d.op.writes() {
			if org := s.one(); org != "" {
				r = r.WithContext(context.WithValue(r.Context(), touchKey{}, touch{org: org}))
			}
		}
		next(w, r)
	}
}

// credentialOf is the request's credential, which authenticate resolved
// before any route runs. A request that reached a route without one (a
// wiring mistake) has no role, and decide refuses it.
func credentialOf(r *http.Request) Credential {
	c, _ := CredentialFrom(r.Context()) // none: no role, which decide refuses
	return c
}

// orgScope is the organization the request's lists are limited to: an
// org_admin's; "" for every other role.
func orgScope(r *http.Request) string {
	if c := credentialOf(r); c.Role == RoleOrgAdmin {
		return c.OrgID
	}
	return ""
}

// touch is what authorize found a write touches, for its audit event.
type touch struct {
	org    string // the one organization the record belongs to
	target string // a created record's id, when fsm cannot tell it
}

type touchKey struct{}

// withTouch is r carrying the organization and the id of the record it
// creates, for a write whose command does not return the record.
func withTouch(r *http.Request, org, id string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), touchKey{}, touch{org: org, target: id}))
}

// touched completes the admin event of r with the organization the write
// touched (organization_id, so the event is among those an org_admin of
// it reads) and a created record's id.
func touched(r *http.Request, ev *fsm.Audit) {
	t, ok := r.Context().Value(touchKey{}).(touch)
	if !ok {
		return
	}
	ev.OrgID = t.org
	if t.target != "" && ev.Detail["target"] == "" {
		if ev.Detail == nil {
			ev.Detail = map[string]string{}
		}
		ev.Detail["target"] = t.target
	}
}

// scopeFailed answers for a find that could not tell where the record is:
// its body cannot be used (the handler would answer the same), or the
// state could not be read.
func (a *api) scopeFailed(w http.ResponseWriter, r *http.Request, err error) {
	var be *httpx.BodyError
	var p problemsError
	switch {
	case errors.As(err, &be):
		httpx.WriteBodyError(w, r, err)
	case errors.As(err, &p):
		writeInvalid(w, r, p.p)
	default:
		a.unavailable(w, r, "read state", err)
	}
}

// problemsError carries a body's validation problems out of a find.
type problemsError struct{ p problems }

func (e problemsError) Error() string { return "invalid body" }

// peekJSON decodes r's body into v as the handler will (httpx.DecodeJSON,
// into the handler's own body type, so both read the same values) and
// leaves the body for the handler to read again.
func peekJSON(r *http.Request, v any) error {
	buf, err := io.ReadAll(io.LimitReader(r.Body, httpx.MaxJSONBody+1))
	if err != nil {
		return &httpx.BodyError{Status: http.StatusBadRequest, Code: httpx.CodeBadRequest, Message: "the body could not be read"}
	}
	r.Body = io.NopCloser(bytes.NewReader(buf))
	err = httpx.DecodeJSON(nil, r, v)
	r.Body = io.NopCloser(bytes.NewReader(buf))
	return err
}

// lowerUUID is s in the form the handlers store a UUID in.
func lowerUUID(s string) string {
	if isUUID(s) {
		return strings.ToLower(s)
	}
	return s
}

func findOrgPath(_ *api, r *http.Request) (scope, error) {
	return scope{orgs: []string{lowerUUID(r.PathValue("id"))}}, nil
}

func findPersonPath(a *api, r *http.Request) (scope, error) {
	id := lowerUUID(r.PathValue("id"))
	if !isUUID(id) {
		return scope{}, nil
	}
	ms, err := a.State.MembershipsOfUser(id)
	if err != nil {
		return scope{}, err
	}
	var s scope
	for _, m := range ms {
		s.orgs = append(s.orgs, m.OrgID)
	}
	s.grants, err = a.grantsOf(id)
	return s, err
}

// grantsOf lists the administrator grants the person holds, so an
// org_admin cannot reset the password or factors of a person of its
// organization who is an admin, an auditor, or an org_admin of another
// organization (and so sign in as them).
func (a *api) grantsOf(userID string) ([]grantRef, error) {
	gs, err := a.State.AdminGrantsOfUser(userID)
	if err != nil {
		return nil, err
	}
	out := make([]grantRef, 0, len(gs))
	for _, g := range gs {
		out = append(out, grantRef{role: g.Role, org: g.OrgID})
	}
	return out, nil
}

func findMembershipPath(a *api, r *http.Request) (scope, error) {
	id := lowerUUID(r.PathValue("id"))
	if !isUUID(id) {
		return scope{}, nil
	}
	m, err := a.State.Membership(id)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return scope{}, nil
	case err != nil:
		return scope{}, err
	}
	return scope{orgs: []string{m.OrgID}}, nil
}

// findMembershipBody is where POST /memberships would put whom: the
// body's organization, and the person as the state knows them
// (joinerOf). A body without usable ids is the handler's validation
// error.
func findMembershipBody(a *api, r *http.Request) (scope, error) {
	var b membershipBody
	if err := peekJSON(r, &b); err != nil {
		return scope{}, err
	}
	var p problems
	userID := p.uuid("user_id", b.UserID)
	orgID := p.uuid("org_id", b.OrgID)
	if len(p) > 0 {
		return scope{}, problemsError{p}
	}
	j, err := a.joinerOf(userID)
	return scope{orgs: []string{orgID}, joiner: j}, err
}

// clientScope is where a registration is: its owner and the
// organizations it serves.
func clientScope(c fsm.Client) scope {
	s := scope{orgs: append([]string{c.OrganizationID}, c.Organizations...)}
	s.every = c.MultiOrganization && len(c.Organizations) == 0
	return s
}

// clientOf is the stored registration the path names; ok false when
// there is none.
func (a *api) clientOf(r *http.Request) (fsm.Client, bool, error) {
	id := r.PathValue("id")
	if !validClientID(id) {
		return fsm.Client{}, false, nil
	}
	c, err := a.State.Client(id)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return c, false, nil
	case err != nil:
		return c, false, err
	}
	return c, true, nil
}

func findClientPath(a *api, r *http.Request) (scope, error) {
	c, ok, err := a.clientOf(r)
	if !ok {
		return scope{}, err
	}
	return clientScope(c), nil
}

// findClientChange is where the client is and where the patch, merged
// as updateClient merges it, leaves it.
func findClientChange(a *api, r *http.Request) (scope, error) {
	cur, ok, err := a.clientOf(r)
	if !ok {
		return scope{}, err
	}
	s := clientScope(cur)
	var b clientBody
	if err := peekJSON(r, &b); err != nil {
		return s, err
	}
	next := cur
	next.RedirectURIs = slices.Clone(cur.RedirectURIs)
	next.Scopes = slices.Clone(cur.Scopes)
	next.Organizations = slices.Clone(cur.Organizations)
	b.mergeInto(&next)
	var p problems
	checkClient(&p, &b, &next)
	if len(p) > 0 {
		return s, problemsError{p}
	}
	after := clientScope(next)
	s.after = &after
	return s, nil
}

func findClientBody(a *api, r *http.Request) (scope, error) {
	var b clientBody
	if err := peekJSON(r, &b); err != nil {
		return scope{}, err
	}
	c, p := newClient(&b, "client")
	if len(p) > 0 {
		return scope{}, problemsError{p}
	}
	return clientScope(c), nil
}

// findOrgQuery is the organization a list asks about (GET /audit, GET
// /invitations: ?organization_id=), if any.
func findOrgQuery(_ *api, r *http.Request) (scope, error) {
	if q := r.URL.Query(); q.Has("organization_id") {
		return scope{orgs: []string{q.Get("organization_id")}}, nil
	}
	return scope{}, nil
}

// apiKeyAsked is what authorization reads of POST /api-keys' body: the
// role and organization of the key; the handler reads the rest.
type apiKeyAsked struct {
	Role           string `json:"role"`
	OrganizationID string `json:"organization_id"`
}

func findAPIKeyBody(_ *api, r *http.Request) (scope, error) {
	var b apiKeyAsked
	buf, err := io.ReadAll(io.LimitReader(r.Body, httpx.MaxJSONBody+1))
	r.Body = io.NopCloser(bytes.NewReader(buf))
	if err != nil {
		return scope{}, err
	}
	// The handler's body type is its own: read the two fields leniently
	// (encoding/json, as the handler), leaving the rest to it.
	if err := json.Unmarshal(buf, &b); err != nil {
		return scope{}, &httpx.BodyError{Status: http.StatusBadRequest, Code: httpx.CodeBadRequest, Message: "body is not valid JSON"}
	}
	s := scope{role: b.Role}
	if b.OrganizationID != "" {
		s.orgs = []string{lowerUUID(b.OrganizationID)}
	}
	return s, nil
}

// findInvitationPath is where the invitation the path names is: its
// organization; nowhere when there is none.
func findInvitationPath(a *api, r *http.Request) (scope, error) {
	id := lowerUUID(r.PathValue("id"))
	if !isUUID(id) {
		return scope{}, nil
	}
	in, err := a.State.Invitation(id)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return scope{}, nil
	case err != nil:
		return scope{}, err
	}
	return scope{orgs: []string{in.OrgID}}, nil
}

// findInvitationBody is the organization POST /invitations invites to;
// a body without a usable one is the handler's validation error.
func findInvitationBody(_ *api, r *http.Request) (scope, error) {
	var b invitationBody
	if err := peekJSON(r, &b); err != nil {
		return scope{}, err
	}
	var p problems
	org := p.uuid("organization_id", b.OrgID)
	if len(p) > 0 {
		return scope{}, problemsError{p}
	}
	return scope{orgs: []string{org}}, nil
}

// MayTry reports whether role may call route ("GET /branding") at all:
// false when decide refuses it whatever record it names, as it does an
// org_admin the site's branding or the keys. The console leaves such
// pages out of its navigation; the API still decides every call.
func MayTry(role, route string) bool {
	d, ok := declarations[route]
	if !ok {
		return false
	}
	v, _ := decide(Credential{Role: role, OrgID: "some-organization"}, d, nil)
	return v == allow || v == needScope
}
