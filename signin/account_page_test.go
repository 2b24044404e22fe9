package signin

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/makiuchi-d/gozxing"
	gzqr "github.com/makiuchi-d/gozxing/qrcode"
	"golang.org/x/net/html"
	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/webui"
)

// qrImgRE finds the setup page's QR code.
var qrImgRE = regexp.MustCompile(`<img src="([^"]*)" width="(\d+)" height="(\d+)" alt="([^"]*)">`)

// decodeQR reads the text of the QR code in a PNG, as a phone's camera
// would (github.com/makiuchi-d/gozxing, a port of ZXing).
func decodeQR(t *testing.T, body []byte) string {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gzqr.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("no QR code in the image: %v", err)
	}
	return res.GetText()
}

// getRaw is a GET by b that keeps the body's bytes.
func (b *browser) getRaw(ref string) (*http.Response, []byte) {
	b.t.Helper()
	p := b.get(ref)
	return &http.Response{StatusCode: p.status, Header: p.header}, []byte(p.body)
}

// TestAccountTOTPLinkAndQR: the setup page's "Open in an authenticator
// app" link is the otpauth: URI itself (not html/template's #ZgotmplZ),
// holding the key the page shows in groups; its QR code is an image of
// the provider's own origin, whose URL carries nothing, which decodes to
// that same URI, is never cached, and draws only for the browser whose
// setup it is, while its session is fresh and until the setup is
// confirmed.
func TestAccountTOTPLinkAndQR(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.submit(formWith(t, b.accountSignIn(hEmail, hPassword), "action", "totp-setup"), "action", "totp-setup", nil)
	m := totpSecretRE.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("setup page: %d\n%s", p.status, p.body)
	}
	for i, g := range strings.Split(m[1], " ") {
		if len(g) != 4 && i != len(strings.Split(m[1], " "))-1 {
			t.Errorf("key %q: group %q is not of four", m[1], g)
		}
	}
	secret := strings.ReplaceAll(m[1], " ", "")

	href := oneHref(t, p, en("totp.open"))
	u, err := url.Parse(href)
	if err != nil || u.Scheme != "otpauth" || u.Host != "totp" || u.Query().Get("secret") != secret || u.Query().Get("issuer") != "127.0.0.1" ||
		u.Path != "/127.0.0.1:"+hEmail {
		t.Fatalf("the app link's href %q (%v): want the otpauth://totp/ URI of the key %s", href, err, secret)
	}

	img := qrImgRE.FindStringSubmatch(p.body)
	if img == nil {
		t.Fatalf("no QR code on the setup page:\n%s", p.body)
	}
	if img[1] != PathTOTPQR || img[4] != en("totp.qr.alt") {
		t.Fatalf("QR image src %q alt %q: want %s, nothing in its URL", img[1], img[4], PathTOTPQR)
	}
	if img[2] != img[3] || img[2] == "0" || len(img[2]) > 3 {
		t.Errorf("QR image %sx%s", img[2], img[3])
	}
	if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src 'self'") || strings.Contains(csp, "data:") {
		t.Errorf("setup page CSP %q: want img-src 'self' alone", csp)
	}
	if c := b.cookie(PathTOTPQR, qrCookie); c == "" || strings.Contains(c, secret) || b.cookie(PathAccount, qrCookie) != "" {
		t.Fatalf("QR cookie %q: want it sealed and sent to %s alone", c, PathTOTPQR)
	}

	resp, body := b.getRaw(img[1])
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("QR image: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("QR image Cache-Control %q, want no-store", cc)
	}
	if got := decodeQR(t, body); got != href {
		t.Fatalf("the QR code reads %q, want the link's %q", got, href)
	}
	// What a query could name is not read: another setup's secret is not
	// drawn, nor anything for a browser without this setup's cookie.
	if resp, body := b.getRaw(PathTOTPQR + "?secret=JBSWY3DPEHPK3PXP"); resp.StatusCode != http.StatusOK || decodeQR(t, body) != href {
		t.Errorf("with a query: %d", resp.StatusCode)
	}
	other := h.browser()
	other.accountSignIn(hEmail, hPassword)
	if resp, _ := other.getRaw(PathTOTPQR); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another browser of the same person: %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.browser().getRaw(PathTOTPQR); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a browser without a session: %d, want 404", resp.StatusCode)
	}

	// Confirming the app ends what the image can draw.
	code, err := factor.TOTPCode(m[1], h.clock.Now()) // as typed, in its groups
	if err != nil {
		t.Fatal(err)
	}
	p = b.submit(formWith(t, p, "action", "totp-confirm"), "action", "totp-confirm", map[string]string{"code": code})
	if p.status != http.StatusOK || !strings.Contains(p.body, en(keyTOTPSet)) {
		t.Fatalf("confirm: %d\n%s", p.status, p.body)
	}
	if resp, _ := b.getRaw(PathTOTPQR); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after the confirmation: %d, want 404", resp.StatusCode)
	}
}

// TestTOTPQRNeedsAFreshSession: the image of a setup page left open past
// the account page's freshness draws nothing.
func TestTOTPQRNeedsAFreshSession(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	b.submit(formWith(t, b.accountSignIn(hEmail, hPassword), "action", "totp-setup"), "action", "totp-setup", nil)
	if resp, _ := b.getRaw(PathTOTPQR); resp.StatusCode != http.StatusOK {
		t.Fatalf("fresh: %d", resp.StatusCode)
	}
	h.clock.Add(accountFresh + time.Minute)
	if resp, _ := b.getRaw(PathTOTPQR); resp.StatusCode != http.StatusNotFound {
		t.Errorf("stale: %d, want 404", resp.StatusCode)
	}
}

// TestAccountSignOut: the account page's "Sign out" ends this browser's
// session as a logout does (its app sessions end), drops its cookie and
// shows the signed-out page; /account then asks to sign in. It needs no
// fresh authentication.
func TestAccountSignOut(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	home := b.accountSignIn(hEmail, hPassword)
	sso := b.cookie("/", session.SSOCookie)
	sessions, _, err := h.applier.State().SSOSessionsOf(hUser, h.clock.Now())
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions: %+v %v", sessions, err)
	}
	h.clock.Add(accountFresh + time.Minute) // no longer fresh: signing out still works
	p := b.submit(formWith(t, home, "action", webui.ActionSignOut), "action", webui.ActionSignOut, nil)
	wantPage(t, "sign-out", p, http.StatusOK, en(keySignedOutTitle), en(keySignedOut))
	if b.cookie("/", session.SSOCookie) != "" || sso == "" {
		t.Errorf("session cookie after signing out: %q (before %q)", b.cookie("/", session.SSOCookie), sso)
	}
	if s, err := h.applier.State().SSOSession(sessions[0].ID); err != nil || s.EndedAt.IsZero() || s.EndReason != fsm.EndLogout {
		t.Errorf("session after signing out: %+v %v, want ended by a logout", s, err)
	}
	if evs := h.accountEvents(hUser); len(evs) == 0 || evs[len(evs)-1].Detail["action"] != webui.ActionSignOut {
		t.Errorf("account events: %+v, want a sign-out", evs)
	}
	if p := b.get(PathAccount); !strings.Contains(p.body, en(titleSignInAccount)) {
		t.Errorf("/account after signing out:\n%s", p.body)
	}
}

// TestAccountSignOutGoesUpstream: a sign-out on /account of a session
// opened through an upstream with end_upstream_session ends the session
// here first, then sends the browser on to the upstream's end session
// (logout's UpstreamSignOut decides); when it declines, the signed-out
// page is shown as before.
func TestAccountSignOutGoesUpstream(t *testing.T) {
	for _, tc := range []struct {
		name     string
		location string // what UpstreamSignOut answers; "" for no
	}{
		{"through the upstream", "https://upstream.example/session/end?state=s"},
		{"ends here", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []fsm.SSOSession
			h := newHarness(t, func(c *Config) {
				c.UpstreamSignOut = func(_ *http.Request, sso fsm.SSOSession) (string, bool) {
					asked = append(asked, sso)
					return tc.location, tc.location != ""
				}
			})
			b := h.browser()
			home := b.accountSignIn(hEmail, hPassword)
			sessions, _, err := h.applier.State().SSOSessionsOf(hUser, h.clock.Now())
			if err != nil || len(sessions) != 1 {
				t.Fatalf("sessions: %+v %v", sessions, err)
			}
			p := b.submit(formWith(t, home, "action", webui.ActionSignOut), "action", webui.ActionSignOut, nil)
			if len(asked) != 1 || asked[0].ID != sessions[0].ID {
				t.Fatalf("UpstreamSignOut asked for %+v, want the browser's session %s", asked, sessions[0].ID)
			}
			if tc.location != "" {
				if p.status != http.StatusSeeOther || p.header.Get("Location") != tc.location {
					t.Fatalf("sign-out: %d to %q, want 303 to %s", p.status, p.header.Get("Location"), tc.location)
				}
			} else {
				wantPage(t, "sign-out", p, http.StatusOK, en(keySignedOutTitle), en(keySignedOut))
			}
			if b.cookie("/", session.SSOCookie) != "" {
				t.Error("the session cookie stays")
			}
			if s, err := h.applier.State().SSOSession(sessions[0].ID); err != nil || s.EndedAt.IsZero() {
				t.Errorf("session after signing out: %+v %v, want ended before the browser leaves", s, err)
			}
		})
	}
}

// TestAccountPasskeysOffSaysWhy: with an issuer at an IP address the
// passkeys section says why there is no button, naming the host, instead
// of "No passkey yet."; with a domain name it offers the button.
func TestAccountPasskeysOffSaysWhy(t *testing.T) {
	h := newHarness(t)
	p := h.browser().accountSignIn(hEmail, hPassword)
	why := en(keyPasskeysOffHere, "127.0.0.1")
	if !strings.Contains(p.body, `<p class="hint" id="passkeys-off">`+htmlEscape(why)+`</p>`) || strings.Contains(p.body, en("account.passkeys.none")) ||
		strings.Contains(p.body, `value="passkey-add"`) {
		t.Fatalf("passkeys section with an IP issuer: want %q alone:\n%s", why, p.body)
	}

	// The same page of an issuer with a domain name (rendered straight:
	// the harness's browser reaches 127.0.0.1 only).
	d := newHarness(t, func(c *Config) { c.Issuer = "https://login.example" })
	if d.p.wa == nil {
		t.Fatal("passkeys off with a domain name")
	}
	rec := httptest.NewRecorder()
	a := &account{p: d.p, w: rec, r: httptest.NewRequest(http.MethodGet, PathAccount, nil), now: d.clock.Now()}
	a.user, _ = d.applier.State().User(hUser)
	a.showHome(http.StatusOK, "", "")
	if body := rec.Body.String(); !strings.Contains(body, `value="passkey-add"`) || !strings.Contains(body, en("account.passkeys.none")) || strings.Contains(body, "passkeys-off") {
		t.Errorf("passkeys section with a domain name:\n%s", body)
	}
}

// activityRows are the cells of the account page's activity table.
func activityRows(t *testing.T, p page) [][]string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(p.body))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			b.WriteString(text(c))
		}
		return b.String()
	}
	var walk func(n *html.Node, in bool)
	walk = func(n *html.Node, in bool) {
		if n.Type == html.ElementNode && n.Data == "table" {
			in = slices.ContainsFunc(n.Attr, func(a html.Attribute) bool { return a.Key == "class" && a.Val == "activity" })
		}
		if in && n.Type == html.ElementNode && n.Data == "tr" && n.Parent != nil && n.Parent.Data == "tbody" {
			var row []string
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && c.Data == "td" {
					row = append(row, strings.TrimSpace(text(c)))
				}
			}
			rows = append(rows, row)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, in)
		}
	}
	walk(doc, false)
	return rows
}

// TestAccountActivityRefusedAndReset: "Recent activity" shows a sign-in
// the authorization flow refused for want of a second factor as refused,
// with the reason, and not as the password step before it ("Signed in
// (password)"); it lists the password reset asked for and completed.
func TestAccountActivityRefusedAndReset(t *testing.T) {
	h := newMailHarness(t)
	b := h.browser()
	b.fullSignInWith(authzQuery(hPublic, false), hEmail, hPassword)
	h.clock.Add(time.Minute + time.Second)
	// The flow (oidc) goes on: the application asks for mfa, and the
	// person has no second factor, so it refuses and says so.
	h.browser().fullSignInWith(authzQuery(hPublic, false), hEmail, hPassword)
	h.p.Refused(httptest.NewRequest(http.MethodGet, "/authorize", nil).WithContext(context.Background()), hUser, hPublic, authn.ReasonNoSecondFactor)

	wantPage(t, "forgot", h.browser().forgot(hEmail), http.StatusOK)
	link := h.lastLink(hEmail, "password_reset")
	r := h.browser()
	wantPage(t, "reset", r.fill(onlyPostForm(t, r.get(link)), map[string]string{"new_password": "another good passphrase"}), http.StatusOK)

	p := h.browser().accountSignIn(hEmail, "another good passphrase")
	rows := activityRows(t, p)
	var results []string
	for _, row := range rows {
		if len(row) != 4 {
			t.Fatalf("activity row %q: want 4 cells", row)
		}
		results = append(results, row[1]+" | "+row[3])
	}
	refused := hAppName + " | " + en(keyRefusedWith, en("account.reason.no_second_factor"))
	okPwd := hAppName + " | " + en("account.activity.ok_with", en("account.strength.pwd"))
	want := []string{
		en(keyThisPage) + " | " + en("account.activity.ok_with", en("account.strength.pwd")),
		en(keyResetPage) + " | " + en(keyResetCompleted),
		en(keyResetPage) + " | " + en(keyResetRequested),
		refused, // the password step it refused is not a line of its own
		okPwd,
	}
	if !slices.Equal(results, want) {
		t.Fatalf("activity:\n got %q\nwant %q", results, want)
	}
}

// TestLanguagePickerOnEveryPage: the forgotten-password page, the reset
// link's page, registration (the address and the link's password), an
// invitation's page, a new address's link and /account (its sign-in and its home) each carry
// the sign-in page's language picker; picking German answers the same
// page in German and remembers it.
func TestLanguagePickerOnEveryPage(t *testing.T) {
	h := newMailHarness(t)
	h.openRegistration("example.org")
	de := language.German
	reg := authzQuery(hPublic, false)
	reg.Set("organization_hint", hOrgA)

	pages := []struct {
		name  string
		open  func(b *browser) page
		title string // the page's heading key, in German after the pick
	}{
		{"forgot", func(b *browser) page { return b.get(PathForgot) }, keyForgotTitle},
		{"reset", func(b *browser) page {
			h.browser().forgot(hEmail)
			return b.get(h.lastLink(hEmail, "password_reset"))
		}, keyResetTitle},
		{"register", func(b *browser) page { return b.registerPage(reg) }, keyRegisterTitle},
		{"register link", func(b *browser) page {
			rb := h.browser()
			wantPage(t, "registration asked", rb.fill(onlyPostForm(t, rb.registerPage(reg)), map[string]string{"email": "newbie@example.org"}), http.StatusOK)
			return b.get(h.lastLink("newbie@example.org", "registration"))
		}, keyRegisterPwTitle},
		{"invitation", func(b *browser) page {
			path, _ := h.invite("new@example.org", time.Hour)
			return b.get(path)
		}, ""},
		{"verify email", func(b *browser) page {
			ab := h.browser()
			home := ab.accountSignIn(hEmail, hPassword)
			wantPage(t, "address change", ab.submit(formWith(t, home, "action", "email-change"), "action", "email-change",
				map[string]string{"new_email": "ann.picked@example.com"}), http.StatusOK)
			return b.get(h.lastLink("ann.picked@example.com", fsm.EmailVerify))
		}, keyVerifyEmailTitle},
		{"account sign-in", func(b *browser) page { return b.get(PathAccount) }, titleSignInAccount},
		{"account", func(b *browser) page { return b.accountSignIn(hEmail, hPassword) }, "account.title"},
	}
	for _, pg := range pages {
		t.Run(pg.name, func(t *testing.T) {
			b := h.browser()
			p := pg.open(b)
			if p.status != http.StatusOK || !strings.Contains(p.body, `<html lang="en">`) {
				t.Fatalf("page: %d\n%s", p.status, p.body)
			}
			f := formWith(t, p, "method", methodLanguage)
			p = b.submit(f, "method", methodLanguage, map[string]string{"lang": "de"})
			if p.status != http.StatusOK || !strings.Contains(p.body, `<html lang="de">`) {
				t.Fatalf("after picking German: %d\n%s", p.status, p.body)
			}
			if pg.title != "" && !strings.Contains(p.body, "<h1>"+inLang(de, pg.title)) {
				t.Errorf("heading not German (%s):\n%s", inLang(de, pg.title), p.body)
			}
			if b.cookie("/", webui.LangCookie) != "de" {
				t.Errorf("language cookie %q, want de", b.cookie("/", webui.LangCookie))
			}
			// Picking a language changes nothing but the language: the
			// address link is not used up by it.
			if u, _ := h.applier.State().User(hUser); u.Email != hEmail {
				t.Fatalf("picking a language changed the address to %s", u.Email)
			}
			// The page again has its form and the picker, German selected.
			formWith(t, p, "method", methodLanguage)
			if !strings.Contains(p.body, `<option value="de" lang="de" selected>`) {
				t.Errorf("German not selected:\n%s", p.body)
			}
		})
	}
}

// TestActivityFolded: a sign-in's first step is folded into the line of
// its refusal or of its second factor when both come from the same
// application and address within a minute; anything else stays a line.
func TestActivityFolded(t *testing.T) {
	at := time.Date(2026, 3, 4, 17, 5, 0, 0, time.UTC)
	ev := func(outcome, acr, reason string, d time.Duration) fsm.Event {
		e := fsm.Event{Type: fsm.EventSignin, Outcome: outcome, ClientID: "app", IP: "192.0.2.1", Time: at.Add(d),
			Detail: map[string]string{}}
		if acr != "" {
			e.Detail["acr"] = acr
		}
		if reason != "" {
			e.Detail["reason"] = reason
		}
		return e
	}
	pwd := ev(fsm.OutcomeSuccess, authn.ACRPwd, "", 0)
	other := func(e fsm.Event, f func(*fsm.Event)) fsm.Event { f(&e); return e }
	for _, tc := range []struct {
		name         string
		newer, older fsm.Event
		want         bool
	}{
		{"second factor after the password", ev(fsm.OutcomeSuccess, authn.ACRMFA, "", 20*time.Second), pwd, true},
		{"refused for want of a second factor", ev(fsm.OutcomeFailure, "", authn.ReasonNoSecondFactor, time.Second), pwd, true},
		{"a wrong code after the password", ev(fsm.OutcomeFailure, "", "wrong_code", time.Second), pwd, false},
		{"two password sign-ins", ev(fsm.OutcomeSuccess, authn.ACRPwd, "", 20*time.Second), pwd, false},
		{"second factor much later", ev(fsm.OutcomeSuccess, authn.ACRMFA, "", 2*time.Minute), pwd, false},
		{"second factor of another application", other(ev(fsm.OutcomeSuccess, authn.ACRMFA, "", time.Second), func(e *fsm.Event) { e.ClientID = "other" }), pwd, false},
		{"second factor from another address", other(ev(fsm.OutcomeSuccess, authn.ACRMFA, "", time.Second), func(e *fsm.Event) { e.IP = "192.0.2.9" }), pwd, false},
		{"after a failed first step", ev(fsm.OutcomeSuccess, authn.ACRMFA, "", time.Second), ev(fsm.OutcomeFailure, "", "wrong_password", 0), false},
		{"a step-up of a session already mfa", ev(fsm.OutcomeSuccess, authn.ACRMFA, "", time.Second), ev(fsm.OutcomeSuccess, authn.ACRMFA, "", 0), false},
	} {
		if got := folded(tc.newer, tc.older); got != tc.want {
			t.Errorf("%s: folded %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAccountSessionsNewestFirst: /account lists the person's sessions
// newest first, whatever order the state keeps them in.
func TestAccountSessionsNewestFirst(t *testing.T) {
	h := newHarness(t)
	var ids []string
	for range 4 {
		h.browser().accountSignIn(hEmail, hPassword)
		h.clock.Add(2 * time.Minute)
	}
	p := h.browser().accountSignIn(hEmail, hPassword)
	sessions, _, err := h.applier.State().SSOSessionsOf(hUser, h.clock.Now())
	if err != nil || len(sessions) != 5 {
		t.Fatalf("sessions: %d %v", len(sessions), err)
	}
	slices.SortFunc(sessions, func(x, y fsm.SSOSession) int { return y.CreatedAt.Compare(x.CreatedAt) })
	last := -1
	for _, s := range sessions {
		ids = append(ids, s.ID)
		i := strings.Index(p.body, s.ID)
		if s.ID == sessions[0].ID {
			continue // this browser's own session has no sign-out button naming it
		}
		if i < 0 || i < last {
			t.Fatalf("session %s at %d, after %d: want newest first (%v)\n%s", s.ID, i, last, ids, p.body)
		}
		last = i
	}
}

// TestAccountActivityNamesTheConsole: a sign-in to the console or the
// CLI (the built-in client, which has no record and so no name) is
// "Administration (console, command line)" in the page's language, not
// the client id.
func TestAccountActivityNamesTheConsole(t *testing.T) {
	h := newHarness(t)
	e := h.p.signinEvent(hUser, adminClientID, map[string]string{"method": authn.AMRPassword, "acr": authn.ACRPwd})
	e.Node, e.Time, e.IP = "n1", h.clock.Now(), "203.0.113.42"
	if _, err := h.applier.Apply(context.Background(), fsm.NewAuditEvent(e)); err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Minute)
	rows := activityRows(t, h.browser().accountSignIn(hEmail, hPassword))
	if len(rows) != 2 || rows[1][1] != en(keyAdminApp) {
		t.Fatalf("activity %q: want the console's sign-in named %q", rows, en(keyAdminApp))
	}
}
