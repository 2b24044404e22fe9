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
	h := hashSecret(secret)
	return string(h[:])
}

// hashSecret is HashSecret into an array: no allocation for a secret of
// up to 256 bytes (every request that authenticates a client hashes one).
func hashSecret(secret string) (out [2 * sha256.Size]byte) {
	var sum [sha256.Size]byte
	if len(secret) > 256 {
		sum = sha256.Sum256([]byte(secret))
	} else {
		var buf [256]byte
		sum = sha256.Sum256(buf[:copy(buf[:], secret)])
	}
	hex.Encode(out[:], sum[:])
	return out
}

// VerifySecret reports in constant time whether secret hashes to stored.
// An empty stored hash matches nothing.
func VerifySecret(secret, stored string) bool {
	if stored == "" {
		return false
	}
	h := hashSecret(secret)
	return subtle.ConstantTimeCompare(h[:], []byte(stored)) == 1
}
