package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
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

// HashToken returns the stored form of an admin token: hex SHA-256.
//
// A plain hash is enough here, unlike for passwords: the token is 256 bits
// from crypto/rand, so there is no dictionary to try and a brute force of
// the hash is as hopeless as guessing the token. A fast hash also keeps the
// check on every admin request cheap.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// tokenMatches reports in constant time whether token hashes to want. An
// empty want (no token configured) matches nothing.
func tokenMatches(token, want string) bool {
	if want == "" || token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(HashToken(token)), []byte(want)) == 1
}
