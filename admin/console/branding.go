package console

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
)

// The site's branding (admin.Branding): a form of its fields, the logo
// as a file whose bytes the console sends as a data: URI, and a preview.
// The preview's logo and colour come from the console's own routes
// (brandingLogo, brandingPreviewStyle), which work on --admin-addr too,
// where the provider's /branding/ routes are not served; the page's CSP
// (img-src 'self'; style-src 'self') is unchanged.

// maxBrandingForm is the multipart form of the branding page: a 64 KiB
// logo and the other fields.
const maxBrandingForm = 160 << 10

type brandingData struct {
	Branding admin.Branding
	// LogoURL and StyleURL are the preview's ("" for none).
	LogoURL  string
	StyleURL string
}

// brandingFieldsCtx is the data of the "brandingfields" template: the
// page, the prefix of the API's field names ("" for the site's,
// "branding." for an organization's) and whether there is a logo to
// remove.
type brandingFieldsCtx struct {
	V       *view
	P       string
	HasLogo bool
}

// brandingPage is GET /console/branding.
func (c *Console) brandingPage(w http.ResponseWriter, r *http.Request) {
	c.renderBranding(w, r, c.newView(w, r, "Branding", "branding"), 0, nil)
}

func (c *Console) renderBranding(w http.ResponseWriter, r *http.Request, v *view, status int, posted url.Values) {
	var b admin.Branding
	if err := c.call(r, "GET", "/branding", nil, &b); err != nil {
		status = c.fail(r, v, err)
	}
	v.Form = url.Values{"display_name": {b.DisplayName}, "primary_color": {b.PrimaryColor},
		"support_url": {b.SupportURL}, "support_email": {b.SupportEmail}}
	for k, vals := range posted {
		if k != "csrf_token" && k != "remove_logo" {
			v.Form[k] = vals
		}
	}
	v.Data = previewOf(b, Prefix+"branding/logo")
	c.render(w, status, "branding", v)
}

// previewOf is the preview of b, its logo served at logoPath.
func previewOf(b admin.Branding, logoPath string) brandingData {
	d := brandingData{Branding: b}
	if _, data, ok := decodeDataURI(b.Logo); ok {
		sum := sha256.Sum256(data)
		d.LogoURL = logoPath + "?v=" + hex.EncodeToString(sum[:8])
	}
	if c := strings.TrimPrefix(b.PrimaryColor, "#"); len(c) == 6 {
		d.StyleURL = Prefix + "branding/preview.css?c=" + url.QueryEscape(c)
	}
	return d
}

// updateBranding is POST /console/branding (multipart): PUT
// /admin/v1/branding with every field of the form, the logo only when a
// file was chosen or "remove" ticked.
func (c *Console) updateBranding(w http.ResponseWriter, r *http.Request) {
	v := c.newView(w, r, "Branding", "branding")
	body, err := brandingForm(r)
	if err != nil {
		v.Error = "The logo could not be used."
		v.Problems = append(v.Problems, httpx.Detail{Field: "logo", Message: err.Error(), Code: "invalid"})
		c.renderBranding(w, r, v, http.StatusBadRequest, r.PostForm)
		return
	}
	if err := c.call(r, "PUT", "/branding", body, nil); err != nil {
		c.renderBranding(w, r, v, c.fail(r, v, err), r.PostForm)
		return
	}
	done(w, r, Prefix+"branding", "branding-updated")
}

// updateOrgBranding is POST /console/organizations/{id}/branding
// (multipart): PATCH /admin/v1/organizations/{id} {branding}.
func (c *Console) updateOrgBranding(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, err := brandingForm(r)
	if err == nil {
		err = c.call(r, "PATCH", "/organizations/"+pathID(id), map[string]any{"branding": body}, nil)
	} else {
		err = &apiError{Status: http.StatusBadRequest, Message: "The logo could not be used.",
			Details: []httpx.Detail{{Field: "branding.logo", Message: err.Error(), Code: "invalid"}}}
	}
	if err != nil {
		v := c.newView(w, r, "Organization", "orgs")
		c.renderOrg(w, r, v, c.fail(r, v, err), r.PostForm, false)
		return
	}
	done(w, r, Prefix+"organizations/"+url.PathEscape(id), "org-updated")
}

// brandingForm is the branding of a posted form: every text field (a
// form always sends them all; "" clears one) and the logo when a file
// was chosen or remove_logo ticked.
func brandingForm(r *http.Request) (map[string]any, error) {
	f := r.PostForm
	body := map[string]any{}
	for _, k := range []string{"display_name", "primary_color", "support_url", "support_email"} {
		body[k] = strings.TrimSpace(f.Get(k))
	}
	if f.Get("remove_logo") != "" {
		body["logo"] = ""
	} else if r.MultipartForm != nil && len(r.MultipartForm.File["logo"]) > 0 {
		uri, err := logoFromUpload(r)
		if err != nil {
			return nil, err
		}
		body["logo"] = uri
	}
	return body, nil
}

// logoFromUpload reads the form's logo file as a data: URI: a PNG by its
// signature, else an SVG by its name or type; the API checks the rest.
func logoFromUpload(r *http.Request) (string, error) {
	fh := r.MultipartForm.File["logo"][0]
	if fh.Size > 64<<10 {
		return "", errors.New("must be at most 64 KiB")
	}
	file, err := fh.Open()
	if err != nil {
		return "", err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, 64<<10+1))
	if err != nil || len(data) == 0 {
		return "", errors.New("the file could not be read")
	}
	if len(data) > 64<<10 {
		return "", errors.New("must be at most 64 KiB")
	}
	typ := ""
	switch {
	case strings.HasPrefix(string(data), "\x89PNG\r\n\x1a\n"):
		typ = "image/png"
	case strings.HasSuffix(strings.ToLower(fh.Filename), ".svg") || fh.Header.Get("Content-Type") == "image/svg+xml":
		typ = "image/svg+xml"
	default:
		return "", errors.New("must be a PNG or an SVG file")
	}
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(data), nil
}

func decodeDataURI(s string) (typ string, data []byte, ok bool) {
	meta, payload, found := strings.Cut(strings.TrimPrefix(s, "data:"), ",")
	typ, b64 := strings.CutSuffix(meta, ";base64")
	if !found || !b64 || !strings.HasPrefix(s, "data:") {
		return "", nil, false
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	return typ, data, err == nil && len(data) > 0
}

// brandingLogo is GET /console/branding/logo: the site's logo, for the
// preview, with the headers of the provider's own logo route.
func (c *Console) brandingLogo(w http.ResponseWriter, r *http.Request) {
	var b admin.Branding
	if id := r.PathValue("id"); id != "" {
		var o admin.Org
		if err := c.call(r, "GET", "/organizations/"+pathID(id), nil, &o); err != nil {
			c.apiMessage(w, r, err)
			return
		}
		b = o.Branding
	} else if err := c.call(r, "GET", "/branding", nil, &b); err != nil {
		c.apiMessage(w, r, err)
		return
	}
	typ, data, ok := decodeDataURI(b.Logo)
	if !ok || (typ != "image/png" && typ != "image/svg+xml") {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	httpx.SetImageHeaders(h, typ)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// brandingPreviewStyle is GET /console/branding/preview.css?c=rrggbb:
// for the preview, the custom properties the provider's brand stylesheet
// sets for its pages (signin/branding.go's brandStylesheet: the colour,
// white on it, and the colour 15% darker for hover), which console.css's
// rules of the preview read as the real pages' stylesheet does.
func brandingPreviewStyle(w http.ResponseWriter, r *http.Request) {
	c := r.URL.Query().Get("c")
	if len(c) != 6 || strings.Trim(strings.ToLower(c), "0123456789abcdef") != "" {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/css; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	rgb, _ := strconv.ParseUint(c, 16, 32)
	dark := func(shift uint) uint64 { return (rgb >> shift & 0xff) * 85 / 100 }
	fmt.Fprintf(w, ".brand-preview{--brand-primary:#%06x;--brand-on-primary:#ffffff;--brand-primary-hover:#%02x%02x%02x}\n",
		rgb, dark(16), dark(8), dark(0))
}
