package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/testcluster"
)

// TestPersonSignsInThroughTheProvider is the whole of a person's way in,
// in headless Chromium against a real node: the sign-in page's choice,
// "Sign in" to the provider's own pages (password, then the
// authenticator app's code, as --admin-acr asks), back to the console as
// that person; the Administrators page (a grant added by email); an API
// key shown once; and, when the person's grant is removed, the end of
// their console session on the next page.
//
// It needs the feature's other branches merged: POST /admin/v1/admins
// (the grants) and the person-token check of the admin API, and the
// built-in client oidcd-admin with its console callback (the provider)
// and node's wiring of it. Without the grants route it takes the
// sign-in page's screenshot and skips, saying so.
func TestPersonSignsInThroughTheProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and a browser")
	}
	c := testcluster.New(t, testcluster.Options{Size: 1})
	base := c.URL(0) + "/console/"
	const email, password = "ada@example.com", "correct horse battery staple"

	// A person with a password and an authenticator app, and a grant.
	var ada struct {
		ID string `json:"id"`
	}
	apiCall(t, c, "POST", "/users", map[string]any{"email": email, "email_verified": true, "password": password}, http.StatusCreated, &ada)
	var totp struct {
		Secret string `json:"secret"`
	}
	apiCall(t, c, "POST", "/users/"+ada.ID+"/totp", nil, http.StatusCreated, &totp)
	var g struct {
		ID string `json:"id"`
	}
	grantStatus := apiCall(t, c, "POST", "/admins", map[string]any{"user_id": ada.ID, "role": "admin"}, 0, &g)

	ctx := chrometest.New(t)
	chrometest.Do(t, ctx, chromedp.Navigate(base+"signin"), chromedp.WaitVisible(css("#signin-provider")))
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "console-signin-choice")
	if grantStatus == http.StatusNotFound {
		t.Skip("NEEDS THE MERGE: POST /admin/v1/admins answered 404 (the grants are on the creds branch; the oidcd-admin client on the provider branch)")
	}
	if grantStatus != http.StatusCreated {
		t.Fatalf("POST /admins: got %d, want 201", grantStatus)
	}

	// The provider's pages: password, then the second factor.
	if got := chrometest.Click(t, ctx, "#signin-provider"); got != http.StatusOK {
		t.Fatalf("Sign in: got status %d at %s, want the provider's sign-in page", got, chrometest.Location(t, ctx))
	}
	if loc := chrometest.Location(t, ctx); !strings.HasPrefix(loc, c.Issuer()+"/authorize") {
		t.Fatalf("Sign in led to %q, want the provider's /authorize", loc)
	}
	chrometest.Do(t, ctx,
		chromedp.SendKeys(css(`input[autocomplete="username"]`), email),
		chromedp.SendKeys(css(`input[autocomplete="current-password"]`), password),
	)
	chrometest.Click(t, ctx, `button[name="method"][value="password"]`)
	code, err := factor.TOTPCode(totp.Secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	chrometest.Do(t, ctx, chromedp.SendKeys(css(`input[autocomplete="one-time-code"]`), code))
	chrometest.Click(t, ctx, `button[name="method"][value="otp"]`)
	// The provider's own client asks no consent: the browser goes straight
	// back to the console.
	waitLocation(t, ctx, base+"cluster")
	if got := chrometest.Text(t, ctx, "#signed-in-as"); !strings.Contains(got, email) || !strings.Contains(got, "(admin)") {
		t.Errorf("header: got %q, want the person and their role", got)
	}
	chrometest.Screenshot(t, ctx, "console-person-signed-in")

	// The Administrators page: ada, and a grant added by email.
	var grace struct {
		ID string `json:"id"`
	}
	apiCall(t, c, "POST", "/users", map[string]any{"email": "grace@example.com", "email_verified": true}, http.StatusCreated, &grace)
	chrometest.Do(t, ctx, chromedp.Navigate(base+"admins"), chromedp.WaitVisible(css("#g-user")))
	chrometest.Do(t, ctx,
		chromedp.SendKeys(css("#g-user"), "grace@example.com"),
		chromedp.SetValue(css("#g-role"), "auditor"),
	)
	submit(t, ctx, `form[action="/console/admins"] button`)
	if got := chrometest.Text(t, ctx, "main table"); !strings.Contains(got, email) || !strings.Contains(got, "grace@example.com") || !strings.Contains(got, "auditor") {
		t.Errorf("administrators: got %q", got)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "console-admins")

	// An API key, shown once.
	chrometest.Do(t, ctx, chromedp.Navigate(base+"api-keys"), chromedp.WaitVisible(css("#k-name")))
	chrometest.CheckForm(t, ctx)
	chrometest.Do(t, ctx,
		chromedp.SendKeys(css("#k-name"), "backup job"),
		chromedp.SetValue(css("#k-role"), "auditor"),
		chromedp.SetValue(css("#k-expiry"), "2592000"),
	)
	if got := chrometest.Click(t, ctx, `form[action="/console/api-keys"] button.primary`); got != http.StatusCreated {
		t.Fatalf("create API key: got status %d\n%s", got, chrometest.Text(t, ctx, "main"))
	}
	key := chrometest.Text(t, ctx, "#api-key")
	if len(key) < 20 {
		t.Errorf("got API key %q, want a long one", key)
	}
	chrometest.Screenshot(t, ctx, "console-apikey-shown-once")
	// The key works on the API, and the list never shows it again.
	if st := apiCallWith(t, c, key, "GET", "/organizations", nil, 0, nil); st != http.StatusOK {
		t.Errorf("the new auditor key on GET /organizations: got %d, want 200", st)
	}
	chrometest.Do(t, ctx, chromedp.Navigate(base+"api-keys"), chromedp.WaitVisible(css("main table")))
	if got := chrometest.Text(t, ctx, "main"); strings.Contains(got, key) || !strings.Contains(got, "backup job") {
		t.Errorf("API keys list: got %q", got)
	}

	// The grant removed: the next page ends the console session.
	apiCall(t, c, "DELETE", "/admins/"+g.ID, nil, http.StatusNoContent, nil)
	chrometest.Do(t, ctx, chromedp.Navigate(base+"people"), chromedp.WaitVisible(css("#signin-provider")))
	if got := chrometest.Text(t, ctx, "#form-error"); !strings.Contains(got, "session has ended") {
		t.Errorf("after the grant went: got %q", got)
	}
	chrometest.Screenshot(t, ctx, "console-person-session-ended")
	chrometest.Do(t, ctx, chromedp.Navigate(base+"cluster"), chromedp.WaitVisible(css("#signin-provider")))
}

// apiCall calls the node's admin API with the admin token; want 0 takes
// any status. It returns the status.
func apiCall(t *testing.T, c *testcluster.Cluster, method, path string, body any, want int, out any) int {
	t.Helper()
	return apiCallWith(t, c, testcluster.AdminToken, method, path, body, want, out)
}

func apiCallWith(t *testing.T, c *testcluster.Cluster, token, method, path string, body any, want int, out any) int {
	t.Helper()
	var rd bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&rd).Encode(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, c.URL(0)+"/admin/v1"+path, &rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if want != 0 && resp.StatusCode != want {
		t.Fatalf("%s %s: got %d, want %d", method, path, resp.StatusCode, want)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// has reports whether the page has an element matching sel.
func has(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
	defer cancel()
	ok, err := chromedp.Run(actx, chromedp.Evaluate[bool]("document.querySelector("+jsString(sel)+") !== null"))
	if err != nil {
		t.Fatalf("has %s: %v", sel, err)
	}
	return ok
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// waitLocation waits until the tab is at want (the signed-in page
// refreshes to the console).
func waitLocation(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	deadline := time.Now().Add(chrometest.ActionTimeout)
	for {
		got := chrometest.Location(t, ctx)
		if got == want {
			chrometest.Do(t, ctx, chromedp.WaitVisible(css("main h1")))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("at %q, want %q\n%s", got, want, chrometest.Text(t, ctx, "main"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
