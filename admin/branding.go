package admin

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Branding is the site's or an organization's branding as the API shows
// it: the logo as a data: URI, as it was given.
type Branding struct {
	DisplayName  string `json:"display_name"`
	Logo         string `json:"logo"`
	PrimaryColor string `json:"primary_color"`
	SupportURL   string `json:"support_url"`
	SupportEmail string `json:"support_email"`
}

// brandingBody is PUT /branding and the branding of PATCH
// /organizations/{id}: each field absent keeps its value, and "" clears
// it.
type brandingBody struct {
	DisplayName  *string `json:"display_name"`
	Logo         *string `json:"logo"`
	PrimaryColor *string `json:"primary_color"`
	SupportURL   *string `json:"support_url"`
	SupportEmail *string `json:"support_email"`
}

func (b *brandingBody) empty() bool {
	return b.DisplayName == nil && b.Logo == nil && b.PrimaryColor == nil && b.SupportURL == nil && b.SupportEmail == nil
}

// Limits of a branding.
const (
	maxDisplayName = 100
	minContrast    = 4.5
)

func brandingOut(b *fsm.Branding) Branding {
	if b == nil {
		return Branding{}
	}
	out := Branding{DisplayName: b.DisplayName, PrimaryColor: b.PrimaryColor, SupportURL: b.SupportURL, SupportEmail: b.SupportEmail}
	if len(b.Logo) > 0 {
		out.Logo = "data:" + b.LogoType + ";base64," + base64.StdEncoding.EncodeToString(b.Logo)
	}
	return out
}

// merge checks the body's fields (field names prefixed with prefix) and
// applies them over cur.
func (p *problems) branding(prefix string, cur fsm.Branding, b *brandingBody) fsm.Branding {
	if v := b.DisplayName; v != nil {
		switch {
		case utf8.RuneCountInString(*v) > maxDisplayName:
			p.add(prefix+"display_name", codeTooLong, "must be at most %d characters", maxDisplayName)
		case strings.ContainsFunc(*v, isControl) || !utf8.ValidString(*v):
			p.add(prefix+"display_name", codeInvalid, "must not hold control characters")
		default:
			cur.DisplayName = strings.TrimSpace(*v)
		}
	}
	if v := b.Logo; v != nil {
		if *v == "" {
			cur.Logo, cur.LogoType = nil, ""
		} else if data, typ, err := parseLogo(*v); err != nil {
			code := codeInvalid
			if errors.Is(err, errLogoTooLarge) {
				code = codeTooLong
			}
			p.add(prefix+"logo", code, "%s", err.Error())
		} else {
			cur.Logo, cur.LogoType = data, typ
		}
	}
	if v := b.PrimaryColor; v != nil {
		if *v == "" {
			cur.PrimaryColor = ""
		} else if c, err := checkPrimaryColor(*v); err != nil {
			p.add(prefix+"primary_color", codeInvalid, "%s", err.Error())
		} else {
			cur.PrimaryColor = c
		}
	}
	if v := b.SupportURL; v != nil {
		if *v == "" {
			cur.SupportURL = ""
		} else if u, ok := p.absURI(prefix+"support_url", *v); ok {
			if u.Scheme != "https" && !isLoopback(u.Hostname()) {
				p.add(prefix+"support_url", codeInvalidURI, "must use https (http only for 127.0.0.1, [::1] or localhost)")
			} else {
				cur.SupportURL = *v
			}
		}
	}
	if v := b.SupportEmail; v != nil {
		if *v == "" {
			cur.SupportEmail = ""
		} else {
			n := len(*p)
			p.email(prefix+"support_email", *v)
			if len(*p) == n {
				cur.SupportEmail = *v
			}
		}
	}
	return cur
}

var errLogoTooLarge = fmt.Errorf("must be at most %d bytes once decoded", fsm.MaxLogoBytes)

// parseLogo reads a data: URI of a PNG or SVG image, base64, at most
// fsm.MaxLogoBytes decoded, and checks the image (checkPNG, checkSVG).
func parseLogo(s string) ([]byte, string, error) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return nil, "", errors.New("must be a data: URI")
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, "", errors.New("must be a data: URI")
	}
	typ, ok := strings.CutSuffix(strings.ToLower(meta), ";base64")
	if !ok {
		return nil, "", errors.New("must be base64 (data:image/png;base64,...)")
	}
	if base64.StdEncoding.DecodedLen(len(payload)) > fsm.MaxLogoBytes+2 {
		return nil, "", errLogoTooLarge
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return nil, "", errors.New("must be valid base64")
	}
	if len(data) > fsm.MaxLogoBytes {
		return nil, "", errLogoTooLarge
	}
	switch typ {
	case "image/png":
		err = checkPNG(data)
	case "image/svg+xml":
		err = checkSVG(data)
	default:
		return nil, "", errors.New("must be image/png or image/svg+xml")
	}
	if err != nil {
		return nil, "", err
	}
	return data, typ, nil
}

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

func checkPNG(b []byte) error {
	if !bytes.HasPrefix(b, pngSignature) {
		return errors.New("is not a PNG image")
	}
	c, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil || c.Width < 1 || c.Height < 1 {
		return errors.New("is not a valid PNG image")
	}
	if c.Width > 4096 || c.Height > 4096 {
		return errors.New("must be at most 4096 pixels wide and high")
	}
	return nil
}

// checkSVG accepts an SVG document whose root is <svg> and that has no
// script, no foreignObject, no event handler attribute (on...), no
// reference outside itself (an href that is not "#..." or "data:...", an
// animation of an href), nor a DOCTYPE or entity, and whose CSS (each
// <style> element's whole text, and every SVG or XLink attribute, style
// and presentation attributes alike) passes checkCSS. The pages only
// ever show it through <img>, and its own address is served with a
// sandbox CSP, nosniff and CORP same-origin, where none of that runs; the
// check is for the day someone opens the logo elsewhere.
func checkSVG(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("must be UTF-8 SVG")
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	depth := 0
	sawRoot := false
	// style holds the text of the <style> element being read: the whole
	// of it is checked at its end, since an XML comment or a CDATA
	// section splits it into pieces that CSS reads as one
	// ("@im<!---->port" is "@import").
	var style *strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return errors.New("is not well-formed XML")
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			if style != nil {
				return errors.New("must not hold elements inside <style>")
			}
			if depth == 0 {
				if sawRoot || name != "svg" {
					return errors.New("must be an SVG document (root <svg>)")
				}
				sawRoot = true
			}
			depth++
			switch name {
			case "script", "foreignobject", "iframe", "embed", "object", "handler", "listener":
				return fmt.Errorf("must not hold <%s>", t.Name.Local)
			case "style":
				style = new(strings.Builder)
			}
			for _, a := range t.Attr {
				if err := checkSVGAttr(a); err != nil {
					return err
				}
			}
		case xml.EndElement:
			depth--
			if style != nil {
				if err := checkCSS(style.String(), true); err != nil {
					return err
				}
				style = nil
			}
		case xml.Directive:
			return errors.New("must not hold a DOCTYPE or entity declaration")
		case xml.ProcInst:
			if t.Target != "xml" {
				return errors.New("must not hold processing instructions")
			}
		case xml.CharData:
			if style != nil {
				style.Write(t)
			}
		}
	}
	if !sawRoot {
		return errors.New("must be an SVG document (root <svg>)")
	}
	return nil
}

// Namespaces whose attributes an SVG's renderer reads: SVG's own
// (unprefixed) and XLink's.
const xlinkNS = "http://www.w3.org/1999/xlink"

// checkSVGAttr checks one attribute of a logo's element (its value as the
// XML decoder gives it, character references resolved).
func checkSVGAttr(a xml.Attr) error {
	an := strings.ToLower(a.Name.Local)
	if strings.HasPrefix(an, "on") {
		return fmt.Errorf("must not hold event handler attributes (%s)", a.Name.Local)
	}
	v := strings.TrimSpace(a.Value)
	switch an {
	case "href", "src":
		if !strings.HasPrefix(v, "#") && !strings.HasPrefix(strings.ToLower(v), "data:") {
			return errors.New("must not refer to anything outside itself (href)")
		}
	case "attributename":
		// <set attributeName="href" to="https://..."> would give an href
		// later, past the check above.
		_, target, _ := strings.Cut(strings.ToLower(v), ":")
		if target == "" {
			target = strings.ToLower(v)
		}
		if target == "href" || target == "src" {
			return errors.New("must not animate a reference (href)")
		}
	}
	if compact := strings.ToLower(strings.Join(strings.Fields(a.Value), "")); strings.Contains(compact, "javascript:") {
		return errors.New("must not hold javascript: addresses")
	}
	switch a.Name.Space {
	case "", xlinkNS:
		// A presentation attribute is CSS (fill="url(...)"), and a style
		// attribute holds declarations; other attributes hold nothing
		// that CSS's functions could turn into a fetch, and refusing them
		// the same costs little. Other namespaces' (an editor's metadata)
		// are not read by the renderer.
		return checkCSS(a.Value, an == "style")
	}
	return nil
}

// cssFunctions are the functions a logo's CSS may call (ASCII case
// folded): colours, transforms, arithmetic and the pseudo-classes of
// selectors. url() is allowed too, for a fragment of the document alone
// (url(#gradient)). Everything else is refused, among it every function
// that fetches (image(), image-set(), cross-fade(), src()...) and old
// browsers' expression().
var cssFunctions = map[string]bool{
	"rgb": true, "rgba": true, "hsl": true, "hsla": true, "hwb": true,
	"translate": true, "translatex": true, "translatey": true, "scale": true, "scalex": true, "scaley": true,
	"rotate": true, "skew": true, "skewx": true, "skewy": true, "matrix": true,
	"calc": true, "min": true, "max": true, "clamp": true, "var": true,
	"not": true, "is": true, "where": true, "nth-child": true, "nth-of-type": true, "nth-last-child": true, "nth-last-of-type": true,
	"url": true,
}

// checkCSS checks CSS from a logo against an allow-list rather than a
// list of what to refuse, so that no spelling of a refused thing gets
// through: no backslash at all (CSS escapes, "@\69mport", "\40import",
// "u\72l(", "@imp\ort"); in style text (a <style> element's or a style
// attribute, style true) no comment ("@im/**/port") and no at-rule but
// @media ("@import", "@font-face" with its src, "@namespace"); every
// function (a name right before "(") one of cssFunctions, and url() only
// of "#..." (quoted or not). A "(" after anything but a name opens a
// block, as in a media query, and calls nothing.
func checkCSS(s string, style bool) error {
	const outside = "must not refer to anything outside itself (url(), @import or other CSS that fetches)"
	if strings.ContainsRune(s, '\\') {
		return errors.New("must not hold CSS escapes (a backslash)")
	}
	if style && strings.Contains(s, "/*") {
		return errors.New("must not hold CSS comments")
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '@':
			if !style {
				continue
			}
			j := i + 1
			for j < len(s) && isCSSNameByte(s[j]) {
				j++
			}
			if !strings.EqualFold(s[i+1:j], "media") {
				return errors.New(outside)
			}
		case '(':
			j := i
			for j > 0 && isCSSNameByte(s[j-1]) {
				j--
			}
			name := strings.ToLower(s[j:i])
			switch {
			case name == "":
				// a block, not a call
			case !cssFunctions[name]:
				return errors.New(outside)
			case name == "url":
				rest := strings.TrimLeft(s[i+1:], " \t\r\n\f")
				rest = strings.TrimLeft(rest, `"'`)
				if !strings.HasPrefix(rest, "#") {
					return errors.New(outside)
				}
			}
		}
	}
	return nil
}

// isCSSNameByte reports whether c may be part of a CSS name: letters,
// digits, "-", "_" and every byte of a non-ASCII character (escapes are
// refused before names are read).
func isCSSNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c >= 0x80
}

// checkPrimaryColor accepts #rrggbb (answered in lower case) on which
// white text reaches a 4.5:1 contrast ratio (WCAG 2.1, 1.4.3).
func checkPrimaryColor(s string) (string, error) {
	s = strings.ToLower(s)
	if len(s) != 7 || s[0] != '#' || strings.Trim(s[1:], "0123456789abcdef") != "" {
		return "", errors.New("must be #rrggbb")
	}
	if r := contrastWithWhite(s); r < minContrast {
		return "", fmt.Errorf("white text on it has a contrast ratio of %.2f:1, below %.1f:1; choose a darker colour", r, minContrast)
	}
	return s, nil
}

// contrastWithWhite is the WCAG 2.1 contrast ratio of white on #rrggbb:
// (1 + 0.05) / (L + 0.05), L the colour's relative luminance.
func contrastWithWhite(hex string) float64 {
	lin := func(h string) float64 {
		var v int
		fmt.Sscanf(h, "%02x", &v)
		c := float64(v) / 255
		if c <= 0.04045 {
			return c / 12.92
		}
		return math.Pow((c+0.055)/1.055, 2.4)
	}
	l := 0.2126*lin(hex[1:3]) + 0.7152*lin(hex[3:5]) + 0.0722*lin(hex[5:7])
	return 1.05 / (l + 0.05)
}

// mayBrand reports whether r's credential may change organization org's
// own branding, and answers 403 itself when not. An admin always may. An
// org_admin of org may not while org owns a client that serves other
// organizations as well (a multi-organization client serving every
// organization, or listing another): that client's sign-in, consent and
// sign-out pages wear its owner's branding (signin's BrandFor) for every
// person who signs in through it, and only an admin sets what people of
// other organizations see. The error answered is the state's.
func (a *api) mayBrand(w http.ResponseWriter, r *http.Request, org string) bool {
	if credentialOf(r).Role == RoleAdmin {
		return true
	}
	shared, _, err := a.State.ClientsWhere(func(c fsm.Client) bool {
		return c.OrganizationID == org && !clientScope(c).only(org)
	}, fsm.Page{Page: 1, PageSize: 1})
	if err != nil {
		a.readFailed(w, r, err)
		return false
	}
	if len(shared) > 0 {
		httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden, fmt.Sprintf(
			"forbidden: this organization owns client %s, which serves other organizations too, and its pages wear this organization's branding for all of them; only an admin may change it", shared[0].ID))
		return false
	}
	return true
}

// getBranding is GET /branding: the site's default.
func (a *api) getBranding(w http.ResponseWriter, r *http.Request) {
	b, err := a.State.Branding()
	if err != nil {
		a.unavailable(w, r, "read branding", err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, brandingOut(&b))
}

// putBranding is PUT /branding: the site's default, the fields given
// over the stored ones ("" clears one).
func (a *api) putBranding(w http.ResponseWriter, r *http.Request) {
	var body brandingBody
	if err := httpx.DecodeJSONLimit(w, r, &body, maxBrandingBody); err != nil {
		httpx.WriteBodyError(w, r, err)
		return
	}
	cur, err := a.State.Branding()
	if err != nil {
		a.unavailable(w, r, "read branding", err)
		return
	}
	var p problems
	if body.empty() {
		p.add("body", codeRequired, "give at least one of display_name, logo, primary_color, support_url, support_email")
	}
	next := p.branding("", cur, &body)
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	res, ok := a.apply(w, r, fsm.MustCommand(fsm.TypeSetBranding, fsm.SetBranding{Branding: next}))
	if !ok {
		return
	}
	b, err := valueOr(res, a.State.Branding)
	if err != nil {
		a.unavailable(w, r, "read branding", err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, brandingOut(&b))
}

// maxBrandingBody holds a logo of fsm.MaxLogoBytes in base64 (4/3 of
// it) and the other fields.
const maxBrandingBody = 128 << 10
