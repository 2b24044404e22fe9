package session

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/seal"
)

// Cookies of the provider's pages.
const (
	// SSOCookie holds the SSO session secret (authn.NewID); the store
	// keeps only authn.HashToken of it.
	SSOCookie = "oidcd_session"
	// AuthzCookie carries the sealed pending request to the picker's GET
	// pages, whose query has only q, after and before.
	AuthzCookie = "oidcd_authz"
	// CSRFCookie is the double-submit CSRF token.
	CSRFCookie = "oidcd_csrf"

	AuthzCookiePath = authn.PathAuthorize
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

// Default lifetimes of an SSO session (node's --session-idle and
// --session-max).
const (
	DefaultIdle = 2 * time.Hour
	DefaultMax  = 12 * time.Hour
)

// Config wires the browser session to one node.
type Config struct {
	Issuer string // {base_url}: an https issuer gets Secure cookies
	State  *fsm.State
	// KEK opens the browser key (nil: stored with the clear marker, see
	// internal/kek).
	KEK *kek.KEK
	// Idle and Max bound an SSO session: it ends after Idle without a
	// sign-in, and Max after it began whatever happens (defaults
	// DefaultIdle, DefaultMax).
	Idle, Max time.Duration
}

// Manager is the browser session of one node: its cookies, the sealer of
// browser state and the browser key.
type Manager struct {
	state  *fsm.State
	kek    *kek.KEK
	secure bool
	sealer *sealer

	idle, max time.Duration
}

// New checks cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.State == nil {
		return nil, errors.New("session: State is required")
	}
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Host == "" {
		return nil, errors.New("session: Issuer must be an absolute URL")
	}
	if cfg.Idle == 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.Max == 0 {
		cfg.Max = DefaultMax
	}
	m := &Manager{state: cfg.State, kek: cfg.KEK, secure: u.Scheme == "https", idle: cfg.Idle, max: cfg.Max}
	m.sealer = &sealer{load: m.BrowserKey}
	return m, nil
}

// Lifetimes of an SSO session opened at now: it ends idle at idle (at
// most at end) and for good at end.
func (m *Manager) Lifetimes(now time.Time) (idle, end time.Time) {
	return m.IdleUntil(now, now.Add(m.max)), now.Add(m.max)
}

// IdleUntil is when a session used at now ends idle: Idle later, but
// never after its end.
func (m *Manager) IdleUntil(now, end time.Time) time.Time {
	idle := now.Add(m.idle)
	if end.Before(idle) {
		return end
	}
	return idle
}

// Secure reports whether the issuer is https: cookies are Secure.
func (m *Manager) Secure() bool { return m.secure }

// SetCookie sets an HttpOnly, SameSite=Lax cookie, Secure when the issuer
// is https. A zero expires makes a browser-session cookie.
func (m *Manager) SetCookie(w http.ResponseWriter, name, value, path string, expires time.Time) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the issuer scheme (an http issuer is for loopback and development; TestSecureCookies)
	http.SetCookie(w, &http.Cookie{
		Name: CookieName(name, path, m.secure), Value: value, Path: path, Expires: expires,
		HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteLaxMode,
	})
}

// ClearCookie tells the browser to drop a cookie.
func (m *Manager) ClearCookie(w http.ResponseWriter, name, path string) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the issuer scheme (an http issuer is for loopback and development; TestSecureCookies)
	http.SetCookie(w, &http.Cookie{
		Name: CookieName(name, path, m.secure), Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteLaxMode,
	})
}

// Cookie is the value of the first cookie called name (of path), "" if
// none.
func (m *Manager) Cookie(r *http.Request, name, path string) string {
	c, err := r.Cookie(CookieName(name, path, m.secure))
	if err != nil {
		return ""
	}
	return c.Value
}

// CSRF protection of the sign-in forms is double-submit, bound to the step
// (authn.CSRFMatch): the oidcd_csrf cookie, the csrf_token form field and
// the CSRF value sealed in the step must all be equal.

// CSRFToken returns this browser's CSRF token, setting a fresh cookie when
// it has none (or a malformed one).
func (m *Manager) CSRFToken(w http.ResponseWriter, r *http.Request) string {
	if v := m.Cookie(r, CSRFCookie, "/"); authn.IsCSRFToken(v) {
		return v
	}
	return m.RotateCSRF(w)
}

// RotateCSRF gives the browser a fresh CSRF token and returns it. It runs
// when a sign-in opens a session, so a token planted or seen before the
// sign-in cannot ride the new session (login CSRF, fixation).
func (m *Manager) RotateCSRF(w http.ResponseWriter) string {
	v := authn.NewID()
	m.SetCookie(w, CSRFCookie, v, "/", time.Time{})
	return v
}

// CSRFOK reports whether a posted form's csrf_token field and the CSRF
// value sealed in its step are this browser's CSRF cookie
// (authn.CSRFMatch: one non-empty token, compared in constant time).
func (m *Manager) CSRFOK(r *http.Request, field, sealed string) bool {
	return authn.CSRFMatch(m.Cookie(r, CSRFCookie, "/"), field, sealed)
}

// Bind binds pd, about to be sealed into a form of stage, to this
// browser's CSRF token, which it reads (or sets) once per request and
// keeps in t, and returns the token for the form's csrf_token field.
func (m *Manager) Bind(w http.ResponseWriter, r *http.Request, t *authn.Turn, pd *authn.Pending, stage string) string {
	if t.CSRF == "" {
		t.CSRF = m.CSRFToken(w, r)
	}
	pd.Stage, pd.CSRF = stage, t.CSRF
	return t.CSRF
}

// Box returns the Box that seals browser state (the pending sign-in, the
// self-service steps) under the browser key, loading the key on first
// use: ErrNoBrowserKey until it is replicated (answer 503). Every node's
// Box opens every other's values.
func (m *Manager) Box() (*seal.Box, error) { return m.sealer.box() }

// FedCookie is the federation cookie: the sealed pending request of a
// sign-in gone to an upstream provider, sent back only to the callbacks
// under authn.PathFederation. SameSite=Lax still reaches the callback,
// a top-level GET from the upstream's site.
const FedCookie = "oidcd_fed"

// SetFedCookie sets the federation cookie to the sealed step until end.
func (m *Manager) SetFedCookie(w http.ResponseWriter, step string, end time.Time) {
	m.SetCookie(w, FedCookie, step, authn.PathFederation, end)
}

// FedCookie is the federation cookie's value ("" for none).
func (m *Manager) FedCookie(r *http.Request) string {
	return m.Cookie(r, FedCookie, authn.PathFederation)
}

// ClearFedCookie drops the federation cookie: a callback uses it once.
func (m *Manager) ClearFedCookie(w http.ResponseWriter) {
	m.ClearCookie(w, FedCookie, authn.PathFederation)
}
