package node_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	cdpwebauthn "github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// cdpDo runs one protocol command in the tab.
func cdpDo(t *testing.T, ctx context.Context, f func(ctx context.Context, tg *chromedp.Target) error) {
	t.Helper()
	chrometest.Do(t, ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		return chromedp.Void{}, f(ctx, tg)
	})
}

// virtualAuthenticator gives the tab a platform authenticator that always
// verifies the person (CTAP2, resident keys, user verification).
func virtualAuthenticator(t *testing.T, ctx context.Context) {
	cdpDo(t, ctx, func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, cdpwebauthn.Enable, cdpwebauthn.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, cdpwebauthn.AddVirtualAuthenticator, cdpwebauthn.AddVirtualAuthenticatorParams{
			Options: &cdpwebauthn.VirtualAuthenticatorOptions{
				Protocol: cdpwebauthn.AuthenticatorProtocolCtap2, Transport: cdpwebauthn.AuthenticatorTransportInternal,
				HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
			},
		})
		return err
	})
}

// pinNode sends every later request of the tab through the balancer to
// node i (the issuer origin stays the same).
func pinNode(t *testing.T, ctx context.Context, i int) {
	cdpDo(t, ctx, func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{testcluster.PinHeader: strconv.Itoa(i)},
		})
		return err
	})
}

// waitNotice waits for the account page's notice to contain want, and
// reports the passkey page's status line if it never comes.
func waitNotice(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		got, err := chromedp.Run(actx, chromedp.Text(chromedp.CSS(`.notice, #passkey-status`)))
		cancel()
		if err == nil && strings.Contains(got, want) {
			return
		}
		if err == nil && strings.Contains(got, "failed") {
			t.Fatalf("passkey page: %s", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no notice %q at %s", want, chrometest.Location(t, ctx))
}

// callbackServer is a relying party's redirect URI that answers 200, so a
// browser can land on it (Chromium refuses the unsafe port 9 of world.cb).
func callbackServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "signed in") }))
	t.Cleanup(srv.Close)
	return srv.URL + "/callback"
}

// browserClient registers a client whose redirect URI is cb.
func browserClient(t *testing.T, c *testcluster.Cluster, w world, cb string, skipConsent bool) string {
	t.Helper()
	var cl map[string]any
	if r := do(t, c, "POST", "/admin/v1/clients", testcluster.AdminToken, map[string]any{"name": "Browser App", "type": "public",
		"redirect_uris": []string{cb}, "scopes": []string{"openid", "email"}, "organization_id": w.orgA, "skip_consent": skipConsent}, &cl); r.StatusCode != 201 {
		t.Fatalf("client: %d", r.StatusCode)
	}
	return cl["client_id"].(string)
}

// localRP is a relying party of an issuer on localhost, reached on
// 127.0.0.1 only.
func localRP(t *testing.T, c *testcluster.Cluster, clientID, cb string) (*rp, context.Context) {
	t.Helper()
	ctx := gooidc.ClientContext(context.Background(), c.Client())
	p, err := gooidc.NewProvider(ctx, c.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	return &rp{provider: p, verifier: p.Verifier(&gooidc.Config{ClientID: clientID}), oauth: oauth2.Config{
		ClientID: clientID, Endpoint: p.Endpoint(), RedirectURL: cb, Scopes: []string{gooidc.ScopeOpenID},
	}}, ctx
}

// TestPasskeyRegisteredOnOneNodeAssertedOnAnother: in headless Chromium
// with a virtual authenticator, a person registers a passkey on /account
// through node 0, then an application asks for mfa and the passkey is
// asserted through node 2. The ID token, verified by go-oidc, says mfa
// with pwd and hwk.
func TestPasskeyRegisteredOnOneNodeAssertedOnAnother(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3, Hostname: "localhost", Configure: func(_ int, cfg *node.Config) { cfg.RateLimit = "off" }})
	w := provision(t, c)
	ctx := chrometest.New(t)
	virtualAuthenticator(t, ctx)

	pinNode(t, ctx, 0)
	chrometest.Do(t, ctx, chromedp.Navigate(c.Issuer()+"/account"))
	chrometest.Do(t, ctx,
		chromedp.SendKeys(chromedp.CSS(`input[autocomplete="username"]`), w.email),
		chromedp.SendKeys(chromedp.CSS(`input[autocomplete="current-password"]`), w.password),
	)
	if st := chrometest.Click(t, ctx, `button[name="method"][value="password"]`); st != 200 {
		t.Fatalf("account sign-in: %d", st)
	}
	chrometest.Screenshot(t, ctx, "account")
	chrometest.Click(t, ctx, `button[value="passkey-add"]`)
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "passkey-register")
	// The script creates the credential and posts it.
	chrometest.Do(t, ctx, chromedp.Click(chromedp.CSS(`#passkey-start`), chromedp.NodeVisible))
	waitNotice(t, ctx, "passkey was added")
	var fac struct {
		Passkeys []struct{ ID string } `json:"passkeys"`
	}
	do(t, c, "GET", "/admin/v1/users/"+w.user+"/factors", testcluster.AdminToken, nil, &fac)
	if len(fac.Passkeys) != 1 {
		t.Fatalf("factors after registration: %+v", fac)
	}

	pinNode(t, ctx, 2)
	cb := callbackServer(t)
	r, octx := localRP(t, c, browserClient(t, c, w, cb, true), cb)
	verifier := oauth2.GenerateVerifier()
	au := r.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier), gooidc.Nonce("nonce-0123456789"), acrValues(acrMFA))
	chrometest.Do(t, ctx, chromedp.Navigate(au))
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "second-factor-passkey")
	chrometest.Click(t, ctx, `button[name="method"][value="passkey"]`) // the page's script asserts at once
	loc := chrometest.WaitLocation(t, ctx, cb)
	u, _ := url.Parse(loc)
	tok, err := r.oauth.Exchange(octx, u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	idt, err := r.verifier.Verify(octx, tok.Extra("id_token").(string))
	if err != nil {
		t.Fatal(err)
	}
	var cl idClaims
	idt.Claims(&cl)
	if cl.ACR != acrMFA || !slices.Equal(cl.AMR, []string{"pwd", "hwk"}) {
		t.Fatalf("acr %q amr %v, want mfa [pwd hwk]", cl.ACR, cl.AMR)
	}
}

// TestPagesRenderAccessibly renders every sign-in and account page in
// Chromium, screenshots it, and fails on an input without a label or a
// text input without autocomplete.
func TestPagesRenderAccessibly(t *testing.T) {
	m := newMFAWorldOpts(t, testcluster.Options{Hostname: "localhost"})
	ctx := chrometest.New(t)
	cb := callbackServer(t)
	r, _ := localRP(t, m.c, browserClient(t, m.c, m.world, cb, false), cb)
	r.oauth.Scopes = []string{"openid", "email"}
	au := func(extra ...oauth2.AuthCodeOption) string {
		opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(oauth2.GenerateVerifier())}, extra...)
		return r.oauth.AuthCodeURL("state-0123456789", opts...)
	}
	check := func(name string) {
		t.Helper()
		chrometest.CheckForm(t, ctx)
		chrometest.Screenshot(t, ctx, name)
	}
	type1 := func(css, text string) {
		t.Helper()
		chrometest.Do(t, ctx, chromedp.SendKeys(chromedp.CSS(css), text))
	}

	// Text-message sign-in: first page, code page, second factor, consent.
	chrometest.Do(t, ctx, chromedp.Navigate(au(acrValues(acrMFA))))
	check("signin")
	type1(`input[autocomplete="tel"]`, m.annPhone)
	chrometest.Click(t, ctx, `button[name="method"][value="sms"]`)
	check("sms-code")
	code, _ := m.lastSMS(t, m.annPhone)
	type1(`input[autocomplete="one-time-code"]`, code)
	chrometest.Click(t, ctx, `button[type="submit"]`)
	check("second-factor")
	type1(`input[autocomplete="one-time-code"]`, m.totpCode(t))
	chrometest.Click(t, ctx, `button[name="method"][value="otp"]`)
	check("consent")
	chrometest.Click(t, ctx, `button[name="decision"][value="allow"]`)
	chrometest.WaitLocation(t, ctx, cb)

	// The organization picker of a multi-organization app.
	var multi map[string]any
	do(t, m.c, "POST", "/admin/v1/clients", testcluster.AdminToken, map[string]any{"name": "Multi Browser App", "type": "public",
		"redirect_uris": []string{cb}, "organization_id": m.orgA, "multi_organization": true, "skip_consent": true}, &multi)
	mr, _ := localRP(t, m.c, multi["client_id"].(string), cb)
	chrometest.Do(t, ctx, chromedp.Navigate(mr.oauth.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("prompt", "select_account"))))
	check("organization-picker")
	chrometest.Click(t, ctx, `button[name="organization_id"][value="`+m.orgB+`"]`)
	chrometest.WaitLocation(t, ctx, cb)

	// A wrong password re-shows the form with its message.
	ctx2 := chrometest.New(t)
	chrometest.Do(t, ctx2, chromedp.Navigate(au()),
		chromedp.SendKeys(chromedp.CSS(`input[autocomplete="username"]`), m.email),
		chromedp.SendKeys(chromedp.CSS(`input[autocomplete="current-password"]`), "wrong"))
	if st := chrometest.Click(t, ctx2, `button[name="method"][value="password"]`); st != 400 {
		t.Fatalf("wrong password: %d", st)
	}
	chrometest.CheckForm(t, ctx2)
	chrometest.Screenshot(t, ctx2, "signin-error")

	// The account pages, with the session opened above (text message +
	// authenticator app, a moment ago).
	chrometest.Do(t, ctx, chromedp.Navigate(m.c.Issuer()+"/account"))
	check("account")
	// A text-message session changes nothing before the password is
	// entered again (and the authenticator app verified, as it was).
	chrometest.Click(t, ctx, `button[value="totp-setup"]`)
	check("account-password")
	type1(`input[autocomplete="current-password"]`, m.password)
	chrometest.Click(t, ctx, `button[name="method"][value="password"]`)
	chrometest.Click(t, ctx, `button[value="totp-setup"]`)
	check("totp-setup")
	secret := chrometest.Text(t, ctx, `#totp-secret`)
	m.clock.Add(31 * time.Second)
	code, err := totpAt(secret, m.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	type1(`input[autocomplete="one-time-code"]`, code)
	chrometest.Click(t, ctx, `button[value="totp-confirm"]`)
	if got := chrometest.Text(t, ctx, `.notice`); !strings.Contains(got, "authenticator app is set up") {
		t.Fatalf("after setup: %q", got)
	}
	chrometest.Click(t, ctx, `button[value="recovery-new"]`)
	check("recovery-codes")
	if n := strings.Count(chrometest.Text(t, ctx, `#recovery-codes`), "-"); n != 10 {
		t.Fatalf("%d recovery codes shown, want 10", n)
	}
	// The old codes stopped working, the new secret works for sign-in.
	m.secret = secret
	q, pages := m.run(t, testcluster.NewBrowser(t), newRP(t, m.c, m.confID, m.confSecret, m.cb, gooidc.ScopeOpenID), script{email: m.email, password: m.password, second: "recovery"}, acrValues(acrMFA))
	if last := pages[len(pages)-1]; q != nil || last.Status != http.StatusBadRequest || !strings.Contains(last.Body, "not correct") {
		t.Fatal("an old recovery code still works after new codes were made")
	}
}
