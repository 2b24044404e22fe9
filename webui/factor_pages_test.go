package webui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFactorPagesEscapeAndCarryTheirInputs: the second-factor era pages
// escape what they show, carry their autocomplete tokens, and only the
// passkey page has script, from our own origin.
func TestFactorPagesEscapeAndCarryTheirInputs(t *testing.T) {
	u, err := New()
	if err != nil {
		t.Fatal(err)
	}
	c := Common{Title: hostile, AppName: hostile, CSRFToken: "csrf", Action: "/account", Step: "step"}
	cases := []struct {
		name       string
		render     func(w http.ResponseWriter)
		want       []string
		wantScript bool
	}{
		{"smscode", func(w http.ResponseWriter) {
			u.SMSCode(w, 200, SMSCodePage{Common: c, Phone: hostile, Error: hostile})
		}, []string{`autocomplete="one-time-code"`, `<button type="submit" class="primary">`}, false},
		{"account", func(w http.ResponseWriter) {
			u.Account(w, 200, AccountPage{Common: c, Email: hostile, HasTOTP: true, RecoveryLeft: 3, PasskeysEnabled: true,
				Passkeys: []PasskeyLine{{ID: hostile, Name: hostile, Created: hostile}}, Notice: hostile, Error: hostile, EmailChange: true})
		}, []string{`value="totp-setup"`, `value="totp-remove"`, `value="passkey-add"`, `value="passkey-remove"`, `value="recovery-new"`,
			`value="email-change"`, `name="new_email" type="email" autocomplete="email"`}, false},
		{"totpsetup", func(w http.ResponseWriter) {
			u.TOTPSetup(w, 200, TOTPSetupPage{Common: c, Secret: hostile, URI: "javascript:alert(1)", Error: hostile})
		}, []string{`autocomplete="one-time-code"`, `value="totp-confirm"`}, false},
		{"recoverycodes", func(w http.ResponseWriter) {
			u.RecoveryCodes(w, 200, RecoveryCodesPage{Title: hostile, Codes: []string{hostile}, BackURL: "/account"})
		}, nil, false},
		{"passkey hostile options", func(w http.ResponseWriter) {
			u.Passkey(w, 200, PasskeyPage{Common: c, Ceremony: CeremonyCreate, Options: `{"a":"</script><script>alert(1)</script>"}`,
				Field: "action", Method: "passkey-finish", Error: hostile})
		}, []string{`name="action" value="passkey-finish"`, `>null</script>`, `autocomplete="off"`}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.render(rec)
			body := rec.Body.String()
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img") || strings.Contains(body, "javascript:") {
				t.Fatalf("hostile markup survived:\n%s", body)
			}
			if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("hostile text not shown escaped:\n%s", body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("missing %s", w)
				}
			}
			csp := rec.Header().Get("Content-Security-Policy")
			scripts := strings.Count(body, "<script")
			if tc.wantScript {
				if scripts != 2 || !strings.Contains(body, `<script src="/static/passkey.js?v=`) || !strings.Contains(csp, "script-src 'self'") {
					t.Errorf("passkey page: %d script elements, CSP %q", scripts, csp)
				}
			} else if scripts != 0 || strings.Contains(csp, "script-src") {
				t.Errorf("%d script elements, CSP %q on a page without script", scripts, csp)
			}
			if strings.Contains(csp, "unsafe-inline") {
				t.Errorf("CSP %q", csp)
			}
		})
	}
}

func TestJSONData(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"publicKey":{"challenge":"abc"}}`, `{"publicKey":{"challenge":"abc"}}`},
		{`{"x":"\u003c/script\u003e"}`, `{"x":"\u003c/script\u003e"}`},
		{`{"x":"</script>"}`, "null"},
		{`not json`, "null"},
		{``, "null"},
	} {
		if got := string(jsonData(tc.in)); got != tc.want {
			t.Errorf("jsonData(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
