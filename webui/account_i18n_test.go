package webui

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/language"
)

// TestAccountPagesInEachLanguage renders /account and the self-service
// pages, every part shown, in German and Japanese: <html lang> names the
// language, each text the test names is its catalog's (so no English
// is left in them), and no argument is missing.
func TestAccountPagesInEachLanguage(t *testing.T) {
	u := newUI(t)
	all := readCatalogs(t)
	when := time.Date(2026, time.March, 4, 17, 5, 0, 0, time.UTC)
	for _, tag := range []language.Tag{language.German, language.Japanese} {
		c := sampleCommon
		c.Lang = tag
		noTitle := c
		noTitle.AppName = ""
		date := u.DateTime(tag, when)
		for _, pg := range []struct {
			name   string
			render func(w http.ResponseWriter)
			keys   []string
			// texts are formatted messages: key and arguments.
			texts [][]any
		}{
			{"account", func(w http.ResponseWriter) {
				u.Account(w, 200, AccountPage{Common: noTitle, Email: "ada@example.com", HasTOTP: true, RecoveryLeft: 7, PasskeysEnabled: true,
					HasPassword: true, EmailChange: true, LanguagePicker: true,
					Passkeys: []PasskeyLine{{ID: "cGs", Name: "YubiKey", Created: date}},
					Sessions: []SessionLine{{ID: "s1", Started: date, Strength: u.Text(tag, "account.strength.mfa"), Apps: []string{"Books", "Mail"}, Current: true},
						{ID: "s2", Started: date}},
					Apps:     []ConsentLine{{ClientID: "books", Name: "Books", Scopes: "openid email", Granted: date}},
					Activity: []ActivityLine{{Time: date, App: "Books", Address: "192.0.2.1", Strength: u.Text(tag, "account.strength.pwd"), OK: true}, {Time: date, App: "Mail", Address: "192.0.2.2"}}})
			}, []string{"account.title", "account.totp.heading", "account.totp.on", "account.totp.replace", "account.totp.remove",
				"account.passkeys.heading", "account.passkeys.remove", "account.passkeys.add", "account.recovery.heading", "account.recovery.new",
				"account.password.heading", "account.password.current", "account.password.new", "account.password.hint", "account.password.submit",
				"account.email.heading", "account.email.unconfirmed", "account.email.new", "account.email.hint", "account.email.hint_confirm", "account.email.submit",
				"account.sessions.heading", "account.sessions.this_browser", "account.sessions.sign_out", "account.sessions.sign_out_others",
				"account.apps.heading", "account.apps.revoke", "account.activity.heading", "account.activity.when", "account.activity.app",
				"account.activity.address", "account.activity.result", "account.activity.failed", "account.sign_out", "lang.label", "lang.choose"},
				[][]any{{"account.recovery.left", 7}, {"account.passkeys.added", date}, {"account.sessions.since", date},
					{"account.apps.scopes_since", "openid email", date}, {"account.activity.ok_with", u.Text(tag, "account.strength.pwd")},
					{"account.parenthesis", u.Text(tag, "account.strength.mfa")}}},
			{"account empty", func(w http.ResponseWriter) {
				u.Account(w, 200, AccountPage{Common: noTitle, Email: "ada@example.com", EmailChange: true, EmailVerified: true})
			}, []string{"account.totp.off", "account.totp.set_up", "account.passkeys.none", "account.apps.none", "account.activity.none", "account.email.confirmed"},
				[][]any{{"account.recovery.left", 0}}},
			{"account passkeys off", func(w http.ResponseWriter) {
				u.Account(w, 200, AccountPage{Common: noTitle, Email: "ada@example.com", PasskeysOff: u.Text(tag, "account.passkeys.off", "127.0.0.1")})
			}, nil, [][]any{{"account.passkeys.off", "127.0.0.1"}}},
			{"totp", func(w http.ResponseWriter) {
				u.TOTPSetup(w, 200, TOTPSetupPage{Common: noTitle, Secret: "JBSWY3DPEHPK3PXP", URI: "otpauth://totp/x", QRURL: "/account/totp.png", QRSize: 200})
			}, []string{"totp.title", "totp.lead", "totp.open", "totp.code.label", "totp.submit", "totp.cancel", "totp.qr.alt", "totp.key"}, nil},
			{"recovery codes", func(w http.ResponseWriter) {
				u.RecoveryCodes(w, 200, RecoveryCodesPage{Frame: c.Frame, Codes: []string{"aaaa-bbbb"}, BackURL: "/account"})
			}, []string{"recovery.title", "recovery.lead", "recovery.back"}, nil},
			{"address", func(w http.ResponseWriter) {
				u.Address(w, 200, AddressPage{Common: c, BackURL: "/authorize?x", LanguagePicker: true})
			}, []string{"address.title", "address.email.label", "address.submit", "address.back", "lang.label", "lang.choose"}, nil},
			{"new password", func(w http.ResponseWriter) {
				u.NewPassword(w, 200, NewPasswordPage{Common: c, Email: "ada@example.com", LanguagePicker: true})
			}, []string{"newpassword.title", "newpassword.label", "newpassword.hint", "newpassword.submit", "lang.label", "lang.choose"}, nil},
			{"confirm", func(w http.ResponseWriter) {
				u.Confirm(w, 200, ConfirmPage{Common: c, LanguagePicker: true})
			}, []string{"confirm.title", "confirm.submit", "lang.label", "lang.choose"}, nil},
		} {
			rec := httptest.NewRecorder()
			pg.render(rec)
			body := rec.Body.String()
			doc := parseHTML(t, body)
			if h := find(doc.root, func(n *node) bool { return n.tag == "html" }); h == nil || h.attr["lang"] != tag.String() {
				t.Errorf("%s, %s: <html> %v, want lang=%q", tag, pg.name, h, tag)
			}
			for _, key := range pg.keys {
				v, ok := all[tag][key].(string)
				if !ok || v == all[language.English][key] && key != "account.passkeys.heading" {
					t.Errorf("%s: %s is not translated: %q", tag, key, v)
				}
				if !strings.Contains(body, html.EscapeString(v)) {
					t.Errorf("%s, %s: the page lacks %s = %q", tag, pg.name, key, v)
				}
			}
			for _, m := range pg.texts {
				want := html.EscapeString(u.Text(tag, m[0].(string), m[1:]...))
				if !strings.Contains(body, want) {
					t.Errorf("%s, %s: the page lacks %v = %q", tag, pg.name, m, want)
				}
			}
			if strings.Contains(body, "%!") {
				t.Errorf("%s, %s: a formatting error on the page:\n%s", tag, pg.name, body)
			}
		}
		// The name of the address and of the app are in <strong>, inside
		// the language's sentence.
		rec := httptest.NewRecorder()
		u.Account(rec, 200, AccountPage{Common: noTitle, Email: "ada@example.com"})
		if want := strongIn(u, tag, "account.signed_in_as", "ada@example.com"); !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: the account page lacks %q", tag, want)
		}
		rec = httptest.NewRecorder()
		u.NewPassword(rec, 200, NewPasswordPage{Common: c, Email: "ada@example.com"})
		if want := strongIn(u, tag, "newpassword.for", "ada@example.com"); !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: the new-password page lacks %q", tag, want)
		}
	}
}

// strongIn is the message key with arg in <strong>, as tStrong writes it.
func strongIn(u *UI, tag language.Tag, key, arg string) string {
	before, after, _ := strings.Cut(u.Text(tag, key, "\x00"), "\x00")
	return fmt.Sprintf("%s<strong>%s</strong>%s", html.EscapeString(before), html.EscapeString(arg), html.EscapeString(after))
}

// TestDateTimeLayouts: /account's dates are written the language's way,
// in the zone of the time given (the caller passes UTC).
func TestDateTimeLayouts(t *testing.T) {
	u := newUI(t)
	when := time.Date(2026, time.March, 4, 17, 5, 0, 0, time.UTC)
	for _, c := range []struct {
		tag  language.Tag
		want string
	}{
		{language.English, "4 Mar 2026, 17:05 UTC"},
		{language.German, "04.03.2026, 17:05 UTC"},
		{language.French, "04/03/2026 17:05 UTC"},
		{language.Spanish, "04/03/2026 17:05 UTC"},
		{language.Japanese, "2026/03/04 17:05 UTC"},
	} {
		if got := u.DateTime(c.tag, when); got != c.want {
			t.Errorf("%s: %q, want %q", c.tag, got, c.want)
		}
	}
}
