package oidcprovider

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
)

// TestAccountLinkAndUnlink: the person's own side of federation, with a
// real upstream (oidc-provider) in Chromium. A person who has a password
// here, and an address the upstream knows nothing of, signs in to
// /account and links their account at the upstream there (signing in at
// the upstream in the browser). Signed out, they sign in to the
// application through the upstream's button and land as themselves. On
// /account they unlink it again: they confirm their password first (the
// upstream's sign-in verified nothing of theirs here), and since this
// browser's session came through the link, the page asks them to sign in
// again.
func TestAccountLinkAndUnlink(t *testing.T) {
	w := newFederationWorld(t, 1, nil)
	issuer := w.c.Issuer()
	const email, password = "alice@example.org", "a-local-password-1"
	var alice map[string]any
	w.c.MustAdmin(t, "POST", "/users", map[string]any{"email": email, "password": password}, &alice)
	aliceID := alice["id"].(string)
	identities := func() []map[string]any {
		var ids struct {
			Data []map[string]any `json:"data"`
		}
		w.c.MustAdmin(t, "GET", "/users/"+aliceID+"/identities", nil, &ids)
		return ids.Data
	}

	ctx := chrometest.New(t)
	chrometest.Open(t, ctx, issuer+"/account")
	signInHere(t, ctx, email, password)
	if got := chrometest.Text(t, ctx, "#providers"); got != "Sign-in providers" {
		t.Fatalf("the providers section's heading: %q", got)
	}
	chrometest.Screenshot(t, ctx, "account-link-offered")

	// Link: to the upstream, which asks for its own sign-in (prompt=login),
	// and back to the account page.
	chrometest.Click(t, ctx, `button[name=provider][value=corp]`)
	chrometest.WaitLocation(t, ctx, w.up.Issuer())
	signInUpstream(t, ctx)
	chrometest.WaitLocation(t, ctx, issuer+"/federation/corp/callback")
	if got := chrometest.Text(t, ctx, "main"); !strings.Contains(got, "Your Corp account is linked.") || !strings.Contains(got, "alice@corp.example") {
		chrometest.Screenshot(t, ctx, "account-link-failed")
		t.Fatalf("after the link the page says %q", got)
	}
	chrometest.Screenshot(t, ctx, "account-link-linked")
	ids := identities()
	if len(ids) != 1 || ids[0]["subject"] != "alice-at-corp" || ids[0]["provider_id"] != w.provider["id"] {
		t.Fatalf("alice's links: %+v", ids)
	}

	// Signed out (a browser with no cookie of either provider), alice
	// signs in to the application through the upstream: the link finds
	// her, not a new person with the upstream's address.
	clearCookies(t, ctx)
	chrometest.Open(t, ctx, w.app.srv.URL+"/login")
	chrometest.WaitLocation(t, ctx, issuer+"/authorize")
	chrometest.Click(t, ctx, `button[name=idp][value=corp]`)
	chrometest.WaitLocation(t, ctx, w.up.Issuer())
	signInUpstream(t, ctx)
	chrometest.WaitLocation(t, ctx, w.app.srv.URL+"/callback")
	if got := chrometest.Text(t, ctx, "#who"); got != "signed in as "+email {
		t.Fatalf("the application says %q", got)
	}
	if sub := w.claims()["sub"]; sub != aliceID {
		t.Fatalf("the application's sub %v, want alice %s", sub, aliceID)
	}
	var users struct {
		Data []map[string]any `json:"data"`
	}
	w.c.MustAdmin(t, "GET", "/users", nil, &users)
	if len(users.Data) != 1 {
		t.Fatalf("%d people, want alice alone", len(users.Data))
	}

	// Unlink, from the session that came through the link.
	chrometest.Open(t, ctx, issuer+"/account")
	chrometest.Click(t, ctx, `button[name=action][value=identity-unlink]`)
	if got := chrometest.Text(t, ctx, "main"); !strings.Contains(got, "Enter your password again") {
		chrometest.Screenshot(t, ctx, "account-link-unlink-gate")
		t.Fatalf("unlink from the upstream's session: the page says %q", got)
	}
	signInHere(t, ctx, "", password)
	chrometest.Screenshot(t, ctx, "account-link-before-unlink")
	chrometest.Click(t, ctx, `button[name=action][value=identity-unlink]`)
	if got := chrometest.Text(t, ctx, "main"); !strings.Contains(got, "Corp is unlinked. This browser had signed in through it") {
		chrometest.Screenshot(t, ctx, "account-link-unlink-failed")
		t.Fatalf("after the unlink the page says %q", got)
	}
	chrometest.Screenshot(t, ctx, "account-link-unlinked")
	if ids := identities(); len(ids) != 0 {
		t.Fatalf("alice's links after the unlink: %+v", ids)
	}
	// Her password still lets her in, and Corp is offered again.
	signInHere(t, ctx, email, password)
	chrometest.Do(t, ctx, chromedp.WaitVisible(`button[name=provider][value=corp]`))
}

// signInHere fills and posts oidcd's sign-in form (the email only when
// given: a confirmation has it filled in).
func signInHere(t *testing.T, ctx context.Context, email, password string) {
	t.Helper()
	if email != "" {
		chrometest.Do(t, ctx, chromedp.SetValue(`#email`, email))
	}
	chrometest.Do(t, ctx, chromedp.SendKeys(`#password`, password))
	chrometest.Click(t, ctx, `button[name=method][value=password]`)
}

// signInUpstream signs alice in on the upstream's login page.
func signInUpstream(t *testing.T, ctx context.Context) {
	t.Helper()
	chrometest.Do(t, ctx,
		chromedp.SetValue(`input[name=`+LoginField+`]`, "alice-at-corp"),
		chromedp.SendKeys(`input[name=`+PasswordField+`]`, "alice-upstream"))
	chrometest.Click(t, ctx, "#"+SubmitID)
}

// clearCookies forgets every cookie of the browser: its sessions here
// and at the upstream.
func clearCookies(t *testing.T, ctx context.Context) {
	t.Helper()
	chrometest.Do(t, ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
		return chromedp.Void{}, err
	})
}
