package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrInvalid covers every value that cannot be opened: tampered, truncated,
// sealed under another key or for another purpose, or expired.
var ErrInvalid = errors.New("seal: invalid or expired")

// KeySize is the key length in bytes.
const KeySize = 32

// Box seals and opens values.
type Box struct{ aead cipher.AEAD }

// New returns a Box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("seal: key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

type envelope struct {
	Exp int64           `json:"e"`
	V   json.RawMessage `json:"v"`
}

// Seal encodes v, valid until exp, for purpose.
func (b *Box) Seal(purpose string, v any, exp time.Time) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	plain, err := json.Marshal(envelope{Exp: exp.Unix(), V: raw})
	if err != nil {
		return "", err
	}
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := b.aead.Seal(nonce, nonce, plain, []byte(purpose))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// sealedEncoding decodes what Seal's encoder writes. Strict: otherwise the
// unused low bits of the last character are ignored, and one sealed value
// would have several spellings that all open (Open also refuses the CR
// and LF that the decoder skips, for the same reason).
var sealedEncoding = base64.RawURLEncoding.Strict()

// MaxSealed bounds the input Open accepts, so a hostile value costs little.
const MaxSealed = 8 << 10

// Open decodes a value sealed for purpose into v if it is intact and not
// expired at now.
func (b *Box) Open(purpose, sealed string, now time.Time, v any) error {
	if len(sealed) > MaxSealed || strings.ContainsAny(sealed, "\r\n") {
		return ErrInvalid
	}
	raw, err := sealedEncoding.DecodeString(sealed)
	if err != nil || len(raw) < b.aead.NonceSize()+b.aead.Overhead() {
		return ErrInvalid
	}
	n := b.aead.NonceSize()
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], []byte(purpose))
	if err != nil {
		return ErrInvalid
	}
	var env envelope
	if err := json.Unmarshal(plain, &env); err != nil || now.Unix() >= env.Exp {
		return ErrInvalid
	}
	if err := json.Unmarshal(env.V, v); err != nil {
		return ErrInvalid
	}
	return nil
}
