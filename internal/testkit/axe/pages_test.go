package axe_test

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/axe"
	"github.com/oidcd/oidcd/internal/testkit/chrometest"
)

const acrMFA = "urn:service:sso:acr:mfa"

// languages are the languages every page is checked in.
var languages = []string{"en", "de", "fr", "es", "ja"}

// shotPages are the pages kept as screenshots under OIDCD_SCREENSHOTS,
// in shotLanguages, with each branding (and the sign-in page in the dark
// scheme).
var (
	shotPages     = []string{"signin", "secondfactor", "consent", "error", "account"}
	shotLanguages = []string{"de", "ja"}
)

// tab walks the pages in one language and branding.
type tab struct {
	t      *testing.T
	ctx    context.Context
	lang   string
	brand  string
	scheme string
	shown  map[string]map[string]bool // page → languages its <html lang> said
	stats  *stats
	// asked, when set, is the language the next page checked must be in
	// instead of lang.
	asked string
}

// stats are the test's measures: pages checked, and the time axe took.
type stats struct {
	pages int
	axe   time.Duration
}

func (b *tab) name(page string) string {
	n := b.lang + "-" + b.brand + "-" + page
	if b.scheme == "dark" {
		n += "-dark"
	}
	return n
}

// open navigates to u and returns the page's status.
func (b *tab) open(u string) int { return chrometest.Open(b.t, b.ctx, u) }

// fill empties the input matching css and types text into it.
func (b *tab) fill(css, text string) {
	b.t.Helper()
	actx, cancel := context.WithTimeout(b.ctx, chrometest.ActionTimeout)
	defer cancel()
	if _, err := chromedp.Run(actx, chromedp.Evaluate[bool](`(() => { document.querySelector('`+css+`').value = ""; return true })()`)); err != nil {
		b.t.Fatalf("empty %s at %s: %v", css, chrometest.Location(b.t, b.ctx), err)
	}
	chrometest.Do(b.t, b.ctx, chromedp.SendKeys(chromedp.CSS(css), text))
}

// href is the address the first link matching css leads to.
func (b *tab) href(css string) string {
	b.t.Helper()
	actx, cancel := context.WithTimeout(b.ctx, chrometest.ActionTimeout)
	defer cancel()
	h, err := chromedp.Run(actx, chromedp.Evaluate[string](`(document.querySelector('`+css+`') || {}).href || ""`))
	if err != nil || h == "" {
		b.t.Fatalf("%s: no link %s at %s (%v)", b.name(""), css, chrometest.Location(b.t, b.ctx), err)
	}
	return h
}

// check runs axe on the page (failing the test with each violation),
// notes the language the page says it is in, and keeps a screenshot of
// the pages of shotPages.
func (b *tab) check(page string, status, want int) {
	b.t.Helper()
	if status != want {
		b.t.Errorf("%s: status %d, want %d (at %s)", b.name(page), status, want, chrometest.Location(b.t, b.ctx))
	}
	t0 := time.Now()
	axe.Check(b.t, b.ctx, b.name(page))
	b.stats.axe += time.Since(t0)
	b.stats.pages++
	actx, cancel := context.WithTimeout(b.ctx, chrometest.ActionTimeout)
	defer cancel()
	lang, err := chromedp.Run(actx, chromedp.Evaluate[string](`document.documentElement.lang`))
	if err != nil {
		b.t.Fatal(err)
	}
	// The page wears a brand (its name, and its colour's stylesheet);
	// the sign-in steps of the organization's application wear the
	// organization's in its rounds.
	name, err := chromedp.Run(actx, chromedp.Evaluate[string](`document.querySelector('link[href^="/branding/"]') ? ((document.querySelector("header.brand .site") || {}).textContent || "") : ""`))
	if err != nil {
		b.t.Fatal(err)
	}
	steps := slices.Contains([]string{"signin", "secondfactor", "consent", "error"}, page)
	wantBrand := siteName
	if b.brand == "org" && steps {
		wantBrand = orgName
	}
	if name == "" || (steps && name != wantBrand) {
		b.t.Errorf("%s: brand %q (with its stylesheet), want %q", b.name(page), name, wantBrand)
	}
	if b.shown[page] == nil {
		b.shown[page] = map[string]bool{}
	}
	asked := b.lang
	if b.asked != "" {
		asked, b.asked = b.asked, ""
	}
	b.shown[page][lang+"←"+asked] = true
	if os.Getenv("OIDCD_SCREENSHOTS") == "" {
		return
	}
	light := b.scheme == "light" && slices.Contains(shotPages, page) && slices.Contains(shotLanguages, b.lang)
	if light || (b.scheme == "dark" && page == "signin") {
		chrometest.Screenshot(b.t, b.ctx, b.name(page))
	}
}

// brandRGB is each branding's primary colour as getComputedStyle gives
// it, brandHex as a custom property holds it.
var (
	brandRGB = map[string]string{"site": "rgb(138, 21, 56)", "org": "rgb(11, 93, 59)"}
	brandHex = map[string]string{"site": "#8a1538", "org": "#0b5d3b"}
)

// colours checks where the brand's colour goes: in the light scheme the
// primary button, the links and the focus ring; in the dark scheme the
// primary button only, links keeping the light blue that reads on the
// dark card.
func (b *tab) colours(t *testing.T) {
	t.Helper()
	actx, cancel := context.WithTimeout(b.ctx, chrometest.ActionTimeout)
	defer cancel()
	got, err := chromedp.Run(actx, chromedp.Evaluate[[]string](`(() => {
  const st = (css) => getComputedStyle(document.querySelector(css));
  const root = getComputedStyle(document.documentElement);
  return [st("button.primary").backgroundColor, st("button.primary").color, st("main a").color, root.getPropertyValue("--focus").trim()];
})()`))
	if err != nil {
		t.Fatal(err)
	}
	// The logo: at most 40 px high, its ratio kept (the PNG is 160×48),
	// the header within the page's width.
	logo, err := chromedp.Run(actx, chromedp.Evaluate[[]float64](`(() => {
  const i = document.querySelector("header.brand img.logo"), r = i.getBoundingClientRect(), h = document.querySelector("header.brand");
  return [r.width, r.height, i.naturalWidth, i.naturalHeight, h.scrollWidth - h.clientWidth];
})()`))
	if err != nil {
		t.Fatal(err)
	}
	if w, h := logo[0], logo[1]; h <= 0 || h > 40.5 || logo[4] > 0 {
		t.Errorf("%s: logo %.1f×%.1f px, header overflowing by %.0f px; want at most 40 px high, no overflow", b.name("signin"), w, h, logo[4])
	} else if b.brand == "site" && (logo[2] != 160 || logo[3] != 48 || math.Abs(w/h-160.0/48) > 0.05) {
		t.Errorf("%s: the 160×48 logo shown at %.1f×%.1f px (natural %v×%v): ratio lost", b.name("signin"), w, h, logo[2], logo[3])
	}
	brand := brandRGB[b.brand]
	want := []string{brand, "rgb(255, 255, 255)", brand, brandHex[b.brand]}
	if b.scheme == "dark" {
		want = []string{brand, "rgb(255, 255, 255)", "rgb(147, 180, 255)", "#93b4ff"}
	}
	for i, what := range []string{"primary button", "its text", "a link", "the focus ring"} {
		if g := got[i]; g != want[i] {
			t.Errorf("%s: %s in %s, want %s", b.name("signin"), what, g, want[i])
		}
	}
}

// links are what the first round collects from the mail, for every round
// to open (a link's page is shown on GET; only a POST uses it up).
type links struct {
	idToken, reset, register, invite, verify string
	phones                                   *int
	// registerLang is the language of the sign-in the registration
	// started from: its link's pages keep it, whatever browser opens it.
	registerLang string
}

// TestEveryPageInEveryLanguage runs axe-core's WCAG 2.1 A and AA rules on
// every page a person meets, in each language, with the site's branding
// and then with an organization's own (a dark primary colour, a PNG
// then an SVG logo, support link and address), and English once more in
// the dark colour scheme on a phone's narrow (360 px) screen: the sign-in page (with an error), the text
// message's code page, the second factor (authenticator app), consent,
// the organization picker, the authorization error page, /account, the
// authenticator app's setup, new recovery codes, the passkey page, a
// forgotten password and its answer, the reset link's page,
// registration and its link's page, an invitation, an address's proof,
// and the signed-out page. Any violation fails the test, naming the page,
// the rule, its impact and the elements.
func TestEveryPageInEveryLanguage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and a browser")
	}
	axe.Script(t)
	start := time.Now()
	s := newSite(t)
	secret := s.totp(t)
	s.admin(t, "POST", "/admin/v1/invitations", map[string]any{"email": "ines@example.com", "organization_id": s.orgA}, nil, 201)
	shown := map[string]map[string]bool{}
	var st stats
	l := links{phones: new(int)}
	for _, br := range []brand{siteBrand(t), orgBrand()} {
		if br.name == "site" {
			s.admin(t, "PUT", "/admin/v1/branding", br.body, nil, 200)
		} else {
			s.admin(t, "PATCH", "/admin/v1/organizations/"+s.orgA, map[string]any{"branding": br.body}, nil, 200)
		}
		rounds := []struct{ lang, scheme string }{}
		for _, lang := range languages {
			rounds = append(rounds, struct{ lang, scheme string }{lang, "light"})
		}
		rounds = append(rounds, struct{ lang, scheme string }{"en", "dark"})
		for _, r := range rounds {
			// A subtest and a browser per round: chrometest bounds a
			// browser's life (2 minutes), which all rounds in one would
			// pass on a busy machine; each browser stops with its round.
			t.Run(r.lang+"-"+br.name+"-"+r.scheme, func(t *testing.T) {
				ctx := chrometest.New(t)
				colorScheme(t, ctx, r.scheme)
				if r.scheme == "dark" {
					narrow(t, ctx) // and a phone's width
				}
				b := &tab{t: t, ctx: ctx, lang: r.lang, brand: br.name, scheme: r.scheme, shown: shown, stats: &st}
				walk(t, s, b, secret, &l)
			})
		}
	}
	// Every page is in the language asked for: its <html lang> says so.
	var wrong []string
	for page, seen := range shown {
		for k := range seen {
			if got, asked, _ := strings.Cut(k, "←"); got != asked {
				wrong = append(wrong, page+" ("+got+" for "+asked+")")
			}
		}
	}
	sort.Strings(wrong)
	if len(wrong) > 0 {
		t.Errorf("pages not in the language asked for: %v", wrong)
	}
	t.Logf("%d pages checked in %v (axe: %v)", st.pages, time.Since(start).Round(time.Millisecond), st.axe.Round(time.Millisecond))
}

// walk visits every page once in b's language and branding.
func walk(t *testing.T, s *site, b *tab, secret string, l *links) {
	t.Helper()
	issuer := s.c.Issuer()
	first := l.idToken == ""

	// Sign-in, with a wrong password, then the second factor and consent.
	fresh(t, b.ctx, issuer, b.lang)
	au, _ := s.authorize(s.consentID, b.lang, oauth2.SetAuthURLParam("acr_values", acrMFA))
	b.check("signin-form", b.open(au), 200)
	forgot, register := b.href(`a[href*="/password/forgot"]`), b.href(`a[href*="/register"]`)
	b.fill("#email", annEmail)
	b.fill("#password", "not the password")
	b.check("signin", chrometest.Click(t, b.ctx, `button[name="method"][value="password"]`), 400)
	b.colours(t)
	b.fill("#password", annPassword)
	b.check("secondfactor", chrometest.Click(t, b.ctx, `button[name="method"][value="password"]`), 200)
	b.fill("#code", s.code(t, secret))
	b.check("consent", chrometest.Click(t, b.ctx, `button[name="method"][value="otp"]`), 200)
	// Declined (so that the next round is asked again): a page says so.
	b.check("declined", chrometest.Click(t, b.ctx, `button[name="decision"][value="deny"]`), 200)

	// The organization picker of an application of several
	// organizations; its code gives the ID token the signed-out page
	// needs.
	au, verifier := s.authorize(s.multiID, b.lang, oauth2.SetAuthURLParam("prompt", "select_account"))
	b.check("picker", b.open(au), 200)
	chrometest.Click(t, b.ctx, `button[name="organization_id"][value="`+s.orgB+`"]`)
	callback := chrometest.WaitLocation(t, b.ctx, s.cb)
	if first {
		l.idToken = s.idToken(t, s.multiID, callback, verifier)
	}

	// /account and the pages it leads to.
	b.check("account", b.open(issuer+"/account"), 200)
	b.check("totpsetup", chrometest.Click(t, b.ctx, `button[value="totp-setup"]`), 200)
	b.open(issuer + "/account")
	b.check("recoverycodes", chrometest.Click(t, b.ctx, `button[value="recovery-new"]`), 200)
	b.open(issuer + "/account")
	b.check("passkey", chrometest.Click(t, b.ctx, `button[value="passkey-add"]`), 200)
	if first {
		b.open(issuer + "/account")
		b.fill(`input[name="new_email"]`, "ann.b@example.com")
		chrometest.Click(t, b.ctx, `button[value="email-change"]`)
		l.verify = s.link(t, "ann.b@example.com", "verify_email")
	}

	// The authorization error page: a redirect URI the application did
	// not register.
	bad, _ := s.authorize(s.consentID, b.lang)
	u, _ := url.Parse(bad)
	q := u.Query()
	q.Set("redirect_uri", "http://127.0.0.1:1/elsewhere")
	u.RawQuery = q.Encode()
	b.check("error", b.open(u.String()), 400)

	// A forgotten password, its answer, the reset link's page.
	b.check("forgot", b.open(forgot), 200)
	// The person's address once (a new link would replace the first, and
	// an address gets a few an hour); then an unknown one, which gets the
	// same answer.
	if first {
		b.fill("#email", annEmail)
	} else {
		b.fill("#email", "nobody@example.com")
	}
	b.check("forgot-sent", chrometest.Click(t, b.ctx, `main form button[type="submit"]`), 200)
	if first {
		l.reset = s.link(t, annEmail, "password_reset")
	}
	b.check("reset", b.open(l.reset), 200)

	// Registration, its answer, its link's page; an invitation; an
	// address's proof.
	b.check("register", b.open(register), 200)
	if first {
		b.fill("#email", "sam@example.com")
		b.check("register-sent", chrometest.Click(t, b.ctx, `main form button[type="submit"]`), 200)
		l.register = s.link(t, "sam@example.com", "registration")
		l.registerLang = b.lang
		l.invite = s.link(t, "ines@example.com", "invitation")
	}
	b.asked = l.registerLang
	b.check("register-link", b.open(l.register), 200)
	b.check("invite", b.open(l.invite), 200)
	b.check("verify-email", b.open(l.verify), 200)

	// The signed-out page.
	b.check("signedout", b.open(issuer+"/logout?"+url.Values{"id_token_hint": {l.idToken}}.Encode()), 200)

	// A sign-in by text message: its code page. A phone gets a few codes
	// an hour, so each round signs in another person.
	*l.phones++
	phone := fmt.Sprintf("+1555020%04d", *l.phones)
	var who map[string]any
	s.admin(t, "POST", "/admin/v1/users", map[string]any{"email": fmt.Sprintf("p%d@example.com", *l.phones), "password": annPassword, "phone": phone}, &who, 201)
	s.admin(t, "POST", "/admin/v1/memberships", map[string]any{"user_id": who["id"], "org_id": s.orgA}, nil, 201)
	fresh(t, b.ctx, issuer, b.lang)
	au, _ = s.authorize(s.consentID, b.lang)
	b.open(au)
	b.fill("#phone", phone)
	b.check("smscode", chrometest.Click(t, b.ctx, `button[name="method"][value="sms"]`), 200)
}
