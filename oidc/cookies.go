package oidc

import (
	"net/http"
	"time"

	"github.com/oidcd/oidcd/internal/authn"
)

// Cookies of the authorization flow; their names and flags are
// internal/authn's, shared with the sign-in pages (package signin).
const (
	cookieSession   = authn.SessionCookie
	cookieAuthz     = authn.AuthzCookie
	cookieCSRF      = authn.CSRFCookie
	authzCookiePath = authn.AuthzCookiePath
)

// SessionCookie is the name of the SSO cookie; package logout reads it to
// find the browser's session.
const SessionCookie = authn.SessionCookie

// CookieName is the name a browser holds cookie name of path under
// (authn.CookieName: __Host- and __Secure- prefixes on an https issuer).
func CookieName(name, path string, secure bool) string { return authn.CookieName(name, path, secure) }

// setCookie sets an HttpOnly, SameSite=Lax cookie, Secure when the issuer
// is https. A zero expires makes a browser-session cookie.
func (p *Provider) setCookie(w http.ResponseWriter, name, value, path string, expires time.Time) {
	p.jar.Set(w, name, value, path, expires)
}

// clearCookie tells the browser to drop a cookie.
func (p *Provider) clearCookie(w http.ResponseWriter, name, path string) { p.jar.Clear(w, name, path) }

// cookieValue is the value of the first cookie called name (of path), ""
// if none.
func (p *Provider) cookieValue(r *http.Request, name, path string) string {
	return p.jar.Value(r, name, path)
}
