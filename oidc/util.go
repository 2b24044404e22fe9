package oidc

import (
	"net/url"

	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
)

// newID returns 32 random bytes, base64url: codes, cookie secrets, jtis.
func newID() string { return authn.NewID() }

// hashToken is how codes and cookie secrets are stored (authn.HashToken:
// they are 256-bit random values, so hex SHA-256 is enough).
func hashToken(s string) string { return authn.HashToken(s) }

// formValue is the single value of a form field (authn.FormValue).
func formValue(form url.Values, key string) (string, bool) { return authn.FormValue(form, key) }

// s256 is the PKCE S256 transform of a verifier (authn.S256).
func s256(verifier string) string { return authn.S256(verifier) }

// logValue is s capped for a log line (httpx.LogValue).
func logValue(s string) string { return httpx.LogValue(s) }
