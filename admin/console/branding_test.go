package console

import (
	"bytes"
	"image"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// postMultipart posts fields and, when logo is set, a file "logo".
func (e *env) postMultipart(path string, fields map[string]string, name string, logo []byte) resp {
	e.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("csrf_token", e.csrf())
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	if logo != nil {
		fw, _ := mw.CreateFormFile("logo", name)
		fw.Write(logo)
	}
	mw.Close()
	req, _ := http.NewRequest("POST", e.srv.URL+path, &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return e.do(req)
}

func TestBrandingPage(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	r := e.get(Prefix + "branding")
	wantStatus(t, "page", r, http.StatusOK)
	wantBody(t, "page", r, `enctype="multipart/form-data"`, "Without a name or a logo the pages show no header.")

	var img bytes.Buffer
	png.Encode(&img, image.NewRGBA(image.Rect(0, 0, 4, 4)))
	fields := map[string]string{"display_name": "Example Sign-in", "primary_color": "#005a9c",
		"support_url": "https://help.example.com/", "support_email": "help@example.com"}
	r = e.postMultipart(Prefix+"branding", fields, "logo.png", img.Bytes())
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"branding?done=branding-updated" {
		t.Fatalf("save: %d %q\n%s", r.Status, r.Location, r.Body)
	}
	b, _ := e.state.Branding()
	if b.DisplayName != "Example Sign-in" || b.LogoType != "image/png" || !bytes.Equal(b.Logo, img.Bytes()) || b.PrimaryColor != "#005a9c" {
		t.Fatalf("stored %+v", b)
	}
	r = e.get(r.Location)
	wantBody(t, "saved", r, "Branding saved.", `/console/branding/logo?v=`, `/console/branding/preview.css?c=005a9c`, "Example Sign-in", "help@example.com")
	if r := e.get(Prefix + "branding/logo"); r.Status != 200 || r.Header.Get("Content-Type") != "image/png" || r.Body != img.String() {
		t.Errorf("preview logo: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
	if r := e.get(Prefix + "branding/preview.css?c=005a9c"); r.Status != 200 || !strings.Contains(r.Body, ".brand-preview{--brand-primary:#005a9c;--brand-on-primary:#ffffff;--brand-primary-hover:#004c84}") {
		t.Errorf("preview style: %d %q", r.Status, r.Body)
	}
	if r := e.get(Prefix + "branding/preview.css?c=red;}"); r.Status != 404 {
		t.Errorf("preview style of junk: %d", r.Status)
	}

	// Refusals come back on the form, as typed, with the field named.
	r = e.postMultipart(Prefix+"branding", map[string]string{"primary_color": "#777777"}, "", nil)
	wantStatus(t, "low contrast", r, http.StatusBadRequest)
	wantBody(t, "low contrast", r, `role="alert"`, `id="b-color-error"`, `value="#777777"`, "4.5:1")
	r = e.postMultipart(Prefix+"branding", nil, "evil.svg", []byte(`<svg onload="alert(1)"/>`))
	wantStatus(t, "svg with a handler", r, http.StatusBadRequest)
	wantBody(t, "svg with a handler", r, `id="b-logo-error"`)
	r = e.postMultipart(Prefix+"branding", nil, "logo.gif", []byte("GIF89a"))
	wantStatus(t, "gif", r, http.StatusBadRequest)
	if b2, _ := e.state.Branding(); !bytes.Equal(b2.Logo, img.Bytes()) {
		t.Error("a refused logo replaced the stored one")
	}

	// A plain form post (no file) keeps the logo; remove clears it.
	r = e.post(Prefix+"branding", url.Values{"display_name": {"Renamed"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("plain post: %d\n%s", r.Status, r.Body)
	}
	if b, _ := e.state.Branding(); b.DisplayName != "Renamed" || len(b.Logo) == 0 {
		t.Fatalf("after a plain post %+v", b)
	}
	e.postMultipart(Prefix+"branding", map[string]string{"remove_logo": "on"}, "", nil)
	if b, _ := e.state.Branding(); len(b.Logo) != 0 {
		t.Fatal("remove kept the logo")
	}
}

func TestOrgBrandingForm(t *testing.T) {
	e := newEnv(t)
	e.signIn()
	e.post(Prefix+"organizations", url.Values{"slug": {"acme"}, "name": {"Acme"}})
	o := firstOrg(t, e.state)
	path := Prefix + "organizations/" + o.ID
	wantBody(t, "page", e.get(path), `id="org-branding"`, `action="/console/organizations/`+o.ID+`/branding"`)

	r := e.postMultipart(path+"/branding", map[string]string{"display_name": "Acme", "primary_color": "#ff0000"}, "", nil)
	wantStatus(t, "low contrast", r, http.StatusBadRequest)
	wantBody(t, "low contrast", r, `id="b-color-error"`, `value="#ff0000"`, `value="Acme"`)

	r = e.postMultipart(path+"/branding", map[string]string{"display_name": "Acme", "primary_color": "#1a1a1a"}, "acme.svg",
		[]byte(`<svg xmlns="http://www.w3.org/2000/svg"><rect width="4" height="4"/></svg>`))
	if r.Status != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", r.Status, r.Body)
	}
	b, _ := e.state.BrandingFor(o.ID)
	if b.DisplayName != "Acme" || b.LogoType != "image/svg+xml" || b.PrimaryColor != "#1a1a1a" {
		t.Fatalf("stored %+v", b)
	}
	r = e.get(path)
	wantBody(t, "saved", r, path+"/branding/logo?v=", "preview.css?c=1a1a1a", `id="b-remove-logo"`)
	lr := e.get(path + "/branding/logo")
	if lr.Status != 200 || lr.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(lr.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("logo: %d %q %q", lr.Status, lr.Header.Get("Content-Type"), lr.Header.Get("Content-Security-Policy"))
	}
	r = e.postMultipart(path+"/branding", map[string]string{"remove_logo": "on"}, "", nil)
	if b, _ := e.state.BrandingFor(o.ID); r.Status != http.StatusSeeOther || len(b.Logo) != 0 {
		t.Errorf("clearing: %d, %+v", r.Status, b)
	}
}
