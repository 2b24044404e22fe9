package authn

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"

	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
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

// CSRF protection of the sign-in forms is double-submit, bound to the step:
// the oidcd_csrf cookie (package session sets it), the csrf_token form
// field and the CSRF value sealed in the step must all be equal. A
// cross-site form can set none of the three; a step lifted from another
// browser carries that browser's token, which this browser's cookie does
// not match.

// IsCSRFToken reports whether v has the shape of a token we issue (NewID:
// 43 characters of base64url), so a junk cookie is replaced, not echoed.
func IsCSRFToken(v string) bool {
	if len(v) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(v)
	return err == nil && len(b) == 32
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
	// StageFederated: the person went to an upstream provider; the step
	// waits in the browser's federation cookie for its callback.
	StageFederated = "federated"
)

// PathFederation is where an upstream provider's callbacks and logout
// tokens arrive: PathFederation + "{slug}/callback",
// "{slug}/backchannel-logout" and "{slug}/logged-out".
const PathFederation = "/federation/"

// Federated is the part of a pending request that went to an upstream
// provider: what its callback must match and what proves the code
// exchange is ours (PKCE), sealed with the rest of the request.
type Federated struct {
	ProviderID string `json:"p"`
	Slug       string `json:"s"`
	State      string `json:"st"`
	Nonce      string `json:"n"`
	Verifier   string `json:"v"`
	// Sent is when the browser left for the upstream (Unix seconds): an
	// upstream's auth_time before it shows that prompt=login was not
	// honoured.
	Sent int64 `json:"t,omitempty"`
}

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
	// Fed is the upstream sign-in in progress (StageFederated).
	Fed *Federated `json:"fed,omitempty"`
}

// Turn is what one request to /authorize keeps while the flow (package
// oidc) and the sign-in (package signin) take turns answering it: both
// hold the same Turn (through Step), so neither copies it back to the
// other.
type Turn struct {
	// CSRF is this browser's token, "" until a page of this request read
	// it (session.Manager.Bind); the sign-in rotates it when it opens a
	// session, and the next page is bound to the value found here.
	CSRF string
	// Ref is the id quoted on error pages and in the log (Reference).
	Ref string
}

// Reference is the id quoted on error pages and in the log: the request's
// correlation id, or a fresh one outside the correlation middleware; the
// same for every page and log line of the request.
func (t *Turn) Reference(r *http.Request) string {
	if t.Ref == "" {
		if t.Ref = httpx.CorrelationID(r.Context()); t.Ref == "" {
			// Hex, as the correlation middleware's: a reference never begins
			// with "-", which an operator's grep would take for a flag.
			t.Ref = httpx.NewID()[:12]
		}
	}
	return t.Ref
}

// SameSession reports whether the browser's usable session (has, of id)
// is the one that authenticated this pending request.
func (p *Pending) SameSession(has bool, id string) bool {
	return has && p.SSOID != "" && id == p.SSOID
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
	// Turn is the flow's own: the CSRF token and reference the sign-in
	// reads and sets are the flow's from then on.
	*Turn
	// OrgHint is the request's organization_hint ("" for none): the
	// organization a multi-organization client's sign-in is for, whose
	// self-registration the sign-in page may offer.
	OrgHint string
	// Resume is the query of a GET /authorize that asks for this request
	// again: a registration finished from an emailed link goes on with it,
	// so the application still receives its code.
	Resume string
	// LoginHint and IdPHint are the request's login_hint and idp_hint
	// ("" for none); Fresh is true when it asked for a fresh
	// authentication (prompt=login), MaxAge its max_age (-1 for none):
	// an upstream sign-in passes them on.
	LoginHint, IdPHint string
	Fresh              bool
	MaxAge             int64
}
