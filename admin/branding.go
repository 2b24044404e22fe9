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
// script, no foreignObject, no event handler attribute (on...) and no
// reference outside itself (an href that is not "#..." or "data:..."),
// nor a DOCTYPE or entity. The pages only ever show it through <img>,
// where none of that runs; the check is for the day someone opens the
// logo's address directly.
func checkSVG(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("must be UTF-8 SVG")
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	depth := 0
	sawRoot := false
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
			}
			for _, a := range t.Attr {
				an := strings.ToLower(a.Name.Local)
				if strings.HasPrefix(an, "on") {
					return fmt.Errorf("must not hold event handler attributes (%s)", a.Name.Local)
				}
				if an == "href" || an == "src" {
					v := strings.TrimSpace(a.Value)
					if !strings.HasPrefix(v, "#") && !strings.HasPrefix(strings.ToLower(v), "data:") {
						return errors.New("must not refer to anything outside itself (href)")
					}
				}
				if compact := strings.ToLower(strings.Join(strings.Fields(a.Value), "")); strings.Contains(compact, "javascript:") {
					// An animation (<set to="javascript:...">) can give an href later.
					return errors.New("must not hold javascript: addresses")
				}
				if strings.Contains(strings.ToLower(a.Value), "url(") && !strings.Contains(strings.ToLower(a.Value), "url(#") {
					return errors.New("must not refer to anything outside itself (url())")
				}
			}
		case xml.EndElement:
			depth--
		case xml.Directive:
			return errors.New("must not hold a DOCTYPE or entity declaration")
		case xml.ProcInst:
			if t.Target != "xml" {
				return errors.New("must not hold processing instructions")
			}
		case xml.CharData:
			// <style> text: @import and url() reach outside.
			l := strings.ToLower(string(t))
			if strings.Contains(l, "@import") || (strings.Contains(l, "url(") && !strings.Contains(l, "url(#")) {
				return errors.New("must not refer to anything outside itself (url() or @import)")
			}
		}
	}
	if !sawRoot {
		return errors.New("must be an SVG document (root <svg>)")
	}
	return nil
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
