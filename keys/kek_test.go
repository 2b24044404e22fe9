package keys

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

func testKEK(t testing.TB, fill byte) *kek.KEK {
	t.Helper()
	k, err := kek.New(bytes.Repeat([]byte{fill}, kek.Size))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// storedKey returns the only stored key.
func storedKey(t testing.TB, a *fsmtest.Applier) fsm.Key {
	t.Helper()
	ks, _, err := a.State().Keys()
	if err != nil || len(ks) != 1 {
		t.Fatalf("stored keys: got %d, %v; want 1", len(ks), err)
	}
	return ks[0]
}

// TestPrivateKeySealedUnderKEK: with a KEK the stored private key is a
// sealed record bound to its kid that opens to PKCS#8 DER; without one it
// is the clear form. Managers with another KEK, or none, refuse a sealed
// key by name.
func TestPrivateKeySealedUnderKEK(t *testing.T) {
	k1, k2 := testKEK(t, 1), testKEK(t, 2)
	for _, tc := range []struct {
		name   string
		kek    *kek.KEK
		sealed bool
	}{
		{"with KEK", k1, true},
		{"without KEK", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, c := fsmtest.New(t), newClock()
			m := newManager(t, a, c, func(cfg *Config) { cfg.KEK = tc.kek })
			if err := m.Tick(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Sign(claims(c), TypJWT); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			key := storedKey(t, a)
			if got := kek.Sealed(key.Private); got != tc.sealed {
				t.Fatalf("stored key sealed: got %v, want %v", got, tc.sealed)
			}
			der, err := tc.kek.Open(key.Private, PrivateKeyAAD(key.Kid))
			if err != nil {
				t.Fatal(err)
			}
			priv, err := x509.ParsePKCS8PrivateKey(der)
			if err != nil {
				t.Fatalf("opened key is not PKCS#8: %v", err)
			}
			d := priv.(*rsa.PrivateKey).D.Bytes()
			if got := bytes.Contains(key.Private, d); got == tc.sealed {
				t.Fatalf("private exponent visible in the stored key: got %v, want %v", got, !tc.sealed)
			}
			if _, err := k1.Open(key.Private, PrivateKeyAAD("another-kid")); tc.sealed && !errors.Is(err, kek.ErrInvalid) {
				t.Errorf("opened under another kid: got %v, want ErrInvalid", err)
			}
			if n, err := m.CheckStored(); err != nil || (n == 0) != tc.sealed {
				t.Errorf("CheckStored: got %d clear, %v", n, err)
			}
			if !tc.sealed {
				return
			}
			for _, other := range []struct {
				kek  *kek.KEK
				want error
			}{{k2, kek.ErrWrongKEK}, {nil, kek.ErrNoKEK}} {
				m2 := newManager(t, a, c, func(cfg *Config) { cfg.KEK = other.kek })
				if _, err := m2.CheckStored(); !errors.Is(err, other.want) {
					t.Errorf("CheckStored with KEK %q: got %v, want %v", other.kek.ID(), err, other.want)
				}
				if _, err := m2.Sign(claims(c), TypJWT); !errors.Is(err, other.want) {
					t.Errorf("Sign with KEK %q: got %v, want %v", other.kek.ID(), err, other.want)
				}
			}
		})
	}
}

// TestBareDERKeysStillRead: a key stored as bare PKCS#8 DER (before keys
// were sealed) still signs, with or without a KEK, and counts as clear.
func TestBareDERKeysStillRead(t *testing.T) {
	a, c := fsmtest.New(t), newClock()
	k, err := generate(c.Now(), c.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(context.Background(), fsm.MustCommand(fsm.TypeAddKey, fsm.AddKey{Key: k})); err != nil {
		t.Fatal(err)
	}
	for _, kk := range []*kek.KEK{nil, testKEK(t, 1)} {
		m := newManager(t, a, c, func(cfg *Config) { cfg.KEK = kk })
		if n, err := m.CheckStored(); err != nil || n != 1 {
			t.Errorf("KEK %q: CheckStored: got %d, %v; want 1 clear", kk.ID(), n, err)
		}
		tok, err := m.Sign(claims(c), TypJWT)
		if err != nil {
			t.Fatalf("KEK %q: Sign: %v", kk.ID(), err)
		}
		if got := header(t, tok).KeyID(); got != k.Kid {
			t.Errorf("kid: got %q, want %q", got, k.Kid)
		}
	}
}

// TestTamperedSealedKeyRefused: a sealed key whose bytes changed, or that
// was stored under another kid, is refused rather than used.
func TestTamperedSealedKeyRefused(t *testing.T) {
	kk := testKEK(t, 1)
	c := newClock()
	k, err := generate(c.Now(), c.Now())
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := kk.Seal(k.Private, PrivateKeyAAD(k.Kid))
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-5] ^= 1
	for _, tc := range []struct {
		name string
		key  fsm.Key
	}{
		{"flipped byte", fsm.Key{Kid: k.Kid, Private: flipped, CreatedAt: k.CreatedAt, ActivatesAt: k.ActivatesAt}},
		{"moved to another kid", fsm.Key{Kid: "another-kid", Private: sealed, CreatedAt: k.CreatedAt, ActivatesAt: k.ActivatesAt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := fsmtest.New(t)
			if _, err := a.Apply(context.Background(), fsm.MustCommand(fsm.TypeAddKey, fsm.AddKey{Key: tc.key})); err != nil {
				t.Fatal(err)
			}
			m := newManager(t, a, c, func(cfg *Config) { cfg.KEK = kk })
			if _, err := m.CheckStored(); !errors.Is(err, kek.ErrInvalid) {
				t.Errorf("CheckStored: got %v, want ErrInvalid", err)
			}
			if _, err := m.Sign(claims(c), TypJWT); !errors.Is(err, kek.ErrInvalid) {
				t.Errorf("Sign: got %v, want ErrInvalid", err)
			}
		})
	}
}
