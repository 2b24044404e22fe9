package signin

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
)

// htmlLang is the tab's <html lang>.
func htmlLang(t *testing.T, ctx context.Context) string {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
	defer cancel()
	lang, err := chromedp.Run(actx, chromedp.Evaluate[string]("document.documentElement.lang"))
	if err != nil {
		t.Fatal(err)
	}
	return lang
}

// TestSignInLanguagesInBrowser drives the sign-in page in a real
// browser: ui_locales=ja shows it in Japanese; the picker, without
// script, switches a page to German, where a wrong password is answered
// in German. Screenshots signin-ja and signin-de ($OIDCD_SCREENSHOTS).
func TestSignInLanguagesInBrowser(t *testing.T) {
	h := newHarness(t)

	ctx := chrometest.New(t)
	q := authzQuery(hPublic, false)
	q.Set("ui_locales", "ja-JP")
	chrometest.Do(t, ctx, chromedp.Navigate(h.srv.URL+authzPath(q)))
	if got := htmlLang(t, ctx); got != "ja" {
		t.Fatalf("<html lang> %q, want ja", got)
	}
	if got, want := chrometest.Text(t, ctx, "h1"), testText(t, language.Japanese, "signin.title"); got != want {
		t.Errorf("heading %q, want %q", got, want)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "signin-ja")

	ctx = chrometest.New(t)
	chrometest.Do(t, ctx, chromedp.Navigate(h.srv.URL+authzPath(authzQuery(hPublic, false))))
	if got := htmlLang(t, ctx); got != "en" {
		t.Fatalf("<html lang> %q, want en (the browser's own language)", got)
	}
	chrometest.Do(t, ctx, chromedp.SetValue(chromedp.CSS("#lang"), "de"))
	chrometest.Click(t, ctx, `button[name="method"][value="language"]`)
	if got := htmlLang(t, ctx); got != "de" {
		t.Fatalf("after picking German: <html lang> %q, want de", got)
	}
	chrometest.Do(t, ctx,
		chromedp.SendKeys(chromedp.CSS("#email"), hEmail),
		chromedp.SendKeys(chromedp.CSS("#password"), "wrong"),
	)
	chrometest.Click(t, ctx, `button[name="method"][value="password"]`)
	if got, want := chrometest.Text(t, ctx, "#form-error"), testText(t, language.German, msgBadPassword); got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	if got := htmlLang(t, ctx); got != "de" {
		t.Errorf("after a wrong password: <html lang> %q, want de", got)
	}
	chrometest.CheckForm(t, ctx)
	chrometest.Screenshot(t, ctx, "signin-de")
}
