package oidc

import (
	"html"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
)

// TestConsentSaysWho: the consent page names the person signed in, so
// that whoever shares their details knows whose they are: each person
// their own address, in the page's language.
func TestConsentSaysWho(t *testing.T) {
	h := newHarness(t)
	// The second person belongs to the app's organization too.
	h.apply(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{
		ID: "2c000000-0000-4000-8000-000000000003", UserID: hUserB, OrgID: hOrgA, Status: fsm.MembershipActive}})
	for _, c := range []struct {
		email, uiLocales, lang, want string
	}{
		{hEmail, "", "en", "Signed in as <strong>" + html.EscapeString(hEmail) + "</strong>"},
		{hEmailB, "", "en", "Signed in as <strong>" + html.EscapeString(hEmailB) + "</strong>"},
		{hEmail, "ja", "ja", "<strong>" + html.EscapeString(hEmail) + "</strong> としてログインしています"},
		{hEmailB, "de", "de", "Angemeldet als <strong>" + html.EscapeString(hEmailB) + "</strong>"},
	} {
		t.Run(c.email+" "+c.lang, func(t *testing.T) {
			b := h.browser()
			q := authzQuery(hConfidential, map[string]string{"scope": "openid email profile", "ui_locales": c.uiLocales})
			p := b.signIn(b.get(authzPath(q)), c.email, hPassword)
			if len(parseForms(t, p.body)) == 0 || !strings.Contains(p.body, `name="decision"`) {
				t.Fatalf("status %d, want the consent page:\n%s", p.status, p.body)
			}
			if !strings.Contains(p.body, `<html lang="`+c.lang+`">`) {
				t.Errorf("got %s, want lang %s", htmlLang(p.body), c.lang)
			}
			if !strings.Contains(p.body, c.want) {
				t.Errorf("the consent page lacks %q:\n%s", c.want, p.body)
			}
			for _, other := range []string{hEmail, hEmailB} {
				if other != c.email && strings.Contains(p.body, html.EscapeString(other)) {
					t.Errorf("the consent page names %s, who is not signed in", other)
				}
			}
		})
	}
}
