package oidc

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestFavicon: /favicon.ico, where browsers ask for a site's icon
// unprompted, is the icon and no 404; every page links it (the sign-in
// page and the error page here) at a versioned address that is cached
// for a year, as the stylesheet is, and the pages' content security
// policy is unchanged (img-src 'self' covers it).
func TestFavicon(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	bare := b.get("/favicon.ico")
	if bare.status != http.StatusOK {
		t.Fatalf("GET /favicon.ico: got %d, want 200", bare.status)
	}
	if ct := bare.header.Get("Content-Type"); ct != "image/x-icon" {
		t.Errorf("Content-Type: got %q, want image/x-icon", ct)
	}
	checkIcon(t, []byte(bare.body))

	linkRE := regexp.MustCompile(`<link rel="icon" href="(/favicon\.ico\?v=[0-9a-f]{16})" type="image/x-icon">`)
	var href string
	for name, p := range map[string]page{
		"sign-in": b.get(authzPath(authzQuery(hPublic))),
		"error":   b.get("/authorize?client_id=no-such-client"),
	} {
		m := linkRE.FindStringSubmatch(p.body)
		if m == nil {
			t.Fatalf("%s page: no icon link matching %s:\n%s", name, linkRE, p.body)
		}
		href = m[1]
		if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s page: Content-Security-Policy %q", name, csp)
		}
	}
	linked := b.get(href)
	if linked.status != http.StatusOK || linked.body != bare.body {
		t.Fatalf("GET %s: got %d, want 200 and the icon", href, linked.status)
	}
	if got, want := linked.header.Get("Cache-Control"), "public, max-age=31536000, immutable"; got != want {
		t.Errorf("GET %s: Cache-Control %q, want %q", href, got, want)
	}
}

// checkIcon checks that body is an ICO file whose images are PNGs of the
// sizes its directory declares, 16 and 32 pixels among them.
func checkIcon(t *testing.T, body []byte) {
	t.Helper()
	if len(body) < 6 || binary.LittleEndian.Uint16(body[0:]) != 0 || binary.LittleEndian.Uint16(body[2:]) != 1 {
		t.Fatalf("not an ICO file: % x", body[:min(len(body), 16)])
	}
	n := int(binary.LittleEndian.Uint16(body[4:]))
	sizes := map[int]bool{}
	for i := range n {
		e := body[6+16*i:]
		w, size, off := int(e[0]), binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
		if int(off)+int(size) > len(body) {
			t.Fatalf("image %d lies outside the file", i)
		}
		img, err := png.Decode(bytes.NewReader(body[off : off+size]))
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		if got := img.Bounds().Dx(); got != w || img.Bounds().Dy() != w {
			t.Errorf("image %d: got %v, want %dx%d", i, img.Bounds(), w, w)
		}
		sizes[w] = true
	}
	if !sizes[16] || !sizes[32] {
		t.Errorf("icon sizes %v, want 16 and 32 among them", sizes)
	}
}
