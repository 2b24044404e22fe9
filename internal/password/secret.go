package password

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// HashSecret returns the stored form of a machine-generated secret (client
// secrets, the admin token): hex SHA-256.
//
// A slow hash protects low-entropy secrets that people choose. These
// secrets are 256 bits from crypto/rand: there is no dictionary to try, and
// brute-forcing the hash is as hopeless as guessing the secret. A fast hash
// keeps the check on every token, introspection and revocation request at a
// few hundred nanoseconds instead of an argon2id run (19 MiB, ~25 ms).
// Never use it for passwords.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// VerifySecret reports in constant time whether secret hashes to stored.
// An empty stored hash matches nothing.
func VerifySecret(secret, stored string) bool {
	if stored == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(stored)) == 1
}
