package federation

import (
	"net/url"
	"slices"
	"strings"
)

// DefaultScopes are the scopes asked for when an Upstream names none: the
// ID token then carries the subject, the address and the name a first
// sign-in needs.
var DefaultScopes = []string{"openid", "email", "profile"}

// maxClientID bounds the client id the configuration may hold; a longer
// one is a mistake, not an id (Entra's are 36 characters, Google's ~72).
const maxClientID = 1024

// Upstream is one registered upstream OpenID provider, as plain
// configuration: the caller reads it from its own records, unsealing the
// secret, and hands it in with each call.
type Upstream struct {
	// Issuer is the upstream's issuer identifier, exactly as its discovery
	// document and its tokens give it: https, or http at a loopback host
	// (127.0.0.1, ::1, localhost) for tests and development.
	Issuer string
	// ClientID and ClientSecret are the credentials the upstream gave
	// oidcd. An empty ClientSecret makes oidcd a public client there (PKCE
	// only, the client id in the token request's body).
	ClientID     string
	ClientSecret string
	// Scopes are asked for at the authorization endpoint; none means
	// DefaultScopes. openid is added when missing: without it there is no
	// ID token.
	Scopes []string
}

// Validate checks the configuration alone, without asking the upstream:
// the issuer's form, a client id, scopes that are scope tokens (RFC 6749
// 3.3). The admin API may call it on registration; every call of a Client
// calls it too. Its errors match ErrConfig.
func (u Upstream) Validate() error {
	if _, err := checkIssuer(u.Issuer); err != nil {
		return err
	}
	if u.ClientID == "" || len(u.ClientID) > maxClientID {
		return configf("client_id must hold 1 to %d bytes", maxClientID)
	}
	for _, s := range u.Scopes {
		if !scopeToken(s) {
			return configf("scope %q is not a scope token", s)
		}
	}
	return nil
}

// scopes is what is asked for: the configured scopes (or the defaults),
// with openid first when it was missing.
func (u Upstream) scopes() string {
	s := u.Scopes
	if len(s) == 0 {
		s = DefaultScopes
	}
	if !slices.Contains(s, "openid") {
		s = append([]string{"openid"}, s...)
	}
	return strings.Join(s, " ")
}

// scopeToken reports whether s is a scope-token of RFC 6749 3.3:
// printable ASCII but space, '"' and '\'.
func scopeToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// checkIssuer parses an issuer: an absolute https URL with a host and no
// query, fragment or user info (OpenID Connect Discovery 1.0, 2), or http
// at a loopback host. It returns the parsed URL.
func checkIssuer(issuer string) (*url.URL, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, configf("issuer %q is not a URL", issuer)
	}
	if u.Host == "" || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(issuer, "#") {
		return nil, configf("issuer %q must be an absolute URL with a host and no user info, query or fragment", issuer)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopbackHost(u.Hostname()):
	default:
		return nil, configf("issuer %q must be https (http only at 127.0.0.1, ::1 or localhost)", issuer)
	}
	return u, nil
}

// loopbackHost reports whether host (without port or brackets) is one of
// the loopback names plain http is allowed at. Only these three: an
// address like 127.0.0.2 is loopback too, but nobody registers one by
// mistake for a development upstream, and a short list is easy to audit.
func loopbackHost(host string) bool {
	return host == "127.0.0.1" || host == "::1" || strings.EqualFold(host, "localhost")
}

// checkEndpoint checks a URL of the discovery document: absolute, no
// fragment or user info, https, or http at a loopback host when the
// issuer itself is http at a loopback host (a development upstream
// serves all its endpoints the same way; a production one never gets
// plain http, whatever its document says).
func checkEndpoint(name, raw string, issuerHTTP bool) (*url.URL, error) {
	if raw == "" {
		return nil, invalidf("discovery document has no %s", name)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" || u.User != nil || u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, invalidf("discovery document's %s %q is not an absolute URL without user info or fragment", name, cleanText(raw, 256))
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && issuerHTTP && loopbackHost(u.Hostname()):
	default:
		return nil, invalidf("discovery document's %s %q must be https", name, cleanText(raw, 256))
	}
	return u, nil
}
