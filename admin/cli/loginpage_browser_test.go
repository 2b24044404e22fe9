package cli

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/axe"
	"github.com/oidcd/oidcd/internal/testkit/chrometest"
)

// TestLoginPagesInBrowser opens the loopback pages of `oidcd admin login`
// in headless Chromium, in both colour schemes: their stylesheet applies
// under their own content security policy (the card has the provider's
// rounded border and the page its sans-serif type), the refusal for want
// of a second factor links to the provider's /account, axe finds nothing,
// and each page is kept as a screenshot ($OIDCD_SCREENSHOTS).
func TestLoginPagesInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	const issuer, state = "http://127.0.0.1:9/", "the-state"
	pages := []struct {
		name  string
		query url.Values
		link  string
	}{
		{"login-no-second-factor", url.Values{"state": {state}, "error": {"access_denied"},
			"error_description": {"strong authentication required; no second factor enrolled"}}, "http://127.0.0.1:9/account"},
		{"login-failed", url.Values{"state": {state}, "error": {"access_denied"}, "error_description": {"organization_access_denied"}}, ""},
		{"login-signed-in", url.Values{"state": {state}, "code": {"c"}}, ""},
	}
	ctx := chrometest.New(t)
	for _, scheme := range []string{"light", "dark"} {
		colorScheme(t, ctx, scheme)
		for _, p := range pages {
			// A fresh handler a page: each takes one answer.
			srv := httptest.NewServer(callbackHandler(state, issuer, make(chan callback, 1)))
			if got := chrometest.Open(t, ctx, srv.URL+"/callback?"+p.query.Encode()); got != 200 {
				t.Errorf("%s: status %d", p.name, got)
			}
			radius, font, href := eval(t, ctx, `getComputedStyle(document.querySelector(".card")).borderTopLeftRadius`),
				eval(t, ctx, `getComputedStyle(document.body).fontFamily`),
				eval(t, ctx, `(document.querySelector(".next a") || {href: ""}).href`)
			if radius != "12px" || font == "" || font[:9] != "system-ui" {
				t.Errorf("%s: the stylesheet did not apply (border radius %q, font %q)", p.name, radius, font)
			}
			if href != p.link {
				t.Errorf("%s: link got %q, want %q", p.name, href, p.link)
			}
			axe.Check(t, ctx, p.name+" ("+scheme+")")
			chrometest.Screenshot(t, ctx, p.name+"-"+scheme)
			srv.Close()
		}
	}
}

// colorScheme emulates prefers-color-scheme in the tab.
func colorScheme(t *testing.T, ctx context.Context, scheme string) {
	t.Helper()
	chrometest.Do(t, ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return chromedp.Void{}, err
	})
}

// eval is the string a script's expression evaluates to in the tab.
func eval(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(actx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return s
}
