package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
)

// A person signs in to the console through the provider itself, as the
// built-in public client admin.ClientID: the code flow with PKCE (S256),
// state and nonce. The steps:
//
//  1. GET /console/signin/provider (the sign-in page's "Sign in" link)
//     makes a state, a nonce and a PKCE verifier, keeps them in the flow
//     cookie (sealed with the browser key like the session, ten minutes,
//     SameSite=Lax so that it comes back on the provider's redirect, which
//     may start on another site when the console has a listener of its
//     own) and sends the browser to the provider's /authorize, asking for
//     the node's admin acr.
//  2. The person signs in there (their second factor included) and the
//     provider sends the browser to /console/callback with code and state.
//  3. The callback opens the flow cookie (once: it is cleared), checks the
//     state, redeems the code with the verifier (Config.Exchange), checks
//     the ID token's nonce, audience and issuer, and asks the admin API,
//     with the new access token as the bearer, who this person is here
//     (GET /admins). A person the API refuses is not signed in.
//  4. The session cookie then holds the access token. Every call of the
//     admin API carries it, so the API's check (liveness, acr, grant)
//     decides each request; when the API refuses the person (401, or 403
//     with a WWW-Authenticate challenge) the console ends the session and
//     shows its sign-in page with the reason. The session lasts as long as
//     the access token, at most SessionLifetime.
//
// The ID token comes straight from the token endpoint (in process, or
// over the issuer's TLS), so its signature is not checked (OpenID Connect
// Core 3.1.3.7, 6); the access token is checked by the API on every call.

// Paths of the provider's endpoints, relative to the issuer (as its
// discovery document names them); the console does not import the provider.
const (
	authorizePath = "/authorize"
	tokenPath     = "/oauth2/token" // #nosec G101 -- an endpoint path, not a credential
	callbackPath  = Prefix + "callback"
)

const (
	cookieFlow   = "oidcd_console_flow"
	purposeFlow  = "oidcd.console.flow.v1"
	flowLifetime = 10 * time.Minute
	// tokenMargin is how much sooner than the access token a person's
	// console session ends.
	tokenMargin = 5 * time.Second
	// defaultAdminACR is --admin-acr's default: a second factor.
	defaultAdminACR = "urn:service:sso:acr:mfa"
)

// Tokens is the provider's answer to a code exchange.
type Tokens struct {
	AccessToken string `json:"access_token"`
	IDToken     string `json:"id_token"`
	ExpiresIn   int64  `json:"expires_in"`
}

// ExchangeError is a refusal of the token endpoint: its status and OAuth
// error code.
type ExchangeError struct {
	Status      int
	Code        string
	Description string
}

func (e *ExchangeError) Error() string {
	return fmt.Sprintf("console: token endpoint answered %d %s: %s", e.Status, e.Code, e.Description)
}

// exchangeForm is the body of the token request of the built-in public
// client (code, redirect URI, verifier, client id; no secret).
func exchangeForm(code, verifier, redirectURI string) url.Values {
	return url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {redirectURI},
		"code_verifier": {verifier},
		"client_id":     {admin.ClientID},
	}
}

// tokenAnswer reads the token endpoint's answer.
func tokenAnswer(status int, body []byte) (Tokens, error) {
	if status != http.StatusOK {
		var e struct {
			Error            json.RawMessage `json:"error"`
			ErrorDescription string          `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e)
		code := ""
		_ = json.Unmarshal(e.Error, &code) // a 429 envelope's error is an object
		return Tokens{}, &ExchangeError{Status: status, Code: code, Description: e.ErrorDescription}
	}
	var t Tokens
	if err := json.Unmarshal(body, &t); err != nil {
		return Tokens{}, fmt.Errorf("console: token answer: %w", err)
	}
	if t.AccessToken == "" || t.IDToken == "" {
		return Tokens{}, errors.New("console: token answer without an access token or an ID token")
	}
	return t, nil
}

// HTTPExchange redeems codes by POSTing to tokenURL (the issuer's
// /oauth2/token) with client (nil: one with a 10-second timeout). It is
// the default when Config.Exchange is nil. Going out through the issuer's
// address means every console sign-in comes from the node's address as
// far as the token endpoint's rate limit is concerned; node uses
// ExchangeVia instead.
func HTTPExchange(client *http.Client, tokenURL string) func(ctx context.Context, code, verifier, redirectURI string) (Tokens, error) {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return func(ctx context.Context, code, verifier, redirectURI string) (Tokens, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(exchangeForm(code, verifier, redirectURI).Encode()))
		if err != nil {
			return Tokens{}, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req) // #nosec G704 -- tokenURL is the operator's issuer, not request input
		if err != nil {
			return Tokens{}, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return Tokens{}, err
		}
		return tokenAnswer(resp.StatusCode, body)
	}
}

// ExchangeVia redeems codes by serving the token request to protocol, the
// node's handler of the provider's endpoints, in process. The request
// keeps the context of the callback, and with it the browser's address
// (the token endpoint's rate limit counts the person's sign-ins, not the
// node's) and the correlation id.
func ExchangeVia(protocol http.Handler) func(ctx context.Context, code, verifier, redirectURI string) (Tokens, error) {
	return func(ctx context.Context, code, verifier, redirectURI string) (Tokens, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenPath, strings.NewReader(exchangeForm(code, verifier, redirectURI).Encode()))
		if err != nil {
			return Tokens{}, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		rec := &recorder{header: http.Header{}}
		protocol.ServeHTTP(rec, req)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		return tokenAnswer(rec.status, rec.body.Bytes())
	}
}

// flow is what the flow cookie holds between the redirect to the provider
// and the callback.
type flow struct {
	State       string `json:"s"`
	Nonce       string `json:"n"`
	Verifier    string `json:"v"`
	RedirectURI string `json:"r"`
}

// callbackURL is the redirect URI of a sign-in started by r.
func (c *Console) callbackURL(r *http.Request) string {
	base := c.callbackBase
	switch {
	case base != "":
	case c.ownListener:
		// The browser reaches this listener directly: the address it
		// used is the console's. (A forged Host only misleads its own
		// browser, and the provider accepts registered URIs alone.)
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	default:
		base = c.issuer
	}
	return base + callbackPath
}

// randomToken is 32 random bytes in base64url: a PKCE verifier (43
// characters, RFC 7636 4.1), a state, a nonce.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// pkceChallenge is the S256 challenge of verifier.
func pkceChallenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// startProvider is GET /console/signin/provider: the start of a person's
// sign-in. A GET (a link) rather than a form: the console's CSP lets forms
// post only to the console's origin, and a form's redirect to the issuer
// on another origin (--admin-addr) would be blocked.
func (c *Console) startProvider(w http.ResponseWriter, r *http.Request) {
	box, err := c.sealer()
	if err != nil {
		c.log.Warn("console: start sign-in", "err", err)
		c.signInFailed(w, r, http.StatusServiceUnavailable, "The cluster is not ready yet; try again in a moment.")
		return
	}
	f := flow{State: randomToken(), Nonce: randomToken(), Verifier: randomToken(), RedirectURI: c.callbackURL(r)}
	v, err := box.Seal(purposeFlow, f, c.now().Add(flowLifetime))
	if err != nil {
		c.log.Warn("console: seal the sign-in flow", "err", err)
		c.signInFailed(w, r, http.StatusInternalServerError, "Something went wrong; try again.")
		return
	}
	c.setCookieSameSite(w, r, cookieFlow, v, int(flowLifetime/time.Second), http.SameSiteLaxMode)
	q := url.Values{
		"client_id":             {admin.ClientID},
		"response_type":         {"code"},
		"scope":                 {"openid"},
		"redirect_uri":          {f.RedirectURI},
		"state":                 {f.State},
		"nonce":                 {f.Nonce},
		"code_challenge":        {pkceChallenge(f.Verifier)},
		"code_challenge_method": {"S256"},
		"acr_values":            {c.adminACR},
	}
	headers(w)
	// #nosec G710 -- the issuer is the operator's; the query is built here
	http.Redirect(w, r, c.issuer+authorizePath+"?"+q.Encode(), http.StatusSeeOther)
}

// idClaims are the ID token's claims the callback checks.
type idClaims struct {
	Iss   string   `json:"iss"`
	Sub   string   `json:"sub"`
	Aud   audience `json:"aud"`
	Nonce string   `json:"nonce"`
	Email string   `json:"email"`
}

// audience is the aud claim: a string or an array of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// readIDToken reads the claims of a compact JWS without checking its
// signature (see the note at the top of this file).
func readIDToken(tok string) (idClaims, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return idClaims{}, errors.New("console: the ID token is not a compact JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return idClaims{}, fmt.Errorf("console: ID token payload: %w", err)
	}
	var cl idClaims
	if err := json.Unmarshal(payload, &cl); err != nil {
		return idClaims{}, fmt.Errorf("console: ID token claims: %w", err)
	}
	return cl, nil
}

// callback is GET /console/callback: the provider's redirect back.
func (c *Console) callback(w http.ResponseWriter, r *http.Request) {
	r, cancel := ctxTimeout(r)
	defer cancel()
	var f flow
	ck, err := r.Cookie(c.cookieName(r, cookieFlow))
	if err == nil {
		box, berr := c.sealer()
		if berr != nil || box.Open(purposeFlow, ck.Value, c.now(), &f) != nil {
			err = errors.New("console: the flow cookie does not open")
		}
	}
	// The flow cookie works once.
	c.setCookieSameSite(w, r, cookieFlow, "", -1, http.SameSiteLaxMode)
	q := r.URL.Query()
	if err != nil {
		c.log.Info("console: callback without a sign-in under way", "correlation_id", httpx.CorrelationID(r.Context()))
		c.signInFailed(w, r, http.StatusBadRequest, "This sign-in was not started here, or it took more than ten minutes. Sign in again.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		c.log.Info("console: callback state mismatch", "correlation_id", httpx.CorrelationID(r.Context()))
		c.signInFailed(w, r, http.StatusBadRequest, "This sign-in answer does not belong to the sign-in this browser started. Sign in again.")
		return
	}
	if e := q.Get("error"); e != "" {
		c.log.Info("console: provider refused the sign-in", "error", httpx.LogValue(e), "correlation_id", httpx.CorrelationID(r.Context()))
		msg := "The sign-in did not complete. Sign in again."
		if e == "access_denied" {
			msg = "The sign-in was cancelled or refused. Sign in again."
		}
		c.signInFailed(w, r, http.StatusBadRequest, msg)
		return
	}
	code := q.Get("code")
	if code == "" {
		c.signInFailed(w, r, http.StatusBadRequest, "The sign-in answer carried no code. Sign in again.")
		return
	}
	tok, err := c.exchange(r.Context(), code, f.Verifier, f.RedirectURI)
	if err != nil {
		c.log.Warn("console: code exchange failed", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		c.signInFailed(w, r, http.StatusBadGateway, "The provider did not complete the sign-in. Sign in again.")
		return
	}
	cl, err := readIDToken(tok.IDToken)
	switch {
	case err != nil:
	case subtle.ConstantTimeCompare([]byte(cl.Nonce), []byte(f.Nonce)) != 1:
		err = errors.New("console: the ID token's nonce is not the sign-in's")
	case !slices.Contains(cl.Aud, admin.ClientID):
		err = errors.New("console: the ID token is not for " + admin.ClientID)
	case c.issuer != "" && cl.Iss != c.issuer:
		err = errors.New("console: the ID token's issuer is another")
	case cl.Sub == "":
		err = errors.New("console: the ID token names no subject")
	}
	if err != nil {
		c.log.Warn("console: ID token refused", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		c.signInFailed(w, r, http.StatusBadGateway, "The provider's answer could not be used. Sign in again.")
		return
	}
	s := session{Token: tok.AccessToken, Sub: cl.Sub, Name: cl.Email, Fingerprint: c.personFingerprint(tok.AccessToken)}
	if !c.whoami(w, r, &s) {
		return
	}
	// The session ends a little before the access token does, so the
	// browser drops it rather than showing a page the API then refuses.
	lifetime := SessionLifetime
	if ttl := time.Duration(tok.ExpiresIn)*time.Second - tokenMargin; tok.ExpiresIn > 0 && ttl < lifetime {
		lifetime = max(ttl, time.Second)
	}
	s.CSRF = httpx.NewID()
	if err := c.seal(w, r, s, lifetime); err != nil {
		c.log.Warn("console: start session", "err", err)
		c.signInFailed(w, r, http.StatusServiceUnavailable, "The cluster is not ready yet; try again in a moment.")
		return
	}
	c.log.Info("console: person signed in", "sub", s.Sub, "role", s.Role, "correlation_id", httpx.CorrelationID(r.Context()))
	// A page rather than a redirect: when the provider is on another site
	// (the console on --admin-addr), the browser would not send the
	// SameSite=Strict session cookie on a redirect that ends a navigation
	// another site started; it does on the refresh this page asks for.
	c.render(w, 0, "signed_in", &view{Title: "Signed in", CSRF: s.CSRF, SignedIn: true, Who: s.Name, Role: s.Role})
}

// whoami asks the admin API, as the person of s, who they are here: their
// grant's role (GET /admins; a refusal by role there means org_admin, the
// one role that may not read grants) and their email. It fills s, or
// answers with the sign-in page and returns false when the API refuses
// the person.
func (c *Console) whoami(w http.ResponseWriter, r *http.Request, s *session) bool {
	rs := &reqSession{s: *s}
	pr := r.WithContext(context.WithValue(r.Context(), sessionKey{}, rs))
	grants, err := listAllGrants(c, pr)
	var ae *apiError
	switch {
	case rs.ended.Load():
		c.log.Info("console: the admin API refused a person", "sub", s.Sub, "correlation_id", httpx.CorrelationID(r.Context()))
		c.signInFailed(w, r, http.StatusForbidden, "You signed in, but you may not administer this site: you hold no administrator grant, or your sign-in did not use the second factor it requires.")
		return false
	case errors.As(err, &ae) && ae.Status == http.StatusForbidden:
		s.Role = admin.RoleOrgAdmin
	case err != nil:
		c.log.Warn("console: read the person's grant", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		c.signInFailed(w, r, http.StatusServiceUnavailable, "Your grant could not be read; try again in a moment.")
		return false
	default:
		for _, g := range grants {
			if g.UserID == s.Sub {
				s.Role = g.Role
				break
			}
		}
	}
	if s.Name == "" {
		var u admin.User
		s.Name = s.Sub
		if c.call(pr, "GET", "/users/"+pathID(s.Sub), nil, &u) == nil && u.Email != "" {
			s.Name = u.Email
		}
	}
	return true
}

// signInFailed shows the sign-in page with a message about a person's
// sign-in (not the token form's).
func (c *Console) signInFailed(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, status, "signin", &view{Title: "Sign in to the console", CSRF: c.csrfToken(w, r), Error: msg, Data: personError{}})
}

// personError marks the sign-in page's error as a person's sign-in's, so
// the token field is not shown as the one in error.
type personError struct{}

// reqSession is the session of one console request, which its calls of
// the admin API read (the bearer) and mark (ended).
type reqSession struct {
	s     session
	ended atomic.Bool
}

type sessionKey struct{}

// requestSession is the session authenticated put in ctx, or nil.
func requestSession(ctx context.Context) *reqSession {
	rs, _ := ctx.Value(sessionKey{}).(*reqSession)
	return rs
}

// refusesPerson reports whether an answer of the admin API refuses the
// person themselves rather than one request: 401, or a 403 that carries a
// bearer challenge (RFC 6750 3: the API's credential check answers so for
// a person who holds no grant any more, or whose sign-in is weaker than
// the site requires). A 403 without a challenge is the authorization
// check's refusal by role (another organization, an auditor's write),
// shown on the page while the session goes on.
func refusesPerson(status int, h http.Header) bool {
	switch status {
	case http.StatusUnauthorized:
		return true
	case http.StatusForbidden:
		return h.Get("WWW-Authenticate") != ""
	}
	return false
}

// personSession serves h for a person's session: the answer is held back
// until h returns, so that when a call of the admin API refused the
// person, the console ends the session and shows the sign-in page with
// the reason instead.
func (c *Console) personSession(w http.ResponseWriter, r *http.Request, rs *reqSession, h http.HandlerFunc) {
	rec := &recorder{header: http.Header{}}
	h(rec, r)
	if rs.ended.Load() {
		c.log.Info("console: person session ended by the admin API", "sub", rs.s.Sub, "correlation_id", httpx.CorrelationID(r.Context()))
		c.endSession(w, r)
		c.signInFailed(w, r, http.StatusUnauthorized, "Your console session has ended: your administrator grant was removed, your sign-in at the provider ended, or it no longer meets this site's requirements. Sign in again.")
		return
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	w.WriteHeader(rec.status)
	_, _ = io.Copy(w, bytes.NewReader(rec.body.Bytes()))
}
