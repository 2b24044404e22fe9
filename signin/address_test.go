package signin

import (
	"strings"
	"testing"
)

// TestNormalizeAddress: what a person types to register, or as a new
// address, becomes one lower-case bare address with its domain in IDNA
// ASCII form, or is refused: several '@', a trailing dot, a display name,
// a quoted local part, a line break, a non-ASCII local part; a look-alike
// domain becomes its punycode and so is not the domain it imitates.
func TestNormalizeAddress(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" for a refusal
	}{
		{"ann@example.com", "ann@example.com"},
		{"  Ann.Lee+tag@Example.COM ", "ann.lee+tag@example.com"},
		{"o'brien@sub.example.org", "o'brien@sub.example.org"},
		{"user@münchen.example", "user@xn--mnchen-3ya.example"},
		{"user@xn--mnchen-3ya.example", "user@xn--mnchen-3ya.example"},
		// A Cyrillic а in place of the Latin a: another domain.
		{"user@\u0430llowed.example", "user@xn--llowed-2nf.example"},
		// Full-width letters are the same domain under the lookup mapping.
		{"user@\uff41llowed.example", "user@allowed.example"},

		{"", ""},
		{"ann", ""},
		{"@example.com", ""},
		{"ann@", ""},
		{"user@allowed.example@evil.example", ""},
		{`"user@allowed.example"@evil.example`, ""},
		{`"ann"@example.com`, ""},
		{"user@allowed.example.", ""},
		{"user@.allowed.example", ""},
		{"user@allowed..example", ""},
		{"user@localhost", ""},
		{"Ann <ann@example.com>", ""},
		{"<ann@example.com>", ""},
		{"ann@example.com (Ann)", ""},
		{"ann@example.com\r\nBcc: evil@evil.example", ""},
		{"ann@example.com\nBcc: evil@evil.example", ""},
		{"ann\r@example.com", ""},
		{"ann @example.com", ""},
		{"ann@exa mple.com", ""},
		{"ann\x00@example.com", ""},
		{"\u0430nn@example.com", ""}, // a non-ASCII local part
		{".ann@example.com", ""},
		{"ann.@example.com", ""},
		{"a..nn@example.com", ""},
		{"ann@-example.com", ""},
		{"ann@example_x.com", ""},
		{"ann@[127.0.0.1]", ""},
		{"ann@example.com\u202e", ""},
		{"ann\uff20example.com", ""}, // a full-width @
		{strings.Repeat("a", 65) + "@example.com", ""},
		{"a@" + strings.Repeat("b", 250) + ".com", ""},
		{"ann@\xff.com", ""},
	} {
		got, problem := normalizeAddress(tc.in)
		if got != tc.want {
			t.Errorf("normalizeAddress(%q) = %q (%q), want %q", tc.in, got, problem, tc.want)
		}
		if (got == "") != (problem != "") {
			t.Errorf("normalizeAddress(%q): address %q with problem %q", tc.in, got, problem)
		}
	}
}

func FuzzNormalizeAddress(f *testing.F) {
	for _, s := range []string{"ann@example.com", "user@münchen.example", "a@b@c", "x@y.", "\"q\"@z.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, problem := normalizeAddress(in)
		if problem != "" {
			return
		}
		if strings.Count(out, "@") != 1 || strings.ContainsAny(out, "\r\n \t\"<>()") || strings.HasSuffix(out, ".") || out != strings.ToLower(out) {
			t.Fatalf("normalizeAddress(%q) = %q", in, out)
		}
		for i := 0; i < len(out); i++ {
			if out[i] >= 0x80 {
				t.Fatalf("normalizeAddress(%q) = %q: not ASCII", in, out)
			}
		}
		if again, p := normalizeAddress(out); again != out || p != "" {
			t.Fatalf("normalizeAddress(%q) = %q, then %q (%q)", in, out, again, p)
		}
	})
}
