package signin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

// BenchmarkSignInPage: the first sign-in page as GET /authorize shows it
// (the browser's session looked up, the step sealed, the frame's
// language negotiated and branding read from the state, the page
// rendered), plain English beside the same page in German and in
// Japanese with a site's branding (a logo, a colour's stylesheet, support
// contacts), in one run; en/branded and de/plain part the cost of the
// branding from the language's. page-bytes is the HTML's size.
//
//	go test -run '^$' -bench SignInPage -benchmem ./signin/
func BenchmarkSignInPage(b *testing.B) {
	// A logo near the 64 KiB the admin API takes: its bytes are in the
	// branding record the page reads.
	logo := []byte(svgLogo[:len(svgLogo)-len("</svg>")] + "<!--" + strings.Repeat("x", 60<<10) + "--></svg>")
	brand := fsm.Branding{DisplayName: "Example University", Logo: logo, LogoType: "image/svg+xml", PrimaryColor: "#005a9c",
		SupportURL: "https://help.example.com/", SupportEmail: "help@example.com"}
	for _, c := range []struct {
		name, acceptLanguage, uiLocales string
		branded                         bool
	}{
		{"en/plain", "en", "", false},
		{"de/branded", "de-DE,de;q=0.9", "", true},
		{"en/branded", "en", "", true},
		{"de/plain", "de-DE,de;q=0.9", "", false},
		{"ja/branded", "en", "ja", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := newHarness(b)
			if c.branded {
				h.apply(fsm.TypeSetBranding, fsm.SetBranding{Branding: brand})
			}
			target := "/authorize?client_id=" + hPublic
			if c.uiLocales != "" {
				target += "&ui_locales=" + c.uiLocales
			}
			get := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodGet, target, nil)
				r.Header.Set("Accept-Language", c.acceptLanguage)
				w := httptest.NewRecorder()
				h.handleAuthorize(w, r)
				return w
			}
			w := get()
			body := w.Body.String()
			if w.Code != http.StatusOK || !strings.Contains(body, `name="password"`) {
				b.Fatalf("%d %.200s", w.Code, body)
			}
			if got := strings.Contains(body, "/branding/logo/"); got != c.branded {
				b.Fatalf("logo shown %v, want %v", got, c.branded)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				get()
			}
			b.ReportMetric(float64(len(body)), "page-bytes")
		})
	}
}
