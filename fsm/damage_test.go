package fsm

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDamagedStateFileIsRefused: a state file cut short, with bytes
// flipped, or with its header wiped is refused at open with ErrDamaged
// naming the file, never opened to panic later.
func TestDamagedStateFileIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/3] }},
		{"bytes flipped", func(b []byte) []byte {
			for i := 3 * 4096; i < len(b); i += 97 {
				b[i] ^= 0xff
			}
			return b
		}},
		{"header wiped", func(b []byte) []byte { clear(b[:8192]); return b }},
		// A branch page's first child pointer sent far past the end of
		// the file (and of bbolt's memory map): reading it faults, which
		// must not crash the process (a full CI run met this with bytes
		// flipped at random).
		{"page pointer past the end", func(b []byte) []byte {
			const page, branch = 4096, 0x01
			damaged := 0
			for off := 2 * page; off+page <= len(b); off += page {
				if binary.LittleEndian.Uint16(b[off+8:]) == branch && binary.LittleEndian.Uint16(b[off+10:]) > 0 {
					binary.LittleEndian.PutUint64(b[off+16+8:], 0x200000) // 8 GiB in, as in that run
					damaged++
				}
			}
			if damaged == 0 {
				t.Fatal("no branch page to damage")
			}
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			h := &harness{t: t, f: f}
			seed(h)
			for i := range 400 {
				h.apply(TypeRevokeToken, RevokeToken{JTI: "jti-" + strconv.Itoa(i), ExpiresAt: t0})
			}
			f.Close()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = Open(path)
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
				t.Fatalf("open of a damaged file: %v, want ErrDamaged naming %s", err, path)
			}
		})
	}
}
