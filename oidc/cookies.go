package oidc

import (
	"net/http"
	"time"

	"github.com/oidcd/oidcd/session"
)

// Cookies of the authorization flow: their names and flags are package
// session's, which node hands to the flow, the sign-in and logout alike.
const (
	cookieSession   = session.SSOCookie
	cookieAuthz     = session.AuthzCookie
	cookieCSRF      = session.CSRFCookie
	authzCookiePath = session.AuthzCookiePath
)

// setCookie sets an HttpOnly, SameSite=Lax cookie, Secure when the issuer
// is https (session.Manager.SetCookie). A zero expires makes a
// browser-session cookie.
func (p *Provider) setCookie(w http.ResponseWriter, name, value, path string, expires time.Time) {
	p.sessions.SetCookie(w, name, value, path, expires)
}

// clearCookie tells the browser to drop a cookie.
func (p *Provider) clearCookie(w http.ResponseWriter, name, path string) {
	p.sessions.ClearCookie(w, name, path)
}

// cookieValue is the value of the first cookie called name (of path), ""
// if none.
func (p *Provider) cookieValue(r *http.Request, name, path string) string {
	return p.sessions.Cookie(r, name, path)
}
