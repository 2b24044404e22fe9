package kek

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testKEK(t testing.TB, fill byte) *KEK {
	t.Helper()
	k, err := New(bytes.Repeat([]byte{fill}, Size))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := testKEK(t, 1)
	for _, tc := range []struct {
		name  string
		kek   *KEK
		plain []byte
	}{
		{"sealed", k, []byte("a signing key")},
		{"sealed empty", k, nil},
		{"clear", nil, []byte("a signing key")},
		{"clear empty", nil, []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := tc.kek.Seal(tc.plain, "signing_key/kid-1")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.kek.Open(rec, "signing_key/kid-1")
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(got, tc.plain) {
				t.Fatalf("got %q, want %q", got, tc.plain)
			}
			if len(tc.plain) > 0 && bytes.Contains(rec, tc.plain) == (tc.kek != nil) {
				t.Fatalf("record %x: plaintext visible = %v, want %v", rec, tc.kek == nil, tc.kek == nil)
			}
		})
	}
}

// TestFormat pins the documented layout: a version byte, then for sealed
// records the key id (SHA-256 prefix of a domain tag and the key), a
// 12-byte nonce and the GCM ciphertext with its 16-byte tag.
func TestFormat(t *testing.T) {
	key := bytes.Repeat([]byte{1}, Size)
	k := testKEK(t, 1)
	plain := []byte("0123456789")

	clear, _ := (*KEK)(nil).Seal(plain, "x")
	if want := append([]byte{VersionClear}, plain...); !bytes.Equal(clear, want) {
		t.Errorf("clear record: got %x, want %x", clear, want)
	}

	rec, _ := k.Seal(plain, "x")
	sum := sha256.Sum256(append([]byte("oidcd kek id\x00"), key...))
	if rec[0] != VersionAESGCM {
		t.Errorf("version: got %d, want %d", rec[0], VersionAESGCM)
	}
	if !bytes.Equal(rec[1:5], sum[:4]) {
		t.Errorf("key id: got %x, want %x", rec[1:5], sum[:4])
	}
	if got, want := len(rec), 1+4+12+len(plain)+16; got != want {
		t.Errorf("length: got %d, want %d", got, want)
	}
	if got, want := k.ID(), base16(sum[:4]); got != want {
		t.Errorf("ID: got %q, want %q", got, want)
	}
	if (*KEK)(nil).ID() != "" {
		t.Errorf("nil ID: got %q, want empty", (*KEK)(nil).ID())
	}
	if !Sealed(rec) || Sealed(clear) {
		t.Errorf("Sealed: got %v for sealed, %v for clear", Sealed(rec), Sealed(clear))
	}
	again, _ := k.Seal(plain, "x")
	if bytes.Equal(again, rec) {
		t.Errorf("two seals of the same plaintext are identical: nonce not random")
	}
}

func base16(b []byte) string {
	const digits = "0123456789abcdef"
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(digits[c>>4])
		s.WriteByte(digits[c&15])
	}
	return s.String()
}

func TestOpenRefuses(t *testing.T) {
	k, other := testKEK(t, 1), testKEK(t, 2)
	rec, err := k.Seal([]byte("secret value"), "totp/u1")
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(rec)
		b[i] ^= 0x01
		return b
	}
	for _, tc := range []struct {
		name string
		kek  *KEK
		rec  []byte
		aad  string
		want error
	}{
		{"wrong aad", k, rec, "totp/u2", ErrInvalid},
		{"empty aad", k, rec, "", ErrInvalid},
		{"wrong key", other, rec, "totp/u1", ErrWrongKEK},
		{"no key", nil, rec, "totp/u1", ErrNoKEK},
		{"tampered ciphertext", k, flip(len(rec) - 20), "totp/u1", ErrInvalid},
		{"tampered tag", k, flip(len(rec) - 1), "totp/u1", ErrInvalid},
		{"tampered nonce", k, flip(6), "totp/u1", ErrInvalid},
		{"tampered key id", k, flip(2), "totp/u1", ErrWrongKEK},
		{"version 2", k, append([]byte{2}, rec[1:]...), "totp/u1", ErrInvalid},
		{"version 0x30 (bare DER)", k, []byte{0x30, 0x82, 0x04}, "totp/u1", ErrInvalid},
		{"truncated header", k, rec[:3], "totp/u1", ErrInvalid},
		{"truncated body", k, rec[:20], "totp/u1", ErrInvalid},
		{"tag cut", k, rec[:len(rec)-1], "totp/u1", ErrInvalid},
		{"empty", k, nil, "totp/u1", ErrInvalid},
		{"empty, no key", nil, []byte{}, "totp/u1", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.kek.Open(tc.rec, tc.aad)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %q, %v; want %v", got, err, tc.want)
			}
			if got != nil {
				t.Fatalf("got plaintext %q with an error", got)
			}
		})
	}
	// Every single-bit change anywhere in the record is refused, except
	// the one that turns the version byte into the clear marker: that
	// record reads as clear, and what it yields is the ciphertext, never
	// the secret (the clear form carries no integrity; see doc.go).
	for i := range rec {
		for bit := range 8 {
			b := bytes.Clone(rec)
			b[i] ^= 1 << bit
			got, err := k.Open(b, "totp/u1")
			if err == nil && (b[0] != VersionClear || bytes.Contains(got, []byte("secret value"))) {
				t.Fatalf("bit %d of byte %d flipped: opened to %q", bit, i, got)
			}
		}
	}
}

// TestErrorsNameTheKeys: the operator is told which key a record needs.
func TestErrorsNameTheKeys(t *testing.T) {
	k, other := testKEK(t, 1), testKEK(t, 2)
	rec, _ := k.Seal([]byte("s"), "a")
	_, err := other.Open(rec, "a")
	if err == nil || !strings.Contains(err.Error(), k.ID()) || !strings.Contains(err.Error(), other.ID()) {
		t.Errorf("wrong key: got %v, want both ids %s and %s", err, k.ID(), other.ID())
	}
	_, err = (*KEK)(nil).Open(rec, "a")
	if err == nil || !strings.Contains(err.Error(), k.ID()) || !strings.Contains(err.Error(), "--kek-file") {
		t.Errorf("no key: got %v, want the id %s and --kek-file", err, k.ID())
	}
}

func TestClearRecordsOpenUnderAnyKey(t *testing.T) {
	rec, _ := (*KEK)(nil).Seal([]byte("old"), "a")
	for _, k := range []*KEK{nil, testKEK(t, 1)} {
		if got, err := k.Open(rec, "b"); err != nil || string(got) != "old" {
			t.Errorf("KEK %q: got %q, %v; want old", k.ID(), got, err)
		}
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
		ok   bool
	}{
		{"32 bytes", bytes.Repeat([]byte{9}, 32), true},
		{"31 bytes", bytes.Repeat([]byte{9}, 31), false},
		{"33 bytes", bytes.Repeat([]byte{9}, 33), false},
		{"all zero", make([]byte, 32), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.key); (err == nil) != tc.ok {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	key := bytes.Repeat([]byte{7}, Size)
	want := testKEK(t, 7).ID()
	b64 := base64.StdEncoding.EncodeToString(key)
	for _, tc := range []struct {
		name    string
		content []byte
		mode    os.FileMode
		errHas  string // "" = must load
	}{
		{"keygen output", []byte(b64 + "\n"), 0o600, ""},
		{"read only", []byte(b64), 0o400, ""},
		{"raw bytes", key, 0o600, ""},
		{"raw with newline-like bytes", append(bytes.Repeat([]byte{'\n'}, 16), bytes.Repeat([]byte{7}, 16)...), 0o600, "zzz"},
		{"unpadded url alphabet", []byte(base64.RawURLEncoding.EncodeToString(key)), 0o600, ""},
		{"group readable", []byte(b64), 0o640, "mode 0640"},
		{"world readable", []byte(b64), 0o604, "mode 0604"},
		{"group writable", []byte(b64), 0o620, "mode 0620"},
		{"short", []byte(base64.StdEncoding.EncodeToString(key[:16])), 0o600, "want 32 random bytes"},
		{"not base64", []byte("correct horse battery staple"), 0o600, "want 32 random bytes"},
		{"empty", nil, 0o600, "want 32 random bytes"},
		{"huge", bytes.Repeat([]byte("A"), 4096), 0o600, "want 32 random bytes"},
		{"all zero", make([]byte, 32), 0o600, "all zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.errHas == "zzz" {
				// 32 raw bytes are taken as they are, whatever they look like.
				tc.errHas = ""
				want := mustNew(t, tc.content).ID()
				checkLoad(t, tc.content, tc.mode, "", want)
				return
			}
			checkLoad(t, tc.content, tc.mode, tc.errHas, want)
		})
	}
	t.Run("missing", func(t *testing.T) {
		if _, err := Load(filepath.Join(t.TempDir(), "nope")); err == nil || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v, want not exist", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("got %v, want not a regular file", err)
		}
	})
}

func mustNew(t *testing.T, key []byte) *KEK {
	t.Helper()
	k, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func checkLoad(t *testing.T, content []byte, mode os.FileMode, errHas, wantID string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	k, err := Load(path)
	if errHas != "" {
		if err == nil || !strings.Contains(err.Error(), errHas) || !strings.Contains(err.Error(), path) {
			t.Fatalf("got %v, want an error naming %s and containing %q", err, path, errHas)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if k.ID() != wantID {
		t.Fatalf("ID: got %q, want %q", k.ID(), wantID)
	}
}

func TestDerive(t *testing.T) {
	a1, _ := New(bytes.Repeat([]byte{1}, Size))
	a2, _ := New(bytes.Repeat([]byte{1}, Size))
	b, _ := New(bytes.Repeat([]byte{2}, Size))
	var none *KEK
	cases := []struct {
		name  string
		x, y  []byte
		equal bool
	}{
		{"same key, same purpose", a1.Derive("p"), a2.Derive("p"), true},
		{"same key, other purpose", a1.Derive("p"), a1.Derive("q"), false},
		{"other key", a1.Derive("p"), b.Derive("p"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.x) != 32 || bytes.Equal(c.x, c.y) != c.equal {
				t.Fatalf("got %x and %x, want equal=%v", c.x, c.y, c.equal)
			}
		})
	}
	if none.Derive("p") != nil {
		t.Fatal("a nil KEK derives nothing")
	}
}
