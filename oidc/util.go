package oidc

import (
	"github.com/oidcd/oidcd/internal/password"

	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
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

// maxLogValue caps a client-supplied value written to a log line.
const maxLogValue = 128

// logValue is s fit for a log line: at most maxLogValue bytes of it, with
// the length of the rest, so a 20 KB parameter cannot make a 20 KB line.
// slog's handlers quote and escape it.
func logValue(s string) string {
	if len(s) <= maxLogValue {
		return s
	}
	return fmt.Sprintf("%s…(+%d bytes)", strings.ToValidUTF8(s[:maxLogValue], ""), len(s)-maxLogValue)
}
