package oidc

import (
	"net/http"
	"time"
)

// Cookies of the sign-in pages.
const (
	// cookieSession holds the SSO session secret (newID); the store keeps
	// only hashToken of it.
	cookieSession = SessionCookie
	// cookieAuthz carries the sealed pending request to the picker's GET
	// pages, whose query has only q, after and before (SPEC.md 4.4).
	cookieAuthz = "oidcd_authz"
	// cookieCSRF is the double-submit CSRF token.
	cookieCSRF = "oidcd_csrf"

	authzCookiePath = "/authorize"
)

// setCookie sets an HttpOnly, SameSite=Lax cookie, Secure when the issuer
// is https. A zero expires makes a browser-session cookie.
func (p *Provider) setCookie(w http.ResponseWriter, name, value, path string, expires time.Time) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the issuer scheme (an http issuer is for loopback and development; TestSecureCookies)
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: path, Expires: expires,
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
	})
}

// clearCookie tells the browser to drop a cookie.
func (p *Provider) clearCookie(w http.ResponseWriter, name, path string) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the issuer scheme (an http issuer is for loopback and development; TestSecureCookies)
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
	})
}

// cookieValue is the value of the first cookie called name, "" if none.
func cookieValue(r *http.Request, name string) string {
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}
