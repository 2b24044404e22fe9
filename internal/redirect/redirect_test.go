package redirect

import (
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		appType, uri string
		ok           bool
	}{
		{Web, "https://app.example/cb", true},
		{Web, "http://127.0.0.1:9090/callback", true},
		{Web, "http://localhost:5173/", true},
		{Web, "http://[::1]/cb", true},
		{Web, "http://app.example/cb", false},
		{Web, "com.example.app:/callback", false},
		{Web, "https://app.example/cb#x", false},
		{Web, "https://u:p@app.example/cb", false},
		{Web, "https:///cb", false},
		{Web, "/cb", false},
		{Web, "https://app.example:0/cb", false},
		{Web, "https://app.example:65536/cb", false},
		{"", "https://app.example/cb", true},
		{Native, "https://app.example/cb", true},
		{Native, "http://127.0.0.1/callback", true},
		{Native, "http://127.0.0.1:51004/callback", true},
		{Native, "http://[::1]/callback", true},
		{Native, "http://localhost/callback", false},
		{Native, "http://127.0.0.2/callback", false},
		{Native, "http://app.example/cb", false},
		{Native, "com.example.app:/callback", true},
		{Native, "com.example.app://callback", true},
		{Native, "com.example.app:callback", true},
		{Native, "myapp:/callback", false},
		{Native, "com.example.app:", false},
		{Native, "com.example.app:/cb#frag", false},
		{Native, "com.example.app://user@host/cb", false},
		{Native, "java.script:/x", true},
		{Native, "javascript:alert(1)", false},
		{Native, "data:text/html,x", false},
		{Native, "https://" + strings.Repeat("a", MaxURI) + ".example/", false},
	} {
		p := Check(tt.appType, tt.uri)
		if (p == nil) != tt.ok {
			t.Errorf("Check(%q, %q) = %v, want ok %v", tt.appType, tt.uri, p, tt.ok)
		}
		if p != nil && (p.Code == "" || p.Message == "") {
			t.Errorf("Check(%q, %q): problem %+v without code or message", tt.appType, tt.uri, p)
		}
	}
}

func TestMatch(t *testing.T) {
	reg := []string{"http://127.0.0.1/callback", "http://[::1]:8400/cb?x=1", "com.example.app:/callback", "https://app.example/cb"}
	for _, tt := range []struct {
		appType, got string
		want         bool
	}{
		{Native, "http://127.0.0.1/callback", true},
		{Native, "http://127.0.0.1:51004/callback", true},
		{Native, "http://127.0.0.1:1/callback", true},
		{Native, "http://127.0.0.1:65535/callback", true},
		{Native, "http://127.0.0.1:65536/callback", false},
		{Native, "http://127.0.0.1:0/callback", false},
		{Native, "http://127.0.0.1:080/callback", false},
		{Native, "http://127.0.0.1:/callback", false},
		{Native, "http://127.0.0.1:51004/callback/", false},
		{Native, "http://127.0.0.1:51004/Callback", false},
		{Native, "http://127.0.0.1:51004/callback?x=1", false},
		{Native, "http://127.0.0.1:51004/callback#f", false},
		{Native, "http://u@127.0.0.1:51004/callback", false},
		{Native, "https://127.0.0.1:51004/callback", false},
		{Native, "HTTP://127.0.0.1:51004/callback", false},
		{Native, "Http://[::1]:9/cb?x=1", false},
		{Native, "http://localhost:51004/callback", false},
		{Native, "http://[::1]:51004/callback", false}, // registered at 127.0.0.1 only
		{Native, "http://[::1]:9/cb?x=1", true},
		{Native, "http://[::1]:9/cb?x=2", false},
		{Native, "http://[::1]:9/cb", false},
		{Native, "com.example.app:/callback", true},
		{Native, "com.example.app:/callback2", false},
		{Native, "COM.example.app:/callback", false},
		{Native, "https://app.example/cb", true},
		{Native, "https://app.example:443/cb", false},
		{Web, "http://127.0.0.1/callback", true},
		{Web, "http://127.0.0.1:51004/callback", false},
		{"", "http://127.0.0.1:51004/callback", false},
	} {
		if got := Match(tt.appType, reg, tt.got); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.appType, tt.got, got, tt.want)
		}
	}
}

func TestCheckOrigin(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://app.example", "https://app.example"},
		{"https://APP.Example:443", "https://app.example"},
		{"https://app.example:8443/", "https://app.example:8443"},
		{"http://localhost:5173", "http://localhost:5173"},
		{"http://127.0.0.1:80", "http://127.0.0.1"},
		{"http://[::1]:3000", "http://[::1]:3000"},
		{"http://app.example", ""},
		{"https://app.example/path", ""},
		{"https://app.example?x", ""},
		{"https://app.example#x", ""},
		{"https://u@app.example", ""},
		{"app.example", ""},
		{"null", ""},
		{"*", ""},
		{"https://", ""},
		{"https://app.example:0", ""},
		{"com.example.app://x", ""},
	} {
		got, err := CheckOrigin(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("CheckOrigin(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("CheckOrigin(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestDefaultOrigins(t *testing.T) {
	uris := []string{"https://app.example/cb", "https://app.example:443/other", "http://127.0.0.1:5173/cb", "com.example.app:/cb", "http://localhost/cb", "https://b.example:8443/x"}
	if got, want := DefaultOrigins(true, uris), []string{"https://app.example", "http://127.0.0.1:5173", "http://localhost", "https://b.example:8443"}; !slices.Equal(got, want) {
		t.Errorf("public: %q, want %q", got, want)
	}
	if got := DefaultOrigins(false, uris); got == nil || len(got) != 0 {
		t.Errorf("confidential: %q, want none", got)
	}
}

func TestOrigins(t *testing.T) {
	uris := []string{"https://app.example/cb"}
	for _, tt := range []struct {
		name    string
		public  bool
		set     bool
		origins []string
		want    []string
	}{
		{"public default", true, false, nil, []string{"https://app.example"}},
		{"confidential default", false, false, nil, []string{}},
		{"set to none", true, true, nil, []string{}},
		{"set, normalized and once", true, true, []string{"https://B.example:443", "https://b.example", "bogus"}, []string{"https://b.example"}},
	} {
		if got := Origins(tt.public, tt.set, tt.origins, uris); got == nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
