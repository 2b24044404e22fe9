package password

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Hashes of importedSecret made by other implementations than the ones
// Verify uses, so a misreading of a format cannot agree with itself:
// bcrypt by glibc's libxcrypt (Python's crypt.crypt with a $2a$, $2b$ or
// $2y$ salt), PBKDF2 by Python's hashlib.pbkdf2_hmac, written the way a
// Keycloak realm export's salt and value read (standard base64, padded)
// and the way passlib writes them (adapted base64, unpadded).
const importedSecret = "correct horse battery staple"

var importedVectors = []struct {
	name, stored, scheme string
}{
	{"bcrypt 2a", "$2a$04$/ErSCk7QuN1G/Cq.yTkga.I1jEYLV1jNjIkFEhCyrcw8Vfz484VX2", SchemeBcrypt},
	{"bcrypt 2b", "$2b$04$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS", SchemeBcrypt},
	{"bcrypt 2y", "$2y$04$Kl6VLAk7hBiqxQIq8pgm..5KFKjLhcGun5XNPtMUYB5QNBgOJ2GDS", SchemeBcrypt},
	{"pbkdf2-sha256 keycloak", "$pbkdf2-sha256$i=27500,l=32$eD237Q2jMzGsivBCMvgrzw==$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E=", SchemePBKDF2SHA256},
	{"pbkdf2-sha256 phc no l", "$pbkdf2-sha256$i=27500$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E", SchemePBKDF2SHA256},
	{"pbkdf2-sha256 passlib", "$pbkdf2-sha256$27500$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv.E", SchemePBKDF2SHA256},
	{"pbkdf2-sha512 keycloak", "$pbkdf2-sha512$i=210000,l=64$efrlleigia9rdmdVwNzKjw==$umI/q5mFxzqqV0p0w9/osTKf3aQpFpblrVOjOK+0RglzJKkwgVz1CWmssFvxbsjz84K073lsQWBXGiPQUHkmpA==", SchemePBKDF2SHA512},
	{"pbkdf2-sha512 passlib", "$pbkdf2-sha512$210000$efrlleigia9rdmdVwNzKjw$umI/q5mFxzqqV0p0w9/osTKf3aQpFpblrVOjOK.0RglzJKkwgVz1CWmssFvxbsjz84K073lsQWBXGiPQUHkmpA", SchemePBKDF2SHA512},
}

func TestVerifyImported(t *testing.T) {
	h := New(cheap, 2)
	ctx := context.Background()
	for _, v := range importedVectors {
		t.Run(v.name, func(t *testing.T) {
			if got := Scheme(v.stored); got != v.scheme {
				t.Fatalf("Scheme: got %q, want %q", got, v.scheme)
			}
			if err := h.Check(v.stored); err != nil {
				t.Fatalf("Check: %v", err)
			}
			for _, try := range []struct {
				secret string
				want   bool
			}{{importedSecret, true}, {importedSecret + " ", false}, {"Correct horse battery staple", false}, {"", false}} {
				got, err := h.Verify(ctx, try.secret, v.stored)
				if err != nil || got != try.want {
					t.Errorf("Verify(%q): got %v, %v; want %v", try.secret, got, err, try.want)
				}
			}
			if !h.NeedsRehash(v.stored) {
				t.Error("NeedsRehash: got false for an imported hash")
			}
		})
	}
}

func TestCheckRefuses(t *testing.T) {
	tests := []struct {
		name, stored string
		want         error
		mention      string
	}{
		{"empty", "", ErrUnsupported, "not a $-prefixed"},
		{"plain text", "hunter2hunter2", ErrUnsupported, "not a $-prefixed"},
		{"md5-crypt", "$1$saltsalt$qjXMvbEw8oaL.CzflDugX/", ErrUnsupported, "md5-crypt"},
		{"sha512-crypt", "$6$rounds=5000$salt$abc", ErrUnsupported, "sha512-crypt"},
		{"argon2i", "$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", ErrUnsupported, "only argon2id"},
		{"scrypt", "$scrypt$ln=16,r=8,p=1$c2FsdA$aGFzaA", ErrUnsupported, `"scrypt"`},
		{"pbkdf2-sha1", "$pbkdf2$1000$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", ErrUnsupported, `"pbkdf2"`},
		{"bcrypt cost 31", "$2b$31$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS", ErrMalformed, "cost 31"},
		{"bcrypt truncated", "$2b$04$q1InSmxkjI2d.mwrmiq6HeRxID781AhVX", ErrMalformed, "bcrypt"},
		{"bcrypt no salt", "$2b$04$", ErrMalformed, "bcrypt"},
		{"pbkdf2 too many rounds", "$pbkdf2-sha256$i=2000001$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E", ErrMalformed, "rounds out of range"},
		{"pbkdf2 too few rounds", "$pbkdf2-sha256$999$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv.E", ErrMalformed, "rounds out of range"},
		{"pbkdf2 rounds not a number", "$pbkdf2-sha256$many$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv.E", ErrMalformed, "rounds"},
		{"pbkdf2 unknown parameter", "$pbkdf2-sha256$i=27500,x=1$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E", ErrMalformed, "parameters"},
		{"pbkdf2 l disagrees", "$pbkdf2-sha256$i=27500,l=64$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E", ErrMalformed, "l=64"},
		{"pbkdf2 short salt", "$pbkdf2-sha256$i=27500$c2FsdA$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E", ErrMalformed, "salt"},
		{"pbkdf2 bad base64", "$pbkdf2-sha256$i=27500$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0Xre*L2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E", ErrMalformed, "key"},
		{"pbkdf2 extra field", "$pbkdf2-sha256$i=27500$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E$x", ErrMalformed, "fields"},
		{"argon2id absurd memory", "$argon2id$v=19$m=4194304,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", ErrMalformed, "m="},
	}
	h := New(cheap, 1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := h.Check(tt.stored)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("Check: got %v, want %v mentioning %q", err, tt.want, tt.mention)
			}
			// Verify refuses the same string the same way, without running it.
			if ok, verr := h.Verify(context.Background(), importedSecret, tt.stored); ok || !errors.Is(verr, tt.want) {
				t.Fatalf("Verify: got %v, %v; want false, %v", ok, verr, tt.want)
			}
		})
	}
}

// TestCheckDoesNotEchoTheHash: an operator sees Check's error in an import
// report and a log; it names the problem, never the hash's secret part.
func TestCheckDoesNotEchoTheHash(t *testing.T) {
	for _, stored := range []string{
		"$1$saltsalt$qjXMvbEw8oaL.CzflDugX/",
		"$pbkdf2-sha256$i=27500$eD237Q2jMzGsivBCMvgrzw$Ku0Fs2I0Xre*L2Odp5t5KMkM",
		"$2b$31$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS",
		"$" + strings.Repeat("x", 40) + "$secretpart",
	} {
		err := New(cheap, 1).Check(stored)
		if err == nil {
			t.Fatalf("%q: accepted", stored)
		}
		for _, part := range strings.Split(stored, "$") {
			if len(part) >= 16 && strings.Contains(err.Error(), part) {
				t.Errorf("%q: the error %q echoes %q", stored, err, part)
			}
		}
	}
}

func TestNeedsRehash(t *testing.T) {
	node := New(Params{Memory: 128, Time: 2, Threads: 1}, 1)
	ctx := context.Background()
	same, _ := node.Hash(ctx, "x")
	weakerMemory, _ := New(Params{Memory: 64, Time: 2, Threads: 1}, 1).Hash(ctx, "x")
	weakerTime, _ := New(Params{Memory: 128, Time: 1, Threads: 1}, 1).Hash(ctx, "x")
	stronger, _ := New(Params{Memory: 256, Time: 3, Threads: 1}, 1).Hash(ctx, "x")
	for _, tt := range []struct {
		name, stored string
		want         bool
	}{
		{"own parameters", same, false},
		{"weaker memory", weakerMemory, true},
		{"weaker passes", weakerTime, true},
		{"stronger", stronger, false},
		{"bcrypt", importedVectors[0].stored, true},
		{"pbkdf2", importedVectors[3].stored, true},
	} {
		if got := node.NeedsRehash(tt.stored); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, v := range importedVectors {
		f.Add(v.stored)
	}
	f.Add("$pbkdf2-sha256$i=1000,l=16$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA")
	h := New(cheap, 1)
	f.Fuzz(func(t *testing.T, s string) {
		err := h.Check(s)
		if err == nil && Scheme(s) == "" {
			t.Fatalf("%q: accepted without a scheme", s)
		}
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%q: %v wraps neither sentinel", s, err)
		}
	})
}
