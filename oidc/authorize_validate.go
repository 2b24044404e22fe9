package oidc

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/redirect"
)

// This file holds the validators of GET /authorize, a fixed pipeline. Each
// is a small pure function, table-tested in authorize_validate_test.go.
// A validator's error is a *page* error (never redirected): its text goes
// to the log with the reference, never to the browser. The one redirected
// validation error (an unsupported acr value) comes from
// checkACRSupported, a separate step that runs only once every page check
// has passed, so the two paths cannot mix.

// Bounds of the authorization request.
const (
	minStateLen     = 8
	maxStateLen     = 1024 // ours: the request travels sealed in a cookie (see authzRequest)
	minNonceLen     = 8
	maxNonceLen     = 512
	maxACRValuesLen = 512
	challengeLen    = 43 // base64url (no padding) of a SHA-256
)

// errAuthzStore marks a store problem: the answer is a 503 page.
var errAuthzStore = errors.New("oidc: store unavailable")

// prompts is the parsed prompt parameter, a set of flags.
type prompts uint8

const (
	promptNone prompts = 1 << iota
	promptLogin
	promptSelectAccount
)

func (ps prompts) has(x prompts) bool { return ps&x != 0 }

var promptValues = map[string]prompts{
	"none":           promptNone,
	"login":          promptLogin,
	"select_account": promptSelectAccount,
}

// authzRequest is a validated authorization request: everything the later
// steps need, carried sealed in the pending request. It is bounded (state
// at most 1024 bytes, nonce and acr_values 512, a registered redirect URI)
// so that the sealed form fits in the picker's cookie (4 KiB in browsers).
type authzRequest struct {
	ClientID    string   `json:"client_id"`
	RedirectURI string   `json:"redirect_uri"`
	Scopes      []string `json:"scope"`
	State       string   `json:"state"`
	Nonce       string   `json:"nonce,omitempty"`
	Challenge   string   `json:"code_challenge"`
	Prompt      prompts  `json:"prompt,omitempty"`
	MaxAge      *int64   `json:"max_age,omitempty"`
	ACRValues   []string `json:"acr_values,omitempty"`
	OrgHint     string   `json:"organization_hint,omitempty"`
	// LoginHint and IdPHint are kept only when well formed (hints, never
	// refused: a malformed one is ignored).
	LoginHint   string    `json:"login_hint,omitempty"`
	IdPHint     string    `json:"idp_hint,omitempty"`
	RequestedAt time.Time `json:"rat"`
}

// clientSource is the read lookupClient needs (*fsm.State has it).
type clientSource interface {
	Client(id string) (fsm.Client, error)
}

// validateAuthorize runs the page checks of GET /authorize in their fixed
// order: client, redirect URI, then the rest of the page checks. Any error it
// returns is shown as a page (errAuthzStore: 503, else 400).
func validateAuthorize(st clientSource, q url.Values) (authzRequest, fsm.Client, error) {
	var req authzRequest
	if err := checkSingleValues(q); err != nil {
		return req, fsm.Client{}, named(detailRepeated, err)
	}
	client, err := lookupClient(st, q.Get("client_id"))
	if err != nil {
		return req, fsm.Client{}, named(detailClient, err)
	}
	if err := checkRedirectURI(client, q.Get("redirect_uri")); err != nil {
		return req, client, named(detailRedirectURI, err)
	}
	req.ClientID, req.RedirectURI = client.ID, q.Get("redirect_uri")
	present := func(k string) (string, bool) { return q.Get(k), q.Has(k) }
	steps := []struct {
		detail string
		check  func() error
	}{
		{detailResponseType, func() error { return checkResponseType(q.Get("response_type")) }},
		{detailPKCE, func() error {
			req.Challenge = q.Get("code_challenge")
			return checkPKCE(req.Challenge, q.Get("code_challenge_method"))
		}},
		{detailScope, func() (err error) { req.Scopes, err = checkScope(client, q.Get("scope")); return err }},
		{detailState, func() error { req.State = q.Get("state"); return checkState(req.State) }},
		{detailNonce, func() error { v, ok := present("nonce"); req.Nonce = v; return checkNonce(v, ok) }},
		{detailPrompt, func() (err error) { v, ok := present("prompt"); req.Prompt, err = parsePrompt(v, ok); return err }},
		{detailMaxAge, func() (err error) { v, ok := present("max_age"); req.MaxAge, err = parseMaxAge(v, ok); return err }},
		{detailACRValues, func() (err error) {
			v, ok := present("acr_values")
			req.ACRValues, err = parseACRValues(v, ok)
			return err
		}},
		{detailOrgHint, func() (err error) {
			v, ok := present("organization_hint")
			req.OrgHint, err = parseOrgHint(v, ok)
			return err
		}},
	}
	for _, step := range steps {
		if err := step.check(); err != nil {
			return req, client, named(step.detail, err)
		}
	}
	req.LoginHint, req.IdPHint = loginHint(q.Get("login_hint")), idpHint(q.Get("idp_hint"))
	return req, client, nil
}

// loginHint is login_hint when it can be an address or a name to type on
// the sign-in page: at most 254 bytes of printable text ("" otherwise).
func loginHint(s string) string {
	if len(s) > 254 {
		return ""
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return ""
		}
	}
	return strings.TrimSpace(s)
}

// idpHint is idp_hint when it has the shape of a provider's slug,
// [a-z0-9-]{1,40} ("" otherwise).
func idpHint(s string) string {
	if len(s) == 0 || len(s) > 40 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return ""
		}
	}
	return s
}

// The catalog keys (webui/locales) of the fixed sentences an error page
// shows the application's developer, one per page-check rule. They name
// the rule, never the input.
const (
	detailRepeated     = "error.detail.repeated"
	detailClient       = "error.detail.client"
	detailRedirectURI  = "error.detail.redirect_uri"
	detailResponseType = "error.detail.response_type"
	detailPKCE         = "error.detail.pkce"
	detailScope        = "error.detail.scope"
	detailState        = "error.detail.state"
	detailNonce        = "error.detail.nonce"
	detailPrompt       = "error.detail.prompt"
	detailMaxAge       = "error.detail.max_age"
	detailACRValues    = "error.detail.acr_values"
	detailOrgHint      = "error.detail.organization_hint"
)

// requestError is a validation error of GET /authorize shown as a page: the
// page shows detail, a fixed sentence for the application's developer;
// the wrapped error, which may quote the input, goes to the log only.
type requestError struct {
	detail string
	err    error
}

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// named gives err the developer-facing sentence detail.
func named(detail string, err error) error { return &requestError{detail: detail, err: err} }

// checkSingleValues rejects a request that repeats any parameter.
func checkSingleValues(q url.Values) error {
	for k, v := range q {
		if len(v) > 1 {
			return fmt.Errorf("parameter %q repeated", httpx.LogValue(k))
		}
	}
	return nil
}

// lookupClient finds an active client.
func lookupClient(st clientSource, id string) (fsm.Client, error) {
	if id == "" {
		return fsm.Client{}, errors.New("client_id missing")
	}
	c, err := st.Client(id)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return fsm.Client{}, fmt.Errorf("client_id %q unknown", httpx.LogValue(id))
	case err != nil:
		return fsm.Client{}, fmt.Errorf("%w: client: %v", errAuthzStore, err)
	case c.Suspended:
		return fsm.Client{}, fmt.Errorf("client %q suspended", httpx.LogValue(id))
	}
	return c, nil
}

// checkRedirectURI requires uri to match a registered URI by
// redirect.Match: byte for byte, or for a native client (the built-in
// one included) a registered loopback redirect at 127.0.0.1 or [::1] with
// the same path and query on any port (RFC 8252 7.3; docs/application-developers.md). The
// built-in client's console callbacks match byte for byte only, even
// where the console is served at a loopback address: only its loopback
// redirects (adminLoopbacks) take any port.
func checkRedirectURI(c fsm.Client, uri string) error {
	if uri == "" {
		return errors.New("redirect_uri missing")
	}
	registered := c.RedirectURIs
	if isAdmin(c) && !slices.Contains(registered, uri) {
		registered = adminLoopbacks
	}
	if !redirect.Match(c.ApplicationType, registered, uri) {
		return fmt.Errorf("redirect_uri %q not registered", httpx.LogValue(uri))
	}
	return nil
}

func checkResponseType(v string) error {
	if v != "code" {
		return fmt.Errorf("response_type %q is not code", httpx.LogValue(v))
	}
	return nil
}

var challengeB64 = base64.RawURLEncoding.Strict()

// checkPKCE requires method S256 and a challenge that is an S256 output:
// 43 characters of unpadded base64url decoding to 32 bytes.
func checkPKCE(challenge, method string) error {
	if challenge == "" {
		return errors.New("code_challenge missing")
	}
	if method != "S256" {
		return fmt.Errorf("code_challenge_method %q is not S256", httpx.LogValue(method))
	}
	if len(challenge) != challengeLen {
		return fmt.Errorf("code_challenge has %d characters, want %d", len(challenge), challengeLen)
	}
	if b, err := challengeB64.DecodeString(challenge); err != nil || len(b) != 32 {
		return errors.New("code_challenge is not base64url of 32 bytes")
	}
	return nil
}

var authzScopes = []string{ScopeOpenID, ScopeEmail, ScopeProfile}

// checkScope parses a space-separated scope list (repeats collapse) and
// requires every scope to be known and registered for the client. It
// returns the scopes in request order.
func checkScope(c fsm.Client, scope string) ([]string, error) {
	var out []string
	for s := range strings.SplitSeq(scope, " ") {
		switch {
		case s == "" || slices.Contains(out, s):
			continue
		case !slices.Contains(authzScopes, s):
			return nil, fmt.Errorf("scope %q unknown", httpx.LogValue(s))
		case !slices.Contains(c.Scopes, s):
			return nil, fmt.Errorf("scope %q not registered for client %q", s, c.ID)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("scope missing or empty")
	}
	return out, nil
}

func checkState(s string) error {
	switch {
	case len(s) < minStateLen:
		return fmt.Errorf("state has %d bytes, want at least %d", len(s), minStateLen)
	case len(s) > maxStateLen:
		return fmt.Errorf("state has %d bytes, want at most %d", len(s), maxStateLen)
	}
	return nil
}

func checkNonce(n string, present bool) error {
	if present && (len(n) < minNonceLen || len(n) > maxNonceLen) {
		return fmt.Errorf("nonce has %d bytes, want %d to %d", len(n), minNonceLen, maxNonceLen)
	}
	return nil
}

// parsePrompt accepts single-space-separated values of none, login and
// select_account, each at most once, none only alone.
func parsePrompt(s string, present bool) (prompts, error) {
	if !present {
		return 0, nil
	}
	var ps prompts
	n := 0
	for v := range strings.SplitSeq(s, " ") {
		p, ok := promptValues[v]
		if !ok {
			return 0, fmt.Errorf("prompt value %q invalid", httpx.LogValue(v))
		}
		if ps.has(p) {
			return 0, fmt.Errorf("prompt value %q repeated", v)
		}
		ps |= p
		n++
	}
	if ps.has(promptNone) && n > 1 {
		return 0, errors.New("prompt none combined with other values")
	}
	return ps, nil
}

// parseMaxAge accepts a non-negative decimal int64.
func parseMaxAge(s string, present bool) (*int64, error) {
	if !present {
		return nil, nil
	}
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return nil, fmt.Errorf("max_age %q is not a non-negative integer", httpx.LogValue(s))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("max_age %q out of range", s)
	}
	return &n, nil
}

// parseACRValues checks the shape of acr_values: at most 512 bytes of
// visible ASCII words separated by single spaces. Whether the values are
// supported is checkACRSupported's question.
func parseACRValues(s string, present bool) ([]string, error) {
	if !present {
		return nil, nil
	}
	if len(s) > maxACRValuesLen {
		return nil, fmt.Errorf("acr_values has %d bytes, want at most %d", len(s), maxACRValuesLen)
	}
	var out []string
	for v := range strings.SplitSeq(s, " ") {
		if v == "" {
			return nil, errors.New("acr_values has an empty value")
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x21 || v[i] > 0x7e {
				return nil, errors.New("acr_values has a character outside visible ASCII")
			}
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// acrRank orders the authentication strengths (phone < pwd < mfa); 0 is
// unknown.
func acrRank(acr string) int {
	switch acr {
	case ACRPhone:
		return 1
	case ACRPwd:
		return 2
	case ACRMFA:
		return 3
	}
	return 0
}

// checkACRSupported is the redirected check of acr_values:
// every value must be in the discovery document's acr_values_supported.
func checkACRSupported(values []string) *Error {
	for _, v := range values {
		if !slices.Contains(acrValuesSupported, v) {
			return &Error{Code: "invalid_request", Description: "unsupported acr value: " + v}
		}
	}
	return nil
}

// requiredACR is the level a request asks for: acr_values lists acceptable
// values in order of preference (OIDC Core 3.1.2.1), so the weakest listed
// one is enough. "" when the request names none.
func requiredACR(values []string) string {
	need := ""
	for _, v := range values {
		if need == "" || acrRank(v) < acrRank(need) {
			need = v
		}
	}
	return need
}

// parseOrgHint accepts a UUID in its canonical 36-character form (either
// case) and returns it in lower case, as organization ids are stored.
func parseOrgHint(s string, present bool) (string, error) {
	if !present {
		return "", nil
	}
	if !isUUID(s) {
		return "", fmt.Errorf("organization_hint %q is not a UUID", s)
	}
	return strings.ToLower(s), nil
}

// isUUID reports whether s is 8-4-4-4-12 hexadecimal digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}

// resume is a query that asks for r again (authn.Step.Resume), less prompt
// and a max_age of 0: the person it is for has just signed in.
func (r authzRequest) resume() string {
	q := url.Values{"response_type": {"code"}, "code_challenge_method": {"S256"}}
	for k, v := range map[string]string{"client_id": r.ClientID, "redirect_uri": r.RedirectURI, "scope": strings.Join(r.Scopes, " "), "state": r.State,
		"code_challenge": r.Challenge, "nonce": r.Nonce, "acr_values": strings.Join(r.ACRValues, " "), "organization_hint": r.OrgHint} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if r.MaxAge != nil && *r.MaxAge > 0 {
		q.Set("max_age", strconv.FormatInt(*r.MaxAge, 10))
	}
	return q.Encode()
}
