package oidc

import (
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"

	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// newID returns 32 random bytes, base64url: codes, cookie secrets, jtis.
func newID() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// hashToken is how codes and cookie secrets are stored: they are 256-bit
// random values, so password.HashSecret (hex SHA-256) is enough.
func hashToken(s string) string { return password.HashSecret(s) }

// s256 is the PKCE S256 transform of a verifier (RFC 7636 4.2).
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// logValue is s capped for a log line (httpx.LogValue).
func logValue(s string) string { return httpx.LogValue(s) }
