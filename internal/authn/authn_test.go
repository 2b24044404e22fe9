package authn

import (
	"strings"
	"testing"
)

func TestCSRFMatch(t *testing.T) {
	a, b := NewID(), NewID()
	for _, tc := range []struct {
		name                  string
		cookie, field, sealed string
		want                  bool
	}{
		{"all equal", a, a, a, true},
		{"no cookie", "", a, a, false},
		{"no field", a, "", a, false},
		{"no sealed", a, a, "", false},
		{"all empty", "", "", "", false},
		{"wrong field", a, b, a, false},
		{"cookie of another browser", b, a, a, false},
		{"step of another browser", a, a, b, false},
		{"prefix", a, a[:20], a, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CSRFMatch(tc.cookie, tc.field, tc.sealed); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsCSRFToken(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{NewID(), true}, {"", false}, {"short", false}, {strings.Repeat("=", 43), false}, {NewID() + "A", false},
	} {
		if got := IsCSRFToken(tc.v); got != tc.want {
			t.Errorf("IsCSRFToken(%q): got %v, want %v", tc.v, got, tc.want)
		}
	}
}

// TestS256 checks the PKCE transform against RFC 7636 appendix B.
func TestS256(t *testing.T) {
	for _, c := range []struct{ verifier, want string }{
		{"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"},
		{"", "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"},
	} {
		if got := S256(c.verifier); got != c.want {
			t.Errorf("S256(%q) = %q, want %q", c.verifier, got, c.want)
		}
	}
}
