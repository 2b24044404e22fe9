package oidc

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/keys"
)

// defaultAccessTTL is the access-token lifetime when the client
// registration sets none: 600 seconds.
const defaultAccessTTL = 600

// registerToken mounts the token, userinfo, introspection, revocation and
// membership endpoints.
func (p *Provider) registerToken(mux *http.ServeMux) {
	mux.Handle("POST "+PathToken, p.instrument("token", p.handleToken))
	mux.Handle("GET "+PathUserinfo, p.instrument("userinfo", p.handleUserinfo))
	mux.Handle("POST "+PathUserinfo, p.instrument("userinfo", p.handleUserinfo))
	mux.Handle("POST "+PathIntrospect, p.instrument("introspect", p.handleIntrospect))
	mux.Handle("POST "+PathRevoke, p.instrument("revoke", p.handleRevoke))
	mux.Handle("GET "+PathMemberships, p.instrument("memberships", p.handleMemberships))
}

// instrument wraps a handler with its latency metric and makes sure the
// request has a correlation id (the node's middleware normally gave it
// one; a bare mux in tests has none).
func (p *Provider) instrument(name string, h http.HandlerFunc) http.Handler {
	withID := httpx.Correlation(h)
	return p.metrics.observe(name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpx.CorrelationID(r.Context()) == "" {
			withID.ServeHTTP(w, r)
			return
		}
		h(w, r)
	}))
}

// tokenResponse is the token endpoint's answer (the TokenResponse schema of
// docs/openapi/oidc.json).
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
	IDToken     string `json:"id_token,omitempty"`
}

// handleToken is POST /oauth2/token: the authorization code
// grant with PKCE. Order: read the body; rate-limit on the client_id as
// sent and the client address (every request counts, even a malformed
// one), and authenticate the client (first, for a client with a limit of
// its own: limitAndAuthenticate); validate the parameters; check the code as
// read locally; sign both tokens; then redeem through the log. The tokens
// are signed before the redemption so that a signing failure leaves the
// code unused; they are handed out only when the redemption succeeded.
func (p *Provider) handleToken(w http.ResponseWriter, r *http.Request) {
	form, ferr := readTokenForm(w, r)
	cred := clientCredentials(r, form)
	p.corsClient(w, r, cred.id) // before the limiter may answer 429
	client, cerr, ok := p.limitAndAuthenticate(w, r, limitToken, cred, ferr, true, p.withAdmin(p.cfg.State.Client))
	if !ok {
		return
	}
	if cerr != nil {
		p.tokenError(w, cred, cerr)
		return
	}
	resp, terr := p.exchangeCode(r, form, client)
	if terr != nil {
		p.tokenError(w, cred, terr)
		return
	}
	p.metrics.tokensIssued.Inc()
	writeNoStoreJSON(w, resp)
}

// tokenError counts and answers an error of the token endpoint.
func (p *Provider) tokenError(w http.ResponseWriter, c credentials, e *Error) {
	p.metrics.tokenErrors.WithLabelValues(e.Code).Inc()
	writeClientError(w, c, e)
}

// exchangeCode redeems the code of form for client: the one code
// exchange of every client. Where a code lives, how it is spent and what
// its access token is bound to is the codeGrant's (appCodes for the
// apps' codes, adminCodes for the built-in client's: adminclient.go);
// the checks of the request against the code (client, redirect URI,
// PKCE, expiry, scope), the tokens and their errors are the same for
// both.
func (p *Provider) exchangeCode(r *http.Request, form url.Values, client fsm.Client) (tokenResponse, *Error) {
	switch gt := formParam(form, "grant_type"); {
	case gt == "":
		return tokenResponse{}, errTokNoGrantType
	case gt != "authorization_code":
		return tokenResponse{}, errTokGrantType
	}
	raw, redirectURI, verifier := formParam(form, "code"), formParam(form, "redirect_uri"), formParam(form, "code_verifier")
	switch {
	case raw == "":
		return tokenResponse{}, errTokNoCode
	case redirectURI == "":
		return tokenResponse{}, errTokNoRedirectURI
	case verifier == "":
		return tokenResponse{}, errTokNoVerifier
	case !validVerifier(verifier):
		return tokenResponse{}, errTokVerifierSyntax
	}
	var g codeGrant = appCodes{p}
	if isAdmin(client) {
		g = adminCodes{p}
	}
	now := p.now()
	code, terr := g.load(r, raw, now)
	if terr != nil {
		return tokenResponse{}, terr
	}
	// PKCE is compared in constant time; the other two are not secrets.
	// The redirect URI is the one the code was issued for, byte for byte:
	// for a native app's loopback redirect, the very port it was sent to.
	switch {
	case code.ClientID != client.ID, code.RedirectURI != redirectURI:
		return tokenResponse{}, errTokGrant
	case subtle.ConstantTimeCompare([]byte(authn.S256(verifier)), []byte(code.Challenge)) != 1:
		return tokenResponse{}, errTokVerifier
	case code.RedeemedAt.IsZero() && !now.Before(code.ExpiresAt):
		// A used code is never refused here, expired or not: the log
		// must see the replay to revoke the first token.
		return tokenResponse{}, errTokCodeExpired
	}
	if s := formParam(form, "scope"); s != "" {
		// Every scope asked for must be one the code was issued for.
		notGranted := func(scope string) bool { return !slices.Contains(code.Scopes, scope) }
		if slices.ContainsFunc(strings.Fields(s), notGranted) {
			return tokenResponse{}, errTokScope
		}
	}
	if !code.RedeemedAt.IsZero() {
		// A replay: the state machine revokes the first token and answers
		// ErrAlreadyUsed. Nothing is signed for it.
		if terr := g.redeem(r, code, now, "", time.Time{}); terr != nil {
			return tokenResponse{}, terr
		}
		return tokenResponse{}, errTokGrant
	}
	ttl := client.AccessTokenTTL
	if ttl <= 0 {
		ttl = defaultAccessTTL
	}
	iat := now.Truncate(time.Second)
	exp, terr := g.expiry(r, code, now, iat.Add(time.Duration(ttl)*time.Second))
	if terr != nil {
		return tokenResponse{}, terr
	}
	jti := authn.NewID()
	access, err := p.cfg.Keys.Sign(g.accessClaims(code, jti, iat, exp), keys.TypJWT)
	if err != nil {
		p.logFault(r.Context(), "sign access token", err)
		return tokenResponse{}, errTokUnavailableSign
	}
	resp := tokenResponse{AccessToken: string(access), TokenType: "bearer", ExpiresIn: int64(exp.Sub(iat) / time.Second), Scope: strings.Join(code.Scopes, " ")}
	if slices.Contains(code.Scopes, ScopeOpenID) {
		id, err := p.cfg.Keys.Sign(newIDClaims(p.cfg.Issuer, code, access, iat, exp), keys.TypJWT)
		if err != nil {
			p.logFault(r.Context(), "sign id token", err)
			return tokenResponse{}, errTokUnavailableSign
		}
		resp.IDToken = string(id)
	}
	if terr := g.redeem(r, code, now, jti, exp); terr != nil {
		return tokenResponse{}, terr
	}
	return resp, nil
}

// codeGrant is what exchangeCode leaves to where a client's codes live.
// The tokens are signed before redeem, so that a signing failure leaves
// an apps' code unused; they are handed out only when redeem succeeded.
type codeGrant interface {
	// load returns the code raw stands for, or the token error to
	// answer (errTokGrant for a code it does not know).
	load(r *http.Request, raw string, now time.Time) (fsm.Code, *Error)
	// expiry is when the access token for code ends: want, the client's
	// lifetime from now, or earlier; an error when no token is due.
	expiry(r *http.Request, code fsm.Code, now, want time.Time) (time.Time, *Error)
	// accessClaims are the claims of code's access token.
	accessClaims(code fsm.Code, jti string, iat, exp time.Time) accessClaims
	// redeem spends code for the access token jti, valid until exp (a
	// replay when code was redeemed before: jti is empty, and the answer
	// is an error).
	redeem(r *http.Request, code fsm.Code, now time.Time, jti string, exp time.Time) *Error
}

// appCodes are the codes of the stored clients: fsm.Code records, read
// locally and redeemed through the log by fsm.RedeemCode, which re-checks
// on the leader what can change and binds the tokens to the app session
// the code opened (its sid).
type appCodes struct{ p *Provider }

var _ codeGrant = appCodes{}

// load reads the code locally. What it holds (client, redirect URI,
// challenge, scopes, person) never changes once issued, and the
// redemption write re-checks on the leader what can change (used,
// expired, the person's access), so a code found here needs no read
// index: on an edge replica that is one WAN round trip less. A code not
// found here may have been issued through another node a moment ago:
// catch up once, then read again.
func (g appCodes) load(r *http.Request, raw string, _ time.Time) (fsm.Code, *Error) {
	p := g.p
	code, err := p.cfg.State.Code(authn.HashToken(raw))
	if errors.Is(err, fsm.ErrNotFound) && p.cfg.ReadIndex != nil {
		if lerr := p.linearize(r.Context()); lerr != nil {
			return fsm.Code{}, errTokUnavailable
		}
		code, err = p.cfg.State.Code(authn.HashToken(raw))
	}
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return fsm.Code{}, errTokGrant
	case err != nil:
		p.logFault(r.Context(), "read code", err)
		return fsm.Code{}, errTokUnavailable
	}
	return code, nil
}

// expiry is the client's lifetime: the app session is checked by redeem.
func (appCodes) expiry(_ *http.Request, _ fsm.Code, _, want time.Time) (time.Time, *Error) {
	return want, nil
}

func (g appCodes) accessClaims(code fsm.Code, jti string, iat, exp time.Time) accessClaims {
	return newAccessClaims(g.p.cfg.Issuer, code, jti, iat, exp)
}

// redeem marks code used (the access token jti until exp) through the
// log, and maps its outcome to the token error it calls for.
func (g appCodes) redeem(r *http.Request, code fsm.Code, now time.Time, jti string, exp time.Time) *Error {
	p := g.p
	res, err := p.cfg.Applier.Apply(r.Context(), p.stamp(r.Context(), fsm.MustCommand(fsm.TypeRedeemCode, fsm.RedeemCode{
		Hash: code.Hash, ClientID: code.ClientID, At: now, AccessJTI: jti, AccessExpires: exp,
	}), fsm.Audit{Type: fsm.EventToken, Actor: fsm.ActorClient, ClientID: code.ClientID, FailOnError: true}))
	if err != nil {
		p.logFault(r.Context(), "apply redeem_code", err)
		return errTokUnavailable
	}
	switch {
	case res.Err == nil:
		return nil
	case errors.Is(res.Err, fsm.ErrExpired):
		return errTokCodeExpired
	case errors.Is(res.Err, fsm.ErrAccessChanged), errors.Is(res.Err, fsm.ErrSessionEnded):
		return errTokAccessChanged
	case errors.Is(res.Err, fsm.ErrAlreadyUsed), errors.Is(res.Err, fsm.ErrNotFound), errors.Is(res.Err, fsm.ErrMismatch):
		return errTokGrant
	default:
		p.logFault(r.Context(), "redeem_code outcome", res.Err)
		return errTokGrant
	}
}

// validVerifier reports whether v has the syntax of a PKCE code verifier
// (RFC 7636 4.1): 43 to 128 characters of [A-Za-z0-9-._~].
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}
