package console_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/testcluster"
)

// TestConsoleInBrowser signs in to the console of a real node in headless
// Chromium, visits every page, checks each form's labels and autocomplete,
// makes an organization, a person, a membership and a client through the
// forms, and takes a screenshot of each page ($OIDCD_SCREENSHOTS keeps
// them).
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and a browser")
	}
	c := testcluster.New(t, testcluster.Options{Size: 1, Demo: true})
	ctx := chrometest.New(t)
	base := c.URL(0) + "/console/"

	// Signed out, the console sends the browser to its sign-in page.
	chrometest.Do(t, ctx, chromedp.Navigate(base+"organizations"), chromedp.WaitVisible(css("#token")))
	if got := chrometest.Location(t, ctx); got != base+"signin" {
		t.Fatalf("got %q, want the sign-in page", got)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "console-signin")

	chrometest.Do(t, ctx, chromedp.SendKeys(css("#token"), "not-the-token"))
	if got := chrometest.Click(t, ctx, `main button[type="submit"]`); got != 401 {
		t.Errorf("wrong token: got status %d, want 401", got)
	}
	if got := chrometest.Text(t, ctx, "#form-error"); !strings.Contains(got, "not the admin token") {
		t.Errorf("wrong token: got %q", got)
	}
	chrometest.Do(t, ctx, chromedp.SendKeys(css("#token"), testcluster.AdminToken))
	if got := chrometest.Click(t, ctx, `main button[type="submit"]`); got != 200 {
		t.Errorf("sign-in: got status %d, want 200 after the redirects", got)
	}
	if got := chrometest.Location(t, ctx); got != base+"cluster" {
		t.Fatalf("after sign-in got %q, want the cluster page", got)
	}
	if got := chrometest.Text(t, ctx, ".facts"); !strings.Contains(got, "node-0") {
		t.Errorf("cluster page: got %q, want the leader node-0", got)
	}
	chrometest.Screenshot(t, ctx, "console-cluster")

	// Each page: its forms pass the check, and it looks right.
	for _, p := range []struct{ path, shot, want string }{
		{"organizations", "console-organizations", "Demo organization"},
		{"people", "console-people", "demo@example.com"},
		{"memberships", "console-memberships", "demo@example.com"},
		{"clients", "console-clients", "demo-rp"},
		{"keys", "console-keys", "active"},
		{"directories", "console-directories", "No directories"},
		{"identity-providers", "console-identity-providers", "No identity providers"},
		{"audit", "console-audit", "created"},
	} {
		chrometest.Do(t, ctx, chromedp.Navigate(base+p.path), chromedp.WaitVisible(css("main h1")))
		if got := chrometest.Text(t, ctx, "main"); !strings.Contains(got, p.want) {
			t.Errorf("%s: got %q, want %q in it", p.path, got, p.want)
		}
		chrometest.CheckForm(t, ctx)
		chrometest.Screenshot(t, ctx, p.shot)
	}

	// An organization through its form.
	chrometest.Do(t, ctx,
		chromedp.Navigate(base+"organizations"),
		chromedp.SendKeys(css("#org-name"), "Acme Corporation"),
		chromedp.SendKeys(css("#org-slug"), "acme"),
	)
	submit(t, ctx, `form[action="/console/organizations"] button`)
	if got := chrometest.Text(t, ctx, "main"); !strings.Contains(got, "Acme Corporation") {
		t.Errorf("after create: got %q", got)
	}
	// The creation is the newest event of the audit trail, filtered by type.
	chrometest.Do(t, ctx, chromedp.Navigate(base+"audit?type=admin"), chromedp.WaitVisible(css("main h1")))
	if got := chrometest.Text(t, ctx, "main table tbody tr"); !strings.Contains(got, "POST /organizations") || !strings.Contains(got, "admin") {
		t.Errorf("audit page after the create: got %q", got)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "console-audit-admin")

	// The branding page, with a branding set through the API: its form
	// and the preview (the logo from the console's own route).
	setBranding(t, c.URL(0))
	chrometest.Do(t, ctx, chromedp.Navigate(base+"branding"), chromedp.WaitVisible(css(".brand-preview img")))
	if got := chrometest.Text(t, ctx, ".brand-preview"); !strings.Contains(got, "Example Sign-in") || !strings.Contains(got, "help@example.com") {
		t.Errorf("branding preview: got %q", got)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "console-branding")

	// A person, then their page with the membership form.
	chrometest.Do(t, ctx,
		chromedp.Navigate(base+"people"),
		chromedp.SendKeys(css("#person-email"), "ada@example.com"),
		chromedp.Click(css("#person-verified")),
		chromedp.SendKeys(css("#person-password"), "correct horse battery staple"),
	)
	submit(t, ctx, `form[action="/console/people"] button`)
	if got := chrometest.Text(t, ctx, "main h1"); got != "ada@example.com" {
		t.Errorf("person page heading: got %q", got)
	}
	chrometest.Do(t, ctx, chromedp.SetValue(css("#add-org"), orgOption(t, ctx, "#add-org", "Acme Corporation")))
	submit(t, ctx, `form[action="/console/memberships"] button`)
	if got := chrometest.Text(t, ctx, "main table"); !strings.Contains(got, "Acme Corporation") || !strings.Contains(got, "active") {
		t.Errorf("person's memberships: got %q", got)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "console-person")

	// A confidential client: its secret is shown once.
	chrometest.Do(t, ctx, chromedp.Navigate(base+"clients"), chromedp.WaitVisible(css("#c-org")))
	chrometest.Do(t, ctx,
		chromedp.SendKeys(css("#c-name"), "Acme intranet"),
		chromedp.SetValue(css("#c-org"), orgOption(t, ctx, "#c-org", "Acme Corporation")),
		chromedp.SendKeys(css("#c-redirects"), "https://intranet.acme.example/callback"),
		chromedp.Click(css("#c-scope-email")),
	)
	if got := chrometest.Click(t, ctx, `form[action="/console/clients"] button.primary`); got != 201 {
		t.Fatalf("create client: got status %d, want 201\n%s", got, chrometest.Text(t, ctx, "main"))
	}
	if secret := chrometest.Text(t, ctx, "#client-secret"); len(secret) < 32 {
		t.Errorf("got client secret %q, want a long one", secret)
	}
	chrometest.Screenshot(t, ctx, "console-client-created")

	// Delete asks first.
	chrometest.Do(t, ctx, chromedp.Navigate(base+"organizations"))
	chrometest.Click(t, ctx, `a[href$="/delete"]`)
	chrometest.Do(t, ctx, chromedp.WaitVisible(css("button.danger")))
	chrometest.Screenshot(t, ctx, "console-confirm-delete")

	chrometest.Click(t, ctx, ".signout button")
	if got := chrometest.Location(t, ctx); got != base+"signin" {
		t.Errorf("after sign-out got %q, want the sign-in page", got)
	}
	chrometest.Do(t, ctx, chromedp.Navigate(base+"cluster"), chromedp.WaitVisible(css("#token")))
}

// setBranding sets the site's branding through the admin API.
func setBranding(t *testing.T, base string) {
	t.Helper()
	svg := `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 140 40"><rect width="40" height="40" rx="8" fill="#005a9c"/>` +
		`<text x="48" y="28" font-family="sans-serif" font-size="20" fill="#1a1a1a">Example</text></svg>`
	body := `{"display_name":"Example Sign-in","primary_color":"#005a9c","support_url":"https://help.example.com/",` +
		`"support_email":"help@example.com","logo":"data:image/svg+xml;base64,` + base64.StdEncoding.EncodeToString([]byte(svg)) + `"}`
	req, _ := http.NewRequest("PUT", base+"/admin/v1/branding", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT /branding: %d", resp.StatusCode)
	}
}

// submit clicks a form's button and fails unless the answer is a page
// with a done notice.
func submit(t *testing.T, ctx context.Context, button string) {
	t.Helper()
	status := chrometest.Click(t, ctx, button)
	if status != 200 {
		t.Fatalf("submit %s: got status %d\n%s", button, status, chrometest.Text(t, ctx, "main"))
	}
	chrometest.Do(t, ctx, chromedp.WaitVisible(css(".flash")))
}

// css is a CSS selector.
func css(s string) chromedp.CSS { return chromedp.CSS(s) }

// orgOption returns the value of the option of select sel whose text
// starts with org.
func orgOption(t *testing.T, ctx context.Context, sel, org string) string {
	t.Helper()
	js := fmt.Sprintf(`(Array.from(document.querySelectorAll(%q)).find(o => o.textContent.startsWith(%q)) || {value: ""}).value`, sel+" option", org)
	actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
	defer cancel()
	v, err := chromedp.Run(actx, chromedp.Evaluate[string](js))
	if err != nil || v == "" {
		t.Fatalf("no option %q in %s (%v)", org, sel, err)
	}
	return v
}
