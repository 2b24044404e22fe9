package signin

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/webui"
)

func (h *harness) get(path string, hdr ...string) (*http.Response, string) {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.srv.URL+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const (
	svgLogo = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 4 4"><rect width="4" height="4" fill="#005a9c"/></svg>`
	pngLogo = "\x89PNG\r\n\x1a\n(a stand-in: fsm does not check, the admin API does)"
)

func TestBrandForAndServing(t *testing.T) {
	h := newHarness(t)
	if b := h.p.BrandFor(hPublic); b != (webui.Brand{}) {
		t.Fatalf("no branding: %+v", b)
	}
	site := fsm.Branding{DisplayName: "Example Sign-in", Logo: []byte(pngLogo), LogoType: "image/png", PrimaryColor: "#005a9c",
		SupportURL: "https://help.example.com/", SupportEmail: "help@example.com"}
	h.apply(fsm.TypeSetBranding, fsm.SetBranding{Branding: site})
	b := h.p.BrandFor(hPublic)
	if b.DisplayName != site.DisplayName || b.SupportURL != site.SupportURL || b.SupportEmail != site.SupportEmail ||
		b.LogoURL != "/branding/logo/"+fsm.LogoHash(site.Logo) || b.StyleURL != "/branding/v1-005a9c.css" {
		t.Fatalf("site's brand: %+v", b)
	}
	if got := h.p.BrandFor("no-such-client"); got != b {
		t.Errorf("an unknown client: %+v, want the site's", got)
	}

	resp, body := h.get(b.LogoURL)
	wantHeaders(t, resp, map[string]string{"Content-Type": "image/png", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "public, max-age=31536000, immutable", "Content-Security-Policy": "default-src 'none'"})
	if resp.StatusCode != 200 || body != pngLogo {
		t.Fatalf("logo: %d %q", resp.StatusCode, body)
	}
	if resp, _ := h.get(b.LogoURL, "If-None-Match", `"`+fsm.LogoHash(site.Logo)+`"`); resp.StatusCode != 304 {
		t.Errorf("If-None-Match: %d, want 304", resp.StatusCode)
	}
	resp, body = h.get(b.StyleURL)
	wantHeaders(t, resp, map[string]string{"Content-Type": "text/css; charset=utf-8", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "public, max-age=31536000, immutable"})
	if resp.StatusCode != 200 || !strings.HasPrefix(body, ":root{--brand-primary:#005a9c;--brand-on-primary:#ffffff;--brand-primary-hover:#004c84}") {
		t.Fatalf("stylesheet: %d %q", resp.StatusCode, body)
	}

	// The organization's own beats the site's, and an SVG logo is served
	// sandboxed.
	org := fsm.Branding{DisplayName: "Org A", Logo: []byte(svgLogo), LogoType: "image/svg+xml", PrimaryColor: "#1a1a1a"}
	h.apply(fsm.TypeUpdateOrg, fsm.UpdateOrg{ID: hOrgA, Branding: &org})
	ob := h.p.BrandFor(hPublic)
	if ob.DisplayName != "Org A" || ob.LogoURL == b.LogoURL || ob.StyleURL != "/branding/v1-1a1a1a.css" || ob.SupportURL != "" {
		t.Fatalf("organization's brand: %+v", ob)
	}
	if got := h.p.BrandForOrg(""); got != b {
		t.Errorf("the site's: %+v, want %+v", got, b)
	}
	resp, body = h.get(ob.LogoURL)
	wantHeaders(t, resp, map[string]string{"Content-Type": "image/svg+xml", "X-Content-Type-Options": "nosniff",
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox", "Content-Disposition": "inline",
		"Cache-Control": "public, max-age=31536000, immutable"})
	if resp.StatusCode != 200 || body != svgLogo {
		t.Fatalf("svg logo: %d %q", resp.StatusCode, body)
	}

	// A new logo is a new name; the old one is gone.
	org.Logo = []byte(strings.Replace(svgLogo, "#005a9c", "#1a1a1a", 1))
	h.apply(fsm.TypeUpdateOrg, fsm.UpdateOrg{ID: hOrgA, Branding: &org})
	nb := h.p.BrandFor(hPublic)
	if nb.LogoURL == ob.LogoURL {
		t.Fatal("the logo changed, its URL did not")
	}
	if resp, _ := h.get(ob.LogoURL); resp.StatusCode != 404 {
		t.Errorf("the replaced logo: %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.get(nb.LogoURL); resp.StatusCode != 200 {
		t.Errorf("the new logo: %d", resp.StatusCode)
	}

	for _, path := range []string{
		"/branding/logo/" + strings.Repeat("0", 64),
		"/branding/logo/" + strings.ToUpper(fsm.LogoHash(site.Logo)),
		"/branding/logo/short",
		"/branding/logo/",
		"/branding/v1-005A9C.css",
		"/branding/v1-05a9c.css",
		"/branding/v1-+05a9c.css",
		"/branding/v2-005a9c.css",
		"/branding/v1-005a9c",
		"/branding/style.css",
	} {
		if resp, _ := h.get(path); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
}

func wantHeaders(t *testing.T, resp *http.Response, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

func TestBrandStylesheetKeepsContrast(t *testing.T) {
	// The hover colour is darker than the colour: white on it reads at
	// least as well.
	for _, rgb := range []uint32{0x767676, 0x005a9c, 0x000000, 0x1a7f37} {
		css := brandStylesheet(rgb)
		i := strings.Index(css, "--brand-primary-hover:#")
		hover, ok := parseColor(css[i+len("--brand-primary-hover:") : i+len("--brand-primary-hover:")+7])
		if !ok {
			t.Fatalf("%06x: %q", rgb, css)
		}
		for shift := 0; shift <= 16; shift += 8 {
			if hover>>shift&0xff > rgb>>shift&0xff {
				t.Errorf("%06x: hover %06x is lighter", rgb, hover)
			}
		}
	}
}
