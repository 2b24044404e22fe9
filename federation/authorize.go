package federation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// AuthRequest is what one sign-in at an upstream must remember between
// sending the browser there and its coming back: the caller seals it into
// the browser's state (or its own records) and hands it to Exchange.
// Every field is 256 random bits, base64url: state ties the answer to this
// browser (CSRF), nonce ties the ID token to this request (replay), and
// the PKCE verifier ties the code to us (a stolen code is useless).
type AuthRequest struct {
	State    string
	Nonce    string
	Verifier string
}

// NewAuthRequest returns a fresh AuthRequest.
func NewAuthRequest() AuthRequest {
	return AuthRequest{State: random32(), Nonce: random32(), Verifier: random32()}
}

// random32 is 32 random bytes, base64url without padding (43 characters).
// crypto/rand.Read does not fail (it aborts the program when the system's
// source does).
func random32() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// minRandomChars is 128 bits in base64url.
const minRandomChars = 22

// validate refuses an AuthRequest not made by NewAuthRequest (empty, or
// too short to be unguessable); the verifier must also be one RFC 7636
// (4.1) allows: 43 to 128 unreserved characters.
func (ar AuthRequest) validate() error {
	for _, f := range []struct{ name, v string }{{"state", ar.State}, {"nonce", ar.Nonce}, {"verifier", ar.Verifier}} {
		if len(f.v) < minRandomChars || len(f.v) > 128 || strings.IndexFunc(f.v, func(r rune) bool {
			return !('A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.' || r == '~')
		}) >= 0 {
			return configf("the AuthRequest's %s is not %d to 128 unreserved characters (use NewAuthRequest)", f.name, minRandomChars)
		}
	}
	if len(ar.Verifier) < 43 {
		return configf("the AuthRequest's verifier is shorter than 43 characters (use NewAuthRequest)")
	}
	return nil
}

// challenge is the PKCE S256 code_challenge of the verifier (RFC 7636, 4.2).
func (ar AuthRequest) challenge() string {
	sum := sha256.Sum256([]byte(ar.Verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// AuthorizeOptions are what the sign-in passes on from the request of
// oidcd's own client.
type AuthorizeOptions struct {
	// Prompt is passed on as prompt: space-separated values of none,
	// login, consent and select_account ("" sends none). prompt=login is
	// how a client's demand for a fresh sign-in reaches the upstream.
	Prompt string
	// MaxAge, when set, is passed on as max_age (seconds, 0 or more).
	MaxAge *int
	// LoginHint is passed on as login_hint, an address the person already
	// typed. A hint longer than 1024 bytes or holding control characters
	// is not sent: it is only a hint.
	LoginHint string
}

// RedirectURI is the redirect URI oidcd registers at an upstream for the
// provider slug, under oidcd's own issuer: {issuer}/federation/{slug}/callback.
// The admin API shows it to the operator, the sign-in sends it; both must
// build it the same way.
func RedirectURI(issuer, slug string) string {
	return strings.TrimSuffix(issuer, "/") + "/federation/" + url.PathEscape(slug) + "/callback"
}

// AuthorizeURL returns where to send the browser to sign in at the
// upstream: its authorization endpoint with the code flow, PKCE S256, the
// AuthRequest's state and nonce, the scopes and what opts passes on
// (OpenID Connect Core 1.0, 3.1.2.1). A query the endpoint already holds
// (Azure AD B2C's p=policy, say) is kept.
func (c *Client) AuthorizeURL(ctx context.Context, up Upstream, redirectURI string, ar AuthRequest, opts AuthorizeOptions) (string, error) {
	if err := checkCall(up, ar, redirectURI); err != nil {
		return "", fmt.Errorf("federation: authorize at %s: %w", up.Issuer, err)
	}
	if err := checkPrompt(opts.Prompt); err != nil {
		return "", fmt.Errorf("federation: authorize at %s: %w", up.Issuer, err)
	}
	if opts.MaxAge != nil && *opts.MaxAge < 0 {
		return "", fmt.Errorf("federation: authorize at %s: %w", up.Issuer, configf("max_age %d is negative", *opts.MaxAge))
	}
	meta, err := c.Discover(ctx, up.Issuer)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(meta.AuthorizationEndpoint)
	if err != nil { // checked by Discover; kept for safety
		return "", fmt.Errorf("federation: authorize at %s: %w", up.Issuer, invalidf("authorization_endpoint is not a URL"))
	}
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", up.ClientID)
	q.Set("redirect_uri", redirectURI)
	q.Set("scope", up.scopes())
	q.Set("state", ar.State)
	q.Set("nonce", ar.Nonce)
	q.Set("code_challenge", ar.challenge())
	q.Set("code_challenge_method", "S256")
	if opts.Prompt != "" {
		q.Set("prompt", opts.Prompt)
	}
	if opts.MaxAge != nil {
		q.Set("max_age", strconv.Itoa(*opts.MaxAge))
	}
	if h := opts.LoginHint; h != "" && len(h) <= maxClaimString && cleanText(h, maxClaimString) == h {
		q.Set("login_hint", h)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// checkCall checks what every protocol call is handed.
func checkCall(up Upstream, ar AuthRequest, redirectURI string) error {
	if err := up.Validate(); err != nil {
		return err
	}
	if err := ar.validate(); err != nil {
		return err
	}
	if u, err := url.Parse(redirectURI); err != nil || !u.IsAbs() || u.Host == "" || u.Fragment != "" {
		return configf("redirect URI %q is not an absolute URL without fragment", redirectURI)
	}
	return nil
}

// checkPrompt allows the prompt values of OpenID Connect Core 1.0,
// 3.1.2.1, none alone.
func checkPrompt(p string) error {
	if p == "" {
		return nil
	}
	vals := strings.Split(p, " ")
	for _, v := range vals {
		if !slices.Contains([]string{"none", "login", "consent", "select_account"}, v) {
			return configf("prompt %q holds %q", p, v)
		}
	}
	if len(vals) > 1 && slices.Contains(vals, "none") {
		return configf("prompt %q combines none with another value", p)
	}
	return nil
}

// Callback is the authorization response the browser brought back to the
// redirect URI (RFC 6749, 4.1.2).
type Callback struct {
	Code  string
	State string
	// Iss is the iss parameter (RFC 9207), "" when absent.
	Iss string
}

// ParseCallback reads the query of the request to the redirect URI. An
// error response is an *UpstreamError (the person declined, the upstream
// refused the client); an answer with neither code nor error, or with a
// parameter twice (RFC 6749, 3.1), is ErrInvalid. The Callback is
// returned in every case, so the caller can find its AuthRequest by State
// even for an error.
func ParseCallback(query url.Values) (Callback, error) {
	cb := Callback{State: query.Get("state"), Iss: query.Get("iss"), Code: query.Get("code")}
	for _, name := range []string{"code", "state", "iss", "error", "error_description"} {
		if len(query[name]) > 1 {
			return cb, fmt.Errorf("federation: callback: %w", invalidf("parameter %s appears more than once", name))
		}
	}
	if e := query.Get("error"); e != "" {
		return cb, fmt.Errorf("federation: callback: %w", newUpstreamError(e, query.Get("error_description"), 0))
	}
	if cb.Code == "" {
		return cb, fmt.Errorf("federation: callback: %w", invalidf("no code and no error"))
	}
	return cb, nil
}

// checkIssParam applies RFC 9207 (2.4) to an authorization response: an
// iss parameter must be the issuer exactly, and when the upstream says it
// always sends one, one must be there. This keeps out the mix-up attack,
// where a response from one upstream is passed off as another's so that
// its code goes to the wrong token endpoint; so it runs before the code
// is sent anywhere.
func checkIssParam(meta *Metadata, up Upstream, iss string) error {
	switch {
	case iss != "" && iss != up.Issuer:
		return invalidf("authorization response's iss %q is not %q", cleanText(iss, 256), up.Issuer)
	case iss == "" && meta.IssParameter:
		return invalidf("authorization response has no iss, which the upstream says it sends")
	}
	return nil
}

// checkState compares the answer's state with the request's, in constant
// time.
func checkState(ar AuthRequest, cb Callback) error {
	if subtle.ConstantTimeCompare([]byte(ar.State), []byte(cb.State)) != 1 {
		return invalidf("authorization response's state is not the request's")
	}
	return nil
}

// EndSessionURL returns where to send the browser to end the person's
// session at the upstream too (OpenID Connect RP-Initiated Logout 1.0,
// 2): its end_session_endpoint with id_token_hint (the ID token of the
// sign-in, when kept), client_id (so the upstream can check the redirect
// even without a hint, or with an expired one), and
// post_logout_redirect_uri with state when the browser should come back.
// ok is false when the upstream has no end_session_endpoint.
func (c *Client) EndSessionURL(ctx context.Context, up Upstream, idTokenHint, postLogoutRedirectURI, state string) (string, bool, error) {
	if err := up.Validate(); err != nil {
		return "", false, fmt.Errorf("federation: end session at %s: %w", up.Issuer, err)
	}
	meta, err := c.Discover(ctx, up.Issuer)
	if err != nil {
		return "", false, err
	}
	if meta.EndSessionEndpoint == "" {
		return "", false, nil
	}
	u, err := url.Parse(meta.EndSessionEndpoint)
	if err != nil { // checked by Discover; kept for safety
		return "", false, fmt.Errorf("federation: end session at %s: %w", up.Issuer, invalidf("end_session_endpoint is not a URL"))
	}
	q := u.Query()
	if idTokenHint != "" {
		q.Set("id_token_hint", idTokenHint)
	}
	q.Set("client_id", up.ClientID)
	if postLogoutRedirectURI != "" {
		q.Set("post_logout_redirect_uri", postLogoutRedirectURI)
		if state != "" {
			q.Set("state", state)
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), true, nil
}
