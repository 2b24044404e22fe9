package signin

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/webui"
)

// wantIn checks that p is in the language tag and shows the catalog's
// texts of keys in it.
func wantIn(t *testing.T, name string, p page, tag language.Tag, keys ...string) {
	t.Helper()
	if got := pageLang(t, p); got != tag.String() {
		t.Errorf("%s: in %q, want %q", name, got, tag)
	}
	for _, k := range keys {
		if want := html.EscapeString(testText(t, tag, k)); !strings.Contains(p.body, want) {
			t.Errorf("%s: lacks %s = %q:\n%s", name, k, want, p.body)
		}
	}
}

// TestTextMessageInPageLanguage: with ui_locales=ja the code page, its
// errors and the text message itself are in Japanese.
func TestTextMessageInPageLanguage(t *testing.T) {
	box := &outbox{}
	h := newHarness(t, func(c *Config) { c.SMS = box })
	h.apply(fsm.TypeUpdateUser, fsm.UpdateUser{ID: hUser, Phone: ptr(hPhone), At: h.clock.Now()})
	b := h.browser()
	q := authzQuery(hPublic, false)
	q.Set("ui_locales", "ja")
	p := b.submit(postForm(t, b.get(authzPath(q)), "method"), "method", "sms", map[string]string{"phone": hPhone})
	if p.status != http.StatusOK {
		t.Fatalf("code page: %d\n%s", p.status, p.body)
	}
	wantIn(t, "code page", p, language.Japanese, "smscode.title", "smscode.code.label")
	msgs := box.sent()
	if len(msgs) != 1 {
		t.Fatalf("messages: %+v", msgs)
	}
	if want := testText(t, language.Japanese, msgSMSText, msgs[0].Code, h.p.issuer.Host, 5); msgs[0].Text != want {
		t.Errorf("text message %q, want %q", msgs[0].Text, want)
	}
	p = b.postCode(p, "12")
	if p.status != http.StatusBadRequest {
		t.Fatalf("short code: %d", p.status)
	}
	wantIn(t, "wrong code", p, language.Japanese, msgBadCode)
	p = b.postCode(p, "")
	wantIn(t, "no code", p, language.Japanese, msgNoCode)
}

// TestSecondFactorInPageLanguage: the second-factor page, and its error,
// are in the language Accept-Language asks for, and in the one
// ui_locales names over it.
func TestSecondFactorInPageLanguage(t *testing.T) {
	h := newHarness(t)
	h.enrollRecovery(hUser)
	for _, c := range []struct {
		ui, accept string
		want       language.Tag
	}{
		{"", "de-DE", language.German},
		{"ja", "de-DE", language.Japanese},
	} {
		b := h.browser()
		q := authzQuery(hPublic, true)
		if c.ui != "" {
			q.Set("ui_locales", c.ui)
		}
		p := b.getIn(authzPath(q), c.accept)
		p = b.submit(postForm(t, p, "method"), "method", "password", map[string]string{"email": hEmail, "password": hPassword})
		if c.ui == "" {
			// The POST carries no Accept-Language: the person picks the
			// language on the sign-in page instead.
			p = b.getIn(authzPath(q), c.accept)
		}
		if p.status != http.StatusOK {
			t.Fatalf("%s: second-factor page: %d\n%s", c.want, p.status, p.body)
		}
		wantIn(t, "second factor", p, c.want, "secondfactor.title", "secondfactor.code.recovery", "secondfactor.recovery.submit")
		p = b.submit(postForm(t, p, "method"), "method", webui.MethodRecovery, map[string]string{"code": "wrong-code"})
		if p.status != http.StatusBadRequest {
			t.Fatalf("%s: wrong code: %d", c.want, p.status)
		}
		if c.ui != "" {
			wantIn(t, "wrong code", p, c.want, msgBadCode)
		}
	}
}
