package seal

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fuzzSealed is fuzzValue sealed for "fuzz" under fuzzKey, valid until
// 2100. It is a constant, not sealed in the test: a fuzzing worker is
// another process, and a fresh seal would differ there.
const fuzzSealed = "CdbUc28LVNzya4eDd4_zAZBNiYCGHnC9LAgAlBG8_VaHbjYLzsjtSaDrlN349YMh9ylO7SnTEBoaY2Uw0w"

var (
	fuzzKey   = bytes.Repeat([]byte{0x5a}, KeySize)
	fuzzValue = fuzzV{A: "seed"}
)

type fuzzV struct{ A string }

// FuzzOpen: Open never panics and opens nothing but the sealed seed.
func FuzzOpen(f *testing.F) {
	b, err := New(fuzzKey)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var got fuzzV
	if err := b.Open("fuzz", fuzzSealed, now, &got); err != nil || got != fuzzValue {
		f.Fatalf("the seed does not open: got %+v, %v", got, err)
	}
	flipped := []byte(fuzzSealed)
	flipped[len(flipped)/2] ^= 'A' ^ 'B'
	for _, s := range []string{
		fuzzSealed, fuzzSealed[:len(fuzzSealed)-1], fuzzSealed + "A", "A" + fuzzSealed, string(flipped),
		fuzzSealed + "=", strings.ToUpper(fuzzSealed), "", "!!!", strings.Repeat("A", 28),
		fuzzSealed[:len(fuzzSealed)-1] + "0",       // the same bytes, unused low bits set: not canonical
		fuzzSealed[:20] + "\r\n" + fuzzSealed[20:], // line breaks the decoder would skip
		strings.Repeat("A", MaxSealed+1),
	} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, sealed string) {
		var v fuzzV
		err := b.Open("fuzz", sealed, now, &v)
		switch {
		case sealed == fuzzSealed && (err != nil || v != fuzzValue):
			t.Fatalf("the seed: got %+v, %v; want %+v", v, err, fuzzValue)
		case sealed != fuzzSealed && err == nil:
			t.Fatalf("%q opened to %+v; want ErrInvalid", sealed, v)
		case sealed != fuzzSealed && err != ErrInvalid:
			t.Fatalf("%q: got %v, want ErrInvalid", sealed, err)
		}
	})
}
