package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/axe"
	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/testcluster"
)

// TestConsoleLayoutAt1280 looks at the console in a 1280 px wide window,
// as an operator's laptop shows it: the sign-in text keeps --admin-token
// whole at every width; the navigation of an admin (every page) is one
// line; the branding preview is the sign-in page's header, button and
// support line, with the same markup and rules as the real page (logo
// beside the name, a filled button in the brand colour, "Support" as the
// link's text), and axe finds nothing on either page. The real sign-in
// page is opened beside it in English and German (the console itself is
// in English only), and every page is kept as a screenshot
// ($OIDCD_SCREENSHOTS).
func TestConsoleLayoutAt1280(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and a browser")
	}
	c := testcluster.New(t, testcluster.Options{Size: 1, Demo: true})
	ctx := chrometest.New(t) // 1280 x 900
	base := c.URL(0) + "/console/"

	// The sign-in page: --admin-token never breaks, however narrow.
	chrometest.Do(t, ctx, chromedp.Navigate(base+"signin"), chromedp.WaitVisible(css("#token")))
	if got := evalString(t, ctx, `(() => {
		const c = Array.from(document.querySelectorAll("main code")).find(e => e.textContent === "--admin-token");
		if (!c) return "no <code>--admin-token</code>";
		const p = c.closest("p"), bad = [];
		for (let w = 240; w <= 1280; w += 2) {
			p.style.width = w + "px";
			if (c.getClientRects().length !== 1) bad.push(w);
		}
		p.style.width = "";
		return bad.length ? "broken at " + bad.slice(0, 5).join(", ") + " px" : "";
	})()`); got != "" {
		t.Errorf("sign-in text: --admin-token %s", got)
	}
	axe.Check(t, ctx, "console sign-in")
	chrometest.Screenshot(t, ctx, "console-1280-signin")

	chrometest.Do(t, ctx, chromedp.SendKeys(css("#token"), testcluster.AdminToken))
	if got := chrometest.Click(t, ctx, `main button[type="submit"]`); got != 200 {
		t.Fatalf("sign-in: status %d", got)
	}

	// The navigation: every link on one line, none broken inside, on a
	// short page and on a long one (whose scroll bar narrows the window).
	checkNav(t, ctx, "cluster")
	chrometest.Screenshot(t, ctx, "console-1280-cluster")

	// The branding preview beside the real sign-in page.
	setBranding(t, c.URL(0))
	chrometest.Do(t, ctx, chromedp.Navigate(base+"branding"), chromedp.WaitVisible(css(".brand-preview img")))
	checkNav(t, ctx, "branding")
	preview := pageParts(t, ctx, ".brand-preview ")
	axe.Check(t, ctx, "console branding")
	chrometest.Screenshot(t, ctx, "console-1280-branding")
	if !strings.Contains(preview, "logo beside the name") || !strings.Contains(preview, "button rgb(0, 90, 156) on rgb(0, 90, 156), text rgb(255, 255, 255)") ||
		!strings.Contains(preview, "support: Need help? Support · help@example.com") {
		t.Errorf("branding preview: got %q", preview)
	}

	authorize := c.Issuer() + "/authorize?" + url.Values{"client_id": {"demo-rp"}, "redirect_uri": {"http://127.0.0.1:9090/callback"},
		"response_type": {"code"}, "scope": {"openid"}, "code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}, "state": {"state-of-the-test"}}.Encode()
	for _, lang := range []string{"en", "de"} {
		chrometest.Do(t, ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, tg, network.SetCookie, network.SetCookieParams{Name: "oidcd_lang", Value: lang, URL: c.Issuer() + "/"})
			return chromedp.Void{}, err
		})
		if got := chrometest.Open(t, ctx, authorize); got != http.StatusOK {
			t.Fatalf("sign-in page (%s): status %d", lang, got)
		}
		real := pageParts(t, ctx, "")
		chrometest.Screenshot(t, ctx, "signin-1280-branded-"+lang)
		// The same parts, as the real page shows them (the support
		// line in the page's language).
		want := strings.Replace(preview, "Need help? Support", map[string]string{"en": "Need help? Support", "de": "Brauchen Sie Hilfe? Support"}[lang], 1)
		if real != want {
			t.Errorf("the sign-in page (%s) and the preview differ:\nreal    %q\npreview %q", lang, real, preview)
		}
	}
}

// checkNav fails the test unless the console's navigation on the tab's
// page is one line with no link broken.
func checkNav(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	// At the window's width, and at 1250 px, a window narrowed by a scroll
	// bar or holding a wider font.
	if got := evalString(t, ctx, `(() => {
		const links = Array.from(document.querySelectorAll(".top nav a"));
		if (links.length < 13) return "only " + links.length + " links";
		const out = [];
		for (const w of ["", "1250px"]) {
			document.body.style.width = w;
			const tops = new Set(links.map(a => Math.round(a.getBoundingClientRect().top)));
			const broken = links.filter(a => a.getClientRects().length > 1).map(a => a.textContent);
			if (tops.size > 1) out.push("on " + tops.size + " lines at " + document.body.clientWidth + " px");
			if (broken.length) out.push("broken: " + broken.join(", "));
		}
		document.body.style.width = "";
		return out.join("; ");
	})()`); got != "" {
		t.Errorf("navigation of the %s page at 1280 px: %s", page, got)
	}
}

// pageParts describes the brand's parts of a sign-in page, or of the
// preview when scope is its selector (with a trailing space): where the
// logo sits against the name, the primary button's colours and the
// support line's text.
func pageParts(t *testing.T, ctx context.Context, scope string) string {
	t.Helper()
	return evalString(t, ctx, fmt.Sprintf(`(() => {
		const q = s => document.querySelector(%q + s);
		const out = [];
		const logo = q(".brand .logo"), name = q(".brand .site");
		if (logo && name) {
			const l = logo.getBoundingClientRect(), n = name.getBoundingClientRect();
			out.push(l.bottom <= n.top ? "logo above the name" : (l.right <= n.left ? "logo beside the name" : "logo over the name"));
		} else {
			out.push("no brand header");
		}
		const b = q("button.primary");
		if (b) {
			const s = getComputedStyle(b);
			out.push("button " + s.backgroundColor + " on " + s.borderColor + ", text " + s.color);
		} else {
			out.push("no primary button");
		}
		const f = q(".support");
		out.push("support: " + (f ? f.textContent.trim().replace(/\s+/g, " ") : "none"));
		return out.join("; ");
	})()`, scope))
}

// evalString is what js evaluates to in the tab.
func evalString(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(actx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	return s
}
