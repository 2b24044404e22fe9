package oidc

import (
	"crypto/subtle"
	"net/http"
	"time"
)

// CSRF protection of the sign-in forms is double-submit, bound to the step:
// the oidcd_csrf cookie, the csrf_token form field and the CSRF value sealed
// in the step must all be equal. A cross-site form can set none of the
// three; a step lifted from another browser carries that browser's token,
// which this browser's cookie does not match.

// isCSRFToken reports whether v has the shape of a token we issue (newID:
// 43 characters of base64url), so a junk cookie is replaced, not echoed.
func isCSRFToken(v string) bool {
	if len(v) != 43 {
		return false
	}
	b, err := challengeB64.DecodeString(v)
	return err == nil && len(b) == 32
}

// csrfToken returns this browser's CSRF token, setting a fresh cookie when
// it has none (or a malformed one).
func (p *Provider) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if v := p.cookieValue(r, cookieCSRF, "/"); isCSRFToken(v) {
		return v
	}
	v := newID()
	p.setCookie(w, cookieCSRF, v, "/", time.Time{})
	return v
}

// csrfMatch reports whether cookie, form field and sealed value are one
// non-empty token, in constant time.
func csrfMatch(cookie, field, sealed string) bool {
	if cookie == "" || field == "" || sealed == "" {
		return false
	}
	a := subtle.ConstantTimeCompare([]byte(cookie), []byte(field))
	b := subtle.ConstantTimeCompare([]byte(field), []byte(sealed))
	return a&b == 1
}

// rotateCSRF gives the browser a fresh CSRF token and returns it. It runs
// when a sign-in opens a session, so a token planted or seen before the
// sign-in cannot ride the new session (login CSRF, fixation).
func (p *Provider) rotateCSRF(w http.ResponseWriter) string {
	v := newID()
	p.setCookie(w, cookieCSRF, v, "/", time.Time{})
	return v
}
