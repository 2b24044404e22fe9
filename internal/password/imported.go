package password

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Schemes of stored hashes: the node's own, and those a person can be
// imported with from another provider (docs/operators/import.md).
const (
	SchemeArgon2id     = "argon2id"
	SchemeBcrypt       = "bcrypt"
	SchemePBKDF2SHA256 = "pbkdf2-sha256"
	SchemePBKDF2SHA512 = "pbkdf2-sha512"
)

// ErrUnsupported reports a stored string of a scheme this package does
// not check (md5-crypt, SHA-crypt, scrypt, a plain password). It is also
// ErrMalformed (errors.Is): to Verify, both are a string it cannot check.
var ErrUnsupported error = unsupportedError{}

type unsupportedError struct{}

func (unsupportedError) Error() string        { return "password: unsupported hash scheme" }
func (unsupportedError) Is(target error) bool { return target == ErrMalformed }

// Bounds of imported hashes. A stored string decides how much work a
// sign-in does, so an import must not bring one that makes every attempt
// on that address cost seconds of CPU: bcrypt cost 15 takes about 2 s on
// one core here, and 2,000,000 rounds of PBKDF2-SHA256 about 0.5 s.
const (
	MinBcryptCost    = 4 // bcrypt.MinCost
	MaxBcryptCost    = 15
	MinPBKDF2Rounds  = 1000
	MaxPBKDF2Rounds  = 2_000_000
	minPBKDF2KeyLen  = 16
	maxPBKDF2KeyLen  = 128
	minPBKDF2SaltLen = 8
	maxPBKDF2SaltLen = 128
)

// Scheme names the scheme of a stored string by its prefix, or "" when it
// is none this package knows. It says nothing of whether the rest is
// well formed (Check does).
func Scheme(stored string) string {
	switch {
	case strings.HasPrefix(stored, "$argon2id$"):
		return SchemeArgon2id
	case strings.HasPrefix(stored, "$2a$"), strings.HasPrefix(stored, "$2b$"), strings.HasPrefix(stored, "$2y$"):
		return SchemeBcrypt
	case strings.HasPrefix(stored, "$pbkdf2-sha256$"):
		return SchemePBKDF2SHA256
	case strings.HasPrefix(stored, "$pbkdf2-sha512$"):
		return SchemePBKDF2SHA512
	}
	return ""
}

// Check reports whether stored is a hash h's Verify can check, within the
// bounds above and, for argon2id, h's caps (MaxArgon2MemoryFactor ...):
// nil, or an error wrapping ErrUnsupported or ErrMalformed that says what
// is wrong, for an operator. An import refuses a person whose hash fails
// it. It never runs the hash.
func (h *Hasher) Check(stored string) error {
	switch Scheme(stored) {
	case SchemeArgon2id:
		_, _, _, err := h.decodeCapped(stored)
		return err
	case SchemeBcrypt:
		return checkBcrypt(stored)
	case SchemePBKDF2SHA256, SchemePBKDF2SHA512:
		_, err := decodePBKDF2(stored)
		return err
	}
	return fmt.Errorf("%w: %s (want argon2id, bcrypt $2a$/$2b$/$2y$, pbkdf2-sha256 or pbkdf2-sha512)", ErrUnsupported, describe(stored))
}

// describe names what an unsupported string looks like, without echoing
// any of its secret part.
func describe(stored string) string {
	if !strings.HasPrefix(stored, "$") {
		return "not a $-prefixed hash string"
	}
	id, _, _ := strings.Cut(stored[1:], "$")
	switch id {
	case "1":
		return "md5-crypt ($1$)"
	case "5":
		return "sha256-crypt ($5$)"
	case "6":
		return "sha512-crypt ($6$)"
	case "argon2i", "argon2d":
		return id + " (only argon2id is accepted)"
	}
	if len(id) > 20 || strings.ContainsFunc(id, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return "an unknown scheme"
	}
	return "scheme " + strconv.Quote(id)
}

func checkBcrypt(stored string) error {
	cost, err := bcrypt.Cost([]byte(stored))
	if err != nil {
		return fmt.Errorf("%w: bcrypt: %v", ErrMalformed, err)
	}
	if cost < MinBcryptCost || cost > MaxBcryptCost {
		return fmt.Errorf("%w: bcrypt cost %d out of range %d..%d", ErrMalformed, cost, MinBcryptCost, MaxBcryptCost)
	}
	// bcrypt.Cost reads only the header: the salt and hash must be there
	// too (22 + 31 characters of bcrypt's base64 after "$2x$NN$").
	if len(stored) != 60 {
		return fmt.Errorf("%w: bcrypt: %d characters, want 60", ErrMalformed, len(stored))
	}
	return nil
}

// pbkdf2Hash is a parsed PBKDF2 string.
type pbkdf2Hash struct {
	newHash   func() hash.Hash
	rounds    int
	salt, key []byte
}

// decodePBKDF2 parses the two spellings of a PBKDF2 hash in use:
//
//	$pbkdf2-sha256$i=27500,l=32$<salt>$<key>  PHC string format, standard
//	                                           base64 (padding allowed, so a
//	                                           Keycloak export's salt and
//	                                           value go in as they are)
//	$pbkdf2-sha256$29000$<salt>$<key>         passlib's modular crypt form,
//	                                           its adapted base64 ("." for "+")
func decodePBKDF2(stored string) (pbkdf2Hash, error) {
	var h pbkdf2Hash
	parts := strings.Split(stored, "$")
	if len(parts) != 5 || parts[0] != "" {
		return h, fmt.Errorf("%w: pbkdf2: want 4 $-separated fields", ErrMalformed)
	}
	switch parts[1] {
	case SchemePBKDF2SHA256:
		h.newHash = sha256.New
	case SchemePBKDF2SHA512:
		h.newHash = sha512.New
	default:
		return h, fmt.Errorf("%w: pbkdf2: algorithm %q", ErrMalformed, parts[1])
	}
	enc := base64.RawStdEncoding
	params := parts[2]
	keyLen := 0
	if strings.HasPrefix(params, "i=") {
		for i, f := range strings.Split(params, ",") {
			name, v, _ := strings.Cut(f, "=")
			n, err := strconv.Atoi(v)
			switch {
			case err != nil:
				return h, fmt.Errorf("%w: pbkdf2: parameter %q", ErrMalformed, f)
			case i == 0 && name == "i":
				h.rounds = n
			case i == 1 && name == "l":
				keyLen = n
			default:
				return h, fmt.Errorf("%w: pbkdf2: parameters %q (want i=<rounds>[,l=<key length>])", ErrMalformed, params)
			}
		}
	} else {
		n, err := strconv.Atoi(params)
		if err != nil {
			return h, fmt.Errorf("%w: pbkdf2: rounds %q", ErrMalformed, params)
		}
		h.rounds = n
		parts[3] = strings.ReplaceAll(parts[3], ".", "+")
		parts[4] = strings.ReplaceAll(parts[4], ".", "+")
	}
	if h.rounds < MinPBKDF2Rounds || h.rounds > MaxPBKDF2Rounds {
		return h, fmt.Errorf("%w: pbkdf2: %d rounds out of range %d..%d", ErrMalformed, h.rounds, MinPBKDF2Rounds, MaxPBKDF2Rounds)
	}
	var err error
	if h.salt, err = enc.Strict().DecodeString(strings.TrimRight(parts[3], "=")); err != nil || len(h.salt) < minPBKDF2SaltLen || len(h.salt) > maxPBKDF2SaltLen {
		return h, fmt.Errorf("%w: pbkdf2: salt (want %d to %d bytes of base64)", ErrMalformed, minPBKDF2SaltLen, maxPBKDF2SaltLen)
	}
	if h.key, err = enc.Strict().DecodeString(strings.TrimRight(parts[4], "=")); err != nil || len(h.key) < minPBKDF2KeyLen || len(h.key) > maxPBKDF2KeyLen {
		return h, fmt.Errorf("%w: pbkdf2: key (want %d to %d bytes of base64)", ErrMalformed, minPBKDF2KeyLen, maxPBKDF2KeyLen)
	}
	if keyLen != 0 && keyLen != len(h.key) {
		return h, fmt.Errorf("%w: pbkdf2: l=%d but the key has %d bytes", ErrMalformed, keyLen, len(h.key))
	}
	return h, nil
}

// verifyImported checks secret against a bcrypt or PBKDF2 string, under
// the Hasher's bound on concurrent derivations.
func (h *Hasher) verifyImported(ctx context.Context, secret, stored string) (bool, error) {
	var check func() bool
	var ok bool
	switch Scheme(stored) {
	case SchemeBcrypt:
		if err := checkBcrypt(stored); err != nil {
			return false, err
		}
		// bcrypt reads at most 72 bytes of the password, here as where
		// the hash was made.
		check = func() bool { return bcrypt.CompareHashAndPassword([]byte(stored), []byte(secret)) == nil }
	case SchemePBKDF2SHA256, SchemePBKDF2SHA512:
		p, err := decodePBKDF2(stored)
		if err != nil {
			return false, err
		}
		check = func() bool {
			got, err := pbkdf2.Key(p.newHash, secret, p.salt, p.rounds, len(p.key))
			return err == nil && subtle.ConstantTimeCompare(got, p.key) == 1
		}
	default:
		return false, h.Check(stored)
	}
	if err := h.derive(ctx, func() { ok = check() }); err != nil {
		return false, err
	}
	return ok, nil
}

// NeedsRehash reports whether a person's stored hash, just verified,
// should be replaced by one from this Hasher: it is of another scheme (an
// imported bcrypt or PBKDF2 hash), or argon2id weaker than this Hasher's
// in memory or passes. Never for a stronger one, so nodes configured apart
// cannot undo each other's work (a stronger one is within the caps, or
// Verify refused it and nothing was verified).
func (h *Hasher) NeedsRehash(stored string) bool {
	if Scheme(stored) != SchemeArgon2id {
		return true
	}
	p, _, _, err := decode(stored)
	return err == nil && (p.Memory < h.params.Memory || p.Time < h.params.Time)
}
