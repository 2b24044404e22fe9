package signin

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/webui"
)

var htmlLangRE = regexp.MustCompile(`<html lang="([^"]*)">`)

// pageLang is the <html lang> of a page.
func pageLang(t *testing.T, p page) string {
	t.Helper()
	m := htmlLangRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no <html lang> (status %d):\n%s", p.status, p.body)
	}
	return m[1]
}

// getIn is GET ref with an Accept-Language header.
func (b *browser) getIn(ref, acceptLanguage string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.abs(ref), nil)
	if err != nil {
		b.t.Fatal(err)
	}
	if acceptLanguage != "" {
		req.Header.Set("Accept-Language", acceptLanguage)
	}
	return b.do(req)
}

// TestSignInLanguage: the sign-in page's language is the request's
// ui_locales, else the picked one, else Accept-Language, else English;
// every turn of the request keeps it, errors included.
func TestSignInLanguage(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		name, uiLocales, accept, want string
	}{
		{"nothing", "", "", "en"},
		{"Accept-Language", "", "de-AT,de;q=0.9,en;q=0.5", "de"},
		{"ui_locales beats Accept-Language", "ja-JP fr", "de", "ja"},
		{"unknown ui_locales", "ko", "es-MX", "es"},
		{"unknown everything", "", "ko, zh", "en"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := h.browser()
			q := authzQuery(hPublic, false)
			if c.uiLocales != "" {
				q.Set("ui_locales", c.uiLocales)
			}
			p := b.getIn(authzPath(q), c.accept)
			if got := pageLang(t, p); got != c.want {
				t.Fatalf("page in %q, want %q", got, c.want)
			}
			// A wrong password: the next turn (a POST, no Accept-Language)
			// is in the same language when ui_locales chose it.
			p = b.signIn(p, hEmail, "wrong")
			want := c.want
			if c.uiLocales == "" || i18n.UILocale(c.uiLocales) == "" {
				want = "en" // the POST carries no Accept-Language
			}
			if got := pageLang(t, p); p.status != http.StatusBadRequest || got != want {
				t.Fatalf("after a wrong password: status %d in %q, want 400 in %q", p.status, got, want)
			}
			msg := testText(t, language.Make(want), msgBadPassword)
			if !strings.Contains(p.body, msg) {
				t.Errorf("the page lacks %q:\n%s", msg, p.body)
			}
		})
	}
}

// TestLanguagePicker: picking a language on the sign-in page shows it
// there, keeps the request going, and is remembered in a cookie that
// beats Accept-Language but not ui_locales.
func TestLanguagePicker(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.getIn(authzPath(authzQuery(hPublic, false)), "de")
	if got := pageLang(t, p); got != "de" {
		t.Fatalf("page in %q, want de", got)
	}

	// Junk is refused quietly: the page stays, nothing is remembered.
	p = b.submit(formWith(t, p, "method", methodLanguage), "method", methodLanguage, map[string]string{"lang": "<x>"})
	if p.status != http.StatusOK || b.cookie("/", webui.LangCookie) != "" {
		t.Fatalf("junk language: status %d, cookie %q", p.status, b.cookie("/", webui.LangCookie))
	}

	p = b.submit(formWith(t, p, "method", methodLanguage), "method", methodLanguage, map[string]string{"lang": "fr"})
	if got := pageLang(t, p); p.status != http.StatusOK || got != "fr" {
		t.Fatalf("after picking fr: status %d in %q", p.status, got)
	}
	if got := b.cookie("/", webui.LangCookie); got != "fr" {
		t.Errorf("cookie %s = %q, want fr", webui.LangCookie, got)
	}
	// The request goes on from the French page.
	if got := done(t, b.signIn(p, hEmail, hPassword)); got.User != hUser {
		t.Errorf("signed in as %q, want %q", got.User, hUser)
	}

	// Remembered: in another request of a browser with the cookie (and
	// no session), it beats Accept-Language...
	b2 := h.browser()
	srv, err := url.Parse(b2.abs("/"))
	if err != nil {
		t.Fatal(err)
	}
	b2.jar.SetCookies(srv, []*http.Cookie{{Name: webui.LangCookie, Value: b.cookie("/", webui.LangCookie), Path: "/"}})
	if got := pageLang(t, b2.getIn(authzPath(authzQuery(hPublic, false)), "de")); got != "fr" {
		t.Errorf("new request with the cookie: %q, want fr", got)
	}
	// ...but ui_locales beats it, until the person picks again in that
	// request.
	q := authzQuery(hPublic, false)
	q.Set("ui_locales", "es")
	p = b2.getIn(authzPath(q), "de")
	if got := pageLang(t, p); got != "es" {
		t.Fatalf("ui_locales es with the cookie fr: %q, want es", got)
	}
	p = b2.submit(formWith(t, p, "method", methodLanguage), "method", methodLanguage, map[string]string{"lang": "ja"})
	if got := pageLang(t, p); got != "ja" {
		t.Fatalf("picked ja over ui_locales es: %q", got)
	}
	p = b2.signIn(p, hEmail, "wrong")
	if got := pageLang(t, p); got != "ja" {
		t.Errorf("the next turn of the request: %q, want ja", got)
	}
}

// TestLanguageCookieFlags: the remembered language is HttpOnly,
// SameSite=Lax, path /, and lasts about a year.
func TestLanguageCookieFlags(t *testing.T) {
	h := newHarness(t)
	b := h.browser()
	p := b.get(authzPath(authzQuery(hPublic, false)))
	f := formWith(t, p, "method", methodLanguage)
	v := url.Values{}
	for k, vs := range f.hidden {
		v[k] = vs
	}
	v.Set("method", methodLanguage)
	v.Set("lang", "de")
	p = b.post(f.action, v)
	var set string
	for _, c := range p.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, webui.LangCookie+"=") {
			set = c
		}
	}
	for _, want := range []string{"oidcd_lang=de", "Path=/", "HttpOnly", "SameSite=Lax", "Expires="} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
}
