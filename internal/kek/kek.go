package kek

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Size is the length of a KEK in bytes (AES-256).
const Size = 32

// Format versions: the first byte of every record.
const (
	VersionClear  byte = 0
	VersionAESGCM byte = 1
)

const (
	idLen     = 4
	headerLen = 1 + idLen
	nonceLen  = 12
	// maxFile bounds what Load reads: a key file is 32 bytes or 44
	// characters of base64 and a newline.
	maxFile = 1 << 10
)

var (
	// ErrNoKEK: the record is sealed, and no KEK was given (--kek-file).
	ErrNoKEK = errors.New("kek: record is sealed under a key-encryption key, and none is configured (--kek-file)")
	// ErrWrongKEK: the record is sealed under another KEK than this one.
	ErrWrongKEK = errors.New("kek: record is sealed under another key-encryption key")
	// ErrInvalid: the record is truncated, of an unknown version, tampered
	// with, or bound to another record (aad).
	ErrInvalid = errors.New("kek: record is malformed, tampered with or bound to another record")
)

// KEK is a key-encryption key. A nil *KEK is valid and seals nothing: the
// record is stored in the clear with a marker, so a provider started
// without --kek-file still works, and a KEK given later still reads it
// (nothing re-wraps it yet).
type KEK struct {
	id   [idLen]byte
	aead cipher.AEAD
	prk  []byte // HKDF pseudo-random key, for Derive
}

// New returns the KEK for a 32-byte key.
func New(key []byte) (*KEK, error) {
	if len(key) != Size {
		return nil, fmt.Errorf("kek: key must be %d bytes, got %d", Size, len(key))
	}
	var zero [Size]byte
	if subtle.ConstantTimeCompare(key, zero[:]) == 1 {
		return nil, errors.New("kek: key is all zero bytes; generate one with oidcd keygen")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("kek: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("kek: %w", err)
	}
	prk, err := hkdf.Extract(sha256.New, key, nil)
	if err != nil {
		return nil, fmt.Errorf("kek: %w", err)
	}
	k := &KEK{aead: aead, prk: prk}
	h := sha256.New()
	h.Write([]byte("oidcd kek id\x00"))
	h.Write(key)
	copy(k.id[:], h.Sum(nil))
	return k, nil
}

// Load reads a KEK from path: 32 raw bytes, or their base64 (standard or
// URL alphabet, padded or not; surrounding white space ignored), which is
// what `oidcd keygen` prints. The file must be a regular file that neither
// group nor others may read, write or execute (mode 0600 or 0400).
func Load(path string) (*KEK, error) {
	f, err := os.Open(filepath.Clean(path)) // #nosec G304 -- the operator names this file (--kek-file)
	if err != nil {
		return nil, fmt.Errorf("kek: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("kek: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("kek: %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("kek: %s has mode %04o: group and others must have no access to a key-encryption key (chmod 600 %s)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("kek: %s: %w", path, err)
	}
	key, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("kek: %s: %w", path, err)
	}
	k, err := New(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// parse accepts 32 raw bytes or base64 of 32 bytes.
func parse(b []byte) ([]byte, error) {
	if len(b) == Size {
		return b, nil
	}
	if len(b) <= maxFile {
		s := string(bytes.TrimSpace(b))
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if k, err := enc.Strict().DecodeString(s); err == nil && len(k) == Size {
				return k, nil
			}
		}
	}
	return nil, errors.New("want 32 random bytes, or their base64 (oidcd keygen prints one)")
}

// ID names the KEK in error messages and logs: 8 hex digits derived from
// the key by a one-way hash. "" for a nil KEK.
func (k *KEK) ID() string {
	if k == nil {
		return ""
	}
	return hex.EncodeToString(k.id[:])
}

// Seal returns sealed bytes bound to aad (what the secret is, e.g.
// "totp/<user id>"), safe to replicate and store. With a nil KEK the
// result is the clear form: a 0 byte, then plaintext.
func (k *KEK) Seal(plaintext []byte, aad string) ([]byte, error) {
	if k == nil {
		out := make([]byte, 1+len(plaintext))
		out[0] = VersionClear
		copy(out[1:], plaintext)
		return out, nil
	}
	out := make([]byte, headerLen+nonceLen, headerLen+nonceLen+len(plaintext)+k.aead.Overhead())
	out[0] = VersionAESGCM
	copy(out[1:headerLen], k.id[:])
	nonce := out[headerLen:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("kek: nonce: %w", err)
	}
	return k.aead.Seal(out, nonce, plaintext, additional(out[:headerLen], aad)), nil
}

// Open reverses Seal with the same aad. A clear record opens with any KEK
// or none; a sealed one needs the KEK it was sealed under (ErrNoKEK,
// ErrWrongKEK) and the same aad (ErrInvalid).
func (k *KEK) Open(sealed []byte, aad string) ([]byte, error) {
	if len(sealed) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrInvalid)
	}
	switch sealed[0] {
	case VersionClear:
		return append([]byte(nil), sealed[1:]...), nil
	case VersionAESGCM:
	default:
		return nil, fmt.Errorf("%w: unknown format version %d", ErrInvalid, sealed[0])
	}
	if len(sealed) < headerLen {
		return nil, fmt.Errorf("%w: truncated", ErrInvalid)
	}
	id := hex.EncodeToString(sealed[1:headerLen])
	if k == nil {
		return nil, fmt.Errorf("%w: it needs the key with id %s", ErrNoKEK, id)
	}
	if !bytes.Equal(sealed[1:headerLen], k.id[:]) {
		return nil, fmt.Errorf("%w: it needs the key with id %s, this node's --kek-file holds %s", ErrWrongKEK, id, k.ID())
	}
	if len(sealed) < headerLen+nonceLen+k.aead.Overhead() {
		return nil, fmt.Errorf("%w: truncated", ErrInvalid)
	}
	nonce, ct := sealed[headerLen:headerLen+nonceLen], sealed[headerLen+nonceLen:]
	plain, err := k.aead.Open(nil, nonce, ct, additional(sealed[:headerLen], aad))
	if err != nil {
		return nil, fmt.Errorf("%w (record %q, key id %s)", ErrInvalid, aad, id)
	}
	return plain, nil
}

// Sealed reports whether record is in the sealed form (not clear).
func Sealed(record []byte) bool {
	return len(record) > 0 && record[0] != VersionClear
}

// additional is the GCM additional data: the record's header, then aad.
func additional(header []byte, aad string) []byte {
	ad := make([]byte, 0, len(header)+len(aad))
	return append(append(ad, header...), aad...)
}

// Derive returns a 32-byte key for purpose info, derived one way from the
// KEK (HKDF-SHA256), so a secret can depend on the KEK without being
// stored; nil for a nil KEK.
func (k *KEK) Derive(info string) []byte {
	if k == nil {
		return nil
	}
	out, err := hkdf.Expand(sha256.New, k.prk, info, 32)
	if err != nil {
		panic(err) // only for lengths out of range
	}
	return out
}
