package oidc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/keys"
)

// clockSkew is how long past exp a token is still accepted: nodes' clocks
// differ a little. It is the whole tolerance; there is no grace period.
const clockSkew = 5 * time.Second

// errTokenInvalid means the token is not an access token we honour now:
// malformed, not ours, expired, an ID or logout token, revoked, of an
// ended app session, of a suspended app, or its person lost access. All
// of these get one answer.
var errTokenInvalid = errors.New("oidc: invalid token")

// accessToken is what a checked access token says. scopes may be shared
// with the token cache: read only.
type accessToken struct {
	jti, sid, sub, org string
	scopes             []string
	exp                time.Time
}

// hasScope reports whether the token was granted scope.
func (t *accessToken) hasScope(scope string) bool {
	for _, s := range t.scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// parseAccessToken checks that raw is an access token we issued and that
// it has not expired at now: signature by a published key (RS256), iss,
// exp (with clockSkew), and the shape of an access token: jti, sid, sub,
// organization_id and scp present, aud empty (an ID token has a non-empty
// aud, a logout token a string aud and no scp). It does not consult the
// store. Token problems are errTokenInvalid; anything else is a fault of
// ours (the key set could not be read).
//
// A token that passed once is remembered (tokenCache): presented again,
// only what can have changed is checked again, that its key is still
// published and exp.
func (p *Provider) parseAccessToken(raw string, now time.Time) (accessToken, error) {
	if raw == "" || len(raw) > keys.MaxTokenSize {
		return accessToken{}, errTokenInvalid
	}
	key := tokenKey(raw)
	if kid, tok, ok := p.tokens.get(key); ok {
		published, err := p.cfg.Keys.Published(kid)
		switch {
		case err != nil:
			return accessToken{}, err
		case !published || !now.Before(tok.exp.Add(clockSkew)):
			p.tokens.remove(key) // for good: neither comes back
			return accessToken{}, errTokenInvalid
		}
		return tok, nil
	}
	tok, kid, err := p.verifyAccessToken(raw, now)
	if err != nil {
		return accessToken{}, err
	}
	p.tokens.add(key, kid, tok, now)
	return tok, nil
}

// tokenKey is the token cache's key for raw, its SHA-256. A token of
// ordinary size is copied to the stack first: converting the string to a
// slice for the hash would put a copy on the heap for every request.
func tokenKey(raw string) [sha256.Size]byte {
	if len(raw) > 2048 {
		return sha256.Sum256([]byte(raw))
	}
	var buf [2048]byte
	return sha256.Sum256(buf[:copy(buf[:], raw)])
}

// verifyAccessToken is parseAccessToken without the cache; it also
// returns the kid of the key that verified raw.
func (p *Provider) verifyAccessToken(raw string, now time.Time) (accessToken, string, error) {
	payload, kid, err := p.cfg.Keys.VerifyKid([]byte(raw))
	if err != nil {
		if errors.Is(err, keys.ErrUnknownKey) {
			return accessToken{}, "", errTokenKeyUnknown
		}
		if errors.Is(err, keys.ErrInvalidToken) {
			return accessToken{}, "", errTokenInvalid
		}
		return accessToken{}, "", err
	}
	var c bearerClaims
	if json.Unmarshal(payload, &c) != nil || c.Iss != p.cfg.Issuer || !noAudience(c.Aud) ||
		c.JTI == "" || c.Sub == "" || c.SID == "" || c.Org == "" || c.Scp == nil {
		return accessToken{}, "", errTokenInvalid
	}
	out := accessToken{jti: c.JTI, sub: c.Sub, sid: c.SID, org: c.Org, scopes: *c.Scp}
	if out.exp = numericDate(c.Exp); out.exp.IsZero() || !now.Before(out.exp.Add(clockSkew)) {
		return accessToken{}, "", errTokenInvalid
	}
	return out, kid, nil
}

// bearerClaims are what the bearer check reads of an access token
// (accessClaims), decoded from the payload keys.Manager has verified. A
// claim of the wrong JSON type fails the decoding, and so the token.
type bearerClaims struct {
	Iss string          `json:"iss"`
	Sub string          `json:"sub"`
	Aud json.RawMessage `json:"aud"`
	Exp *float64        `json:"exp"`
	JTI string          `json:"jti"`
	SID string          `json:"sid"`
	Org string          `json:"organization_id"`
	Scp *[]string       `json:"scp"`
}

// noAudience reports whether an aud claim is absent, null or an empty
// array: an ID token's aud is a non-empty array, a logout token's a
// string, and neither is an access token.
func noAudience(aud json.RawMessage) bool {
	aud = bytes.TrimSpace(aud)
	return len(aud) == 0 || string(aud) == "null" || string(aud) == "[]"
}

// numericDate is a JSON NumericDate (seconds since the epoch, possibly
// fractional) as a time, or the zero time when it is absent, not
// positive or out of range. A float64 holds every whole second exactly.
func numericDate(n *float64) time.Time {
	if n == nil || !(*n > 0 && *n < 1<<33) {
		return time.Time{}
	}
	sec, frac := math.Modf(*n)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// errTokenKeyUnknown is errTokenInvalid for a token whose kid this node
// does not publish.
var errTokenKeyUnknown = fmt.Errorf("%w: signed by a key not published here", errTokenInvalid)

// parseAccessTokenCaughtUp is parseAccessToken that, for a token naming a
// key this node does not know, catches up with the cluster once and tries
// again: a key rotated in with "immediate" through another node signs
// tokens a moment before a lagging node has applied it.
func (p *Provider) parseAccessTokenCaughtUp(ctx context.Context, raw string, now time.Time) (accessToken, error) {
	tok, err := p.parseAccessToken(raw, now)
	if errors.Is(err, errTokenKeyUnknown) && p.catchUp(ctx) {
		tok, err = p.parseAccessToken(raw, now)
	}
	return tok, err
}

// checkAccessToken is parseAccessToken plus the live check of the store,
// never cached: not revoked, app and SSO session live, app not suspended,
// organization and membership active, person exists
// (fsm.State.CheckAccess). With email set and the email scope granted,
// it also reads the person's email. A store that cannot be read is an
// error other than errTokenInvalid.
func (p *Provider) checkAccessToken(ctx context.Context, raw string, now time.Time, email bool) (accessToken, fsm.Access, error) {
	tok, err := p.parseAccessTokenCaughtUp(ctx, raw, now)
	if err != nil {
		return tok, fsm.Access{}, err
	}
	// Only a well-formed token of ours costs a read index: no acknowledged
	// logout, revocation or suspension anywhere may be missed here.
	if err := p.linearize(ctx); err != nil {
		return tok, fsm.Access{}, err
	}
	acc, err := p.cfg.State.CheckAccess(tok.jti, tok.sid, now, email && tok.hasScope(ScopeEmail))
	switch {
	case errors.Is(err, fsm.ErrNotFound), errors.Is(err, fsm.ErrSessionEnded),
		errors.Is(err, fsm.ErrAccessChanged), errors.Is(err, fsm.ErrAlreadyUsed):
		return tok, acc, errTokenInvalid
	case err != nil:
		return tok, acc, err
	}
	// The claims are ours and signed, so these hold; checking is cheap.
	if acc.UserID != tok.sub || acc.OrgID != tok.org {
		return tok, acc, errTokenInvalid
	}
	return tok, acc, nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header (scheme case-insensitive, RFC 6750 2.1). Tokens in the body or
// the query are not accepted.
func bearerToken(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	tok = strings.TrimLeft(tok, " ")
	// Two IndexByte scans (vectorized) rather than ContainsAny, which
	// walks the token a byte at a time: tokens are a couple of KB.
	if strings.IndexByte(tok, ' ') >= 0 || strings.IndexByte(tok, '\t') >= 0 {
		return ""
	}
	return tok
}

// bearerStyle is how a bearer endpoint answers a failed check.
type bearerStyle uint8

const (
	bearerJSON     bearerStyle = iota // GET /userinfo: 401 {"error":"invalid_token"}, 500 {"error":"server_error"}
	bearerNoBody                      // POST /userinfo: the same statuses and headers, no body
	bearerEnvelope                    // /api/v1: 401 as bearerJSON, 500 the INTERNAL_ERROR envelope
)

// bearer checks the request's bearer token and counts the outcome; email is
// checkAccessToken's. On failure it has answered: 401 invalid_token (one
// answer, with the Bearer challenge) for every token problem, or 500 when
// the store could not be read.
func (p *Provider) bearer(w http.ResponseWriter, r *http.Request, style bearerStyle, email bool) (accessToken, fsm.Access, bool) {
	tok, acc, err := p.checkAccessToken(r.Context(), bearerToken(r), p.now(), email)
	p.corsBearer(w, r, tok, acc, err) // bearer serves only CORS endpoints
	switch {
	case err == nil:
		p.metrics.bearerChecks.WithLabelValues(bearerValid).Inc()
		return tok, acc, true
	case errors.Is(err, errTokenInvalid):
		p.metrics.bearerChecks.WithLabelValues(bearerInvalid).Inc()
		writeInvalidToken(w, style == bearerNoBody)
	case errors.Is(err, errUnavailable):
		// 503 {error, error_description?}, as userinfo and the membership
		// list document it; POST /userinfo without a body.
		p.metrics.bearerChecks.WithLabelValues(bearerError).Inc()
		if style == bearerNoBody {
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusServiceUnavailable)
		} else {
			writeOAuthError(w, errTokUnavailable)
		}
	default:
		p.metrics.bearerChecks.WithLabelValues(bearerError).Inc()
		p.logFault(r.Context(), "bearer check", err)
		switch style {
		case bearerNoBody:
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusInternalServerError)
		case bearerEnvelope:
			httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "internal error")
		default:
			writeOAuthError(w, errTokServer)
		}
	}
	return tok, acc, false
}

// invalidTokenBody is the body of every bearer 401, byte for byte.
// #nosec G101 -- an error body, not a credential
const invalidTokenBody = `{"error":"invalid_token"}`

// writeInvalidToken answers every bearer token problem: 401, the Bearer
// challenge, the exact Content-Type, and the body unless noBody (POST
// /userinfo).
func writeInvalidToken(w http.ResponseWriter, noBody bool) {
	h := w.Header()
	h.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	if !noBody {
		w.Write([]byte(invalidTokenBody))
	}
}

// logFault logs a server-side failure with the request's correlation id.
func (p *Provider) logFault(ctx context.Context, what string, err error) {
	p.log.Error(what, "err", err, "correlation_id", httpx.CorrelationID(ctx))
}
