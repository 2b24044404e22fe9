package admin

import (
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/redirect"
)

// Detail codes of VALIDATION_ERROR.
const (
	codeRequired    = "required"
	codeInvalid     = "invalid"
	codeTooLong     = "too_long"
	codeTooShort    = "too_short"
	codeTooMany     = "too_many"
	codeOutOfRange  = "out_of_range"
	codeInvalidUUID = "invalid_uuid"
	codeInvalidURI  = "invalid_uri"
	codeImmutable   = "immutable"
)

// Limits of the inputs.
const (
	maxSlug          = 63
	maxName          = 200
	maxEmail         = 254
	minPassword      = password.MinLength
	maxPassword      = password.MaxLength
	maxRedirectURIs  = 20
	maxURI           = 2048
	maxClientID      = 128
	maxOrganizations = 100
	minTTL           = 60
	maxTTL           = 86400
	defaultTTL       = 600
)

// problems collects every field problem of one request.
type problems []httpx.Detail

func (p *problems) add(field, code, format string, args ...any) {
	*p = append(*p, httpx.Detail{Field: field, Code: code, Message: fmt.Sprintf(format, args...)})
}

// writeInvalid answers 400 VALIDATION_ERROR with details.
func writeInvalid(w http.ResponseWriter, r *http.Request, d []httpx.Detail) {
	httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeValidation, "invalid request", d...)
}

func (p *problems) slug(field, s string) {
	switch {
	case s == "":
		p.add(field, codeRequired, "is required")
	case len(s) > maxSlug:
		p.add(field, codeTooLong, "must be at most %d characters", maxSlug)
	case strings.TrimLeft(s, "abcdefghijklmnopqrstuvwxyz0123456789-") != "":
		p.add(field, codeInvalid, "may hold only lowercase letters, digits and hyphens")
	}
}

func (p *problems) name(field, s string) {
	switch {
	case strings.TrimSpace(s) == "":
		p.add(field, codeRequired, "is required")
	case utf8.RuneCountInString(s) > maxName:
		p.add(field, codeTooLong, "must be at most %d characters", maxName)
	case strings.ContainsFunc(s, isControl):
		p.add(field, codeInvalid, "must not hold control characters")
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// email accepts a bare address (no display name, no angle brackets) that
// net/mail can parse.
func (p *problems) email(field, s string) {
	switch {
	case s == "":
		p.add(field, codeRequired, "is required")
	case len(s) > maxEmail:
		p.add(field, codeTooLong, "must be at most %d bytes", maxEmail)
	default:
		a, err := mail.ParseAddress(s)
		if err != nil || a.Address != s || !strings.Contains(s, "@") {
			p.add(field, codeInvalid, "must be an email address")
		}
	}
}

// phone accepts E.164: "+" then 8 to 15 digits, the first not 0. Empty
// means none.
func (p *problems) phone(field, s string) {
	if s == "" {
		return
	}
	digits, ok := strings.CutPrefix(s, "+")
	if !ok || len(digits) < 8 || len(digits) > 15 || digits[0] == '0' ||
		strings.TrimLeft(digits, "0123456789") != "" {
		p.add(field, codeInvalid, "must be an E.164 number: + and 8 to 15 digits")
	}
}

func (p *problems) password(field, s string) {
	switch {
	case len(s) < minPassword:
		p.add(field, codeTooShort, "must be at least %d bytes", minPassword)
	case len(s) > maxPassword:
		p.add(field, codeTooLong, "must be at most %d bytes", maxPassword)
	}
}

// uuid checks a required UUID and returns it in canonical lowercase form.
func (p *problems) uuid(field, s string) string {
	if s == "" {
		p.add(field, codeRequired, "is required")
		return s
	}
	if !isUUID(s) {
		p.add(field, codeInvalidUUID, "must be a UUID")
		return s
	}
	return strings.ToLower(s)
}

// isUUID accepts only the canonical 36-character form.
func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

func (p *problems) oneOf(field, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	p.add(field, codeInvalid, "must be one of %s", strings.Join(allowed, ", "))
}

// clientID accepts 1 to 128 of [A-Za-z0-9._-].
func validClientID(s string) bool {
	if s == "" || len(s) > maxClientID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// redirectURI checks a redirect URI of a client of application type
// appType ("" is web) by internal/redirect's rules, which the
// authorization and token endpoints match with.
func (p *problems) redirectURI(appType, field, s string) {
	if pr := redirect.Check(appType, s); pr != nil {
		p.add(field, pr.Code, "%s", pr.Message)
	}
}

// absURI checks an absolute http(s) URI with a host, no fragment and no user
// info.
func (p *problems) absURI(field, s string) (*url.URL, bool) {
	if len(s) > maxURI {
		p.add(field, codeTooLong, "must be at most %d bytes", maxURI)
		return nil, false
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Opaque != "":
		p.add(field, codeInvalidURI, "must be an absolute URI")
	case u.Scheme != "https" && u.Scheme != "http":
		p.add(field, codeInvalidURI, "must use http or https")
	case u.Host == "" || u.Hostname() == "":
		p.add(field, codeInvalidURI, "must name a host")
	case u.Fragment != "" || strings.Contains(s, "#"):
		p.add(field, codeInvalidURI, "must not have a fragment")
	case u.User != nil:
		p.add(field, codeInvalidURI, "must not hold user info")
	default:
		return u, true
	}
	return nil, false
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() && (ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback))
}
