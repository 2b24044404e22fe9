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

// Bounds of the argon2id strings Decode parses at all, whatever the
// Hasher: beyond them a string is malformed.
const (
	MaxMemory  = 1 << 20 // KiB, 1 GiB
	MaxTime    = 64
	minSaltLen = 8
	maxSaltLen = 64
	minKeyLen  = 16
	maxKeyLen  = 64
)

// Caps on the cost of an argon2id string a Hasher verifies, and so of one
// an import may bring (Hasher.Check), as bcrypt's and PBKDF2's are capped
// (MaxBcryptCost, MaxPBKDF2Rounds): a stored string decides the work of
// every attempt on its address, wrong ones included. Memory is at most
// MaxArgon2MemoryFactor times the Hasher's own, passes at most
// MaxArgon2Time and lanes at most MaxArgon2Threads (or the Hasher's own
// passes and lanes when those are higher, so its own hashes always pass).
// At the default parameters that is 152 MiB and 10 passes: 40 times the
// work of one of the node's own derivations, 1.5 to 2 s of one core, as
// bcrypt cost 15 takes.
const (
	MaxArgon2MemoryFactor = 8
	MaxArgon2Time         = 10
	MaxArgon2Threads      = 16
)

// ErrMalformed reports a stored string this package cannot check: not a
// well-formed argon2id, bcrypt or PBKDF2 hash within bounds.
var ErrMalformed = errors.New("password: malformed hash")

// Hasher derives argon2id hashes with at most a fixed number running at once.
// Build it with New; the zero value is not usable.
type Hasher struct {
	params Params
	sem    chan struct{}
	// onDerive, set only by tests, is called with +1 as a derivation
	// starts and -1 as it ends, while it holds its slot.
	onDerive func(delta int)
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

// derive runs f, one derivation of any scheme, in a slot of the
// semaphore: every derivation of the package goes through it.
func (h *Hasher) derive(ctx context.Context, f func()) error {
	if err := h.acquire(ctx); err != nil {
		return err
	}
	defer h.release()
	if h.onDerive != nil {
		h.onDerive(1)
		defer h.onDerive(-1)
	}
	f()
	return nil
}

// Hash returns the PHC string of secret under a fresh random salt. It fails
// only when ctx ends before a slot is free.
func (h *Hasher) Hash(ctx context.Context, secret string) (string, error) {
	salt := make([]byte, SaltLen)
	rand.Read(salt) // never fails (crypto/rand since Go 1.24)
	var key []byte
	if err := h.derive(ctx, func() {
		key = argon2.IDKey([]byte(secret), salt, h.params.Time, h.params.Memory, h.params.Threads, KeyLen)
	}); err != nil {
		return "", err
	}
	return encode(h.params, salt, key), nil
}

// Verify reports whether secret matches phc, an argon2id PHC string or an
// imported hash (Check). A wrong secret is (false, nil); a string that
// cannot be parsed, or whose cost is beyond h's caps, is (false, an error
// wrapping ErrMalformed or ErrUnsupported) and nothing is derived; a
// context that ends while waiting for a slot is (false, ctx.Err()).
func (h *Hasher) Verify(ctx context.Context, secret, phc string) (bool, error) {
	if Scheme(phc) != SchemeArgon2id {
		return h.verifyImported(ctx, secret, phc)
	}
	p, salt, want, err := h.decodeCapped(phc)
	if err != nil {
		return false, err
	}
	var got []byte
	if err := h.derive(ctx, func() {
		// #nosec G115 -- decode bounds len(want) by maxKeyLen
		got = argon2.IDKey([]byte(secret), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	}); err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// Decoy spends what checking a wrong password against one of h's own
// hashes spends, one argon2id derivation at h's parameters in a slot of
// the semaphore, and throws the result away. A password check with no
// stored hash to compare (no such person, a person without a password, a
// stored string Verify refuses, a person a directory checks) calls it, so
// that its answer takes as long as a wrong password for a local person.
// It fails only when ctx ends before a slot is free.
func (h *Hasher) Decoy(ctx context.Context, secret string) error {
	salt := make([]byte, SaltLen)
	return h.derive(ctx, func() {
		_ = argon2.IDKey([]byte(secret), salt, h.params.Time, h.params.Memory, h.params.Threads, KeyLen)
	})
}

// decodeCapped is decode, then h's caps on the cost (MaxArgon2Time ...).
func (h *Hasher) decodeCapped(phc string) (Params, []byte, []byte, error) {
	p, salt, key, err := decode(phc)
	if err == nil {
		err = h.checkCost(p)
	}
	return p, salt, key, err
}

// checkCost reports argon2id parameters beyond h's caps, naming the cap.
func (h *Hasher) checkCost(p Params) error {
	maxMemory := uint64(MaxArgon2MemoryFactor) * uint64(h.params.Memory)
	maxTime := max(MaxArgon2Time, h.params.Time)
	maxThreads := max(MaxArgon2Threads, h.params.Threads)
	switch {
	case uint64(p.Memory) > maxMemory:
		return fmt.Errorf("%w: argon2id m=%d KiB is above the cap of %d KiB (%d times this node's own m=%d)",
			ErrMalformed, p.Memory, maxMemory, MaxArgon2MemoryFactor, h.params.Memory)
	case p.Time > maxTime:
		return fmt.Errorf("%w: argon2id t=%d is above the cap of %d passes", ErrMalformed, p.Time, maxTime)
	case p.Threads > maxThreads:
		return fmt.Errorf("%w: argon2id p=%d is above the cap of %d lanes", ErrMalformed, p.Threads, maxThreads)
	}
	return nil
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
