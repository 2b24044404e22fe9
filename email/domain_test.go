package email

import "testing"

// TestASCIIDomain: the one form both the admin API's stored domains and
// the registration page's comparison use.
func TestASCIIDomain(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"Example.COM", "example.com", true},
		{"bücher.example", "xn--bcher-kva.example", true},
		{"ＥＸＡＭＰＬＥ.com", "example.com", true},                // full-width folded
		{"аllowed.example", "xn--llowed-2nf.example", true}, // a Cyrillic а is not allowed.example
		{"sub.allowed.example", "sub.allowed.example", true},
		{"localhost", "", false},
		{"-a.example", "", false},
		{"a_b.example", "", false},
		{"a..example", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := ASCIIDomain(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ASCIIDomain(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
