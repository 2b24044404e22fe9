package oidc

import (
	"html"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/webui"
)

// TestFlowInUILocales: with ui_locales=ja every page of the flow after
// the sign-in page is in Japanese, the texts its callers pass included:
// the second-factor page and its error, the consent page with its scope
// lines, the page after a refusal. An error page before any request is
// known is in the language of Accept-Language, its developer's line too.
func TestFlowInUILocales(t *testing.T) {
	h := newHarness(t)
	ui, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	ja := language.Japanese
	want := func(name string, p page, tag language.Tag, texts ...string) {
		t.Helper()
		if !strings.Contains(p.body, `<html lang="`+tag.String()+`">`) {
			t.Errorf("%s: not in %s:\n%s", name, tag, p.body)
		}
		for _, s := range texts {
			if !strings.Contains(p.body, html.EscapeString(s)) {
				t.Errorf("%s: lacks %q:\n%s", name, s, p.body)
			}
		}
	}
	// An authenticator app (what makes mfa possible) and recovery codes
	// (the page offers both).
	secret, _, err := factor.NewTOTPSecret("idp.example", hEmail)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := (*kek.KEK)(nil).Seal([]byte(secret), factor.TOTPAAD(hUser))
	if err != nil {
		t.Fatal(err)
	}
	h.apply(fsm.TypeSetTOTP, fsm.SetTOTP{UserID: hUser, Secret: sealed, At: h.clock.Now()})
	_, hashes := factor.NewRecoveryCodes()
	h.apply(fsm.TypeSetRecoveryCodes, fsm.SetRecoveryCodes{UserID: hUser, Hashes: hashes, At: h.clock.Now()})

	b := h.browser()
	q := authzQuery(hConfidential, map[string]string{"acr_values": ACRMFA, "ui_locales": "ja", "scope": "openid email profile"})
	p := b.signIn(b.get(authzPath(q)), hEmail, hPassword)
	want("second factor", p, ja, ui.Text(ja, "secondfactor.title"), ui.Text(ja, "secondfactor.code.otp_recovery"), ui.Text(ja, "secondfactor.recovery.submit"))
	p = b.submit(postForm(t, p, "method"), "method", webui.MethodRecovery, map[string]string{"code": "not-a-code"})
	if p.status != http.StatusBadRequest {
		t.Fatalf("wrong code: %d\n%s", p.status, p.body)
	}
	want("wrong code", p, ja, ui.Text(ja, "code.error.wrong"))
	code, err := factor.TOTPCode(secret, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	p = b.submit(postForm(t, p, "method"), "method", webui.MethodOTP, map[string]string{"code": code})
	want("consent", p, ja, ui.Text(ja, "consent.title"), ui.Text(ja, "consent.allow"), ui.Text(ja, "consent.scope.openid"),
		ui.Text(ja, "consent.scope.email"), ui.Text(ja, "consent.scope.profile"))
	p = b.submit(postForm(t, p, "decision"), "decision", decisionDeny, nil)
	want("declined", p, ja, ui.Text(ja, "consent.declined.title"), ui.Text(ja, "consent.declined", "Confidential App"))

	// A request that cannot be honoured: no pending request to say
	// otherwise, so Accept-Language decides.
	for _, c := range []struct {
		path, accept string
		tag          language.Tag
		status       int
		key, detail  string
	}{
		{"/authorize?client_id=" + hConfidential, "de-DE,de;q=0.9", language.German, http.StatusBadRequest, msgBadRequest, detailRedirectURI},
		{PathAuthorize + "/nowhere", "es", language.Spanish, http.StatusNotFound, msgNotFound, ""},
		{"/authorize?client_id=" + hConfidential, "", language.English, http.StatusBadRequest, msgBadRequest, detailRedirectURI},
	} {
		req, err := http.NewRequest(http.MethodGet, b.abs(c.path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept-Language", c.accept)
		p := h.browser().do(req)
		wantErrorPage(t, p, c.status)
		want(c.path+" "+c.accept, p, c.tag, ui.Text(c.tag, "error.title"), ui.Text(c.tag, c.key), ui.Text(c.tag, c.detail), ui.Text(c.tag, "error.hint.reference"))
	}
}

// TestScopeLines: every scope a request may name has its consent line in
// the catalog.
func TestScopeLines(t *testing.T) {
	ui, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range authzScopes {
		if key := "consent.scope." + s; ui.Text(language.English, key) == key {
			t.Errorf("scope %s has no line %s", s, key)
		}
	}
}

// TestErrorPageLanguage: the error page of a request whose client or
// redirect URI is wrong (no client known yet, nothing pending) is in the
// language the sign-in page would be: the request's ui_locales first
// (its first supported tag), then the language picked (webui.LangCookie),
// then Accept-Language; its heading, message and developer's line all.
func TestErrorPageLanguage(t *testing.T) {
	h := newHarness(t)
	badClient := authzQuery("no-such-client")
	badRedirect := authzQuery(hConfidential, map[string]string{"redirect_uri": "https://evil.example/cb"})
	with := func(q url.Values, uiLocales string) string {
		return authzPath(authzQueryMods(maps.Clone(q), map[string]string{"ui_locales": uiLocales}))
	}
	for _, c := range []struct {
		name, path, accept, cookie string
		lang                       string
		texts                      []string
	}{
		{"ui_locales over Accept-Language", with(badClient, "de"), "fr", "", "de",
			[]string{"Etwas ist schiefgelaufen", "Diese Anmeldeanfrage ist ungültig.", "Die client_id fehlt oder ist unbekannt"}},
		{"first supported tag of ui_locales", with(badRedirect, "tlh ja"), "es", "", "ja",
			[]string{"問題が発生しました", "このログイン要求は無効です。", "redirect_uri がないか、このアプリケーションに登録されていません。"}},
		{"ui_locales over the language picked", with(badRedirect, "es-MX"), "", "fr", "es",
			[]string{"Algo ha salido mal", "Falta la redirect_uri"}},
		{"the language picked over Accept-Language", with(badClient, "tlh"), "de", "fr", "fr",
			[]string{"Une erreur s’est produite", "Le client_id est absent ou inconnu"}},
		{"Accept-Language", authzPath(badRedirect), "ja-JP,en;q=0.5", "", "ja",
			[]string{"問題が発生しました", "redirect_uri がないか"}},
		{"a malformed query in its ui_locales", "/authorize?ui_locales=de&client_id=%zz", "", "", "de",
			[]string{"Etwas ist schiefgelaufen", "Diese Anmeldeanfrage ist ungültig."}},
		{"a page under /authorize that does not exist", PathAuthorize + "/nowhere?ui_locales=fr", "de", "", "fr",
			[]string{"Une erreur s’est produite", "Cette page n’existe pas."}},
		{"nothing asked", authzPath(badClient), "", "", "en",
			[]string{"Something went wrong", "The client_id is missing, unknown"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, h.srv.URL+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept-Language", c.accept)
			if c.cookie != "" {
				req.AddCookie(&http.Cookie{Name: webui.LangCookie, Value: c.cookie})
			}
			p := h.browser().do(req)
			if p.status != http.StatusBadRequest && p.status != http.StatusNotFound {
				t.Fatalf("status %d, want an error page:\n%s", p.status, p.body)
			}
			if want := `<html lang="` + c.lang + `">`; !strings.Contains(p.body, want) {
				t.Errorf("got %s, want %s", htmlLang(p.body), want)
			}
			for _, s := range c.texts {
				if !strings.Contains(p.body, html.EscapeString(s)) {
					t.Errorf("lacks %q:\n%s", s, p.body)
				}
			}
		})
	}
}

// htmlLang is the page's <html lang="…"> tag, for a message.
func htmlLang(body string) string {
	i := strings.Index(body, "<html")
	if i < 0 {
		return "no <html>"
	}
	j := strings.IndexByte(body[i:], '>')
	if j < 0 {
		return body[i:]
	}
	return body[i : i+j+1]
}
