// Package chrometest drives a real headless Chromium (Debian's
// /usr/bin/chromium, installed by scripts/ensure-chromium.sh) from tests,
// through github.com/chromedp/chromedp.
//
//	ctx := chrometest.New(t)                // fresh browser and profile, one tab
//	chrometest.Do(t, ctx,                   // each Do is bounded by ActionTimeout (30 s)
//		chromedp.Navigate(base+"/authorize?..."),
//		chromedp.SendKeys(chromedp.CSS(`input[autocomplete="username"]`), "demo@example.com"),
//		chromedp.SendKeys(chromedp.CSS(`input[type="password"]`), "demo-password"),
//	)
//	status := chrometest.Click(t, ctx, `button[name="method"][value="password"]`) // waits for the next page
//	chrometest.CheckForm(t, ctx)            // every visible control labeled, autocomplete set
//	chrometest.Screenshot(t, ctx, "signin") // $OIDCD_SCREENSHOTS/signin.png, else under t.TempDir()
//	where := chrometest.Location(t, ctx)    // current URL
//	msg := chrometest.Text(t, ctx, ".error") // text of the first match of a CSS selector
//
// The API:
//
//   - New(t) context.Context: starts a browser with the flags --headless
//     --no-sandbox --disable-gpu --disable-quic --no-first-run
//     --disable-background-networking --disable-component-update
//     --disable-sync, its own --user-data-dir under t.TempDir(), a 1280x900
//     window, and host resolution limited to 127.0.0.1 and localhost (any
//     other host name fails, so a test can never reach the internet). The returned tab
//     context ends after Timeout (2 minutes); t.Cleanup stops the browser.
//     Without chromium the test is skipped, or fails when CI=true.
//     $OIDCD_CHROMIUM names another executable. A test wanting two
//     independent browsers (two people) calls New twice.
//   - Do(t, ctx, actions...): chromedp.Do bounded by ActionTimeout; fails
//     the test naming the page on error. Use chromedp.Run with
//     context.WithTimeout(ctx, ...) for actions returning values.
//   - Click(t, ctx, css) int: clicks and waits until the page it leads to
//     has loaded; returns its HTTP status (of the last hop after
//     redirects). Use it for every click that navigates: a query right
//     after a plain chromedp.Click can bind to the page being left.
//   - Screenshot(t, ctx, name): full-page PNG; name is a plain file name.
//   - CheckForm(t, ctx): reports (t.Errorf, one line per control) every
//     visible input/select/textarea without a <label> (for= or wrapping;
//     buttons and hidden inputs are exempt) and every text-like input (text,
//     email, tel, password, number, search, url) without autocomplete.
//   - FormProblems(ctx) ([]string, error): the same check, returned.
//   - Location(t, ctx), Text(t, ctx, css): small readers that fail the test.
//
// chromedp v0.23 has a generic API: chromedp.Do(ctx, steps...) for
// Action[Void] steps, chromedp.Run(ctx, action) for one action with a
// value (chromedp.Run(ctx, chromedp.Evaluate[string]("document.title"))).
// For a WebAuthn ceremony, enable a virtual authenticator through
// github.com/chromedp/cdproto/webauthn (webauthn.Enable,
// webauthn.AddVirtualAuthenticator) with chromedp.Call before navigating,
// and serve the issuer as http://localhost:<port>: WebAuthn refuses an IP
// address as the relying-party id, and http://localhost is a secure context.
package chrometest
