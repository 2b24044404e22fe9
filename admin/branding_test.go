package admin

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"math"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// TestContrastWithWhite: the WCAG 2.1 ratio of white text on a colour,
// against pairs computed by hand and by the usual checkers.
func TestContrastWithWhite(t *testing.T) {
	for _, c := range []struct {
		hex  string
		want float64
		ok   bool
	}{
		{"#767676", 4.54, true},
		{"#777777", 4.48, false},
		{"#000000", 21, true},
		{"#ffffff", 1, false},
		{"#005a9c", 7.14, true},
		{"#0000ff", 8.59, true},
		{"#ff0000", 4.0, false},
		{"#008000", 5.14, true},
	} {
		got := contrastWithWhite(c.hex)
		if math.Abs(got-c.want) > 0.01 {
			t.Errorf("%s: ratio %.3f, want %.2f", c.hex, got, c.want)
		}
		_, err := checkPrimaryColor(c.hex)
		if (err == nil) != c.ok {
			t.Errorf("%s: accepted %v, want %v (%v)", c.hex, err == nil, c.ok, err)
		}
	}
	for _, bad := range []string{"767676", "#76767", "#7676766", "#gggggg", "#fff", "red", "rgb(0,0,0)", " #000000"} {
		if _, err := checkPrimaryColor(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if c, err := checkPrimaryColor("#005A9C"); err != nil || c != "#005a9c" {
		t.Errorf("upper case: %q %v, want lower case", c, err)
	}
}

func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURI(typ string, b []byte) string {
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b)
}

func svgURI(s string) string { return dataURI("image/svg+xml", []byte(s)) }

func TestParseLogo(t *testing.T) {
	small := pngBytes(t, 2, 2)
	big := append(pngBytes(t, 1, 1), make([]byte, fsm.MaxLogoBytes)...) // trailing bytes: too large
	for _, c := range []struct {
		name, uri string
		typ       string // "" when refused
	}{
		{"png", dataURI("image/png", small), "image/png"},
		{"svg", svgURI(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10" fill="#005a9c"/></svg>`), "image/svg+xml"},
		{"svg with an xml declaration and a local use", svgURI(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"><defs><g id="a"/></defs><use xlink:href="#a"/></svg>`), "image/svg+xml"},
		{"svg with a local gradient", svgURI(`<svg xmlns="http://www.w3.org/2000/svg"><linearGradient id="g"/><rect fill="url(#g)"/></svg>`), "image/svg+xml"},
		{"not data", "https://example.com/logo.png", ""},
		{"not base64", "data:image/png," + string(small), ""},
		{"bad base64", "data:image/png;base64,!!!", ""},
		{"gif", dataURI("image/gif", []byte("GIF89a")), ""},
		{"png that is not", dataURI("image/png", []byte("<svg/>")), ""},
		{"png signature only", dataURI("image/png", pngSignature), ""},
		{"png too large", dataURI("image/png", big), ""},
		{"png too many pixels", dataURI("image/png", pngBytes(t, 5000, 1)), ""},
		{"svg that is a png", dataURI("image/svg+xml", small), ""},
		{"svg root not svg", svgURI(`<html><svg/></html>`), ""},
		{"svg two roots", svgURI(`<svg/><svg/>`), ""},
		{"svg script", svgURI(`<svg><script>alert(1)</script></svg>`), ""},
		{"svg namespaced script", svgURI(`<svg xmlns:x="http://www.w3.org/2000/svg"><x:script/></svg>`), ""},
		{"svg onload", svgURI(`<svg onload="alert(1)"/>`), ""},
		{"svg OnClick", svgURI(`<svg><rect OnClick="alert(1)"/></svg>`), ""},
		{"svg foreignObject", svgURI(`<svg><foreignObject><div/></foreignObject></svg>`), ""},
		{"svg external href", svgURI(`<svg><image href="https://evil.example/x.png"/></svg>`), ""},
		{"svg external xlink:href", svgURI(`<svg xmlns:xlink="http://www.w3.org/1999/xlink"><use xlink:href="other.svg#a"/></svg>`), ""},
		{"svg javascript href", svgURI(`<svg><a href="javascript:alert(1)"><rect/></a></svg>`), ""},
		{"svg animated javascript href", svgURI(`<svg><a><set attributeName="href" to="JavaScript :alert(1)"/><rect/></a></svg>`), ""},
		{"svg data href", svgURI(`<svg><image href="data:image/png;base64,iVBORw0KGgo="/></svg>`), "image/svg+xml"},
		{"svg external url()", svgURI(`<svg><rect style="fill:url(https://evil.example/p)"/></svg>`), ""},
		{"svg style import", svgURI(`<svg><style>@import "https://evil.example/x.css";</style></svg>`), ""},
		{"svg doctype entity", svgURI(`<!DOCTYPE svg [<!ENTITY x "y">]><svg>&x;</svg>`), ""},
		{"svg not well formed", svgURI(`<svg><rect></svg>`), ""},
		{"svg empty", svgURI(``), ""},
		{"svg text only", svgURI(`hello`), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, typ, err := parseLogo(c.uri)
			if typ != c.typ {
				t.Fatalf("type %q (%v), want %q", typ, err, c.typ)
			}
			if c.typ != "" && len(data) == 0 {
				t.Fatal("no bytes")
			}
		})
	}
}

func TestPutBranding(t *testing.T) {
	e := newEnv(t)
	logo := dataURI("image/png", pngBytes(t, 3, 3))
	e.run(t, []tc{
		{name: "empty body", method: "PUT", path: "/admin/v1/branding", body: `{}`, status: 400, code: httpx.CodeValidation, field: "body", dcode: codeRequired},
		{name: "low contrast", method: "PUT", path: "/admin/v1/branding", body: `{"primary_color":"#777777"}`, status: 400, code: httpx.CodeValidation, field: "primary_color", dcode: codeInvalid},
		{name: "not a colour", method: "PUT", path: "/admin/v1/branding", body: `{"primary_color":"blue"}`, status: 400, code: httpx.CodeValidation, field: "primary_color", dcode: codeInvalid},
		{name: "http support url", method: "PUT", path: "/admin/v1/branding", body: `{"support_url":"http://help.example.com/"}`, status: 400, code: httpx.CodeValidation, field: "support_url", dcode: codeInvalidURI},
		{name: "relative support url", method: "PUT", path: "/admin/v1/branding", body: `{"support_url":"/help"}`, status: 400, code: httpx.CodeValidation, field: "support_url", dcode: codeInvalidURI},
		{name: "javascript support url", method: "PUT", path: "/admin/v1/branding", body: `{"support_url":"javascript:alert(1)"}`, status: 400, code: httpx.CodeValidation, field: "support_url", dcode: codeInvalidURI},
		{name: "named support email", method: "PUT", path: "/admin/v1/branding", body: `{"support_email":"Help <help@example.com>"}`, status: 400, code: httpx.CodeValidation, field: "support_email", dcode: codeInvalid},
		{name: "two support emails", method: "PUT", path: "/admin/v1/branding", body: `{"support_email":"a@example.com, b@example.com"}`, status: 400, code: httpx.CodeValidation, field: "support_email", dcode: codeInvalid},
		{name: "long name", method: "PUT", path: "/admin/v1/branding", body: `{"display_name":"` + strings.Repeat("é", 101) + `"}`, status: 400, code: httpx.CodeValidation, field: "display_name", dcode: codeTooLong},
		{name: "control in name", method: "PUT", path: "/admin/v1/branding", body: `{"display_name":"a\u0007b"}`, status: 400, code: httpx.CodeValidation, field: "display_name", dcode: codeInvalid},
		{name: "svg with script", method: "PUT", path: "/admin/v1/branding", body: `{"logo":"` + svgURI(`<svg><script/></svg>`) + `"}`, status: 400, code: httpx.CodeValidation, field: "logo", dcode: codeInvalid},
		{name: "unknown field", method: "PUT", path: "/admin/v1/branding", body: `{"colour":"#000000"}`, status: 400, code: httpx.CodeValidation},
	})
	e.must(200, "PUT", "/admin/v1/branding", `{"display_name":"Example","logo":"`+logo+`","primary_color":"#005A9C","support_url":"https://help.example.com/","support_email":"help@example.com"}`)
	got := decodeAs[Branding](t, e.must(200, "GET", "/admin/v1/branding", ""))
	want := Branding{DisplayName: "Example", Logo: logo, PrimaryColor: "#005a9c", SupportURL: "https://help.example.com/", SupportEmail: "help@example.com"}
	if got != want {
		t.Fatalf("GET /branding: %+v, want %+v", got, want)
	}
	if ev := e.lastEvent(fsm.EventAdmin); ev.Detail["action"] != "PUT /branding" {
		t.Errorf("audit event %+v", ev.Detail)
	}
	// A field left out keeps its value; "" clears one.
	got = decodeAs[Branding](t, e.must(200, "PUT", "/admin/v1/branding", `{"logo":"","support_url":"http://localhost:8080/help"}`))
	want.Logo, want.SupportURL = "", "http://localhost:8080/help"
	if got != want {
		t.Fatalf("after a partial PUT: %+v, want %+v", got, want)
	}
	// A logo of 64 KiB passes through the body limit.
	svg := `<svg xmlns="http://www.w3.org/2000/svg"><desc>` + strings.Repeat("x", fsm.MaxLogoBytes-100) + `</desc></svg>`
	e.must(200, "PUT", "/admin/v1/branding", `{"logo":"`+svgURI(svg)+`"}`)
	tooBig := `<svg><desc>` + strings.Repeat("x", fsm.MaxLogoBytes) + `</desc></svg>`
	w := e.do("PUT", "/admin/v1/branding", `{"logo":"`+svgURI(tooBig)+`"}`)
	if env := checkEnvelope(t, w, 400, httpx.CodeValidation); !hasDetail(env, "logo", codeTooLong) {
		t.Errorf("a logo over 64 KiB: %+v", env.Details)
	}
}

func TestOrgBranding(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	path := "/admin/v1/organizations/" + o.ID
	e.run(t, []tc{
		{name: "low contrast", method: "PATCH", path: path, body: `{"branding":{"primary_color":"#ff0000"}}`, status: 400, code: httpx.CodeValidation, field: "branding.primary_color", dcode: codeInvalid},
		{name: "bad logo", method: "PATCH", path: path, body: `{"branding":{"logo":"data:text/html;base64,PHNjcmlwdD4="}}`, status: 400, code: httpx.CodeValidation, field: "branding.logo", dcode: codeInvalid},
	})
	got := decodeAs[Org](t, e.must(200, "PATCH", path, `{"branding":{"display_name":"Acme","primary_color":"#1a1a1a"}}`))
	if got.Branding.DisplayName != "Acme" || got.Branding.PrimaryColor != "#1a1a1a" || got.Name != "Org acme" {
		t.Fatalf("PATCH answer %+v", got)
	}
	got = decodeAs[Org](t, e.must(200, "PATCH", path, `{"name":"Acme Inc."}`))
	if got.Branding.DisplayName != "Acme" {
		t.Fatalf("a rename lost the branding: %+v", got)
	}
	got = decodeAs[Org](t, e.must(200, "PATCH", path, `{"branding":{"display_name":"","primary_color":""}}`))
	if got.Branding != (Branding{}) {
		t.Fatalf("cleared branding answered %+v", got.Branding)
	}
	if stored, _ := e.state.Org(o.ID); stored.Branding != nil {
		t.Errorf("cleared branding stored as %+v", stored.Branding)
	}
	if ev := e.lastEvent(fsm.EventAdmin); ev.Detail["action"] != "PATCH /organizations/{id}" || ev.OrgID != o.ID {
		t.Errorf("audit event %+v", ev)
	}
}

// TestOrgAdminBrandsOwnOrganization: an org_admin of P, whose clients
// serve P alone, sets P's branding, and nothing else's (the attack table
// has the refusals; TestSharedClientsBrandingIsAnAdmins those of an
// organization owning a shared client, as the scene's O does).
func TestOrgAdminBrandsOwnOrganization(t *testing.T) {
	s := newScene(t)
	w := s.as(orgAdmin(s.p.ID), "PATCH", "/admin/v1/organizations/"+s.p.ID, `{"branding":{"display_name":"P's own"}}`)
	if w.Code != 200 {
		t.Fatalf("got %d: %s", w.Code, w.Body)
	}
	if b, _ := s.state.BrandingFor(s.p.ID); b.DisplayName != "P's own" {
		t.Errorf("stored %+v", b)
	}
}
