package signin

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/webui"
)

// BrandFor is the brand (webui.Brand) of the pages of a sign-in for
// client clientID: its organization's branding, else the site's. An unknown client, or
// one that belongs to no organization, gets the site's; a failed read
// gets the zero Brand (the pages' defaults), logged.
func (p *Signin) BrandFor(clientID string) webui.Brand {
	org := ""
	if clientID != "" {
		if c, err := p.cfg.State.Client(clientID); err == nil {
			org = c.OrganizationID
		}
	}
	return p.BrandForOrg(org)
}

// BrandForOrg is the brand of the pages of organization orgID (an
// invitation, a registration), else the site's ("" for the site's).
//
// Brands are cached by organization while fsm's BrandingGeneration
// holds: a branding record carries its logo (up to 64 KiB), which every
// page would otherwise decode and hash.
func (p *Signin) BrandForOrg(orgID string) webui.Brand {
	gen := p.cfg.State.BrandingGeneration()
	if b, ok := p.brands.get(orgID, gen); ok {
		return b
	}
	b, err := p.cfg.State.BrandingFor(orgID)
	if err != nil {
		p.log.Warn("read branding", "err", err)
		return webui.Brand{}
	}
	brand := brandOf(b)
	p.brands.put(orgID, gen, brand)
	return brand
}

// brandCache holds brands by organization ("" for the site's) under the
// branding generation they were read at.
type brandCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]webui.Brand
}

// maxCachedBrands bounds the cache: a site with more organizations than
// this reads the rest each time.
const maxCachedBrands = 4096

func (c *brandCache) get(org string, gen uint64) (webui.Brand, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return webui.Brand{}, false
	}
	b, ok := c.m[org]
	return b, ok
}

func (c *brandCache) put(org string, gen uint64, b webui.Brand) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case gen < c.gen:
		return // read before a newer change: not worth keeping
	case gen > c.gen || c.m == nil:
		c.gen, c.m = gen, map[string]webui.Brand{}
	}
	if len(c.m) < maxCachedBrands {
		c.m[org] = b
	}
}

func brandOf(b fsm.Branding) webui.Brand {
	out := webui.Brand{DisplayName: b.DisplayName, SupportURL: b.SupportURL, SupportEmail: b.SupportEmail}
	if h := fsm.LogoHash(b.Logo); h != "" {
		out.LogoURL = logoPath + h
	}
	if rgb, ok := parseColor(b.PrimaryColor); ok {
		out.StyleURL = fmt.Sprintf("%s%s-%06x.css", brandingPath, styleVersion, rgb)
	}
	return out
}

const (
	brandingPath = "/branding/"
	logoPath     = brandingPath + "logo/"
	// styleVersion names the shape of brandStylesheet: a change to what
	// it writes takes a new version, so that browsers holding the old
	// (cached as immutable) fetch the new.
	styleVersion = "v1"
	forever      = "public, max-age=31536000, immutable"
)

// registerBranding mounts the logos and stylesheets of the brandings.
func (p *Signin) registerBranding(mux *http.ServeMux) {
	mux.HandleFunc("GET "+logoPath+"{hash}", p.serveLogo)
	mux.HandleFunc("GET "+brandingPath+"{file}", p.serveBrandStyle)
}

// serveLogo is GET /branding/logo/{hash}: the logo whose bytes have this
// SHA-256 (lower-case hex), in the site's branding or an organization's.
// The name is the content, so it is cacheable for ever; a logo replaced
// is a new name, and the old one answers 404.
func (p *Signin) serveLogo(w http.ResponseWriter, r *http.Request) {
	hash := r.PathValue("hash")
	if len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		http.NotFound(w, r)
		return
	}
	logo, typ, ok, err := p.cfg.State.BrandingLogo(hash)
	if err != nil {
		p.log.Warn("read branding logo", "err", err)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	if !ok || (typ != "image/png" && typ != "image/svg+xml") {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	httpx.SetImageHeaders(h, typ)
	h.Set("Cache-Control", forever)
	h.Set("ETag", `"`+hash+`"`)
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if match := r.Header.Get("If-None-Match"); match == `"`+hash+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(logo)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(logo)
	}
}

// serveBrandStyle is GET /branding/v1-{rrggbb}.css: the stylesheet of a
// primary colour. Its name holds everything it says, so any node
// answers it without reading the state, it is cacheable for ever, and a
// new colour is a new name.
func (p *Signin) serveBrandStyle(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	rest, ok := strings.CutPrefix(file, styleVersion+"-")
	hex, ok2 := strings.CutSuffix(rest, ".css")
	rgb, ok3 := parseColor("#" + hex)
	if !ok || !ok2 || !ok3 || hex != strings.ToLower(hex) {
		http.NotFound(w, r)
		return
	}
	body := brandStylesheet(rgb)
	h := w.Header()
	h.Set("Content-Type", "text/css; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", forever)
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write([]byte(body))
	}
}

// brandStylesheet sets, for the pages' stylesheet (webui/static/style.css)
// to use:
//
//	--brand-primary        the colour: in the light scheme, buttons, links
//	                       and the focus ring; in the dark scheme only the
//	                       primary button (links and ring keep a colour
//	                       that reads on the dark card)
//	--brand-on-primary     text on it: white (the admin API refuses a
//	                       colour white text reads on below 4.5:1)
//	--brand-primary-hover  the colour 15% darker (more contrast still)
func brandStylesheet(rgb uint32) string {
	r, g, b := rgb>>16&0xff, rgb>>8&0xff, rgb&0xff
	dark := func(c uint32) uint32 { return c * 85 / 100 }
	return fmt.Sprintf(":root{--brand-primary:#%06x;--brand-on-primary:#ffffff;--brand-primary-hover:#%02x%02x%02x}\n",
		rgb, dark(r), dark(g), dark(b))
}

// parseColor reads #rrggbb (lower or upper case).
func parseColor(s string) (uint32, bool) {
	if len(s) != 7 || s[0] != '#' {
		return 0, false
	}
	v, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil || strings.ContainsAny(s[1:], "+-xX_") {
		return 0, false
	}
	return uint32(v), true
}
