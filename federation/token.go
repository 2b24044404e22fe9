package federation

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
)

const (
	// skew is how far in the future an iat (or nbf) may be: the upstream's
	// clock and ours are never quite the same.
	skew = 2 * time.Minute
	// maxTokenAge is how old (by iat) a token may be. An ID token is
	// minted at the exchange a moment ago, a logout token is delivered as
	// the upstream ends the session; one older than this is a replay or a
	// clock gone wrong. It also bounds how long the caller must remember a
	// logout token's jti (LogoutToken.ReplayUntil).
	maxTokenAge = 15 * time.Minute

	// maxSubject is the longest sub (OpenID Connect Core 1.0, 2: at most
	// 255 ASCII characters).
	maxSubject = 255
	// maxClaimString bounds the other string claims this package returns
	// (sid, jti, email, name, acr) and each string of StringsClaim.
	maxClaimString = 1024
	// maxClaimStrings bounds the strings StringsClaim returns.
	maxClaimStrings = 1000
)

// backchannelLogoutEvent is the member of a logout token's events claim
// that makes it one (OpenID Connect Back-Channel Logout 1.0, 2.4).
const backchannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"

// IDToken is an upstream's ID token that passed every check of Exchange.
type IDToken struct {
	// Raw is the token as received, for id_token_hint at the upstream's
	// end-session endpoint.
	Raw string
	// Subject is sub: with the issuer, the person at the upstream.
	Subject string
	// Email is the email claim, "" when absent or not a string.
	Email string
	// EmailVerified is email_verified: true for true or the string "true"
	// (older AD FS and Cognito send strings), false for anything else.
	EmailVerified bool
	// Name is the name claim, "" when absent or not a string.
	Name string
	// AMR and ACR are how the upstream says the person signed in
	// (RFC 8176 values), for a provider whose second factor is trusted.
	AMR []string
	ACR string
	// SID is the upstream's session id, "" when absent: a back-channel
	// logout token may name the session by it.
	SID string
	// AuthTime is auth_time, zero when absent. Upstreams differ in
	// sending it (Entra ID only as an optional claim), so this package
	// does not require it; a caller that passed MaxAge or prompt=login and
	// needs proof of a fresh sign-in checks it.
	AuthTime time.Time
	// IssuedAt and Expiry are iat and exp.
	IssuedAt, Expiry time.Time
	// Claims are all the token's claims as JSON decodes them (numbers are
	// float64), for claims this package does not name (groups: see
	// StringsClaim).
	Claims map[string]any
}

// LogoutToken is an upstream's back-channel logout token that passed every
// check of VerifyLogoutToken. The caller ends the sessions it names and
// records JTI until ReplayUntil to refuse the same token twice.
type LogoutToken struct {
	JTI string
	// SID and Subject name what to end: the upstream session, the
	// person's sessions from this upstream, or both (one is never "").
	SID     string
	Subject string
	// IssuedAt is iat; Expiry is exp, zero when absent.
	IssuedAt, Expiry time.Time
	// ReplayUntil is when the token would be refused anyway (its age, its
	// exp): the jti need not be remembered past it.
	ReplayUntil time.Time
}

// jwsHeader is what is read of a token's protected header.
type jwsHeader struct {
	alg, kid, typ string
}

// parseCompact checks that raw is a compact JWS (three base64url parts,
// RFC 7515 7.1) of at most maxLen bytes and returns its header. It refuses
// what this package does not verify: an algorithm not in allowedAlgs,
// critical extensions (crit), and an unencoded payload (b64, RFC 7797). A
// key the header names or carries (jwk, jku, x5u, x5c) is never used: keys
// come from the upstream's JWKS alone.
func parseCompact(raw string, maxLen int64) (jwsHeader, error) {
	if int64(len(raw)) > maxLen {
		return jwsHeader{}, invalidf("token is longer than %d bytes", maxLen)
	}
	parts := strings.SplitN(raw, ".", 6) // 5 is JWE; more is neither
	if len(parts) != 3 {
		if len(parts) == 5 {
			return jwsHeader{}, invalidf("token is encrypted (JWE), which is not supported")
		}
		return jwsHeader{}, invalidf("token is not a compact JWS")
	}
	for _, p := range parts {
		if strings.IndexFunc(p, func(r rune) bool {
			return !('A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_')
		}) >= 0 {
			return jwsHeader{}, invalidf("token is not a compact JWS (a part is not base64url)")
		}
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return jwsHeader{}, invalidf("token header is not base64url")
	}
	var h map[string]any
	if err := json.Unmarshal(hb, &h); err != nil {
		return jwsHeader{}, invalidf("token header is not a JSON object")
	}
	var out jwsHeader
	for name, dst := range map[string]*string{"alg": &out.alg, "kid": &out.kid, "typ": &out.typ} {
		v, ok := h[name]
		if !ok {
			continue
		}
		s, isStr := v.(string)
		if !isStr {
			return jwsHeader{}, invalidf("token header's %s is not a string", name)
		}
		*dst = s
	}
	if !slices.Contains(allowedAlgs, out.alg) {
		return jwsHeader{}, invalidf("token algorithm %q is not one of %s", cleanText(out.alg, 32), strings.Join(allowedAlgs, ", "))
	}
	if _, ok := h["crit"]; ok {
		return jwsHeader{}, invalidf("token header has critical extensions (crit)")
	}
	if _, ok := h["b64"]; ok {
		return jwsHeader{}, invalidf("token header has b64")
	}
	if parts[1] == "" || parts[2] == "" {
		return jwsHeader{}, invalidf("token has no payload or no signature")
	}
	if len(out.kid) > maxClaimString {
		return jwsHeader{}, invalidf("token kid is longer than %d bytes", maxClaimString)
	}
	return out, nil
}

// verifyJWT checks raw's form and signature by a key of the upstream's
// JWKS and returns its header and claims. A kid the cached set lacks
// makes the set fetched again (at most once per refetchFloor, see load):
// the upstream may have rotated its keys since.
func (c *Client) verifyJWT(ctx context.Context, meta *Metadata, raw string) (jwsHeader, map[string]any, error) {
	h, err := parseCompact(raw, c.maxBody)
	if err != nil {
		return h, nil, err
	}
	ks, err := c.keys(ctx, meta.JWKSURI, false)
	if err != nil {
		return h, nil, fmt.Errorf("JWKS: %w", err)
	}
	candidates := ks.find(h.kid, h.alg)
	if len(candidates) == 0 {
		ks, err = c.keys(ctx, meta.JWKSURI, true)
		if err != nil {
			return h, nil, fmt.Errorf("JWKS, fetched again for kid %q: %w", cleanText(h.kid, 64), err)
		}
		candidates = ks.find(h.kid, h.alg)
	}
	if len(candidates) == 0 {
		if h.kid == "" {
			return h, nil, invalidf("token has no kid and the JWKS has no single %s key", h.alg)
		}
		return h, nil, invalidf("JWKS has no %s key with kid %q", h.alg, cleanText(h.kid, 64))
	}
	var payload []byte
	for _, k := range candidates {
		if payload, err = jws.Verify([]byte(raw), jws.WithKey(jwa.SignatureAlgorithm(h.alg), k.pub)); err == nil {
			break
		}
	}
	if err != nil {
		return h, nil, invalidf("token signature does not verify with the key %q of the JWKS", cleanText(h.kid, 64))
	}
	claims, err := decodeClaims(payload)
	if err != nil {
		return h, nil, err
	}
	return h, claims, nil
}

// decodeClaims reads a JWT claims set: a JSON object.
func decodeClaims(payload []byte) (map[string]any, error) {
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil || claims == nil {
		return nil, invalidf("token claims are not a JSON object")
	}
	return claims, nil
}

// verifyIDToken runs the checks of OpenID Connect Core 1.0, 3.1.3.7 on an
// ID token from the token endpoint, in its order, and returns the token.
func (c *Client) verifyIDToken(ctx context.Context, up Upstream, meta *Metadata, raw, nonce string) (*IDToken, error) {
	h, claims, err := c.verifyJWT(ctx, meta, raw)
	if err != nil {
		return nil, err
	}
	// A logout token or a JWT access token (RFC 9068) is no ID token,
	// even when it would pass the claim checks.
	if t := strings.ToLower(h.typ); t == "logout+jwt" || t == "application/logout+jwt" || t == "at+jwt" || t == "application/at+jwt" {
		return nil, invalidf("token has typ %q, which is no ID token's", cleanText(h.typ, 64))
	}
	cl := claimReader{claims: claims}
	if err := checkIssAud(cl, up); err != nil {
		return nil, err
	}
	now := c.now()
	exp, ok := cl.time("exp")
	if !ok {
		return nil, cl.missing("exp")
	}
	if !now.Before(exp) {
		return nil, invalidf("token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	iat, ok := cl.time("iat")
	if !ok {
		return nil, cl.missing("iat")
	}
	if err := checkIssuedAt(iat, now); err != nil {
		return nil, err
	}
	if err := checkNotBefore(cl, now); err != nil {
		return nil, err
	}
	got, ok := cl.str("nonce")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(nonce)) != 1 {
		return nil, invalidf("token's nonce is not the one sent")
	}
	sub, ok := cl.str("sub")
	if !ok || sub == "" || len(sub) > maxSubject {
		return nil, invalidf("token's sub is missing or longer than %d bytes", maxSubject)
	}
	sid, _ := cl.boundedStr("sid")
	acr, _ := cl.boundedStr("acr")
	email, _ := cl.boundedStr("email")
	name, _ := cl.boundedStr("name")
	authTime, _ := cl.time("auth_time")
	if cl.err != nil {
		return nil, cl.err
	}
	return &IDToken{
		Raw:           raw,
		Subject:       sub,
		Email:         email,
		EmailVerified: claims["email_verified"] == true || claims["email_verified"] == "true",
		Name:          name,
		AMR:           StringsClaim(claims, "amr"),
		ACR:           acr,
		SID:           sid,
		AuthTime:      authTime,
		IssuedAt:      iat,
		Expiry:        exp,
		Claims:        claims,
	}, nil
}

// checkIssAud checks iss, aud and azp: the token was issued by this
// upstream for us. When aud holds other clients too, azp must name us, so
// a token the upstream issued to another client that merely lists us
// cannot sign a person in here (OpenID Connect Core 1.0, 3.1.3.7, 3-5).
func checkIssAud(cl claimReader, up Upstream) error {
	iss, ok := cl.str("iss")
	if !ok || iss != up.Issuer {
		return invalidf("token's iss %q is not %q", cleanText(iss, 256), up.Issuer)
	}
	aud, err := cl.audience()
	if err != nil {
		return err
	}
	if !slices.Contains(aud, up.ClientID) {
		return invalidf("token's aud does not hold our client_id")
	}
	azp, hasAzp := cl.str("azp")
	if _, present := cl.claims["azp"]; present && !hasAzp {
		return invalidf("token's azp is not a string")
	}
	if hasAzp && azp != up.ClientID {
		return invalidf("token's azp %q is not our client_id", cleanText(azp, 256))
	}
	if len(aud) > 1 && !hasAzp {
		return invalidf("token has several audiences and no azp")
	}
	return nil
}

// checkIssuedAt refuses an iat further in the future than skew or older
// than maxTokenAge.
func checkIssuedAt(iat, now time.Time) error {
	if iat.After(now.Add(skew)) {
		return invalidf("iat %s is in the future", iat.UTC().Format(time.RFC3339))
	}
	if iat.Before(now.Add(-maxTokenAge)) {
		return invalidf("iat %s is more than %s ago", iat.UTC().Format(time.RFC3339), maxTokenAge)
	}
	return nil
}

// checkNotBefore refuses a token whose nbf, when present, is still ahead.
func checkNotBefore(cl claimReader, now time.Time) error {
	if _, present := cl.claims["nbf"]; !present {
		return nil
	}
	nbf, ok := cl.time("nbf")
	if !ok {
		return cl.err
	}
	if nbf.After(now.Add(skew)) {
		return invalidf("nbf %s is in the future", nbf.UTC().Format(time.RFC3339))
	}
	return nil
}

// verifyLogoutToken runs the checks of OpenID Connect Back-Channel Logout
// 1.0, 2.6.
func (c *Client) verifyLogoutToken(ctx context.Context, up Upstream, meta *Metadata, raw string) (*LogoutToken, error) {
	h, claims, err := c.verifyJWT(ctx, meta, raw)
	if err != nil {
		return nil, err
	}
	if h.typ != "" {
		if t := strings.ToLower(h.typ); t != "logout+jwt" && t != "application/logout+jwt" {
			return nil, invalidf("token has typ %q, not logout+jwt", cleanText(h.typ, 64))
		}
	}
	cl := claimReader{claims: claims}
	if err := checkIssAud(cl, up); err != nil {
		return nil, err
	}
	now := c.now()
	iat, ok := cl.time("iat")
	if !ok {
		return nil, cl.missing("iat")
	}
	if err := checkIssuedAt(iat, now); err != nil {
		return nil, err
	}
	replayUntil := iat.Add(maxTokenAge)
	var exp time.Time
	if _, present := claims["exp"]; present {
		if exp, ok = cl.time("exp"); !ok {
			return nil, cl.err
		}
		if !now.Before(exp) {
			return nil, invalidf("token expired at %s", exp.UTC().Format(time.RFC3339))
		}
		if exp.Before(replayUntil) {
			replayUntil = exp
		}
	}
	if err := checkNotBefore(cl, now); err != nil {
		return nil, err
	}
	// events and no nonce are what tell a logout token from an ID token
	// (2.4): an ID token replayed to the logout endpoint must end nothing.
	events, ok := claims["events"].(map[string]any)
	if !ok {
		return nil, invalidf("token has no events object")
	}
	if _, ok := events[backchannelLogoutEvent].(map[string]any); !ok {
		return nil, invalidf("token's events lack %s with an object", backchannelLogoutEvent)
	}
	if _, present := claims["nonce"]; present {
		return nil, invalidf("token has a nonce")
	}
	jti, ok := cl.boundedStr("jti")
	if !ok || jti == "" {
		return nil, invalidf("token has no jti")
	}
	sid, hasSid := cl.boundedStr("sid")
	sub, hasSub := cl.str("sub")
	if len(sub) > maxSubject {
		return nil, invalidf("token's sub is longer than %d bytes", maxSubject)
	}
	if cl.err != nil {
		return nil, cl.err
	}
	if (!hasSid || sid == "") && (!hasSub || sub == "") {
		return nil, invalidf("token has neither sid nor sub")
	}
	return &LogoutToken{JTI: jti, SID: sid, Subject: sub, IssuedAt: iat, Expiry: exp, ReplayUntil: replayUntil}, nil
}

// claimReader reads typed claims; the first claim of the wrong type is
// kept in err.
type claimReader struct {
	claims map[string]any
	err    error
}

func (cl *claimReader) fail(format string, args ...any) {
	if cl.err == nil {
		cl.err = invalidf(format, args...)
	}
}

func (cl *claimReader) missing(name string) error {
	if cl.err != nil {
		return cl.err
	}
	return invalidf("token has no %s", name)
}

// str is a string claim; ok is false when absent, and also (with err
// set) when of another type.
func (cl *claimReader) str(name string) (string, bool) {
	v, present := cl.claims[name]
	if !present {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		cl.fail("token's %s is not a string", name)
	}
	return s, ok
}

// boundedStr is str, refusing (with err set) one longer than
// maxClaimString.
func (cl *claimReader) boundedStr(name string) (string, bool) {
	s, ok := cl.str(name)
	if len(s) > maxClaimString {
		cl.fail("token's %s is longer than %d bytes", name, maxClaimString)
		return "", false
	}
	return s, ok
}

// maxNumericDate is 9999-12-31T23:59:59Z: a later "date" is garbage.
const maxNumericDate = 253402300799

// time is a NumericDate claim (RFC 7519, 2: seconds, maybe fractional);
// ok is false when absent, and also (with err set) when not a number in
// [0, year 9999].
func (cl *claimReader) time(name string) (time.Time, bool) {
	v, present := cl.claims[name]
	if !present {
		return time.Time{}, false
	}
	f, ok := v.(float64)
	if !ok || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		cl.fail("token's %s is not a date", name)
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}

// audience is aud: one string or an array of strings (RFC 7519, 4.1.3),
// never empty.
func (cl *claimReader) audience() ([]string, error) {
	switch v := cl.claims["aud"].(type) {
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, a := range v {
			s, ok := a.(string)
			if !ok {
				return nil, invalidf("token's aud holds a value that is not a string")
			}
			out = append(out, s)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, invalidf("token has no aud")
}

// StringsClaim reads a claim that is a list of strings (groups, roles,
// amr) from claims: a JSON array of strings, or one string (some
// providers send a single group that way). Values that are not strings,
// empty strings and strings longer than 1024 bytes are skipped, and at
// most the first 1000 values are returned, so a hostile or misconfigured
// upstream cannot hand the caller unbounded data. nil when the claim is
// absent or holds no such value.
func StringsClaim(claims map[string]any, name string) []string {
	keep := func(s string) bool { return s != "" && len(s) <= maxClaimString }
	switch v := claims[name].(type) {
	case string:
		if keep(v) {
			return []string{v}
		}
	case []any:
		var out []string
		for _, e := range v {
			if len(out) == maxClaimStrings {
				break
			}
			if s, ok := e.(string); ok && keep(s) {
				out = append(out, s)
			}
		}
		return out
	case []string: // claims built by a caller rather than decoded
		var out []string
		for _, s := range v {
			if len(out) == maxClaimStrings {
				break
			}
			if keep(s) {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
