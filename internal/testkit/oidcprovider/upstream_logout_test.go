package oidcprovider

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// The black-box test of end_upstream_session: a person signed in through
// a real upstream (oidc-provider, in Chromium) signs out of an application
// that knows only oidcd (go-oidc with x/oauth2); the sign-out takes the
// browser through the upstream's own end session and back to the
// application's post-logout URI with its state, and the upstream's
// session is gone with ours.

// pinTab sends every later request of the tab to the cluster's balancer
// on to node i (-1: spread again); the issuer origin stays the same.
func pinTab(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	headers := network.Headers{}
	if i >= 0 {
		headers[testcluster.PinHeader] = strconv.Itoa(i)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: headers}); err != nil {
		t.Fatal(err)
	}
}

// TestSignOutEndsTheUpstreamSession: with end_upstream_session, an
// application's sign-out at oidcd goes through oidc-provider's end
// session (its confirmation page, clicked) and lands at the application's
// post-logout URI with the application's state; the application got its
// logout token, and the next sign-in asks the upstream for the password
// again. On three nodes the sign-out is sent to one node and the way back
// from the upstream to another, which opens the state the first sealed.
func TestSignOutEndsTheUpstreamSession(t *testing.T) {
	for _, size := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", size), func(t *testing.T) {
			if size > 1 && testing.Short() {
				t.Skip("three nodes and Chromium")
			}
			c := testcluster.New(t, testcluster.Options{Size: size, Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
			issuer := c.Issuer()
			app := newRP(t, issuer)
			var org, cl, ip map[string]any
			c.MustAdmin(t, "POST", "/organizations", map[string]any{"slug": "alpha", "name": "Alpha"}, &org)
			c.MustAdmin(t, "POST", "/clients", map[string]any{"name": "App", "type": "confidential", "organization_id": org["id"],
				"redirect_uris": []string{app.srv.URL + "/callback", app.srv.URL + "/signed-out"}, "scopes": []string{"openid", "email"},
				"skip_consent": true, "backchannel_logout_uri": app.srv.URL + "/backchannel"}, &cl)
			app.register(cl["client_id"].(string), cl["client_secret"].(string))

			// What oidcd tells the operator to register at the upstream
			// is what the upstream is given.
			postLogout := issuer + "/federation/corp/logged-out"
			up := Start(t, Config{
				Clients: []Client{{ID: "oidcd", Secret: "upstream-secret", RedirectURIs: []string{issuer + "/federation/corp/callback"},
					PostLogoutRedirectURIs: []string{postLogout}, BackchannelLogoutURI: issuer + "/federation/corp/backchannel-logout"}},
				Accounts: []Account{{Sub: "alice-at-corp", Password: "alice-upstream", Email: "alice@corp.example", EmailVerified: true,
					Name: "Alice", AMR: []string{"pwd"}}},
			})
			c.MustAdmin(t, "POST", "/identity-providers", map[string]any{"slug": "corp", "display_name": "Corp", "issuer": up.Issuer(),
				"client_id": "oidcd", "client_secret": "upstream-secret", "scopes": Scopes, "email_domains": []string{"corp.example"},
				"memberships": map[string]any{"organization_id": org["id"]}, "end_upstream_session": true}, &ip)
			if ip["post_logout_redirect_uri"] != postLogout || ip["end_upstream_session"] != true {
				t.Fatalf("the provider's answer: post_logout_redirect_uri %v, end_upstream_session %v; want %s, true",
					ip["post_logout_redirect_uri"], ip["end_upstream_session"], postLogout)
			}

			ctx := chrometest.New(t)
			// logIn signs alice in on the upstream's sign-in page, and
			// waits for the application.
			logIn := func() {
				t.Helper()
				chrometest.Do(t, ctx,
					chromedp.SetValue(`input[name=`+LoginField+`]`, "alice-at-corp"),
					chromedp.SendKeys(`input[name=`+PasswordField+`]`, "alice-upstream"))
				chrometest.Click(t, ctx, "#"+SubmitID)
				chrometest.WaitLocation(t, ctx, app.srv.URL+"/callback")
				if got := chrometest.Text(t, ctx, "#who"); got == "" {
					t.Fatal("the application shows nobody signed in")
				}
			}
			chrometest.Open(t, ctx, app.srv.URL+"/login?idp_hint=corp")
			chrometest.WaitLocation(t, ctx, up.Issuer()+"/interaction/")
			logIn()
			app.mu.Lock()
			sid, _ := app.claims["sid"].(string)
			app.mu.Unlock()
			if size == 1 {
				st := c.Node(0).FSM().State()
				as, err := st.AppSession(sid)
				if err != nil {
					t.Fatal(err)
				}
				sso, err := st.SSOSession(as.SSOSessionID)
				if err != nil || sso.ProviderID != ip["id"] || sso.UpstreamIDToken == "" {
					t.Fatalf("the SSO session keeps no upstream ID token: %+v, %v", sso, err)
				}
			}

			// The sign-out: oidcd ends its session, then the upstream
			// asks for a confirmation on its own page.
			if size > 1 {
				pinTab(t, ctx, 0)
			}
			chrometest.Open(t, ctx, app.srv.URL+"/logout")
			chrometest.WaitLocation(t, ctx, up.Issuer()+"/session/end")
			chrometest.Do(t, ctx, chromedp.WaitVisible("#"+LogoutButtonID))
			chrometest.Screenshot(t, ctx, "upstream-logout-confirm")
			if size > 1 {
				pinTab(t, ctx, size-1)
			}
			chrometest.Click(t, ctx, "#"+LogoutButtonID)
			chrometest.WaitLocation(t, ctx, app.srv.URL+"/signed-out")
			chrometest.Screenshot(t, ctx, "upstream-logout-done")
			if size > 1 {
				pinTab(t, ctx, -1)
			}
			app.mu.Lock()
			back, sent := append([]string(nil), app.back...), app.outState
			app.mu.Unlock()
			if len(back) != 1 || back[0] != sent {
				t.Fatalf("the post-logout URI got states %q, want [%q]", back, sent)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				app.mu.Lock()
				n := len(app.logouts)
				app.mu.Unlock()
				if n > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no logout token reached the application")
				}
				time.Sleep(50 * time.Millisecond)
			}

			// Both sessions are gone: the next sign-in goes to the
			// upstream, which asks for the password again instead of
			// sending the browser straight back.
			chrometest.Open(t, ctx, app.srv.URL+"/login?idp_hint=corp")
			chrometest.WaitLocation(t, ctx, up.Issuer()+"/interaction/")
			chrometest.Do(t, ctx, chromedp.WaitVisible(`input[name=`+PasswordField+`]`))
			chrometest.Screenshot(t, ctx, "upstream-logout-asks-again")
			logIn()
			if size > 1 {
				return
			}

			// The person's own sign-out, on /account, goes through the
			// upstream's end session as well, and back to oidcd's
			// signed-out page; after it the upstream asks again.
			chrometest.Open(t, ctx, issuer+"/account")
			chrometest.Click(t, ctx, `button[name="action"][value="sign-out"]`)
			chrometest.WaitLocation(t, ctx, up.Issuer()+"/session/end")
			chrometest.Click(t, ctx, "#"+LogoutButtonID)
			chrometest.WaitLocation(t, ctx, postLogout)
			chrometest.Screenshot(t, ctx, "account-sign-out-upstream-done")
			if got := chrometest.Text(t, ctx, "h1"); got == "" {
				t.Fatal("no signed-out page after the upstream")
			}
			chrometest.Open(t, ctx, app.srv.URL+"/login?idp_hint=corp")
			chrometest.WaitLocation(t, ctx, up.Issuer()+"/interaction/")
			chrometest.Do(t, ctx, chromedp.WaitVisible(`input[name=`+PasswordField+`]`))
		})
	}
}
