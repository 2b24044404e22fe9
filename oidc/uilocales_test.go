package oidc

import (
	"net/http"
	"strings"
	"testing"
)

// TestUILocales: the authorization request's ui_locales chooses the
// sign-in page's language, over Accept-Language, on every step of the
// request (it travels sealed with it); without one, or with none
// supported, Accept-Language does.
func TestUILocales(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, uiLocales, accept, wantLang, wantH1 string
	}{
		{"ui_locales", "de-CH en", "fr", "de", "Anmelden"},
		{"first supported of ui_locales", "ko ja", "", "ja", "ログイン"},
		// CLDR falls back from Klingon to English; the person named Spanish.
		{"first tag unsupported, then Spanish", "tlh es", "de", "es", "Iniciar sesión"},
		{"none supported", "ko", "es-419", "es", "Iniciar sesión"},
		{"none", "", "", "en", "Sign in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := h.browser()
			q := authzQuery(hPublic)
			if tc.uiLocales != "" {
				q.Set("ui_locales", tc.uiLocales)
			}
			req, err := http.NewRequest(http.MethodGet, b.abs(authzPath(q)), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept-Language", tc.accept)
			p := b.do(req)
			if want := `<html lang="` + tc.wantLang + `">`; p.status != http.StatusOK || !strings.Contains(p.body, want) {
				t.Fatalf("status %d, want 200 and %s:\n%s", p.status, want, p.body)
			}
			wantH1(t, p, tc.wantH1)
			// The next step, a POST without Accept-Language, keeps the
			// language ui_locales chose.
			p = b.signIn(p, hEmail, "wrong")
			want := tc.wantLang
			if tc.uiLocales == "" || tc.uiLocales == "ko" {
				want = "en"
			}
			if !strings.Contains(p.body, `<html lang="`+want+`">`) {
				t.Errorf("after a wrong password: want lang %s:\n%s", want, p.body)
			}
		})
	}
}
