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

// exchangeCode redeems the code of form for client.
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
	if isAdmin(client) {
		return p.exchangeAdminCode(r, raw, redirectURI, verifier, formParam(form, "scope"))
	}
	// The code is read locally. What it holds (client, redirect URI,
	// challenge, scopes, person) never changes once issued, and the
	// redemption write re-checks on the leader what can change (used,
	// expired, the person's access), so a code found here needs no read
	// index: on an edge replica that is one WAN round trip less. A code
	// not found here may have been issued through another node a moment
	// ago: catch up once, then read again.
	now := p.now()
	code, err := p.cfg.State.Code(authn.HashToken(raw))
	if errors.Is(err, fsm.ErrNotFound) && p.cfg.ReadIndex != nil {
		if lerr := p.linearize(r.Context()); lerr != nil {
			return tokenResponse{}, errTokUnavailable
		}
		code, err = p.cfg.State.Code(authn.HashToken(raw))
	}
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return tokenResponse{}, errTokGrant
	case err != nil:
		p.logFault(r.Context(), "read code", err)
		return tokenResponse{}, errTokUnavailable
	}
	// PKCE is compared in constant time; the other two are not secrets.
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
		return p.redeem(r, code, client.ID, now, "", time.Time{}, tokenResponse{})
	}
	ttl := client.AccessTokenTTL
	if ttl <= 0 {
		ttl = defaultAccessTTL
	}
	iat := now.Truncate(time.Second)
	exp := iat.Add(time.Duration(ttl) * time.Second)
	jti := authn.NewID()
	access, err := p.cfg.Keys.Sign(newAccessClaims(p.cfg.Issuer, code, jti, iat, exp), keys.TypJWT)
	if err != nil {
		p.logFault(r.Context(), "sign access token", err)
		return tokenResponse{}, errTokUnavailableSign
	}
	resp := tokenResponse{AccessToken: string(access), TokenType: "bearer", ExpiresIn: ttl, Scope: strings.Join(code.Scopes, " ")}
	if slices.Contains(code.Scopes, ScopeOpenID) {
		id, err := p.cfg.Keys.Sign(newIDClaims(p.cfg.Issuer, code, access, iat, exp), keys.TypJWT)
		if err != nil {
			p.logFault(r.Context(), "sign id token", err)
			return tokenResponse{}, errTokUnavailableSign
		}
		resp.IDToken = string(id)
	}
	return p.redeem(r, code, client.ID, now, jti, exp, resp)
}

// redeem marks code used (the access token jti until exp) and answers resp,
// or the token error its outcome calls for.
func (p *Provider) redeem(r *http.Request, code fsm.Code, clientID string, now time.Time, jti string, exp time.Time, resp tokenResponse) (tokenResponse, *Error) {
	res, err := p.cfg.Applier.Apply(r.Context(), p.stamp(r.Context(), fsm.MustCommand(fsm.TypeRedeemCode, fsm.RedeemCode{
		Hash: code.Hash, ClientID: clientID, At: now, AccessJTI: jti, AccessExpires: exp,
	}), fsm.Audit{Type: fsm.EventToken, Actor: fsm.ActorClient, ClientID: clientID, FailOnError: true}))
	if err != nil {
		p.logFault(r.Context(), "apply redeem_code", err)
		return tokenResponse{}, errTokUnavailable
	}
	switch {
	case res.Err == nil:
		return resp, nil
	case errors.Is(res.Err, fsm.ErrExpired):
		return tokenResponse{}, errTokCodeExpired
	case errors.Is(res.Err, fsm.ErrAccessChanged), errors.Is(res.Err, fsm.ErrSessionEnded):
		return tokenResponse{}, errTokAccessChanged
	case errors.Is(res.Err, fsm.ErrAlreadyUsed), errors.Is(res.Err, fsm.ErrNotFound), errors.Is(res.Err, fsm.ErrMismatch):
		return tokenResponse{}, errTokGrant
	default:
		p.logFault(r.Context(), "redeem_code outcome", res.Err)
		return tokenResponse{}, errTokGrant
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
