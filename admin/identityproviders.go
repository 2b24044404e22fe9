package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oidcd/oidcd/federation"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Identity providers (federation, docs/operators/federation.md): the
// site's other OpenID providers that people may sign in through, and the
// links that tie a person here to their subject at one. The records and
// their rules are fsm's (fsm/federation.go); this file takes and shows
// them, seals the client secret under the KEK, and says who may do what
// (authz.go, findIdP*): an admin every provider, an org_admin of O only
// O's, granting memberships in O alone and never naming email_domains.
//
// Every write here is of state format fsm.FormatGate: while a rolling
// upgrade is under way it is refused before it is proposed (409 naming
// idpFeature). Nothing else can make a provider or a link, so none exists
// then, and no sign-in through one can be proposed either.

// Bounds of a provider's fields.
const (
	maxIdPSlug         = 40
	maxIdPDisplayName  = 100
	maxIdPClientID     = 256
	maxIdPClientSecret = 1024
	maxIdPScopes       = 20
	maxIdPDomains      = 100
	maxIdPGroups       = 100
	maxIdPGroup        = 256
)

// idpFeature is what the state-format gate's 409 names for every write of
// this file.
const idpFeature = "identity providers (federation)"

// defaultIdPScopes is what a provider asks of its upstream when the body
// names no scopes.
var defaultIdPScopes = []string{"openid", "email", "profile"}

var (
	idpSlugForm = regexp.MustCompile(`^[a-z0-9-]{1,40}$`)
	// scopeToken is RFC 6749 3.3's scope-token.
	scopeToken = regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]+$`)
)

// IdentityProvider is a provider as the API shows it: never the client
// secret, only whether one is set; with the three addresses to register
// at the upstream, which follow from this node's issuer and the slug.
type IdentityProvider struct {
	ID                    string              `json:"id"`
	Slug                  string              `json:"slug"`
	DisplayName           string              `json:"display_name"`
	Issuer                string              `json:"issuer"`
	ClientID              string              `json:"client_id"`
	ClientSecretSet       bool                `json:"client_secret_set"`
	Scopes                []string            `json:"scopes"`
	OrganizationID        string              `json:"organization_id,omitempty"` // absent: the site's
	EmailDomains          []string            `json:"email_domains"`
	Provisioning          string              `json:"provisioning"`
	Memberships           ProviderMemberships `json:"memberships"`
	TrustMFA              bool                `json:"trust_mfa"`
	BackchannelLogout     bool                `json:"backchannel_logout"`
	EndUpstreamSession    bool                `json:"end_upstream_session"`
	Enabled               bool                `json:"enabled"`
	RedirectURI           string              `json:"redirect_uri"`
	BackchannelLogoutURI  string              `json:"backchannel_logout_uri"`
	PostLogoutRedirectURI string              `json:"post_logout_redirect_uri"`
	CreatedAt             time.Time           `json:"created_at"`
	UpdatedAt             time.Time           `json:"updated_at"`
}

// ProviderMemberships is a provider's memberships as the API takes and
// shows them: the organization every person signed in through it is an
// active member of (absent: the provider's own, if any), and the
// organization of each upstream group of groups_claim.
type ProviderMemberships struct {
	OrganizationID     string            `json:"organization_id,omitempty"`
	GroupsClaim        string            `json:"groups_claim,omitempty"`
	GroupOrganizations map[string]string `json:"group_organizations,omitempty"`
}

// Identity is a person's link to their subject at a provider.
type Identity struct {
	ID         string    `json:"id"`
	ProviderID string    `json:"provider_id"`
	Subject    string    `json:"subject"`
	Email      string    `json:"email"`
	LinkedAt   time.Time `json:"linked_at"`
	LastUsedAt time.Time `json:"last_used_at"`
}

// FederationURIs are the addresses at issuer (this provider's, as people
// reach it) that the upstream of slug is told: where it sends people back
// (redirect, federation.RedirectURI, which the sign-in sends), where it
// posts logout tokens (back-channel) and where it sends people after an
// upstream logout (post-logout), the routes under authn.PathFederation.
func FederationURIs(issuer, slug string) (redirect, backchannel, postLogout string) {
	base := strings.TrimSuffix(issuer, "/") + authn.PathFederation + url.PathEscape(slug)
	return federation.RedirectURI(issuer, slug), base + "/backchannel-logout", base + "/logged-out"
}

func (a *api) idpOut(ip fsm.IdentityProvider) IdentityProvider {
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	out := IdentityProvider{ID: ip.ID, Slug: ip.Slug, DisplayName: ip.DisplayName, Issuer: ip.Issuer, ClientID: ip.ClientID,
		ClientSecretSet: len(ip.ClientSecret) > 0, Scopes: orEmpty(ip.Scopes), OrganizationID: ip.OrgID,
		EmailDomains: orEmpty(ip.EmailDomains), Provisioning: ip.Provisioning,
		Memberships: ProviderMemberships{OrganizationID: ip.Memberships.OrgID, GroupsClaim: ip.Memberships.GroupsClaim,
			GroupOrganizations: ip.Memberships.GroupOrgs},
		TrustMFA: ip.TrustMFA, BackchannelLogout: ip.BackchannelLogout, EndUpstreamSession: ip.EndUpstreamSession,
		Enabled: ip.Enabled, CreatedAt: ip.CreatedAt, UpdatedAt: ip.UpdatedAt}
	out.RedirectURI, out.BackchannelLogoutURI, out.PostLogoutRedirectURI = FederationURIs(a.Issuer, ip.Slug)
	return out
}

func identityOut(idn fsm.Identity) Identity {
	return Identity{ID: idn.ID, ProviderID: idn.ProviderID, Subject: idn.Subject, Email: idn.Email,
		LinkedAt: idn.LinkedAt, LastUsedAt: idn.LastUsedAt}
}

// optField is a body field whose presence matters beside its value: Given
// when the key is in the body at all, null included (Null). encoding/json
// calls UnmarshalJSON for null too, since the field is a value, not a
// pointer.
type optField[T any] struct {
	Given bool
	Null  bool
	V     T
}

func (o *optField[T]) UnmarshalJSON(b []byte) error {
	o.Given = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.V)
}

// idpBody is the body of POST and PATCH /identity-providers; absent fields
// keep their values on PATCH (client_secret the stored secret).
type idpBody struct {
	Slug         *string          `json:"slug"`
	DisplayName  *string          `json:"display_name"`
	Issuer       *string          `json:"issuer"`
	ClientID     *string          `json:"client_id"`
	ClientSecret *string          `json:"client_secret"`
	Scopes       *[]string        `json:"scopes"`
	Organization optField[string] `json:"organization_id"` // null or "": the site's
	// EmailDomains is an admin's only: an org_admin's body holding the
	// key at all, null or [] included, is refused (403).
	EmailDomains       optField[[]string]   `json:"email_domains"` // null: none
	Provisioning       *string              `json:"provisioning"`
	Memberships        *ProviderMemberships `json:"memberships"` // replaces the whole; {} clears it
	TrustMFA           *bool                `json:"trust_mfa"`
	BackchannelLogout  *bool                `json:"backchannel_logout"`
	EndUpstreamSession *bool                `json:"end_upstream_session"`
	Enabled            *bool                `json:"enabled"`
}

// mergeInto sets the given fields on ip (the client secret is the
// caller's: it is sealed apart).
func (b *idpBody) mergeInto(ip *fsm.IdentityProvider) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setBool := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	set(&ip.Slug, b.Slug)
	set(&ip.DisplayName, b.DisplayName)
	set(&ip.Issuer, b.Issuer)
	set(&ip.ClientID, b.ClientID)
	set(&ip.Provisioning, b.Provisioning)
	if b.Scopes != nil {
		ip.Scopes = slices.Clone(*b.Scopes)
	}
	if b.Organization.Given {
		ip.OrgID = b.Organization.V // "" for null too
	}
	if b.EmailDomains.Given {
		ip.EmailDomains = slices.Clone(b.EmailDomains.V)
	}
	if m := b.Memberships; m != nil {
		ip.Memberships = fsm.ProviderMemberships{OrgID: m.OrganizationID, GroupsClaim: m.GroupsClaim}
		if len(m.GroupOrganizations) > 0 {
			ip.Memberships.GroupOrgs = maps.Clone(m.GroupOrganizations)
		}
	}
	setBool(&ip.TrustMFA, b.TrustMFA)
	setBool(&ip.BackchannelLogout, b.BackchannelLogout)
	setBool(&ip.EndUpstreamSession, b.EndUpstreamSession)
	setBool(&ip.Enabled, b.Enabled)
}

// newProvider is the provider the body of POST /identity-providers makes
// under id, its defaults filled in, checked and normalized.
func newProvider(b *idpBody, id string) (fsm.IdentityProvider, problems) {
	ip := fsm.IdentityProvider{ID: id, Scopes: slices.Clone(defaultIdPScopes), Provisioning: fsm.ProvisionCreate,
		BackchannelLogout: true, Enabled: true}
	b.mergeInto(&ip)
	var p problems
	checkProvider(&p, &ip)
	switch {
	case b.ClientSecret == nil || *b.ClientSecret == "":
		p.add("client_secret", codeRequired, "is required: the secret the upstream issued for client_id")
	case len(*b.ClientSecret) > maxIdPClientSecret:
		p.add("client_secret", codeTooLong, "must be at most %d bytes", maxIdPClientSecret)
	}
	return ip, p
}

// patchedProvider is cur with the body of PATCH merged in, checked and
// normalized.
func patchedProvider(b *idpBody, cur fsm.IdentityProvider) (fsm.IdentityProvider, problems) {
	next := cur
	next.Scopes = slices.Clone(cur.Scopes)
	next.EmailDomains = slices.Clone(cur.EmailDomains)
	next.Memberships.GroupOrgs = maps.Clone(cur.Memberships.GroupOrgs)
	b.mergeInto(&next)
	var p problems
	checkProvider(&p, &next)
	if s := b.ClientSecret; s != nil {
		switch {
		case *s == "":
			p.add("client_secret", codeRequired, "must not be empty; leave it out to keep the stored one")
		case len(*s) > maxIdPClientSecret:
			p.add("client_secret", codeTooLong, "must be at most %d bytes", maxIdPClientSecret)
		}
	}
	return next, p
}

// checkProvider validates a complete provider (a new one with its
// defaults, or a stored one with a patch merged) and normalizes it:
// UUIDs lowercased, scopes each once, email domains as registration
// domains are stored (lowercase ASCII).
func checkProvider(p *problems, ip *fsm.IdentityProvider) {
	switch {
	case ip.Slug == "":
		p.add("slug", codeRequired, "is required")
	case len(ip.Slug) > maxIdPSlug:
		p.add("slug", codeTooLong, "must be at most %d characters", maxIdPSlug)
	case !idpSlugForm.MatchString(ip.Slug):
		p.add("slug", codeInvalid, "may hold only lowercase letters, digits and hyphens")
	}
	switch {
	case strings.TrimSpace(ip.DisplayName) == "":
		p.add("display_name", codeRequired, "is required: the sign-in button reads \"Continue with\" and this name")
	case utf8.RuneCountInString(ip.DisplayName) > maxIdPDisplayName:
		p.add("display_name", codeTooLong, "must be at most %d characters", maxIdPDisplayName)
	case strings.ContainsFunc(ip.DisplayName, isControl):
		p.add("display_name", codeInvalid, "must not hold control characters")
	}
	p.issuer("issuer", ip.Issuer)
	switch {
	case ip.ClientID == "":
		p.add("client_id", codeRequired, "is required: the client id the upstream issued")
	case len(ip.ClientID) > maxIdPClientID:
		p.add("client_id", codeTooLong, "must be at most %d bytes", maxIdPClientID)
	case strings.ContainsFunc(ip.ClientID, isControl) || !utf8.ValidString(ip.ClientID):
		p.add("client_id", codeInvalid, "must not hold control characters")
	}
	switch {
	case len(ip.Scopes) > maxIdPScopes:
		p.add("scopes", codeTooMany, "must hold at most %d scopes", maxIdPScopes)
	case !slices.Contains(ip.Scopes, "openid"):
		p.add("scopes", codeRequired, "must hold openid: the upstream signs the person in with OpenID Connect")
	}
	for i, s := range ip.Scopes {
		if len(s) > 256 || !scopeToken.MatchString(s) {
			p.add(fmt.Sprintf("scopes[%d]", i), codeInvalid, "must be a scope token: printable ASCII without spaces, quotes or backslashes")
		}
	}
	ip.Scopes = dedupe(ip.Scopes)
	if ip.OrgID != "" {
		ip.OrgID = p.uuid("organization_id", ip.OrgID)
	}
	p.idpDomains(ip)
	p.oneOf("provisioning", ip.Provisioning, fsm.ProvisionCreate, fsm.ProvisionLink, fsm.ProvisionCreateOrLink, fsm.ProvisionOff)
	m := &ip.Memberships
	if m.OrgID != "" {
		m.OrgID = p.uuid("memberships.organization_id", m.OrgID)
	}
	switch {
	case len(m.GroupsClaim) > maxIdPGroup:
		p.add("memberships.groups_claim", codeTooLong, "must be at most %d bytes", maxIdPGroup)
	case strings.ContainsFunc(m.GroupsClaim, isControl):
		p.add("memberships.groups_claim", codeInvalid, "must not hold control characters")
	case len(m.GroupOrgs) > 0 && m.GroupsClaim == "":
		p.add("memberships.groups_claim", codeRequired, "is required with group_organizations: the claim of the upstream's ID token that lists a person's groups")
	}
	if len(m.GroupOrgs) > maxIdPGroups {
		p.add("memberships.group_organizations", codeTooMany, "must map at most %d groups", maxIdPGroups)
	}
	for _, g := range slices.Sorted(maps.Keys(m.GroupOrgs)) {
		field := "memberships.group_organizations[" + g + "]"
		if g == "" || len(g) > maxIdPGroup || strings.ContainsFunc(g, isControl) {
			p.add(field, codeInvalid, "a group must be 1 to %d bytes without control characters", maxIdPGroup)
			continue
		}
		m.GroupOrgs[g] = p.uuid(field, m.GroupOrgs[g])
	}
}

// issuer checks an upstream's issuer: an absolute https URL (http only at
// 127.0.0.1, [::1] or localhost, a development upstream) with a host and
// no user info, query or fragment. It is stored exactly as given, a
// trailing slash included: an upstream's ID tokens name it exactly, and
// its discovery document is read from it without that slash and with
// /.well-known/openid-configuration.
func (p *problems) issuer(field, s string) {
	if s == "" {
		p.add(field, codeRequired, "is required: the upstream's issuer, as its discovery document names it")
		return
	}
	if len(s) > maxURI {
		p.add(field, codeTooLong, "must be at most %d bytes", maxURI)
		return
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		p.add(field, codeInvalidURI, "must be an absolute URL with a host, such as https://login.example.com/realms/staff")
	case u.User != nil:
		p.add(field, codeInvalidURI, "must not hold user info")
	case u.RawQuery != "" || u.ForceQuery:
		p.add(field, codeInvalidURI, "must not have a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		p.add(field, codeInvalidURI, "must not have a fragment")
	case u.Scheme == "https":
	case u.Scheme == "http" && (u.Hostname() == "127.0.0.1" || u.Hostname() == "::1" || strings.EqualFold(u.Hostname(), "localhost")):
	default:
		p.add(field, codeInvalidURI, "must use https (http only at 127.0.0.1, [::1] or localhost, for a development upstream): codes, secrets and tokens never cross a network in the clear")
	}
}

// idpDomains checks and normalizes a provider's email domains: at most
// maxIdPDomains, each a domain name (no @, no wildcard) given once.
func (p *problems) idpDomains(ip *fsm.IdentityProvider) {
	if len(ip.EmailDomains) > maxIdPDomains {
		p.add("email_domains", codeTooMany, "must hold at most %d domains", maxIdPDomains)
		return
	}
	p.domainList("email_domains", ip.EmailDomains, true)
	if len(ip.EmailDomains) == 0 {
		ip.EmailDomains = nil
	}
}

// idpScope is where a provider reaches: its organization and each
// organization it grants memberships in; every for the site's (an
// organization's org_admin may never make or change one).
func idpScope(ip fsm.IdentityProvider) scope {
	s := scope{every: ip.OrgID == ""}
	for _, o := range append([]string{ip.OrgID, ip.Memberships.OrgID}, slices.Sorted(maps.Values(ip.Memberships.GroupOrgs))...) {
		if o = lowerUUID(o); o != "" && !slices.Contains(s.orgs, o) {
			s.orgs = append(s.orgs, o)
		}
	}
	return s
}

// providerOf is the stored provider the path names; ok false when there
// is none.
func (a *api) providerOf(r *http.Request) (fsm.IdentityProvider, bool, error) {
	id := lowerUUID(r.PathValue("id"))
	if !isUUID(id) {
		return fsm.IdentityProvider{}, false, nil
	}
	ip, err := a.State.IdentityProvider(id)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return ip, false, nil
	case err != nil:
		return ip, false, err
	}
	return ip, true, nil
}

// findIdPPath is where the provider the path names is: its organization
// alone (the organizations it grants memberships in do not make it
// theirs to see); nowhere for the site's and for none.
func findIdPPath(a *api, r *http.Request) (scope, error) {
	ip, ok, err := a.providerOf(r)
	if !ok || ip.OrgID == "" {
		return scope{}, err
	}
	return scope{orgs: []string{ip.OrgID}}, nil
}

// findIdPChange is where the provider is, and where the patch, merged as
// updateIdentityProvider merges it, leaves it (idpScope).
func findIdPChange(a *api, r *http.Request) (scope, error) {
	ip, ok, err := a.providerOf(r)
	if !ok {
		return scope{}, err
	}
	var s scope
	if ip.OrgID != "" {
		s.orgs = []string{ip.OrgID}
	}
	var b idpBody
	if err := peekJSON(r, &b); err != nil {
		return s, err
	}
	next, p := patchedProvider(&b, ip)
	if len(p) > 0 {
		return s, problemsError{p}
	}
	after := idpScope(next)
	s.after = &after
	return s, nil
}

// findIdPBody is where the provider POST /identity-providers makes would
// reach (idpScope).
func findIdPBody(_ *api, r *http.Request) (scope, error) {
	var b idpBody
	if err := peekJSON(r, &b); err != nil {
		return scope{}, err
	}
	ip, p := newProvider(&b, "00000000-0000-4000-8000-000000000000")
	if len(p) > 0 {
		return scope{}, problemsError{p}
	}
	return idpScope(ip), nil
}

// refuseDelegatedDomains answers 403 for an org_admin's body that names
// email_domains at all: the domains a provider is authoritative for let
// its sign-ins link to the people who have addresses there and vouch for
// those addresses, a claim only an admin makes, as an organization's
// registration domains are (addedDomain).
func refuseDelegatedDomains(w http.ResponseWriter, r *http.Request, b *idpBody) bool {
	if !b.EmailDomains.Given || orgScope(r) == "" {
		return false
	}
	httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden,
		"forbidden: only an admin sets a provider's email_domains (an org_admin's request may not hold the field at all, even empty): "+
			"they say whose addresses the upstream vouches for, which links sign-ins to existing people; leave the field out")
	return true
}

// gated names the state-format gate's feature in the API's words.
func gated(cmd fsm.Command) fsm.Command {
	if cmd.Feature != "" {
		cmd.Feature = idpFeature
	}
	return cmd
}

// sealClientSecret seals a provider's client secret under the KEK.
func (a *api) sealClientSecret(w http.ResponseWriter, r *http.Request, id, secret string) ([]byte, bool) {
	sealed, err := a.KEK.Seal([]byte(secret), fsm.IdentityProviderAAD(id))
	if err != nil {
		a.unavailable(w, r, "seal the client secret", err)
		return nil, false
	}
	return sealed, true
}

func (a *api) createIdentityProvider(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b idpBody
	if !decode(w, r, &b) {
		return
	}
	if refuseDelegatedDomains(w, r, &b) {
		return
	}
	ip, p := newProvider(&b, a.createID(r, key))
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	ip.CreatedAt = a.now()
	ip.UpdatedAt = ip.CreatedAt
	r = withTouch(r, ip.OrgID, ip.ID) // fsm names no provider in an event's target
	r, rp := withReplay(r, &replay{key: key, id: ip.ID, read: func() (any, bool, error) {
		got, err := a.State.IdentityProvider(ip.ID)
		return a.idpOut(got), got.Slug == ip.Slug && got.Issuer == ip.Issuer && got.ClientID == ip.ClientID && got.OrgID == ip.OrgID, err
	}})
	if a.replayed(w, r, rp) {
		return // before the secret is sealed again
	}
	if ip.ClientSecret, ok = a.sealClientSecret(w, r, ip.ID, *b.ClientSecret); !ok {
		return
	}
	cmd := gated(fsm.MustCommand(fsm.TypePutIdentityProvider, fsm.PutIdentityProvider{Provider: ip, Create: true}))
	res, ok := a.commitCreate(w, r, a.stamp(r, cmd), rp)
	if !ok {
		return
	}
	if v, isIdP := res.Value.(fsm.IdentityProvider); isIdP {
		ip = v
	}
	httpx.WriteJSON(w, http.StatusCreated, a.idpOut(ip))
}

// listIdentityProviders is every provider, in id order; an org_admin's
// list, its organization's.
func (a *api) listIdentityProviders(w http.ResponseWriter, r *http.Request) {
	ips, err := a.State.IdentityProviders()
	if err != nil {
		a.unavailable(w, r, "read state", err)
		return
	}
	if org := orgScope(r); org != "" {
		ips = slices.DeleteFunc(ips, func(ip fsm.IdentityProvider) bool { return ip.OrgID != org })
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		Data []IdentityProvider `json:"data"`
	}{mapSlice(ips, a.idpOut)})
}

func (a *api) pathProvider(w http.ResponseWriter, r *http.Request) (fsm.IdentityProvider, bool) {
	id, ok := pathUUID(w, r)
	if !ok {
		return fsm.IdentityProvider{}, false
	}
	ip, err := a.State.IdentityProvider(id)
	if err != nil {
		a.readFailed(w, r, err)
		return fsm.IdentityProvider{}, false
	}
	return ip, true
}

func (a *api) getIdentityProvider(w http.ResponseWriter, r *http.Request) {
	if ip, ok := a.pathProvider(w, r); ok {
		httpx.WriteJSON(w, http.StatusOK, a.idpOut(ip))
	}
}

// updateIdentityProvider merges the given fields into the stored
// provider; a new client_secret replaces the stored one, an absent one
// keeps it. The command carries the updated_at that was read, so a
// concurrent change in between is refused (409), not lost.
func (a *api) updateIdentityProvider(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	var b idpBody
	if !decode(w, r, &b) {
		return
	}
	if refuseDelegatedDomains(w, r, &b) {
		return
	}
	cur, err := a.State.IdentityProvider(id)
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	next, p := patchedProvider(&b, cur)
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	next.ClientSecret, next.UpdatedAt = nil, a.now() // nil: fsm keeps the stored secret
	// updated_at must move even if the clock did not, or the next
	// writer's expectation could not tell the versions apart.
	if !next.UpdatedAt.After(cur.UpdatedAt) {
		next.UpdatedAt = cur.UpdatedAt.Add(time.Nanosecond)
	}
	if b.ClientSecret != nil {
		if next.ClientSecret, ok = a.sealClientSecret(w, r, id, *b.ClientSecret); !ok {
			return
		}
	}
	res, ok := a.apply(w, r, gated(fsm.MustCommand(fsm.TypePutIdentityProvider, fsm.PutIdentityProvider{Provider: next, ExpectUpdatedAt: cur.UpdatedAt})))
	if !ok {
		return
	}
	out, err := valueOr(res, func() (fsm.IdentityProvider, error) { return a.State.IdentityProvider(id) })
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, a.idpOut(out))
}

// deleteIdentityProvider removes the provider and every link to it: nobody
// signs in through it any more, and every SSO session opened through it
// ends in the same write, each app session with a back-channel logout
// token carrying sid, which the leader's sender delivers from the
// replicated outbox.
func (a *api) deleteIdentityProvider(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	if _, ok := a.apply(w, r, gated(fsm.MustCommand(fsm.TypeDeleteIdentityProvider, fsm.DeleteIdentityProvider{ID: id, At: a.now()}))); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listIdentities is a person's links, in id order.
func (a *api) listIdentities(w http.ResponseWriter, r *http.Request) {
	u, ok := a.pathUser(w, r)
	if !ok {
		return
	}
	ids, err := a.State.Identities(u.ID)
	if err != nil {
		a.unavailable(w, r, "read state", err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		Data []Identity `json:"data"`
	}{mapSlice(ids, identityOut)})
}

// unlinkIdentity removes one of a person's links; every SSO session opened
// through it ends in the same write, with back-channel logout tokens
// carrying sid. An administrator's unlink is not refused when it leaves
// the person no other way in (a person's own, on /account, is): it is how
// an account taken over at the upstream is cut loose.
func (a *api) unlinkIdentity(w http.ResponseWriter, r *http.Request) {
	userID, ok := pathUUID(w, r)
	if !ok {
		return
	}
	identityID := r.PathValue("identity_id")
	if !isUUID(identityID) {
		writeInvalid(w, r, []httpx.Detail{{Field: "identity_id", Message: "must be a UUID", Code: codeInvalidUUID}})
		return
	}
	identityID = strings.ToLower(identityID)
	ev := adminEvent(r)
	ev.Detail["identity_id"] = identityID
	cmd := gated(fsm.MustCommand(fsm.TypeUnlinkIdentity, fsm.UnlinkIdentity{UserID: userID, IdentityID: identityID, At: a.now()}))
	if _, ok := a.applyAs(w, r, cmd, ev); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
