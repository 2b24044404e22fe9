package demorp_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/node"
)

// TestDemoRPInBrowser is the newcomer's path of the README in headless
// Chromium: demo-rp's "Sign in", the provider's pages (their forms
// checked), the claims page, and "Sign out"; screenshots of each.
func TestDemoRPInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and a browser")
	}
	c, _, base := setup(t)
	ctx := chrometest.New(t)

	chrometest.Do(t, ctx, chromedp.Navigate(base+"/"))
	chrometest.Screenshot(t, ctx, "demo-rp-home")
	if st := chrometest.Click(t, ctx, "#signin"); st != 200 {
		t.Fatalf("sign-in page: got status %d", st)
	}
	if got := chrometest.Location(t, ctx); !strings.HasPrefix(got, c.Issuer()+"/authorize") {
		t.Fatalf("got %q, want the provider's sign-in page", got)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Do(t, ctx,
		chromedp.SendKeys(chromedp.CSS(`input[autocomplete="username"]`), node.DemoEmail),
		chromedp.SendKeys(chromedp.CSS(`input[autocomplete="current-password"]`), node.DemoPassword),
	)
	chrometest.Click(t, ctx, `button[name="method"][value="password"]`)
	if strings.HasPrefix(chrometest.Location(t, ctx), c.Issuer()) {
		chrometest.CheckForm(t, ctx)
		chrometest.Click(t, ctx, `button[name="decision"][value="allow"]`)
	}
	if got := chrometest.Location(t, ctx); got != base+"/" {
		t.Fatalf("after sign-in got %q, want demo-rp's home", got)
	}
	if got := chrometest.Text(t, ctx, "h1"); !strings.Contains(got, node.DemoEmail) {
		t.Errorf("got heading %q, want the demo person", got)
	}
	if got := chrometest.Text(t, ctx, "#claim-table"); !strings.Contains(got, "the person's stable id") || !strings.Contains(got, "how strongly") {
		t.Errorf("#claim-table: got %q, want the claims explained", got)
	}
	for _, id := range []string{"#userinfo", "#memberships"} {
		if got := chrometest.Text(t, ctx, id); !strings.Contains(got, `"sub"`) && !strings.Contains(got, `"org_slug"`) {
			t.Errorf("%s: got %q", id, got)
		}
	}
	chrometest.Screenshot(t, ctx, "demo-rp-signed-in")

	chrometest.Click(t, ctx, "#signout")
	if got := chrometest.Location(t, ctx); !strings.HasPrefix(got, base+"/signed-out") {
		t.Fatalf("after sign-out got %q", got)
	}
	if got := chrometest.Text(t, ctx, "#notice"); !strings.Contains(got, "signed out here and at the provider") {
		t.Errorf("got notice %q", got)
	}
	chrometest.Screenshot(t, ctx, "demo-rp-signed-out")
}
