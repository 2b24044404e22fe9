package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/ratelimit"
)

// Scopes a client may register.
var allowedScopes = []string{"openid", "email", "profile"}

// Client is a registration as the API shows it. ClientSecret is set only in
// the answer that creates a confidential client; the stored hash never
// leaves the state.
type Client struct {
	ClientID             string    `json:"client_id"`
	ClientSecret         string    `json:"client_secret,omitempty"`
	Name                 string    `json:"name"`
	Type                 string    `json:"type"`
	RedirectURIs         []string  `json:"redirect_uris"`
	Scopes               []string  `json:"scopes"`
	OrganizationID       string    `json:"organization_id"`
	MultiOrganization    bool      `json:"multi_organization"`
	Organizations        []string  `json:"organizations"`
	AccessTokenTTL       int64     `json:"access_token_ttl"`
	BackchannelLogoutURI string    `json:"backchannel_logout_uri,omitempty"`
	SkipConsent          bool      `json:"skip_consent"`
	Suspended            bool      `json:"suspended"`
	RateLimit            string    `json:"rate_limit,omitempty"` // absent: the node's --rate-limit
	ApplicationType      string    `json:"application_type"`     // web or native
	WebOrigins           []string  `json:"web_origins"`          // the effective list: the default when the registration names none
	WebOriginsDefault    bool      `json:"web_origins_default"`  // the registration names none: WebOrigins follows the redirect URIs
	CreatedAt            time.Time `json:"created_at"`
	UpdatedAt            time.Time `json:"updated_at"`
}

func clientOut(c fsm.Client) Client {
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return Client{
		ClientID:             c.ID,
		Name:                 c.Name,
		Type:                 c.Type,
		RedirectURIs:         orEmpty(c.RedirectURIs),
		Scopes:               orEmpty(c.Scopes),
		OrganizationID:       c.OrganizationID,
		MultiOrganization:    c.MultiOrganization,
		Organizations:        orEmpty(c.Organizations),
		AccessTokenTTL:       c.AccessTokenTTL,
		BackchannelLogoutURI: c.BackchannelLogoutURI,
		SkipConsent:          c.SkipConsent,
		Suspended:            c.Suspended,
		RateLimit:            c.RateLimit,
		ApplicationType:      applicationType(c),
		WebOrigins:           effectiveOrigins(c),
		WebOriginsDefault:    !c.WebOriginsSet,
		CreatedAt:            c.CreatedAt,
		UpdatedAt:            c.UpdatedAt,
	}
}

// clientBody is the body of POST and PATCH /clients; absent fields are nil.
// ClientSecret exists only to reject it with a clear detail rather than as
// an unknown field.
type clientBody struct {
	ClientID             *string          `json:"client_id"`
	ClientSecret         *json.RawMessage `json:"client_secret"`
	Name                 *string          `json:"name"`
	Type                 *string          `json:"type"`
	RedirectURIs         *[]string        `json:"redirect_uris"`
	Scopes               *[]string        `json:"scopes"`
	OrganizationID       *string          `json:"organization_id"`
	MultiOrganization    *bool            `json:"multi_organization"`
	Organizations        *[]string        `json:"organizations"`
	AccessTokenTTL       *int64           `json:"access_token_ttl"`
	BackchannelLogoutURI *string          `json:"backchannel_logout_uri"` // "" removes it
	SkipConsent          *bool            `json:"skip_consent"`
	Suspended            *bool            `json:"suspended"`
	RateLimit            *string          `json:"rate_limit"` // "" removes it
	ApplicationType      *string          `json:"application_type"`
	WebOrigins           optOrigins       `json:"web_origins"` // absent keeps, null is the default, [] none
}

// mergeInto copies the given mutable fields onto c (client_id and type are
// the caller's business).
func (b *clientBody) mergeInto(c *fsm.Client) {
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	setList := func(dst *[]string, src *[]string) {
		if src != nil {
			*dst = slices.Clone(*src)
		}
	}
	setBool := func(dst *bool, src *bool) {
		if src != nil {
			*dst = *src
		}
	}
	set(&c.Name, b.Name)
	setList(&c.RedirectURIs, b.RedirectURIs)
	setList(&c.Scopes, b.Scopes)
	set(&c.OrganizationID, b.OrganizationID)
	setBool(&c.MultiOrganization, b.MultiOrganization)
	setList(&c.Organizations, b.Organizations)
	if b.AccessTokenTTL != nil {
		c.AccessTokenTTL = *b.AccessTokenTTL
	}
	set(&c.BackchannelLogoutURI, b.BackchannelLogoutURI)
	setBool(&c.SkipConsent, b.SkipConsent)
	setBool(&c.Suspended, b.Suspended)
	set(&c.RateLimit, b.RateLimit)
	b.mergeApps(c)
}

// checkClient validates a complete registration (a new one with defaults
// filled in, or a stored one with a patch merged) and normalizes it: UUIDs
// lowercased, duplicate list entries dropped, web origins as browsers
// write them. b is the body merged into c, for what only it still holds
// (an application_type that is neither web nor native).
func checkClient(p *problems, b *clientBody, c *fsm.Client) {
	if !validClientID(c.ID) {
		if len(c.ID) > maxClientID {
			p.add("client_id", codeTooLong, "must be at most %d characters", maxClientID)
		} else {
			p.add("client_id", codeInvalid, "must be 1 to %d of the characters A-Z a-z 0-9 . _ -", maxClientID)
		}
	} else if strings.EqualFold(c.ID, ClientID) {
		// The provider's own client (console and CLI sign-in) exists on
		// every node without being stored; a stored one of that name
		// would never be used, only confuse the list.
		p.add("client_id", codeInvalid, "%s is the provider's own client", ClientID)
	}
	p.name("name", c.Name)
	p.oneOf("type", c.Type, fsm.ClientConfidential, fsm.ClientPublic)
	p.checkApps(b, c)

	switch {
	case len(c.RedirectURIs) == 0:
		p.add("redirect_uris", codeRequired, "must hold at least one URI")
	case len(c.RedirectURIs) > maxRedirectURIs:
		p.add("redirect_uris", codeTooMany, "must hold at most %d URIs", maxRedirectURIs)
	default:
		for i, u := range c.RedirectURIs {
			p.redirectURI(c.ApplicationType, fmt.Sprintf("redirect_uris[%d]", i), u)
		}
	}
	c.RedirectURIs = dedupe(c.RedirectURIs)

	if len(c.Scopes) == 0 {
		p.add("scopes", codeRequired, "must hold at least one scope")
	}
	for i, s := range c.Scopes {
		if !slices.Contains(allowedScopes, s) {
			p.add(fmt.Sprintf("scopes[%d]", i), codeInvalid, "must be one of openid, email, profile")
		}
	}
	c.Scopes = dedupe(c.Scopes)

	c.OrganizationID = p.uuid("organization_id", c.OrganizationID)
	switch {
	case len(c.Organizations) > 0 && !c.MultiOrganization:
		p.add("organizations", codeInvalid, "only allowed when multi_organization is true")
	case len(c.Organizations) > maxOrganizations:
		p.add("organizations", codeTooMany, "must hold at most %d organizations", maxOrganizations)
	default:
		for i := range c.Organizations {
			c.Organizations[i] = p.uuid(fmt.Sprintf("organizations[%d]", i), c.Organizations[i])
		}
	}
	c.Organizations = dedupe(c.Organizations)

	if c.AccessTokenTTL < minTTL || c.AccessTokenTTL > maxTTL {
		p.add("access_token_ttl", codeOutOfRange, "must be between %d and %d seconds", minTTL, maxTTL)
	}
	if c.BackchannelLogoutURI != "" {
		p.backchannelURI("backchannel_logout_uri", c.BackchannelLogoutURI)
	}
	c.RateLimit = p.rateLimit("rate_limit", c.RateLimit, c.Type)
}

// backchannelURI checks a back-channel logout URI, whoever sets it: an
// absolute http or https URI naming a host (absURI), never an IP address
// no receiver lives at (undeliverable). The leader POSTs logout tokens to
// it and follows no redirect (package logout); an org_admin's choice is
// narrowed further by delegatedBackchannelURI.
func (p *problems) backchannelURI(field, s string) {
	u, ok := p.absURI(field, s)
	if !ok {
		return
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && undeliverable(ip) {
		p.add(field, codeInvalidURI, "must not be an unspecified, link-local, multicast or broadcast address: no receiver lives there (169.254.169.254 is a cloud's metadata service)")
	}
}

// undeliverable reports whether ip is an address no back-channel receiver
// lives at: unspecified, link-local (169.254.0.0/16, where clouds serve
// instance metadata, and fe80::/10), multicast or the broadcast address,
// also written as an IPv4-mapped or NAT64 (64:ff9b::/96) IPv6 address.
func undeliverable(ip netip.Addr) bool {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	return ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// nat64 is the well-known NAT64 prefix (RFC 6052), which embeds an IPv4
// address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// reservedSuffixes are the names that mean this host or the local
// network wherever they are resolved: localhost (RFC 6761), mDNS's .local
// (RFC 6762), .home.arpa (RFC 8375) and the rest of .arpa (reverse
// lookups), .internal (ICANN's private-use name) and .localdomain.
var reservedSuffixes = []string{"localhost", "local", "arpa", "internal", "localdomain"}

// delegatedBackchannelURI is what an org_admin may set as a back-channel
// logout URI beyond backchannelURI: https, at a DNS name of at least two
// labels, written plainly (lowercase ASCII letters, digits and hyphens;
// no trailing dot, no all-digit last label, which some resolvers read as
// a number), that is not an IP address and not one of reservedSuffixes.
// https is what keeps the leader's POST off the site's own network: a
// name the org_admin points at an internal address gets a TLS handshake
// that fails there, since nothing inside presents a certificate for that
// name that the leader's roots trust. An admin may set any address
// backchannelURI takes (a receiver on a private network, or plain http).
func (p *problems) delegatedBackchannelURI(field, s string) {
	u, err := url.Parse(s)
	if err != nil {
		return // backchannelURI said so
	}
	const why = "an org_admin may set only an https URI at a public DNS name (not an IP address, localhost, a name of one label, or a .local, .internal, .localdomain or .arpa name); ask an admin for another address"
	host := strings.ToLower(u.Hostname())
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	switch {
	case u.Scheme != "https":
		p.add(field, codeInvalidURI, "must use https: %s", why)
	case !plainHostName(host) || len(labels) < 2 || strings.Trim(last, "0123456789") == "":
		p.add(field, codeInvalidURI, "must name a host by a DNS name: %s", why)
	case slices.Contains(reservedSuffixes, last):
		p.add(field, codeInvalidURI, "must name a public host: %s", why)
	}
}

// plainHostName reports whether host is a DNS name written plainly:
// labels of 1 to 63 ASCII letters (lowercased by the caller), digits and hyphens, neither
// starting nor ending with a hyphen, at most 253 bytes in all.
func plainHostName(host string) bool {
	if host == "" || len(host) > 253 {
		return false
	}
	for _, l := range strings.Split(host, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// checkDelegated adds the problems of the fields an org_admin sets more
// narrowly than an admin, where r's credential is not an admin's: its
// back-channel logout URI, when it is new (before is the stored one; an
// address an admin chose stays when an org_admin changes something else).
func checkDelegated(r *http.Request, p *problems, c fsm.Client, before string) {
	if credentialOf(r).Role == RoleAdmin || c.BackchannelLogoutURI == "" || c.BackchannelLogoutURI == before {
		return
	}
	p.delegatedBackchannelURI("backchannel_logout_uri", c.BackchannelLogoutURI)
}

// rateLimitForm is the form of a client's own rate limit, as
// docs/openapi/admin.json gives it: digits, "/", and a duration of
// time.ParseDuration without sign or spaces.
var rateLimitForm = regexp.MustCompile(`^[0-9]+/([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`)

// Bounds of a client's own rate limit. 10,000 requests a window keeps one
// key of the cluster's limiter under 80 KB; a window of at most a day
// keeps a key from being remembered for longer.
const (
	maxRateLimitN   = 10_000
	minRateLimitPer = time.Second
	maxRateLimitPer = 24 * time.Hour
)

// rateLimit checks a client's own rate limit (its rate_limit field):
// empty (the node's --rate-limit), or "N/duration" within the bounds
// above, for a confidential client. It returns the form stored: spaces
// trimmed and N in plain digits ("20/60s").
func (p *problems) rateLimit(field, s, clientType string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	const form = "must be N/duration, such as 600/60s (N requests per client address in any window of that duration), or empty for the node's --rate-limit"
	lim, err := ratelimit.ParseLimit(s)
	switch {
	case s == "off":
		p.add(field, codeInvalid, "cannot be off for one client: give a higher N instead, or empty for the node's --rate-limit")
	case err != nil || !rateLimitForm.MatchString(s):
		p.add(field, codeInvalid, form)
	case lim.N > maxRateLimitN:
		p.add(field, codeOutOfRange, "N must be between 1 and %d", maxRateLimitN)
	case lim.Per < minRateLimitPer || lim.Per > maxRateLimitPer:
		p.add(field, codeOutOfRange, "the duration must be between %v and %v", minRateLimitPer, maxRateLimitPer)
	case clientType != fsm.ClientConfidential:
		// The limit of its own applies once the client proves who it is
		// (oidc/ratelimit.go): a public client has no secret to prove it.
		p.add(field, codeInvalid, "only a confidential client can have a rate limit of its own: a public client has no secret to prove that a request is its own")
	default:
		_, per, _ := strings.Cut(s, "/")
		return strconv.Itoa(lim.N) + "/" + per
	}
	return s
}

// dedupe drops repeated entries, keeping the first of each; nil stays nil
// and an empty list becomes nil.
func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func (a *api) createClient(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b clientBody
	if !decode(w, r, &b) {
		return
	}
	var id string
	if b.ClientID == nil {
		id = a.createID(r, key)
	} else {
		key = "" // a client_id of its own identifies the client: a retry meets 409 on it
	}
	c, p := newClient(&b, id)
	checkDelegated(r, &p, c, "")
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	var secret string
	if c.Type == fsm.ClientConfidential {
		secret = randomString()
		c.SecretHash = password.HashSecret(secret)
	}
	c.CreatedAt = a.now()
	c.UpdatedAt = c.CreatedAt
	rp := &replay{key: key, id: c.ID, read: func() (any, bool, error) {
		got, err := a.State.Client(c.ID)
		return clientOut(got), got.Name == c.Name && got.Type == c.Type && got.OrganizationID == c.OrganizationID &&
			slices.Equal(got.RedirectURIs, c.RedirectURIs), err
	}}
	if c.Type == fsm.ClientConfidential {
		// Only the secret's hash is kept: a retry cannot show it again.
		rp.shownOnce = func(id string) string {
			return shownOnceMessage("client", id, "client_secret", "there is no other way to a new secret than to delete the client (DELETE /admin/v1/clients/"+
				id+") and create it again, which makes a new client_id unless the body gives one")
		}
	}
	r, rp = withReplay(r, rp)
	if _, ok := a.applyCreate(w, r, nameAppsFeature(fsm.MustCommand(fsm.TypeCreateClient, fsm.PutClient{Client: c, Create: true})), rp); !ok {
		return
	}
	out := clientOut(c)
	out.ClientSecret = secret
	httpx.WriteJSON(w, http.StatusCreated, out)
}

// newClient is the registration the body of POST /clients makes, its
// defaults filled in, checked and normalized (checkClient); id is its
// client_id when the body gives none.
func newClient(b *clientBody, id string) (fsm.Client, problems) {
	var p problems
	if b.ClientSecret != nil {
		p.add("client_secret", codeImmutable, "is generated for confidential clients and cannot be set")
	}
	c := fsm.Client{
		ID:             deref(b.ClientID),
		Type:           fsm.ClientConfidential,
		Scopes:         []string{"openid"},
		AccessTokenTTL: defaultTTL,
	}
	if b.ClientID == nil {
		c.ID = id
	}
	if b.Type != nil {
		c.Type = *b.Type
	}
	b.mergeInto(&c)
	checkClient(&p, b, &c)
	return c, p
}

// pathClientID reads the {id} path value, a client_id.
func pathClientID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !validClientID(id) {
		writeInvalid(w, r, []httpx.Detail{{Field: "id", Code: codeInvalid,
			Message: fmt.Sprintf("must be a client_id: 1 to %d of A-Z a-z 0-9 . _ -", maxClientID)}})
		return "", false
	}
	return id, true
}

// listClients lists the registrations; an org_admin's, those that belong
// to its organization (as owner or served).
func (a *api) listClients(w http.ResponseWriter, r *http.Request) {
	read := a.State.Clients
	if org := orgScope(r); org != "" {
		read = func(pg fsm.Page) ([]fsm.Client, int, error) {
			return a.State.ClientsWhere(func(c fsm.Client) bool { return clientScope(c).has(org) }, pg)
		}
	}
	serveList(a, w, r, read, clientOut)
}

func (a *api) getClient(w http.ResponseWriter, r *http.Request) {
	id, ok := pathClientID(w, r)
	if !ok {
		return
	}
	c, err := a.State.Client(id)
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, clientOut(c))
}

// updateClient merges the given fields into the stored registration. The
// command carries the updated_at that was read, so a concurrent change in
// between makes the state machine refuse it (409) instead of being lost.
func (a *api) updateClient(w http.ResponseWriter, r *http.Request) {
	id, ok := pathClientID(w, r)
	if !ok {
		return
	}
	var b clientBody
	if !decode(w, r, &b) {
		return
	}
	cur, err := a.State.Client(id)
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	var p problems
	if b.ClientSecret != nil {
		p.add("client_secret", codeImmutable, "cannot be changed")
	}
	if b.ClientID != nil && *b.ClientID != cur.ID {
		p.add("client_id", codeImmutable, "cannot be changed")
	}
	if b.Type != nil && *b.Type != cur.Type {
		p.add("type", codeImmutable, "cannot be changed")
	}
	next := cur
	next.RedirectURIs = slices.Clone(cur.RedirectURIs)
	next.Scopes = slices.Clone(cur.Scopes)
	next.Organizations = slices.Clone(cur.Organizations)
	next.WebOrigins = slices.Clone(cur.WebOrigins)
	b.mergeInto(&next)
	checkClient(&p, &b, &next)
	checkDelegated(r, &p, next, cur.BackchannelLogoutURI)
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	// updated_at must move even if the clock did not, or the next writer's
	// expectation could not tell the versions apart.
	next.UpdatedAt = a.now()
	if !next.UpdatedAt.After(cur.UpdatedAt) {
		next.UpdatedAt = cur.UpdatedAt.Add(time.Nanosecond)
	}
	cmd := fsm.PutClient{Client: next, ExpectUpdatedAt: cur.UpdatedAt}
	res, ok := a.apply(w, r, nameAppsFeature(fsm.MustCommand(fsm.TypeUpdateClient, cmd)))
	if !ok {
		return
	}
	c, err := valueOr(res, func() (fsm.Client, error) { return a.State.Client(id) })
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, clientOut(c))
}

func (a *api) deleteClient(w http.ResponseWriter, r *http.Request) {
	id, ok := pathClientID(w, r)
	if !ok {
		return
	}
	if _, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeDeleteClient, fsm.DeleteClient{ID: id})); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
