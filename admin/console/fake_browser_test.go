package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/testkit/chrometest"
)

// TestPersonConsoleInBrowserWithFakes runs the console's side of a
// person's sign-in and the Administrators and API keys pages in headless
// Chromium, with the fakes of person_test.go standing in for the parts
// built on other branches: a provider whose /authorize signs the person
// in at once, and the admin API's grants, keys and person-token check.
// It checks the cookies a real browser keeps (the Lax flow cookie, the
// Strict session after the signed-in page's refresh), the forms' labels
// and autocomplete, and takes screenshots. TestPersonSignsInThroughTheProvider
// (package console_test) is the same against a real node, after the merge.
func TestPersonConsoleInBrowserWithFakes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	e := newPersonEnv(t)
	sub := e.person("ada@example.com", admin.RoleAdmin)
	e.person("grace@example.com", admin.RoleAuditor)
	e.api.mu.Lock()
	e.api.grants = e.api.grants[:1] // grace has no grant yet
	e.api.mu.Unlock()

	mux := http.NewServeMux()
	mux.Handle(Prefix, e.console)
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := e.idp.signIn(r.URL.String(), sub)
		http.Redirect(w, r, r.URL.Query().Get("redirect_uri")+"?"+q.Encode(), http.StatusFound)
	})
	srv := httptest.NewServer(httpx.Correlation(mux))
	t.Cleanup(srv.Close)
	e.console.issuer, e.idp.issuer = srv.URL, srv.URL
	base := srv.URL + Prefix

	ctx := chrometest.New(t)
	chrometest.Do(t, ctx, chromedp.Navigate(base+"admins"), chromedp.WaitVisible(chromedp.CSS("#signin-provider")))
	chrometest.CheckForm(t, ctx)
	chrometest.Click(t, ctx, "#signin-provider")
	waitAt(t, ctx, base+"cluster")
	if got := chrometest.Text(t, ctx, "#signed-in-as"); !strings.Contains(got, "ada@example.com") || !strings.Contains(got, "(admin)") {
		t.Errorf("header: got %q", got)
	}

	chrometest.Do(t, ctx, chromedp.Navigate(base+"admins"), chromedp.WaitVisible(chromedp.CSS("#g-user")))
	chrometest.CheckForm(t, ctx)
	chrometest.Do(t, ctx,
		chromedp.SendKeys(chromedp.CSS("#g-user"), "grace@example.com"),
		chromedp.SetValue(chromedp.CSS("#g-role"), "auditor"),
	)
	if got := chrometest.Click(t, ctx, `form[action="/console/admins"] button`); got != 200 {
		t.Fatalf("add grant: got %d\n%s", got, chrometest.Text(t, ctx, "main"))
	}
	if got := chrometest.Text(t, ctx, "main"); !strings.Contains(got, "Administrator grant added.") || !strings.Contains(got, "grace@example.com") {
		t.Errorf("administrators: got %q", got)
	}
	chrometest.Screenshot(t, ctx, "console-admins-fake")

	chrometest.Do(t, ctx, chromedp.Navigate(base+"api-keys"), chromedp.WaitVisible(chromedp.CSS("#k-name")))
	chrometest.CheckForm(t, ctx)
	chrometest.Do(t, ctx,
		chromedp.SendKeys(chromedp.CSS("#k-name"), "backup job"),
		chromedp.SetValue(chromedp.CSS("#k-expiry"), "2592000"),
	)
	if got := chrometest.Click(t, ctx, `form[action="/console/api-keys"] button.primary`); got != http.StatusCreated {
		t.Fatalf("create API key: got %d\n%s", got, chrometest.Text(t, ctx, "main"))
	}
	if got := chrometest.Text(t, ctx, "#api-key"); !strings.HasPrefix(got, "oidcd_ak_") {
		t.Errorf("API key: got %q", got)
	}
	chrometest.Screenshot(t, ctx, "console-apikey-shown-once-fake")

	// The grant removed: the next page ends the session.
	e.api.mu.Lock()
	e.api.grants = e.api.grants[1:]
	e.api.mu.Unlock()
	chrometest.Do(t, ctx, chromedp.Navigate(base+"people"), chromedp.WaitVisible(chromedp.CSS("#signin-provider")))
	if got := chrometest.Text(t, ctx, "#form-error"); !strings.Contains(got, "session has ended") {
		t.Errorf("after the grant went: got %q", got)
	}
	chrometest.Screenshot(t, ctx, "console-session-ended-fake")
}

// waitAt waits until the tab is at want (the signed-in page refreshes
// to the console).
func waitAt(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	deadline := time.Now().Add(chrometest.ActionTimeout)
	for {
		got := chrometest.Location(t, ctx)
		if got == want {
			chrometest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS("main h1")))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("at %q, want %q", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
