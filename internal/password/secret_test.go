package password

import "testing"

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
}
