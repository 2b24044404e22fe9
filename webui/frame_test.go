package webui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFrameOnEveryPage: a brand's stylesheet comes after the page's own,
// its logo is an <img> from the provider's origin (never inlined), its
// name heads the page and its support contacts close it, on every kind
// of page; a page without a brand has none of them.
func TestFrameOnEveryPage(t *testing.T) {
	u := newUI(t)
	brand := Brand{DisplayName: "Example <Corp>", LogoURL: "/branding/logo/abc", StyleURL: "/branding/v1-005a9c.css",
		SupportURL: "https://help.example.com/", SupportEmail: "help@example.com"}
	c := sampleCommon
	c.Brand = brand
	f := Frame{Brand: brand}
	pages := map[string]func(w http.ResponseWriter, f Frame){
		"signin": func(w http.ResponseWriter, f Frame) { c.Frame = f; u.SignIn(w, 200, SignInPage{Common: c}) },
		"second": func(w http.ResponseWriter, f Frame) {
			c.Frame = f
			u.SecondFactor(w, 200, SecondFactorPage{Common: c, Methods: []string{MethodOTP}})
		},
		"sms": func(w http.ResponseWriter, f Frame) { c.Frame = f; u.SMSCode(w, 200, SMSCodePage{Common: c}) },
		"passkey": func(w http.ResponseWriter, f Frame) {
			c.Frame = f
			u.Passkey(w, 200, PasskeyPage{Common: c, Options: "{}"})
		},
		"account": func(w http.ResponseWriter, f Frame) { c.Frame = f; u.Account(w, 200, AccountPage{Common: c}) },
		"totp":    func(w http.ResponseWriter, f Frame) { c.Frame = f; u.TOTPSetup(w, 200, TOTPSetupPage{Common: c}) },
		"codes":   func(w http.ResponseWriter, f Frame) { u.RecoveryCodes(w, 200, RecoveryCodesPage{Frame: f}) },
		"picker":  func(w http.ResponseWriter, f Frame) { c.Frame = f; u.OrganizationPicker(w, 200, PickerPage{Common: c}) },
		"consent": func(w http.ResponseWriter, f Frame) { c.Frame = f; u.Consent(w, 200, ConsentPage{Common: c}) },
		"error":   func(w http.ResponseWriter, f Frame) { u.Error(w, 400, ErrorPage{Frame: f, Message: "m"}) },
		"message": func(w http.ResponseWriter, f Frame) { u.Message(w, 200, MessagePage{Frame: f, Message: "m"}) },
		"address": func(w http.ResponseWriter, f Frame) { c.Frame = f; u.Address(w, 200, AddressPage{Common: c}) },
		"newpw":   func(w http.ResponseWriter, f Frame) { c.Frame = f; u.NewPassword(w, 200, NewPasswordPage{Common: c}) },
		"confirm": func(w http.ResponseWriter, f Frame) { c.Frame = f; u.Confirm(w, 200, ConfirmPage{Common: c}) },
	}
	want := []string{
		`<link rel="stylesheet" href="/branding/v1-005a9c.css">`,
		`<img class="logo" src="/branding/logo/abc" alt="">`,
		`<span class="site">Example &lt;Corp&gt;</span>`,
		`<a href="https://help.example.com/">`,
		`<a href="mailto:help@example.com">help@example.com</a>`,
	}
	for name, render := range pages {
		rec := httptest.NewRecorder()
		render(rec, f)
		body := rec.Body.String()
		own := strings.Index(body, `href="/static/style.css`)
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: lacks %s", name, w)
			}
		}
		if i := strings.Index(body, want[0]); i < own {
			t.Errorf("%s: the brand's stylesheet (at %d) comes before the page's own (at %d)", name, i, own)
		}
		rec = httptest.NewRecorder()
		render(rec, Frame{})
		for _, w := range []string{"/branding/", `class="brand"`, `class="support"`} {
			if strings.Contains(rec.Body.String(), w) {
				t.Errorf("%s: unbranded, but holds %s", name, w)
			}
		}
	}
}

// TestBrandPartsRefuseUnsafeValues: the header and footer, written in Go
// rather than by html/template, keep only same-origin logo paths, http(s)
// support links and plain addresses, and escape what they show.
func TestBrandPartsRefuseUnsafeValues(t *testing.T) {
	u := newUI(t)
	for _, c := range []struct {
		name      string
		b         Brand
		want, not []string
	}{
		{"javascript link", Brand{SupportURL: "javascript:alert(1)"}, nil, []string{"javascript", "<footer"}},
		{"protocol-relative logo", Brand{LogoURL: "//evil.example/x.png", DisplayName: "S"}, []string{`<span class="site">S</span>`}, []string{"evil", "<img"}},
		{"backslash logo", Brand{LogoURL: `/\evil.example/x.png`}, nil, []string{"evil", "<header"}},
		{"data logo", Brand{LogoURL: "data:image/svg+xml,<svg/onload=alert(1)>"}, nil, []string{"onload", "<header"}},
		{"address with a query", Brand{SupportEmail: "a@b.example?subject=x"}, nil, []string{"mailto", "<footer"}},
		{"quote in a name", Brand{DisplayName: `"><script>x</script>`}, []string{`&#34;&gt;&lt;script&gt;`}, []string{"<script>"}},
		{"logo alone is named", Brand{LogoURL: "/branding/logo/abc"}, []string{`alt="Logo"`}, nil},
		{"plain link kept", Brand{SupportURL: "https://help.example.com/a?b=1&c=2"}, []string{`href="https://help.example.com/a?b=1&amp;c=2"`}, nil},
	} {
		page := string(u.brandHead(0, c.b)) + string(u.brandFoot(0, c.b))
		for _, w := range c.want {
			if !strings.Contains(page, w) {
				t.Errorf("%s: %q lacks %s", c.name, page, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(page, n) {
				t.Errorf("%s: %q holds %s", c.name, page, n)
			}
		}
	}
}
