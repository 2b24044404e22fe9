package signin

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/password"
)

// TestImportedHashReplacedAtFirstSignIn: a person imported with another
// provider's hash signs in with their password; a wrong password changes
// nothing; the first good sign-in stores the node's argon2id hash of the
// same password, which the next sign-in uses.
func TestImportedHashReplacedAtFirstSignIn(t *testing.T) {
	const secret = "correct horse battery staple"
	for _, tc := range []struct{ scheme, stored string }{
		// Made by libxcrypt and by Python's hashlib (internal/password's vectors).
		{password.SchemeBcrypt, "$2y$04$Kl6VLAk7hBiqxQIq8pgm..5KFKjLhcGun5XNPtMUYB5QNBgOJ2GDS"},
		{password.SchemePBKDF2SHA256, "$pbkdf2-sha256$i=27500,l=32$eD237Q2jMzGsivBCMvgrzw==$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E="},
		{password.SchemePBKDF2SHA512, "$pbkdf2-sha512$210000$efrlleigia9rdmdVwNzKjw$umI/q5mFxzqqV0p0w9/osTKf3aQpFpblrVOjOK.0RglzJKkwgVz1CWmssFvxbsjz84K073lsQWBXGiPQUHkmpA"},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h := newHarness(t, func(c *Config) { c.Registerer = reg })
			h.apply(fsm.TypeUpdateUser, fsm.UpdateUser{ID: hUser, PasswordHash: &tc.stored, At: h.clock.Now()})
			stored := func() string {
				u, err := h.p.cfg.State.User(hUser)
				if err != nil {
					t.Fatal(err)
				}
				return u.PasswordHash
			}

			b := h.browser()
			if p := b.signIn(b.get(authzPath(authzQuery(hPublic, false))), hEmail, secret+"!"); p.status != http.StatusBadRequest {
				t.Fatalf("wrong password: got %d", p.status)
			}
			if stored() != tc.stored {
				t.Fatal("a wrong password changed the stored hash")
			}
			b = h.browser()
			b.fullSignInWith(authzQuery(hPublic, false), hEmail, secret)
			now := stored()
			if password.Scheme(now) != password.SchemeArgon2id || h.p.cfg.Hasher.NeedsRehash(now) {
				t.Fatalf("after the first sign-in the hash is %q, want the node's argon2id", now)
			}
			if ok, err := h.p.cfg.Hasher.Verify(context.Background(), secret, now); !ok || err != nil {
				t.Fatalf("the new hash does not check the password: %v %v", ok, err)
			}
			if got := bcGather(t, reg)[`oidcd_password_rehashes_total{scheme="`+tc.scheme+`"}`]; got != 1 {
				t.Fatalf("oidcd_password_rehashes_total{scheme=%q}: got %v, want 1", tc.scheme, got)
			}
			b = h.browser()
			b.fullSignInWith(authzQuery(hPublic, false), hEmail, secret)
			if stored() != now {
				t.Fatal("the second sign-in replaced the hash again")
			}
		})
	}
}
