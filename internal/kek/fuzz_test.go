package kek

import (
	"bytes"
	"testing"
)

// FuzzOpen: no input makes Open panic; a sealed record never opens
// without the key, and under the key opens only to what was sealed with it
// for that aad (fuzz workers seal their own copy, with another nonce, so
// the check is on the plaintext, not on the record's bytes).
func FuzzOpen(f *testing.F) {
	k, err := New(bytes.Repeat([]byte{3}, Size))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := k.Seal([]byte("plaintext"), "aad")
	clear, _ := (*KEK)(nil).Seal([]byte("plaintext"), "aad")
	for _, s := range [][]byte{good, clear, nil, {1}, {1, 0, 0, 0, 0}, {2}, good[:len(good)-1]} {
		f.Add(s, "aad")
	}
	f.Fuzz(func(t *testing.T, rec []byte, aad string) {
		for _, kk := range []*KEK{nil, k} {
			got, err := kk.Open(rec, aad)
			if err != nil {
				if got != nil {
					t.Fatalf("plaintext %q returned with error %v", got, err)
				}
				continue
			}
			if Sealed(rec) && (kk == nil || aad != "aad" || string(got) != "plaintext") {
				t.Fatalf("forged record %x opened under %q to %q", rec, aad, got)
			}
		}
	})
}
