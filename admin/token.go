package admin

import (
	"crypto/rand"
	"encoding/base64"

	"github.com/oidcd/oidcd/internal/password"
)

// GenerateToken returns a fresh admin token: 32 random bytes, base64url
// without padding.
func GenerateToken() string { return randomString() }

// randomString returns 32 random bytes, base64url without padding.
func randomString() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// HashToken returns the stored form of an admin token (see
// password.HashSecret for why a fast hash is right for it).
func HashToken(token string) string { return password.HashSecret(token) }

// tokenMatches reports in constant time whether token hashes to want. An
// empty want (no token configured) matches nothing.
func tokenMatches(token, want string) bool {
	return token != "" && password.VerifySecret(token, want)
}
