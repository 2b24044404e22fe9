package password

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// MinLength and MaxLength bound a password a person sets, in bytes: at
// least 8 (OWASP ASVS 2.1.1), and a cap that keeps argon2id's input small.
const (
	MinLength = 8
	MaxLength = 1024
)

// Params are the argon2id cost parameters.
type Params struct {
	Memory  uint32 // KiB
	Time    uint32 // passes over the memory
	Threads uint8  // lanes
}

// DefaultParams returns OWASP's argon2id recommendation (19 MiB, 2 passes,
// one lane); tests pass cheaper Params to New.
func DefaultParams() Params { return Params{Memory: 19 * 1024, Time: 2, Threads: 1} }

// Lengths of what Hash generates.
const (
	SaltLen = 16
	KeyLen  = 32
)

// Bounds that Verify accepts from a stored string.
const (
	MaxMemory  = 1 << 20 // KiB, 1 GiB
	MaxTime    = 64
	minSaltLen = 8
	maxSaltLen = 64
	minKeyLen  = 16
	maxKeyLen  = 64
)

// ErrMalformed reports a stored string this package cannot check: not a
// well-formed argon2id, bcrypt or PBKDF2 hash within bounds.
var ErrMalformed = errors.New("password: malformed hash")

// Hasher derives argon2id hashes with at most a fixed number running at once.
// Build it with New; the zero value is not usable.
type Hasher struct {
	params Params
	sem    chan struct{}
}

// New returns a Hasher that hashes with p and runs at most concurrency
// derivations at once (callers pass runtime.GOMAXPROCS(0)); concurrency
// below 1 means 1. Zero fields of p are taken from DefaultParams.
func New(p Params, concurrency int) *Hasher {
	if p.Memory == 0 {
		p.Memory = DefaultParams().Memory
	}
	if p.Time == 0 {
		p.Time = DefaultParams().Time
	}
	if p.Threads == 0 {
		p.Threads = DefaultParams().Threads
	}
	if concurrency < 1 {
		concurrency = 1
	}
	return &Hasher{params: p, sem: make(chan struct{}, concurrency)}
}

// Params returns the parameters new hashes use.
func (h *Hasher) Params() Params { return h.params }

// acquire waits for a free slot or for ctx to end.
func (h *Hasher) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *Hasher) release() { <-h.sem }

// Hash returns the PHC string of secret under a fresh random salt. It fails
// only when ctx ends before a slot is free.
func (h *Hasher) Hash(ctx context.Context, secret string) (string, error) {
	salt := make([]byte, SaltLen)
	rand.Read(salt) // never fails (crypto/rand since Go 1.24)
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(secret), salt, h.params.Time, h.params.Memory, h.params.Threads, KeyLen)
	h.release()
	return encode(h.params, salt, key), nil
}

// Verify reports whether secret matches phc, an argon2id PHC string or an
// imported hash (Check). A wrong secret is (false, nil); a string that
// cannot be parsed is (false, an error wrapping ErrMalformed or
// ErrUnsupported); a context that ends while waiting for a slot is
// (false, ctx.Err()).
func (h *Hasher) Verify(ctx context.Context, secret, phc string) (bool, error) {
	if Scheme(phc) != SchemeArgon2id {
		return h.verifyImported(ctx, secret, phc)
	}
	p, salt, want, err := decode(phc)
	if err != nil {
		return false, err
	}
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	// #nosec G115 -- decode bounds len(want) by maxKeyLen
	got := argon2.IDKey([]byte(secret), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	h.release()
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

var b64 = base64.RawStdEncoding.Strict()

func encode(p Params, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// Decode parses a PHC string into its parameters, salt and key.
func Decode(phc string) (Params, []byte, []byte, error) { return decode(phc) }

func decode(phc string) (Params, []byte, []byte, error) {
	var p Params
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[0] != "" {
		return p, nil, nil, fmt.Errorf("%w: want 5 $-separated fields", ErrMalformed)
	}
	if parts[1] != "argon2id" {
		return p, nil, nil, fmt.Errorf("%w: algorithm %q", ErrMalformed, parts[1])
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, fmt.Errorf("%w: version %q", ErrMalformed, parts[2])
	}
	p, err := decodeParams(parts[3])
	if err != nil {
		return p, nil, nil, err
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < minSaltLen || len(salt) > maxSaltLen {
		return p, nil, nil, fmt.Errorf("%w: salt", ErrMalformed)
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < minKeyLen || len(key) > maxKeyLen {
		return p, nil, nil, fmt.Errorf("%w: hash", ErrMalformed)
	}
	return p, salt, key, nil
}

// decodeParams parses "m=<KiB>,t=<passes>,p=<lanes>", in that order.
func decodeParams(s string) (Params, error) {
	var p Params
	fields := strings.Split(s, ",")
	if len(fields) != 3 {
		return p, fmt.Errorf("%w: parameters %q", ErrMalformed, s)
	}
	var vals [3]uint64
	for i, name := range []string{"m", "t", "p"} {
		v, ok := strings.CutPrefix(fields[i], name+"=")
		if !ok {
			return p, fmt.Errorf("%w: parameter %d is not %s", ErrMalformed, i+1, name)
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return p, fmt.Errorf("%w: parameter %s=%q", ErrMalformed, name, v)
		}
		vals[i] = n
	}
	// #nosec G115 -- vals were parsed with strconv.ParseUint(v, 10, 32)
	p = Params{Memory: uint32(vals[0]), Time: uint32(vals[1])}
	switch {
	case vals[2] < 1 || vals[2] > 255:
		return p, fmt.Errorf("%w: p=%d out of range", ErrMalformed, vals[2])
	case p.Time < 1 || p.Time > MaxTime:
		return p, fmt.Errorf("%w: t=%d out of range", ErrMalformed, p.Time)
	// #nosec G115 -- vals[2] was parsed with bitSize 32 and is at most 255 here
	case p.Memory < 8*uint32(vals[2]) || p.Memory > MaxMemory:
		return p, fmt.Errorf("%w: m=%d out of range", ErrMalformed, p.Memory)
	}
	// #nosec G115 -- vals[2] is within 1..255: checked just above
	p.Threads = uint8(vals[2])
	return p, nil
}
