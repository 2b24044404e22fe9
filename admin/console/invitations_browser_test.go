package console_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestInvitationsInBrowser drives the pages of the people's own way in,
// in headless Chromium against a real node that sends mail to an outbox:
// an organization's registration settings, an invitation sent and
// withdrawn, and a person's address check; each form passes the label
// and autocomplete check, and each page is kept as a screenshot
// ($OIDCD_SCREENSHOTS).
func TestInvitationsInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and a browser")
	}
	outbox := filepath.Join(t.TempDir(), "outbox.jsonl")
	c := testcluster.New(t, testcluster.Options{Size: 1, Demo: true, Configure: func(_ int, cfg *node.Config) { cfg.EmailOutbox = outbox }})
	ctx := chrometest.New(t)
	base := c.URL(0) + "/console/"
	chrometest.Do(t, ctx, chromedp.Navigate(base+"signin"), chromedp.WaitVisible(css("#token")), chromedp.SendKeys(css("#token"), testcluster.AdminToken))
	chrometest.Click(t, ctx, `main button[type="submit"]`)

	// The organization's page, from the list: registration opened to two
	// domains, one of them internationalized.
	chrometest.Do(t, ctx, chromedp.Navigate(base+"organizations"), chromedp.WaitVisible(css("main table")))
	chrometest.Click(t, ctx, `main table a[href^="/console/organizations/"]:not([href$="/delete"])`)
	chrometest.Do(t, ctx, chromedp.WaitVisible(css("#o-reg-domains")))
	chrometest.CheckForm(t, ctx)
	chrometest.Do(t, ctx,
		chromedp.Click(css("#o-reg-enabled")),
		chromedp.SendKeys(css("#o-reg-domains"), "demo.example\n@oops.example"),
	)
	if got := chrometest.Click(t, ctx, `#registration button`); got != 400 {
		t.Errorf("a bad domain: got status %d, want 400", got)
	}
	if got := chrometest.Text(t, ctx, "#o-reg-domains-error"); !strings.Contains(got, "without @") {
		t.Errorf("a bad domain: error %q", got)
	}
	chrometest.Screenshot(t, ctx, "console-org-registration-error")
	chrometest.Do(t, ctx, chromedp.SetValue(css("#o-reg-domains"), "demo.example\nbücher.example"))
	submit(t, ctx, `#registration button`)
	actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
	domains, err := chromedp.Run(actx, chromedp.Evaluate[string](`document.querySelector("#o-reg-domains").value`))
	cancel()
	if err != nil || domains != "demo.example\nxn--bcher-kva.example" {
		t.Errorf("registration domains: got %q", domains)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "console-org-registration")
	chrometest.Do(t, ctx, chromedp.Navigate(base+"organizations"), chromedp.WaitVisible(css("main table")))
	if got := chrometest.Text(t, ctx, "main table"); !strings.Contains(got, "open to demo.example, xn--bcher-kva.example") {
		t.Errorf("organizations list: got %q", got)
	}

	// An invitation through its form, then withdrawn.
	chrometest.Do(t, ctx, chromedp.Navigate(base+"invitations"), chromedp.WaitVisible(css("#i-email")))
	chrometest.CheckForm(t, ctx)
	chrometest.Do(t, ctx,
		chromedp.SendKeys(css("#i-email"), "grace@example.com"),
		chromedp.SetValue(css("#i-org"), orgOption(t, ctx, "#i-org", "Demo organization")),
		chromedp.SetValue(css("#i-expiry"), "259200"),
	)
	submit(t, ctx, `form[action="/console/invitations"][method="post"] button`)
	chrometest.Do(t, ctx,
		chromedp.SendKeys(css("#i-email"), "heidi@example.com"),
		chromedp.SetValue(css("#i-org"), orgOption(t, ctx, "#i-org", "Demo organization")),
	)
	submit(t, ctx, `form[action="/console/invitations"][method="post"] button`)
	if got := chrometest.Text(t, ctx, "main table"); !strings.Contains(got, "grace@example.com") || !strings.Contains(got, "heidi@example.com") || !strings.Contains(got, "pending") {
		t.Errorf("invitations: got %q", got)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "console-invitations")
	submit(t, ctx, `main table form button`)
	if got := chrometest.Text(t, ctx, "main table"); strings.Contains(got, "heidi@example.com") || !strings.Contains(got, "grace@example.com") {
		t.Errorf("after the withdrawal of the newest: got %q", got)
	}

	// A person's address check.
	chrometest.Do(t, ctx, chromedp.Navigate(base+"people"), chromedp.WaitVisible(css("main table")))
	chrometest.Click(t, ctx, `main table a[href^="/console/people/"]`)
	chrometest.Do(t, ctx, chromedp.WaitVisible(css("#verify-email")))
	submit(t, ctx, "#verify-email")
	if got := chrometest.Text(t, ctx, ".flash"); !strings.Contains(got, "24 hours") {
		t.Errorf("after the address check: got %q", got)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "console-person-verify-email")
}
