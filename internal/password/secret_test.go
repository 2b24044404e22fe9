package password

import (
	"strings"
	"testing"
)

func TestSecret(t *testing.T) {
	stored := HashSecret("s3cret-0123456789")
	cases := []struct {
		secret, stored string
		want           bool
	}{
		{"s3cret-0123456789", stored, true},
		{"s3cret-0123456788", stored, false},
		{"", stored, false},
		{"s3cret-0123456789", "", false},
		{"", "", false},
		{"s3cret-0123456789", stored[:10], false},
	}
	for _, c := range cases {
		if got := VerifySecret(c.secret, c.stored); got != c.want {
			t.Errorf("VerifySecret(%q, %q): got %v, want %v", c.secret, c.stored, got, c.want)
		}
	}
	if len(stored) != 64 {
		t.Fatalf("stored form: got %d hex chars, want 64", len(stored))
	}
	// The stored form is hex SHA-256, on either side of the stack buffer.
	if got := HashSecret("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("HashSecret(abc) = %s", got)
	}
	for _, n := range []int{255, 256, 257, 4096} {
		s := strings.Repeat("k", n)
		if !VerifySecret(s, HashSecret(s)) || VerifySecret(s[:n-1], HashSecret(s)) {
			t.Errorf("a %d-byte secret does not verify against its own hash alone", n)
		}
	}
	if a := testing.AllocsPerRun(100, func() { VerifySecret("s3cret-0123456789", stored) }); a > 1 {
		t.Errorf("VerifySecret allocates %v times, want at most 1 (the stored form as bytes)", a)
	}
}
