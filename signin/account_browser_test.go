package signin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/testkit/chrometest"
)

// activityLines measures the activity table in the tab: for each row,
// how many lines its app's name takes, and whether the table is wider
// than the card it sits in.
type activityLayout struct {
	AppLines []int    `json:"appLines"`
	Apps     []string `json:"apps"`
	Overflow bool     `json:"overflow"`
}

const measureActivity = `(() => {
  const lines = el => {
    const r = document.createRange();
    r.selectNodeContents(el);
    return new Set([...r.getClientRects()].map(q => Math.round(q.top))).size;
  };
  const cells = [...document.querySelectorAll("table.activity tbody td:nth-child(2)")];
  const table = document.querySelector("table.activity");
  const card = document.querySelector("main.card");
  return {appLines: cells.map(lines), apps: cells.map(c => c.textContent),
    overflow: !table || table.getBoundingClientRect().right > card.getBoundingClientRect().right + 0.5 || document.documentElement.scrollWidth > window.innerWidth};
})()`

// TestAccountPageInBrowser: /account with a few sign-ins of applications
// with long names, a refusal and a password reset, in a real browser at
// a phone's 360 px and a desktop's 1280 px, in English and in German: no
// app name takes more than two lines on the phone or more than one on
// the desktop, the table stays inside its card, and the setup page's QR
// code loads under the pages' CSP; "Sign out" ends on the signed-out
// page, and the forgotten-password page's picker switches it to French.
// Screenshots account-activity-*, totp-setup-*, signed-out-*, forgot-*
// ($OIDCD_SCREENSHOTS).
func TestAccountPageInBrowser(t *testing.T) {
	h := newMailHarness(t)
	now := h.clock.Now()
	for _, c := range []struct{ id, name string }{{"support", "Customer Support Portal"}, {"payroll", "Payroll and Expenses"}} {
		h.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{
			ID: c.id, Name: c.name, Type: fsm.ClientPublic, Scopes: []string{"openid"}, OrganizationID: hOrgA,
			SkipConsent: true, RedirectURIs: []string{"https://app.example/cb"}, AccessTokenTTL: 600, CreatedAt: now, UpdatedAt: now,
		}})
		h.browser().fullSignInWith(authzQuery(c.id, false), hEmail, hPassword)
	}
	h.browser().fullSignInWith(authzQuery(hPublic, false), hEmail, hPassword)
	h.p.Refused(httptest.NewRequest(http.MethodGet, "/authorize", nil), hUser, "payroll", authn.ReasonNoSecondFactor)
	bad := h.browser()
	bad.signIn(bad.get(authzPath(authzQuery("support", false))), hEmail, "not the password")
	h.browser().forgot(hEmail)
	// Two sign-ins from addresses a phone must fit beside the time.
	for _, e := range []fsm.Audit{
		h.p.signinEvent(hUser, "support", map[string]string{"method": authn.AMRPassword, "acr": authn.ACRPwd}),
		h.p.failureEvent(hUser, hPublic, map[string]string{"reason": "wrong_code"}),
	} {
		e.Node, e.Time = "n1", h.clock.Now()
		e.IP = "203.0.113.42"
		if e.Outcome == fsm.OutcomeFailure {
			e.IP = "2001:db8:85a3::8a2e:370:7334"
		}
		if _, err := h.applier.Apply(context.Background(), fsm.NewAuditEvent(e)); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		lang string
		tag  language.Tag
	}{{"en", language.English}, {"de", language.German}} {
		t.Run(tc.lang, func(t *testing.T) {
			ctx := chrometest.New(t)
			chrometest.Do(t, ctx, chromedp.Navigate(h.srv.URL+PathAccount))
			if tc.lang != "en" {
				chrometest.Do(t, ctx, chromedp.SetValue(chromedp.CSS("#lang"), tc.lang))
				chrometest.Click(t, ctx, `button[name="method"][value="language"]`)
			}
			chrometest.Do(t, ctx,
				chromedp.SendKeys(chromedp.CSS("#email"), hEmail),
				chromedp.SendKeys(chromedp.CSS("#password"), hPassword),
			)
			chrometest.Click(t, ctx, `button[name="method"][value="password"]`)
			if got := htmlLang(t, ctx); got != tc.lang {
				t.Fatalf("<html lang> %q, want %s", got, tc.lang)
			}
			for _, size := range []struct {
				name          string
				width, height int64
				maxLines      int
			}{{"desktop", 1280, 900, 1}, {"phone", 360, 740, 2}} {
				chrometest.Do(t, ctx, chromedp.EmulateViewport(size.width, size.height))
				actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
				got, err := chromedp.Run(actx, chromedp.Evaluate[activityLayout](measureActivity))
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Apps) < 5 {
					t.Fatalf("%s: activity rows %q, want at least 5", size.name, got.Apps)
				}
				for i, n := range got.AppLines {
					if n > size.maxLines {
						t.Errorf("%s: %q takes %d lines, want at most %d", size.name, got.Apps[i], n, size.maxLines)
					}
				}
				if got.Overflow {
					t.Errorf("%s: the activity table is wider than its card or the screen", size.name)
				}
				chrometest.Screenshot(t, ctx, fmt.Sprintf("account-activity-%s-%s", tc.lang, size.name))
			}
			want := testText(t, tc.tag, keyRefusedWith, testText(t, tc.tag, "account.reason.no_second_factor"))
			if body := chrometest.Text(t, ctx, "table.activity"); !strings.Contains(body, want) {
				t.Errorf("activity lacks %q:\n%s", want, body)
			}

			// The authenticator app's setup page: its QR code is drawn.
			chrometest.Do(t, ctx, chromedp.EmulateViewport(360, 740))
			chrometest.Click(t, ctx, `button[value="totp-setup"]`)
			actx, cancel := context.WithTimeout(ctx, chrometest.ActionTimeout)
			w, err := chromedp.Run(actx, chromedp.Evaluate[int](`(() => { const i = document.querySelector(".qr img"); return i && i.complete ? i.naturalWidth : 0; })()`))
			cancel()
			if err != nil || w == 0 {
				t.Errorf("the QR code did not load: %d %v", w, err)
			}
			chrometest.Screenshot(t, ctx, "totp-setup-"+tc.lang+"-phone")

			// Sign out from the account's home: the signed-out page.
			chrometest.Do(t, ctx, chromedp.Navigate(h.srv.URL+PathAccount))
			chrometest.Click(t, ctx, `button[value="sign-out"]`)
			if got, want := chrometest.Text(t, ctx, "h1"), testText(t, tc.tag, keySignedOutTitle); got != want {
				t.Errorf("after signing out: heading %q, want %q", got, want)
			}
			chrometest.Screenshot(t, ctx, "signed-out-"+tc.lang+"-phone")

			// The forgotten-password page has the picker too.
			chrometest.Do(t, ctx, chromedp.Navigate(h.srv.URL+PathForgot))
			chrometest.Do(t, ctx, chromedp.SetValue(chromedp.CSS("#lang"), "fr"))
			chrometest.Click(t, ctx, `button[name="method"][value="language"]`)
			if got, want := chrometest.Text(t, ctx, "h1"), testText(t, language.French, keyForgotTitle); got != want {
				t.Errorf("forgot page after picking French: heading %q, want %q", got, want)
			}
			chrometest.CheckForm(t, ctx)
			chrometest.Screenshot(t, ctx, "forgot-fr-from-"+tc.lang+"-phone")
		})
	}
}
