package oidc

import (
	"crypto/sha256"
	"encoding/base64"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
)

// accessClaims are the claims of an access token. An app's token has
// no client_id and no azp: it names its app session (sid), and the app is
// found from there. The built-in client's token (adminclient.go) names no
// organization and has no app session: its sid is the SSO session, and
// it names its client instead.
type accessClaims struct {
	Iss string `json:"iss"`
	Sub string `json:"sub"`
	// Aud is a zero-length array, not a slice: it always encodes as [],
	// never null and never omitted. Access tokens are not
	// audience-restricted, and an empty aud is also what tells them from
	// ID tokens at the bearer check.
	Aud      [0]string `json:"aud"`
	Exp      int64     `json:"exp"`
	Iat      int64     `json:"iat"`
	JTI      string    `json:"jti"`
	AuthTime int64     `json:"auth_time"`
	ACR      string    `json:"acr"`
	AMR      []string  `json:"amr"`
	SID      string    `json:"sid"`
	OrgID    string    `json:"organization_id,omitempty"` // every app's token names one
	ClientID string    `json:"client_id,omitempty"`       // the built-in client's only
	Scp      []string  `json:"scp"`
}

// idClaims are the claims of an ID token (docs/application-developers.md,
// "What the tokens say").
type idClaims struct {
	Iss      string   `json:"iss"`
	Sub      string   `json:"sub"`
	Aud      []string `json:"aud"` // [client_id]: an array even with one element
	Exp      int64    `json:"exp"`
	Iat      int64    `json:"iat"`
	AuthTime int64    `json:"auth_time"`
	ACR      string   `json:"acr"`
	AMR      []string `json:"amr"`
	SID      string   `json:"sid"`
	OrgID    string   `json:"organization_id,omitempty"` // none for the built-in client
	AtHash   string   `json:"at_hash"`
	JTI      string   `json:"jti"`
	Rat      int64    `json:"rat"`
	Nonce    string   `json:"nonce,omitempty"`
}

// orEmpty turns a nil list into an empty one, so it encodes as [].
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// newAccessClaims are the access-token claims for a redeemed code.
func newAccessClaims(issuer string, c fsm.Code, jti string, iat, exp time.Time) accessClaims {
	return accessClaims{
		Iss: issuer, Sub: c.UserID, Exp: exp.Unix(), Iat: iat.Unix(), JTI: jti,
		AuthTime: c.AuthTime.Unix(), ACR: c.ACR, AMR: orEmpty(c.AMR), SID: c.SID, OrgID: c.OrgID,
		Scp: orEmpty(c.Scopes),
	}
}

// newIDClaims are the ID-token claims for a redeemed code, bound to the
// access token issued with it by at_hash. It lives as long as the access
// token.
func newIDClaims(issuer string, c fsm.Code, accessToken []byte, iat, exp time.Time) idClaims {
	return idClaims{
		Iss: issuer, Sub: c.UserID, Aud: []string{c.ClientID}, Exp: exp.Unix(), Iat: iat.Unix(),
		AuthTime: c.AuthTime.Unix(), ACR: c.ACR, AMR: orEmpty(c.AMR), SID: c.SID, OrgID: c.OrgID,
		AtHash: atHash(accessToken), JTI: authn.NewID(), Rat: c.RequestedAt.Unix(), Nonce: c.Nonce,
	}
}

// atHash is the at_hash of an RS256 ID token (OIDC Core 3.1.3.6): the
// base64url left half of the SHA-256 of the access token's ASCII.
func atHash(accessToken []byte) string {
	sum := sha256.Sum256(accessToken)
	return base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])
}
