package authn

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/internal/httpx"
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

// TestReferenceOutsideCorrelation: a reference made outside the
// correlation middleware is the same for the whole turn and is hex, so it
// never begins with "-" (base64url would, one time in 64).
func TestReferenceOutsideCorrelation(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/authorize", nil)
	for i := 0; i < 500; i++ {
		var turn Turn
		ref := turn.Reference(r)
		if len(ref) != 12 || strings.Trim(ref, "0123456789abcdef") != "" {
			t.Fatalf("reference %q: want 12 hex digits", ref)
		}
		if again := turn.Reference(r); again != ref {
			t.Fatalf("second reference %q, first %q", again, ref)
		}
	}
	ctx := httptest.NewRequest(http.MethodGet, "/", nil)
	var turn Turn
	httpx.Correlation(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if got, want := turn.Reference(r), httpx.CorrelationID(r.Context()); got != want {
			t.Errorf("reference %q inside the middleware, correlation id %q", got, want)
		}
	})).ServeHTTP(httptest.NewRecorder(), ctx)
}
