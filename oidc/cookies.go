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
	// pages, whose query has only q, after and before.
	cookieAuthz = "oidcd_authz"
	// cookieCSRF is the double-submit CSRF token.
	cookieCSRF = "oidcd_csrf"

	authzCookiePath = "/authorize"
)

// CookieName is the name a browser holds cookie name of path under. On an
// https issuer a cookie of path / gets the __Host- prefix, which browsers
// accept only Secure, without Domain and with path /, so a sibling
// subdomain can neither plant nor shadow it; a cookie of another path gets
// __Secure-. On an http issuer (loopback, development) names stay plain.
func CookieName(name, path string, secure bool) string {
	switch {
	case !secure:
		return name
	case path == "/":
		return "__Host-" + name
	}
	return "__Secure-" + name
}

func (p *Provider) cookieName(name, path string) string { return CookieName(name, path, p.secure) }

// setCookie sets an HttpOnly, SameSite=Lax cookie, Secure when the issuer
// is https. A zero expires makes a browser-session cookie.
func (p *Provider) setCookie(w http.ResponseWriter, name, value, path string, expires time.Time) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the issuer scheme (an http issuer is for loopback and development; TestSecureCookies)
	http.SetCookie(w, &http.Cookie{
		Name: p.cookieName(name, path), Value: value, Path: path, Expires: expires,
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
	})
}

// clearCookie tells the browser to drop a cookie.
func (p *Provider) clearCookie(w http.ResponseWriter, name, path string) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the issuer scheme (an http issuer is for loopback and development; TestSecureCookies)
	http.SetCookie(w, &http.Cookie{
		Name: p.cookieName(name, path), Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
	})
}

// cookieValue is the value of the first cookie called name (of path), ""
// if none.
func (p *Provider) cookieValue(r *http.Request, name, path string) string {
	c, err := r.Cookie(p.cookieName(name, path))
	if err != nil {
		return ""
	}
	return c.Value
}
