package logout

import (
	"html"
	"net/http"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/webui"
)

// TestLogoutPagesInTheirLanguage: the signed-out page and the error
// pages are in the language the frame gives (Accept-Language here) with
// the catalog's texts, and the signed-out page wears the branding of the
// client the request names; a refused request, whose client is not
// known, wears the site's.
func TestLogoutPagesInTheirLanguage(t *testing.T) {
	var (
		mu    sync.Mutex
		asked []string // the client ids the pages' frames were asked for
	)
	h := newHarness(t, func(c *Config) {
		c.FrontChannelWait = -1
		c.Frame = func(r *http.Request, clientID string) webui.Frame {
			mu.Lock()
			asked = append(asked, clientID)
			mu.Unlock()
			return webui.Frame{Lang: i18n.Negotiate("", "", r.Header.Get("Accept-Language")), Brand: webui.Brand{DisplayName: "Brand of " + clientID + "."}}
		}
	})
	ui, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	get := func(rawQuery, cookie, accept string) response {
		t.Helper()
		req, _ := http.NewRequest("GET", h.srv.URL+Path+"?"+rawQuery, nil)
		req.Header.Set("Accept-Language", accept)
		return h.do(req, cookie)
	}
	wantTexts := func(name string, r response, tag language.Tag, keys ...string) {
		t.Helper()
		if !strings.Contains(r.body, `<html lang="`+tag.String()+`">`) {
			t.Errorf("%s: not in %s:\n%s", name, tag, r.body)
		}
		for _, k := range keys {
			if want := html.EscapeString(ui.Text(tag, k)); !strings.Contains(r.body, want) {
				t.Errorf("%s: lacks %s = %q:\n%s", name, k, want, r.body)
			}
		}
	}

	sess := h.ssoSession(hUser)
	_, hint := h.signIn(sess, hUser, hAppA, hOrgA)
	r := get(q("id_token_hint", hint), sess.secret, "ja-JP,en;q=0.5")
	if r.status != http.StatusOK {
		t.Fatalf("signed out: %d\n%s", r.status, r.body)
	}
	wantTexts("signed out", r, language.Japanese, titleSignedOut, msgSignedOut)
	if want := "Brand of " + hAppA + "."; !strings.Contains(r.body, want) {
		t.Errorf("signed out: not in the client's branding %q:\n%s", want, r.body)
	}

	r = get(q("id_token_hint", "not-a-token"), "", "de-DE")
	if r.status != http.StatusBadRequest {
		t.Fatalf("bad hint: %d\n%s", r.status, r.body)
	}
	wantTexts("bad hint", r, language.German, titleInvalid, msgInvalid, "error.reference")
	mu.Lock()
	defer mu.Unlock()
	if asked[len(asked)-1] != "" {
		t.Errorf("a refused request's page asked for the branding of %q", asked[len(asked)-1])
	}
}
