package federation

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// maxCode bounds an authorization code from the browser before it is sent
// on (Entra ID's run to about 1.5 KB).
const maxCode = 16 << 10

// Exchange completes a sign-in: it checks the callback against ar (state)
// and the upstream (iss, RFC 9207), redeems the code at the token endpoint
// with the PKCE verifier and the client's credentials, and returns the ID
// token once every check of OpenID Connect Core 1.0, 3.1.3.7 passed:
// signature by a key of the upstream's JWKS with RS256, PS256 or ES256;
// iss; aud holding our client_id; azp (required with several audiences);
// exp ahead; iat neither in the future (beyond a 2 minute skew) nor older
// than 15 minutes; nonce. The caller found ar by cb.State; redirectURI
// is the one AuthorizeURL was given.
func (c *Client) Exchange(ctx context.Context, up Upstream, redirectURI string, ar AuthRequest, cb Callback) (*IDToken, error) {
	wrap := func(err error) error { return fmt.Errorf("federation: sign-in at %s: %w", up.Issuer, err) }
	if err := checkCall(up, ar, redirectURI); err != nil {
		return nil, wrap(err)
	}
	if err := checkState(ar, cb); err != nil {
		return nil, wrap(err)
	}
	if cb.Code == "" || len(cb.Code) > maxCode {
		return nil, wrap(invalidf("authorization code is empty or longer than %d bytes", maxCode))
	}
	meta, err := c.Discover(ctx, up.Issuer)
	if err != nil {
		return nil, err
	}
	if err := checkIssParam(meta, up, cb.Iss); err != nil {
		return nil, wrap(err)
	}
	tr, err := c.redeem(ctx, up, meta, redirectURI, cb.Code, ar.Verifier)
	if err != nil {
		return nil, wrap(fmt.Errorf("token endpoint: %w", err))
	}
	tok, err := c.verifyIDToken(ctx, up, meta, tr.idToken, ar.Nonce)
	if err != nil {
		return nil, wrap(fmt.Errorf("ID token: %w", err))
	}
	if tok.Email == "" && meta.UserinfoEndpoint != "" && tr.accessToken != "" && strings.EqualFold(tr.tokenType, "bearer") {
		if err := c.userinfo(ctx, meta, tr.accessToken, tok); err != nil {
			return nil, wrap(fmt.Errorf("userinfo: %w", err))
		}
	}
	return tok, nil
}

// tokenResponse is what the token endpoint answered that this package
// uses.
type tokenResponse struct {
	idToken, accessToken, tokenType string
}

// userinfo completes tok from the upstream's userinfo endpoint (OpenID
// Connect Core 1.0, 5.3) when its ID token named no address, as an oidcd
// upstream's does (it puts email in userinfo only): email,
// email_verified and name, and the claims the ID token lacks (a groups
// claim). The answer's sub must be the ID token's (5.3.2): a userinfo
// answer for another person is never taken, which is the substitution
// this check exists for. A signed or encrypted answer (application/jwt)
// is not read: tok stays without an address.
func (c *Client) userinfo(ctx context.Context, meta *Metadata, accessToken string, tok *IDToken) error {
	req, err := http.NewRequest(http.MethodGet, meta.UserinfoEndpoint, nil)
	if err != nil {
		return invalidf("userinfo_endpoint: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+accessToken)
	a, err := c.do(ctx, c.post, req)
	if err != nil {
		return err
	}
	if err := statusError(req, a.status); err != nil {
		return err
	}
	if a.status != http.StatusOK {
		return invalidf("GET %s: HTTP %d", req.URL.Redacted(), a.status)
	}
	if ct := strings.ToLower(a.header.Get("Content-Type")); strings.HasPrefix(ct, "application/jwt") {
		return nil
	}
	claims, err := decodeClaims(a.body)
	if err != nil {
		return err
	}
	cl := claimReader{claims: claims}
	sub, ok := cl.str("sub")
	if !ok || subtle.ConstantTimeCompare([]byte(sub), []byte(tok.Subject)) != 1 {
		return invalidf("answer's sub is not the ID token's")
	}
	email, _ := cl.boundedStr("email")
	name, _ := cl.boundedStr("name")
	if cl.err != nil {
		return cl.err
	}
	tok.Email = email
	tok.EmailVerified = email != "" && (claims["email_verified"] == true || claims["email_verified"] == "true")
	if tok.Name == "" {
		tok.Name = name
	}
	if tok.Claims == nil {
		tok.Claims = map[string]any{}
	}
	for k, v := range claims {
		if _, ok := tok.Claims[k]; !ok {
			tok.Claims[k] = v
		}
	}
	return nil
}

// redeem sends the token request (RFC 6749, 4.1.3; RFC 7636, 4.5) and
// returns the response's id_token. The client authenticates as
// authMethod chooses; with client_secret_basic, id and secret are
// form-urlencoded before base64 (RFC 6749, 2.3.1), which matters for a
// secret holding ':' or '%' and which many clients get wrong. The token
// endpoint's redirects are not followed: a code and a secret are never
// sent on to a URL the discovery document did not name.
func (c *Client) redeem(ctx context.Context, up Upstream, meta *Metadata, redirectURI, code, verifier string) (tokenResponse, error) {
	method, err := authMethod(meta.TokenEndpointAuthMethods, up.ClientSecret)
	if err != nil {
		return tokenResponse{}, err
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {redirectURI},
		"code_verifier": {verifier},
	}
	switch method {
	case authPost:
		form.Set("client_id", up.ClientID)
		form.Set("client_secret", up.ClientSecret)
	case authNone:
		form.Set("client_id", up.ClientID)
	}
	req, err := http.NewRequest(http.MethodPost, meta.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return tokenResponse{}, invalidf("token_endpoint: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if method == authBasic {
		cred := url.QueryEscape(up.ClientID) + ":" + url.QueryEscape(up.ClientSecret)
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	}
	a, err := c.do(ctx, c.post, req)
	if err != nil {
		return tokenResponse{}, err
	}
	return parseTokenResponse(req, a)
}

// parseTokenResponse reads the token endpoint's answer: 200 with an
// id_token (and the access token, for userinfo), or an OAuth error (RFC 6749, 5.2), which is an
// *UpstreamError for a 4xx (invalid_grant: the code was used or expired;
// invalid_client: the secret is wrong) and ErrUnreachable for a 5xx or
// 429 (temporarily_unavailable is a sick upstream, not a refusal).
func parseTokenResponse(req *http.Request, a *answer) (tokenResponse, error) {
	var body struct {
		IDToken          any `json:"id_token"`
		AccessToken      any `json:"access_token"`
		TokenType        any `json:"token_type"`
		Error            any `json:"error"`
		ErrorDescription any `json:"error_description"`
	}
	jsonErr := json.Unmarshal(a.body, &body)
	code, _ := body.Error.(string)
	desc, _ := body.ErrorDescription.(string)
	if err := statusError(req, a.status); err != nil {
		if jsonErr == nil && code != "" {
			return tokenResponse{}, unreachablef("%s %s: HTTP %d, error %s", req.Method, req.URL.Redacted(), a.status, cleanText(code, maxErrorCode))
		}
		return tokenResponse{}, err
	}
	switch {
	case a.status >= 300 && a.status < 400:
		return tokenResponse{}, invalidf("HTTP %d: the token endpoint redirects, which is not followed", a.status)
	case jsonErr != nil:
		return tokenResponse{}, withKind(ErrInvalid, jsonErr, "HTTP %d: answer is not a JSON object", a.status)
	case code != "":
		return tokenResponse{}, newUpstreamError(code, desc, a.status)
	case a.status != http.StatusOK:
		return tokenResponse{}, invalidf("HTTP %d without an OAuth error", a.status)
	}
	raw, ok := body.IDToken.(string)
	if !ok || raw == "" {
		return tokenResponse{}, invalidf("answer has no id_token (is openid among the scopes?)")
	}
	at, _ := body.AccessToken.(string)
	tt, _ := body.TokenType.(string)
	return tokenResponse{idToken: raw, accessToken: at, tokenType: tt}, nil
}

// VerifyLogoutToken checks a back-channel logout token the upstream posted
// (OpenID Connect Back-Channel Logout 1.0, 2.6): signature as for ID
// tokens; iss; aud holding our client_id; iat present and not older than
// 15 minutes; exp, when present, ahead; typ, when present, logout+jwt;
// events holding the back-channel logout event; no nonce; a jti; a sid or
// a sub. Refusing replays is the caller's: it records JTI until
// ReplayUntil. An ID token is never a logout token: it has no events and
// has a nonce.
func (c *Client) VerifyLogoutToken(ctx context.Context, up Upstream, raw string) (*LogoutToken, error) {
	wrap := func(err error) error { return fmt.Errorf("federation: logout token from %s: %w", up.Issuer, err) }
	if err := up.Validate(); err != nil {
		return nil, wrap(err)
	}
	meta, err := c.Discover(ctx, up.Issuer)
	if err != nil {
		return nil, err
	}
	lt, err := c.verifyLogoutToken(ctx, up, meta, raw)
	if err != nil {
		return nil, wrap(err)
	}
	return lt, nil
}
