package admin

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func firstCode(p problems) string {
	if len(p) == 0 {
		return ""
	}
	return p[0].Code
}

func TestValidators(t *testing.T) {
	webRedirect := func(p *problems, field, s string) { p.redirectURI("", field, s) }
	nativeRedirect := func(p *problems, field, s string) { p.redirectURI("native", field, s) }
	tests := []struct {
		name  string
		check func(*problems, string, string)
		in    string
		want  string // "" = accepted
	}{
		{"slug ok", (*problems).slug, "acme-2", ""},
		{"slug hyphen only", (*problems).slug, "-", ""},
		{"slug empty", (*problems).slug, "", codeRequired},
		{"slug dot", (*problems).slug, "a.b", codeInvalid},
		{"slug unicode", (*problems).slug, "äcme", codeInvalid},
		{"email ok", (*problems).email, "a.b+c@sub.example.org", ""},
		{"email no at", (*problems).email, "example.org", codeInvalid},
		{"email angle", (*problems).email, "<a@example.org>", codeInvalid},
		{"email two", (*problems).email, "a@example.org, b@example.org", codeInvalid},
		{"phone ok 8", (*problems).phone, "+12345678", ""},
		{"phone ok 15", (*problems).phone, "+123456789012345", ""},
		{"phone empty", (*problems).phone, "", ""},
		{"phone 7", (*problems).phone, "+1234567", codeInvalid},
		{"phone letters", (*problems).phone, "+1555CALLME", codeInvalid},
		{"phone double plus", (*problems).phone, "++15551234567", codeInvalid},
		{"password 8", (*problems).password, "12345678", ""},
		{"password 7", (*problems).password, "1234567", codeTooShort},
		{"password 8 bytes of 4 runes", (*problems).password, "ääää", ""},
		{"redirect https", webRedirect, "https://app.example:8443/cb?a=b", ""},
		{"redirect http ipv6 loopback", webRedirect, "http://[::1]/cb", ""},
		{"redirect http 127.0.0.2", webRedirect, "http://127.0.0.2/cb", codeInvalidURI},
		{"redirect http localhost.evil", webRedirect, "http://localhost.evil.example/cb", codeInvalidURI},
		{"redirect javascript", webRedirect, "javascript:alert(1)", codeInvalidURI},
		{"redirect empty", webRedirect, "", codeInvalidURI},
		{"redirect port only", webRedirect, "https://:443/cb", codeInvalidURI},
		{"redirect native private-use", nativeRedirect, "com.example.app:/callback", ""},
		{"redirect native any-port loopback", nativeRedirect, "http://127.0.0.1/callback", ""},
		{"redirect native localhost", nativeRedirect, "http://localhost/callback", codeInvalidURI},
		{"redirect web private-use", webRedirect, "com.example.app:/callback", codeInvalidURI},
		{"redirect too long", webRedirect, "https://app.example/" + strings.Repeat("a", maxURI), codeTooLong},
		{"name ok", (*problems).name, "Acme", ""},
		{"name tab", (*problems).name, "a\tb", codeInvalid},
		{"name c1 control", (*problems).name, "a\u0085b", codeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p problems
			tt.check(&p, "f", tt.in)
			if got := firstCode(p); got != tt.want {
				t.Errorf("%q: got %q, want %q", tt.in, got, tt.want)
			}
			for _, d := range p {
				if d.Field != "f" || d.Message == "" {
					t.Errorf("got %+v, want field f and a message", d)
				}
			}
		})
	}
}

func TestValidClientID(t *testing.T) {
	for in, want := range map[string]bool{
		"a": true, "A.b_c-9": true, "": false, "a b": false, "a/b": false, "ä": false, "a:b": false,
	} {
		if got := validClientID(in); got != want {
			t.Errorf("%q: got %v, want %v", in, got, want)
		}
	}
}

func TestParsePage(t *testing.T) {
	tests := []struct {
		query    string
		page     int
		size     int
		problems int
	}{
		{"", 1, 20, 0},
		{"page=3&page_size=7", 3, 7, 0},
		{"page=1&page_size=100", 1, 100, 0},
		{"page=%2B2", 2, 20, 0},
		{"page=+2", 1, 20, 1}, // "+" is a space in a query
		{"page=0&page_size=101", 1, 20, 2},
		{"page=x", 1, 20, 1},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			p, bad := parsePage(httptest.NewRequest("GET", "/x?"+tt.query, nil))
			if p.Page != tt.page || p.PageSize != tt.size || len(bad) != tt.problems {
				t.Errorf("got %+v with %d problems, want page %d size %d with %d", p, len(bad), tt.page, tt.size, tt.problems)
			}
		})
	}
}
