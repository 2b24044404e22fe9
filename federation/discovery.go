package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The signing algorithms an upstream's tokens may use. RS256 is what every
// provider supports (and OpenID Connect requires), PS256 and ES256 are
// what newer ones offer. none and HS* are refused always: an HMAC "key" of
// an upstream would be our client secret, which a token could then be
// forged with by anyone who knows it, and none is no signature.
var allowedAlgs = []string{"RS256", "PS256", "ES256"}

// Metadata is what an upstream's discovery document says that this
// package uses, checked. A Metadata returned is the caller's own copy.
type Metadata struct {
	Issuer                string
	AuthorizationEndpoint string
	TokenEndpoint         string
	JWKSURI               string
	// EndSessionEndpoint is "" when the upstream offers no RP-initiated
	// logout.
	EndSessionEndpoint string
	// UserinfoEndpoint is "" when the upstream names none; it is asked for
	// the address when the ID token carries none (an oidcd upstream puts
	// it in userinfo only).
	UserinfoEndpoint string
	// TokenEndpointAuthMethods is token_endpoint_auth_methods_supported
	// (nil when absent, which means client_secret_basic).
	TokenEndpointAuthMethods []string
	// IDTokenSigningAlgs is id_token_signing_alg_values_supported.
	IDTokenSigningAlgs []string
	// IssParameter is authorization_response_iss_parameter_supported
	// (RFC 9207): when true, an authorization response without iss is
	// refused.
	IssParameter bool
	// BackchannelLogout and BackchannelLogoutSession are
	// backchannel_logout_supported and backchannel_logout_session_supported,
	// for the admin API to show whether a registered back-channel logout
	// can work.
	BackchannelLogout        bool
	BackchannelLogoutSession bool
}

func (m *Metadata) clone() *Metadata {
	out := *m
	out.TokenEndpointAuthMethods = slices.Clone(m.TokenEndpointAuthMethods)
	out.IDTokenSigningAlgs = slices.Clone(m.IDTokenSigningAlgs)
	return &out
}

// Discover returns the upstream's checked discovery document, from the
// cache while it is fresh (see Options). The document is read from
// {issuer}/.well-known/openid-configuration and must name issuer exactly
// as configured (OpenID Connect Discovery 1.0, 4.3): a document that
// names another issuer would have us accept that issuer's tokens.
func (c *Client) Discover(ctx context.Context, issuer string) (*Metadata, error) {
	iu, err := checkIssuer(issuer)
	if err != nil {
		return nil, fmt.Errorf("federation: discovery: %w", err)
	}
	m, err := load(ctx, c, &c.discovery, issuer, false, func(ctx context.Context) (*Metadata, time.Duration, error) {
		a, err := c.getJSON(ctx, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration")
		if err != nil {
			return nil, 0, err
		}
		m, err := parseDiscovery(a.body, issuer, iu.Scheme == "http")
		if err != nil {
			return nil, 0, err
		}
		return m, maxAge(a.header), nil
	})
	if err != nil {
		return nil, fmt.Errorf("federation: discovery of %s: %w", issuer, err)
	}
	return m.clone(), nil
}

// parseDiscovery reads and checks a discovery document of issuer. Each
// check keeps out an upstream this client cannot use safely: endpoints
// over plain http would carry codes and tokens in the clear, an upstream
// without the code flow or without PKCE S256 cannot be asked the way we
// ask, and one that signs with none of our algorithms cannot be verified.
func parseDiscovery(body []byte, issuer string, issuerHTTP bool) (*Metadata, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, withKind(ErrInvalid, err, "discovery document is not a JSON object")
	}
	d := docReader{doc: doc}
	m := &Metadata{
		Issuer:                   d.str("issuer"),
		AuthorizationEndpoint:    d.str("authorization_endpoint"),
		TokenEndpoint:            d.str("token_endpoint"),
		JWKSURI:                  d.str("jwks_uri"),
		EndSessionEndpoint:       d.str("end_session_endpoint"),
		UserinfoEndpoint:         d.str("userinfo_endpoint"),
		TokenEndpointAuthMethods: d.strs("token_endpoint_auth_methods_supported"),
		IDTokenSigningAlgs:       d.strs("id_token_signing_alg_values_supported"),
		IssParameter:             d.boolean("authorization_response_iss_parameter_supported"),
		BackchannelLogout:        d.boolean("backchannel_logout_supported"),
		BackchannelLogoutSession: d.boolean("backchannel_logout_session_supported"),
	}
	responseTypes := d.strs("response_types_supported")
	challengeMethods := d.strs("code_challenge_methods_supported")
	if d.err != nil {
		return nil, d.err
	}
	if m.Issuer != issuer {
		return nil, invalidf("discovery document names issuer %q, not %q", cleanText(m.Issuer, 256), issuer)
	}
	for _, e := range []struct{ name, url string }{
		{"authorization_endpoint", m.AuthorizationEndpoint},
		{"token_endpoint", m.TokenEndpoint},
		{"jwks_uri", m.JWKSURI},
	} {
		if _, err := checkEndpoint(e.name, e.url, issuerHTTP); err != nil {
			return nil, err
		}
	}
	for _, e := range []struct{ name, url string }{
		{"end_session_endpoint", m.EndSessionEndpoint},
		{"userinfo_endpoint", m.UserinfoEndpoint},
	} {
		if e.url == "" {
			continue
		}
		if _, err := checkEndpoint(e.name, e.url, issuerHTTP); err != nil {
			return nil, err
		}
	}
	if !slices.Contains(responseTypes, "code") {
		return nil, invalidf("discovery document's response_types_supported lacks code")
	}
	if challengeMethods != nil && !slices.Contains(challengeMethods, "S256") {
		return nil, invalidf("discovery document's code_challenge_methods_supported lacks S256")
	}
	if !slices.ContainsFunc(m.IDTokenSigningAlgs, func(a string) bool { return slices.Contains(allowedAlgs, a) }) {
		return nil, invalidf("discovery document's id_token_signing_alg_values_supported holds none of %s", strings.Join(allowedAlgs, ", "))
	}
	return m, nil
}

// docReader reads members of a discovery document. A member this package
// relies on (a string, a list of strings) that has another type makes
// the document invalid; a boolean is true only for true or "true" (some
// providers send strings), anything else counts as false rather than
// refusing a document sign-ins depend on.
type docReader struct {
	doc map[string]json.RawMessage
	err error
}

func (d *docReader) str(name string) string {
	raw, ok := d.doc[name]
	if !ok || string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil && d.err == nil {
		d.err = invalidf("discovery document's %s is not a string", name)
	}
	return s
}

// strs is nil when the member is absent.
func (d *docReader) strs(name string) []string {
	raw, ok := d.doc[name]
	if !ok || string(raw) == "null" {
		return nil
	}
	var s []string
	if err := json.Unmarshal(raw, &s); err != nil && d.err == nil {
		d.err = invalidf("discovery document's %s is not a list of strings", name)
	}
	if s == nil {
		s = []string{}
	}
	return s
}

// boolean is true for true and for the string "true".
func (d *docReader) boolean(name string) bool {
	switch strings.TrimSpace(string(d.doc[name])) {
	case "true", `"true"`:
		return true
	}
	return false
}

// The ways of sending the client secret at the token endpoint (OpenID
// Connect Core 1.0, 9).
const (
	authBasic = "client_secret_basic"
	authPost  = "client_secret_post"
	authNone  = "none"
)

// authMethod chooses how the token request authenticates, from the
// upstream's token_endpoint_auth_methods_supported: client_secret_basic
// when the list is absent (its default) or holds it, client_secret_post
// when only that of the two is listed; none for a public client (no
// secret). An upstream that takes neither way of sending a secret (only
// private_key_jwt, say) cannot be used with one.
func authMethod(supported []string, secret string) (string, error) {
	switch {
	case secret == "":
		return authNone, nil
	case supported == nil || slices.Contains(supported, authBasic):
		return authBasic, nil
	case slices.Contains(supported, authPost):
		return authPost, nil
	}
	return "", invalidf("discovery document's token_endpoint_auth_methods_supported holds neither %s nor %s", authBasic, authPost)
}
