package signin

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/webui"
)

// testUI is one UI for the tests' expected texts.
var testUI = sync.OnceValue(func() *webui.UI {
	u, err := webui.New()
	if err != nil {
		panic(err)
	}
	return u
})

// en is a catalog message in English: what the tests that read English
// pages expect.
func en(key string, args ...any) string { return testUI().Text(language.English, key, args...) }

// inLang is a catalog message in tag, as a page writes it (escaped).
func inLang(tag language.Tag, key string, args ...any) string {
	return html.EscapeString(testUI().Text(tag, key, args...))
}

// pick gives b the language cookie of a language picked earlier: every
// page of this browser is in it.
func (b *browser) pick(tag string) {
	b.t.Helper()
	u, err := url.Parse(b.abs("/"))
	if err != nil {
		b.t.Fatal(err)
	}
	b.jar.SetCookies(u, []*http.Cookie{{Name: webui.LangCookie, Value: tag, Path: "/"}})
}

var (
	englishDateRE = regexp.MustCompile(`\b\d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}\b`)
	germanDateRE  = regexp.MustCompile(`\b\d{2}\.\d{2}\.\d{4}, \d{2}:\d{2} UTC\b`)
)

// TestAccountInGerman: /account of a person whose browser picked German
// is German, from its sign-in form to the home page, and writes the
// sessions' and sign-ins' times the German way, in UTC; a change's
// notice is German too.
func TestAccountInGerman(t *testing.T) {
	h := newHarness(t)
	de := language.German
	elsewhere := h.browser()
	elsewhere.fullSignInWith(authzQuery(hPublic, false), hEmail, hPassword)
	h.clock.Add(3 * time.Minute) // another time

	b := h.browser()
	b.pick("de")
	p := b.get(PathAccount)
	if got := pageLang(t, p); got != "de" || !strings.Contains(p.body, inLang(de, titleSignInAccount)) {
		t.Fatalf("/account sign-in in %q:\n%s", got, p.body)
	}
	p = b.signIn(p, hEmail, "wrong")
	if !strings.Contains(p.body, inLang(de, msgBadPassword)) {
		t.Fatalf("a wrong password on /account, in German:\n%s", p.body)
	}
	p = b.signIn(p, hEmail, hPassword)
	if got := pageLang(t, p); p.status != http.StatusOK || got != "de" {
		t.Fatalf("/account home: %d in %q", p.status, got)
	}
	for _, key := range []string{"account.title", "account.sessions.heading", "account.activity.heading", "account.password.submit"} {
		if !strings.Contains(p.body, inLang(de, key)) {
			t.Errorf("the page lacks %s in German:\n%s", key, p.body)
		}
	}
	sessions, _, err := h.applier.State().SSOSessionsOf(hUser, h.clock.Now())
	if err != nil || len(sessions) != 2 {
		t.Fatalf("sessions: %v %v", sessions, err)
	}
	for _, s := range sessions {
		// The session's start, in the German layout and in UTC.
		if want := inLang(de, "account.sessions.since", h.p.cfg.UI.DateTime(de, s.CreatedAt.UTC())); !strings.Contains(p.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := len(germanDateRE.FindAllString(p.body, -1)); n < 4 { // 2 sessions, 3 sign-ins (one failed)
		t.Errorf("%d dates in the German layout, want at least 4:\n%s", n, p.body)
	}
	if m := englishDateRE.FindString(p.body); m != "" {
		t.Errorf("an English date on the German page: %q", m)
	}
	for _, key := range []string{"account.reason.wrong_password", "account.strength.pwd"} {
		if !strings.Contains(p.body, inLang(de, key)) {
			t.Errorf("the activity lacks %s in German", key)
		}
	}
	p = b.submit(formWith(t, p, "action", "sessions-end-others"), "action", "sessions-end-others", nil)
	if want := inLang(de, keyOthersEnded, 1); p.status != http.StatusOK || !strings.Contains(p.body, want) {
		t.Errorf("ending the other session: %d, want %q:\n%s", p.status, want, p.body)
	}
}

// TestForgotKeepsTheSignInLanguage: the forgotten-password page reached
// from a sign-in that asked for Japanese (ui_locales) is Japanese, in a
// browser that says nothing of its language, and so is its answer and
// the message it commits to the outbox.
func TestForgotKeepsTheSignInLanguage(t *testing.T) {
	h := newMailHarness(t)
	ja := language.Japanese
	b := h.browser()
	q := authzQuery(hPublic, false)
	q.Set("ui_locales", "ja-JP en")
	signin := b.get(authzPath(q))
	if got := pageLang(t, signin); got != "ja" {
		t.Fatalf("sign-in page in %q", got)
	}
	p := b.get(oneHref(t, signin, testUI().Text(ja, "signin.forgot")))
	if got := pageLang(t, p); p.status != http.StatusOK || got != "ja" {
		t.Fatalf("forgot page: %d in %q:\n%s", p.status, got, p.body)
	}
	for _, key := range []string{keyForgotTitle, keyForgotLead, keySendLink, keyBackToSignIn, "address.email.label"} {
		if !strings.Contains(p.body, inLang(ja, key)) {
			t.Errorf("the forgot page lacks %s in Japanese:\n%s", key, p.body)
		}
	}
	back, err := url.Parse(oneHref(t, p, testUI().Text(ja, keyBackToSignIn)))
	if err != nil || back.Path != "/authorize" || back.Query().Get("ui_locales") != "ja" {
		t.Errorf("the way back to the sign-in %q, want it in Japanese", back)
	}
	form := onlyPostForm(t, p)
	bad := b.fill(form, map[string]string{"email": "not an address"})
	if got := pageLang(t, bad); bad.status != http.StatusBadRequest || got != "ja" || !strings.Contains(bad.body, inLang(ja, keyBadAddress)) {
		t.Fatalf("a bad address: %d in %q:\n%s", bad.status, got, bad.body)
	}
	// The answer is a message page, whose <html lang> comes with its
	// template's conversion; its texts are Japanese already.
	p = b.fill(onlyPostForm(t, bad), map[string]string{"email": hEmail})
	if p.status != http.StatusOK || !strings.Contains(p.body, inLang(ja, keyCheckEmail)) || !strings.Contains(p.body, inLang(ja, keyForgotSent)) {
		t.Fatalf("forgot answer: %d:\n%s", p.status, p.body)
	}
	ms := h.mailsTo(hEmail)
	if len(ms) != 1 || ms[0].Kind != email.Kind(email.PasswordReset) {
		t.Fatalf("outbox to %s: %+v", hEmail, ms)
	}
	if ms[0].Locale != "ja" {
		t.Errorf("the reset message's locale %q, want ja", ms[0].Locale)
	}
	// The reset link's page is in the browser's language (nothing says
	// otherwise): English here.
	if got := pageLang(t, b.get(h.lastLink(hEmail, ms[0].Kind))); got != "en" {
		t.Errorf("reset link page in %q", got)
	}
}

// TestMailNamesTheBrand: a message names the site as the page's branding
// does, else by the issuer's host; its locale is the page's language.
func TestMailNamesTheBrand(t *testing.T) {
	h := newMailHarness(t)
	for _, c := range []struct {
		f          webui.Frame
		site, lang string
	}{
		{webui.Frame{}, email.Site(h.p.cfg.Issuer), "en"},
		{webui.Frame{Lang: language.French, Brand: webui.Brand{DisplayName: "Acme Books"}}, "Acme Books", "fr"},
		{webui.Frame{Lang: language.Make("de-AT")}, email.Site(h.p.cfg.Issuer), "de"},
		{webui.Frame{Lang: language.Korean}, email.Site(h.p.cfg.Issuer), "en"},
	} {
		m, err := h.p.outgoing(c.f, email.PasswordReset, hEmail, hUser, email.Data{Link: "https://x.example/l", Expires: resetTTL})
		if err != nil {
			t.Fatal(err)
		}
		if m.Locale != c.lang {
			t.Errorf("%v: locale %q, want %q", c.f, m.Locale, c.lang)
		}
		e := fsm.Email{To: m.To, Kind: m.Kind, Locale: m.Locale, Body: m.Body}
		msg, err := email.Open(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(msg.Subject+msg.Text, c.site) {
			t.Errorf("%v: the message does not name %q:\n%s\n%s", c.f, c.site, msg.Subject, msg.Text)
		}
	}
}

// TestRegistrationKeepsTheSignInLanguage: a registration started from a
// sign-in with ui_locales=es is Spanish throughout: its page, its
// message (locale es), and the link's page even in another browser
// that prefers German, which wears the organization's branding.
func TestRegistrationKeepsTheSignInLanguage(t *testing.T) {
	h := newMailHarness(t)
	h.openRegistration("allowed.example")
	h.apply(fsm.TypeUpdateOrg, fsm.UpdateOrg{ID: hOrgA, Branding: &fsm.Branding{DisplayName: "Alpha Sign-in"}})
	es := language.Spanish
	b := h.browser()
	q := authzQuery(hPublic, false)
	q.Set("ui_locales", "es-MX")
	signin := b.get(authzPath(q))
	rp := b.get(oneHref(t, signin, testUI().Text(es, "signin.register")))
	if got := pageLang(t, rp); rp.status != http.StatusOK || got != "es" || !strings.Contains(rp.body, inLang(es, keyRegisterLead, "Org alpha")) {
		t.Fatalf("registration page: %d in %q:\n%s", rp.status, got, rp.body)
	}
	bad := b.fill(onlyPostForm(t, rp), map[string]string{"email": "someone@evil.example"})
	if got := pageLang(t, bad); bad.status != http.StatusBadRequest || got != "es" || !strings.Contains(bad.body, inLang(es, keyRegisterDomain, "allowed.example")) {
		t.Fatalf("a domain not allowed: %d in %q:\n%s", bad.status, got, bad.body)
	}
	const addr = "nueva@allowed.example"
	p := b.fill(onlyPostForm(t, bad), map[string]string{"email": addr})
	if p.status != http.StatusOK || !strings.Contains(p.body, inLang(es, keyRegisterSent, addr)) {
		t.Fatalf("registration sent: %d:\n%s", p.status, p.body)
	}
	ms := h.mailsTo(addr)
	if len(ms) != 1 || ms[0].Locale != "es" {
		t.Fatalf("the registration message: %+v, want one in es", ms)
	}
	if !strings.Contains(ms[0].msg.Text, "Alpha Sign-in") {
		t.Errorf("the message does not name the organization's brand:\n%s", ms[0].msg.Text)
	}
	other := h.browser()
	lp := other.getIn(h.lastLink(addr, fsm.EmailRegistration), "de")
	if got := pageLang(t, lp); lp.status != http.StatusOK || got != "es" {
		t.Fatalf("the link's page: %d in %q:\n%s", lp.status, got, lp.body)
	}
	for _, want := range []string{`<span class="site">Alpha Sign-in</span>`, inLang(es, keyRegisterPwTitle), inLang(es, keyRegisterPwLeadOrg, "Org alpha"), inLang(es, keyCreateAccount)} {
		if !strings.Contains(lp.body, want) {
			t.Errorf("the link's page lacks %q:\n%s", want, lp.body)
		}
	}
	short := other.fill(onlyPostForm(t, lp), map[string]string{"new_password": "short"})
	if got := pageLang(t, short); short.status != http.StatusBadRequest || got != "es" || !strings.Contains(short.body, inLang(es, keyPasswordLength)) {
		t.Errorf("a short password on the link's page: %d in %q", short.status, got)
	}
	// The request it goes on with asks for Spanish too.
	fin := other.fill(onlyPostForm(t, short), map[string]string{"new_password": "long enough passphrase"})
	loc, err := url.Parse(fin.header.Get("Location"))
	if fin.status != http.StatusSeeOther || err != nil || loc.Path != "/authorize" || loc.Query().Get("ui_locales") != "es" || loc.Query().Get("client_id") != hPublic {
		t.Errorf("registration done: %d to %q, want /authorize with ui_locales=es", fin.status, fin.header.Get("Location"))
	}
}
