package authn

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/seal"
)

// Authentication strength values (acr) and methods (amr).
const (
	ACRMFA   = "urn:service:sso:acr:mfa"
	ACRPwd   = "urn:service:sso:acr:pwd" // #nosec G101 -- an acr value, not a credential
	ACRPhone = "urn:service:sso:acr:phone"

	AMRPassword = "pwd"
	AMRPasskey  = "hwk"
	AMROTP      = "otp"
	AMRRecovery = "rcv"
	AMRSMS      = "sms"
)

// PathAuthorize is the authorization endpoint, where every sign-in step
// posts its form.
const PathAuthorize = "/authorize"

// Cookies of the sign-in pages.
const (
	// SessionCookie holds the SSO session secret (NewID); the store keeps
	// only HashToken of it. Package logout reads it to find the browser's
	// session.
	SessionCookie = "oidcd_session"
	// AuthzCookie carries the sealed pending request to the picker's GET
	// pages, whose query has only q, after and before.
	AuthzCookie = "oidcd_authz"
	// CSRFCookie is the double-submit CSRF token.
	CSRFCookie = "oidcd_csrf"

	AuthzCookiePath = PathAuthorize
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

// Jar sets and reads the sign-in cookies of one issuer: Secure is true
// when the issuer is https.
type Jar struct{ Secure bool }

// Set sets an HttpOnly, SameSite=Lax cookie, Secure when the issuer is
// https. A zero expires makes a browser-session cookie.
func (j Jar) Set(w http.ResponseWriter, name, value, path string, expires time.Time) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the issuer scheme (an http issuer is for loopback and development; TestSecureCookies)
	http.SetCookie(w, &http.Cookie{
		Name: CookieName(name, path, j.Secure), Value: value, Path: path, Expires: expires,
		HttpOnly: true, Secure: j.Secure, SameSite: http.SameSiteLaxMode,
	})
}

// Clear tells the browser to drop a cookie.
func (j Jar) Clear(w http.ResponseWriter, name, path string) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the issuer scheme (an http issuer is for loopback and development; TestSecureCookies)
	http.SetCookie(w, &http.Cookie{
		Name: CookieName(name, path, j.Secure), Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: j.Secure, SameSite: http.SameSiteLaxMode,
	})
}

// Value is the value of the first cookie called name (of path), "" if
// none.
func (j Jar) Value(r *http.Request, name, path string) string {
	c, err := r.Cookie(CookieName(name, path, j.Secure))
	if err != nil {
		return ""
	}
	return c.Value
}

// CSRF protection of the sign-in forms is double-submit, bound to the step:
// the oidcd_csrf cookie, the csrf_token form field and the CSRF value sealed
// in the step must all be equal. A cross-site form can set none of the
// three; a step lifted from another browser carries that browser's token,
// which this browser's cookie does not match.

// IsCSRFToken reports whether v has the shape of a token we issue (NewID:
// 43 characters of base64url), so a junk cookie is replaced, not echoed.
func IsCSRFToken(v string) bool {
	if len(v) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(v)
	return err == nil && len(b) == 32
}

// CSRFToken returns this browser's CSRF token, setting a fresh cookie when
// it has none (or a malformed one).
func (j Jar) CSRFToken(w http.ResponseWriter, r *http.Request) string {
	if v := j.Value(r, CSRFCookie, "/"); IsCSRFToken(v) {
		return v
	}
	return j.RotateCSRF(w)
}

// RotateCSRF gives the browser a fresh CSRF token and returns it. It runs
// when a sign-in opens a session, so a token planted or seen before the
// sign-in cannot ride the new session (login CSRF, fixation).
func (j Jar) RotateCSRF(w http.ResponseWriter) string {
	v := NewID()
	j.Set(w, CSRFCookie, v, "/", time.Time{})
	return v
}

// CSRFMatch reports whether cookie, form field and sealed value are one
// non-empty token, in constant time.
func CSRFMatch(cookie, field, sealed string) bool {
	if cookie == "" || field == "" || sealed == "" {
		return false
	}
	a := subtle.ConstantTimeCompare([]byte(cookie), []byte(field))
	b := subtle.ConstantTimeCompare([]byte(field), []byte(sealed))
	return a&b == 1
}

// NewID returns 32 random bytes, base64url: codes, cookie secrets, jtis.
func NewID() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// HashToken is how codes and cookie secrets are stored: they are 256-bit
// random values, so password.HashSecret (hex SHA-256) is enough.
func HashToken(s string) string { return password.HashSecret(s) }

// S256 is the PKCE S256 transform of a verifier (RFC 7636 4.2):
// base64url, unpadded, of its SHA-256.
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// FormValue is the single value of a form field; ok is false when the
// field is absent or repeated (a repeat yields "").
func FormValue(form url.Values, key string) (string, bool) {
	if v := form[key]; len(v) == 1 {
		return v[0], true
	}
	return "", false
}

// MaxPageForm bounds the body of a sign-in form post.
const MaxPageForm = 16 << 10

// MaxEmailLen is the longest address a sign-in looks up.
const MaxEmailLen = 254

// Catalog keys (webui/locales) of the texts both the flow's pages and the
// sign-in pages show: translated into the page's language where they are
// rendered (webui.UI.Text).
const (
	MsgBadRequest    = "error.bad_request"
	MsgExpired       = "error.expired"
	MsgForbidden     = "error.forbidden"
	MsgUnavailable   = "error.unavailable"
	TitleUnavailable = "error.unavailable.title"
)

// Stages of a pending authorization request: which form its step answers.
const (
	StageSignIn  = "signin"
	StagePicker  = "picker"
	StageConsent = "consent"
	StageMFA     = "mfa"     // the second-factor page (and its passkey ceremony)
	StageSMSCode = "smscode" // the text-message code page
)

// Pending is the part of an authorization request in progress that the
// flow and the sign-in share; package oidc embeds it next to the request
// itself (its JSON fields sit beside "req" in the sealed step).
type Pending struct {
	Stage string `json:"stage"`
	// OrgID is the organization chosen on the picker or shown on the
	// consent page; later steps keep to it.
	OrgID string `json:"org,omitempty"`
	// SSOID is the SSO session that satisfied this request's
	// authentication rules (prompt, max_age). Later steps accept only that
	// session, so a fresh sign-in is not asked for twice.
	SSOID string `json:"sso,omitempty"`
	// CSRF is the double-submit token this step is bound to.
	CSRF string `json:"csrf,omitempty"`
	// StepUp: a second factor was completed for SSOID in this flow, so the
	// strength check passes even when the factor (a recovery code) did not
	// raise the acr; the relying party judges the acr it gets.
	StepUp bool `json:"stepup,omitempty"`
	// Challenge is the replicated WebAuthn challenge of a passkey
	// ceremony in progress.
	Challenge string `json:"chal,omitempty"`
	// SMS is the handle of the text-message code sent, Phone its number.
	SMS   string `json:"sms,omitempty"`
	Phone string `json:"phone,omitempty"`
	// UILocales is the language the request's ui_locales asked for (one
	// of the pages' languages, or "" for none), or the one the person
	// then picked on the sign-in page: every page of the request is in
	// it.
	UILocales string `json:"ui,omitempty"`
}

// Step is one turn of the interactive sign-in inside /authorize: what the
// flow hands the sign-in (oidc.Steps). The sign-in either answers with one
// of its pages, or records an authentication and lets the flow go on.
type Step struct {
	// Pending is the request in progress. The sign-in writes Stage (and
	// CSRF) before Seal, clears SSOID and OrgID on the sign-in page, sets
	// SSOID and StepUp when it authenticates, and keeps its Challenge,
	// SMS and Phone.
	Pending *Pending
	// Seal seals the whole pending request as it now stands, for the step
	// field of a form. Its error is the sealer's (answer 503).
	Seal func() (string, error)
	// Form is the posted form of Pending.Stage (StageSignIn, StageMFA or
	// StageSMSCode), already opened and checked against CSRF. Nil: show
	// the page of Show.
	Form url.Values
	// Show is the page to answer with when Form is nil: StageSignIn or
	// StageMFA.
	Show string
	// ClientID and AppName name the application signed in to.
	ClientID, AppName string
	// CSRF is this browser's token, "" until a page of this request read
	// it; the sign-in rotates it when it opens a session, and the flow
	// binds its next page to the value found here.
	CSRF string
	// Reference is the id quoted on error pages and in the log.
	Reference string
	// OrgHint is the request's organization_hint ("" for none): the
	// organization a multi-organization client's sign-in is for, whose
	// self-registration the sign-in page may offer.
	OrgHint string
	// Resume is the query of a GET /authorize that asks for this request
	// again: a registration finished from an emailed link goes on with it,
	// so the application still receives its code.
	Resume string
}

// ErrNoBrowserKey: the cluster-wide browser key has not been replicated
// yet (a node that just started); pages answer 503.
var ErrNoBrowserKey = errors.New("browser key not available yet")

// OpenBrowserKey returns the browser key from its stored form: a kek
// record sealed with additional data aad (sealed, or clear without a
// KEK), or the bare 32 bytes written before secrets were sealed (its kek
// record, clear or sealed, is never 32 bytes long).
func OpenBrowserKey(k *kek.KEK, stored []byte, aad string) ([]byte, error) {
	if len(stored) == seal.KeySize {
		return stored, nil
	}
	key, err := k.Open(stored, aad)
	if err != nil {
		return nil, fmt.Errorf("open browser key: %w", err)
	}
	return key, nil
}

// Sealer is the Box for browser state, built on first use from the key
// load returns (load answers ErrNoBrowserKey until the key is
// replicated). Each surface holds its own; all open each other's values.
type Sealer struct {
	load func() ([]byte, error)
	mu   sync.Mutex
	box  *seal.Box
}

// NewSealer returns a Sealer over load.
func NewSealer(load func() ([]byte, error)) *Sealer { return &Sealer{load: load} }

// Box returns the Box, loading the key on first use.
func (s *Sealer) Box() (*seal.Box, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.box != nil {
		return s.box, nil
	}
	key, err := s.load()
	if err != nil {
		return nil, err
	}
	b, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	s.box = b
	return b, nil
}
