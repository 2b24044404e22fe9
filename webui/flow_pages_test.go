package webui

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/text/language"
)

// TestFlowPagesInEachLanguage renders each page of the sign-in flow, with
// every part shown, in German and Japanese (and English, the default):
// <html lang> names the language, the texts are its catalog's (the keys
// listed, the ones with an argument formatted with it), and none is
// English where the language has its own.
func TestFlowPagesInEachLanguage(t *testing.T) {
	u := newUI(t)
	all := readCatalogs(t)
	type want struct {
		key  string
		args []any
	}
	pages := []struct {
		name   string
		render func(w http.ResponseWriter, c Common)
		keys   []want
	}{
		{"secondfactor", func(w http.ResponseWriter, c Common) {
			u.SecondFactor(w, http.StatusOK, SecondFactorPage{Common: c, Methods: []string{MethodOTP, MethodRecovery, MethodPasskey}, Error: u.Text(c.Lang, "code.error.wrong")})
		}, []want{{key: "secondfactor.title"}, {key: "secondfactor.code.otp_recovery"}, {key: "secondfactor.otp.submit"}, {key: "secondfactor.recovery.submit"}, {key: "secondfactor.passkey.submit"}, {key: "signin.or"}, {key: "code.error.wrong"}}},
		{"secondfactor-otp", func(w http.ResponseWriter, c Common) {
			u.SecondFactor(w, http.StatusOK, SecondFactorPage{Common: c, Methods: []string{MethodOTP}})
		}, []want{{key: "secondfactor.code.otp"}}},
		{"secondfactor-recovery", func(w http.ResponseWriter, c Common) {
			u.SecondFactor(w, http.StatusOK, SecondFactorPage{Common: c, Methods: []string{MethodRecovery}})
		}, []want{{key: "secondfactor.code.recovery"}}},
		{"smscode", func(w http.ResponseWriter, c Common) {
			u.SMSCode(w, http.StatusOK, SMSCodePage{Common: c, Phone: "••••4567", Error: u.Text(c.Lang, "code.error.missing")})
		}, []want{{key: "smscode.title"}, {key: "smscode.code.label"}, {key: "signin.submit"}, {key: "code.error.missing"}}},
		{"passkey-get", func(w http.ResponseWriter, c Common) {
			u.Passkey(w, http.StatusOK, PasskeyPage{Common: c, Ceremony: CeremonyGet, Options: `{"publicKey":{}}`, Method: MethodPasskey, CancelURL: "/back", Error: u.Text(c.Lang, "passkey.error.failed")})
		}, []want{{key: "passkey.title"}, {key: "passkey.prompt.get"}, {key: "passkey.get.submit"}, {key: "passkey.other_method"}, {key: "passkey.unsupported"}, {key: "passkey.prompt_failed", args: []any{"%s"}}, {key: "passkey.error.failed"}}},
		{"passkey-create", func(w http.ResponseWriter, c Common) {
			u.Passkey(w, http.StatusOK, PasskeyPage{Common: c, Ceremony: CeremonyCreate, Options: `{"publicKey":{}}`, Field: "action", Method: "passkey-add"})
		}, []want{{key: "passkey.prompt.create"}, {key: "passkey.name.label"}, {key: "passkey.name.default"}, {key: "passkey.create.submit"}}},
		{"picker", func(w http.ResponseWriter, c Common) {
			u.OrganizationPicker(w, http.StatusOK, PickerPage{Common: c, Orgs: []PickerOrg{{ID: "o1", Name: "Acme", Slug: "acme"}}, PrevURL: "/p", NextURL: "/n", Error: u.Text(c.Lang, "picker.error.choose")})
		}, []want{{key: "picker.title"}, {key: "picker.search.label"}, {key: "picker.search.submit"}, {key: "picker.pages"}, {key: "picker.previous"}, {key: "picker.next"}, {key: "picker.error.choose"}}},
		{"picker-empty", func(w http.ResponseWriter, c Common) {
			u.OrganizationPicker(w, http.StatusOK, PickerPage{Common: c})
		}, []want{{key: "picker.empty"}}},
		{"consent", func(w http.ResponseWriter, c Common) {
			u.Consent(w, http.StatusOK, ConsentPage{Common: c, OrgName: "Acme Corp", Scopes: []ScopeLine{{Name: "email", Description: u.Text(c.Lang, "consent.scope.email")}}})
		}, []want{{key: "consent.title"}, {key: "consent.allow"}, {key: "consent.deny"}, {key: "consent.scope.email"}}},
		{"consent-no-app", func(w http.ResponseWriter, c Common) {
			c.AppName = ""
			u.Consent(w, http.StatusOK, ConsentPage{Common: c})
		}, []want{{key: "consent.this_app"}}},
		{"error", func(w http.ResponseWriter, c Common) {
			u.Error(w, http.StatusBadRequest, ErrorPage{Frame: c.Frame, Message: u.Text(c.Lang, "error.bad_request"), Detail: "The state must be 8 to 1024 bytes long.", Reference: "ref-1"})
		}, []want{{key: "error.title"}, {key: "error.bad_request"}, {key: "error.developer"}, {key: "error.reference"}, {key: "error.hint.reference"}}},
		{"error-unavailable", func(w http.ResponseWriter, c Common) {
			u.Error(w, http.StatusServiceUnavailable, ErrorPage{Frame: c.Frame, Title: u.Text(c.Lang, "error.unavailable.title"), Message: u.Text(c.Lang, "error.unavailable")})
		}, []want{{key: "error.unavailable.title"}, {key: "error.unavailable"}, {key: "error.hint"}}},
		{"message", func(w http.ResponseWriter, c Common) {
			u.Message(w, http.StatusOK, MessagePage{Frame: c.Frame, Message: u.Text(c.Lang, "logout.done")})
		}, []want{{key: "message.title"}, {key: "logout.done"}}},
	}
	// sameWord are the texts a language writes as English does.
	sameWord := map[string]bool{"de passkey.name.default": true}
	for _, tag := range []language.Tag{language.English, language.German, language.Japanese} {
		for _, p := range pages {
			c := sampleCommon
			c.Lang = tag
			rec := httptest.NewRecorder()
			p.render(rec, c)
			body := rec.Body.String()
			if !strings.Contains(body, `<html lang="`+tag.String()+`">`) {
				t.Errorf("%s %s: no <html lang=%q>", tag, p.name, tag)
			}
			for _, k := range p.keys {
				want := u.Text(tag, k.key, k.args...)
				if _, ok := all[tag][k.key]; !ok || want == "" {
					t.Errorf("%s %s: the catalog lacks %s", tag, p.name, k.key)
					continue
				}
				if !strings.Contains(body, html.EscapeString(want)) {
					t.Errorf("%s %s: the page lacks %s = %q", tag, p.name, k.key, want)
				}
				if en := u.Text(language.English, k.key, k.args...); tag != language.English && en == want && !sameWord[tag.String()+" "+k.key] {
					t.Errorf("%s %s: %s is the English %q", tag, p.name, k.key, en)
				}
			}
			if strings.Contains(body, "%!") {
				t.Errorf("%s %s: a formatting error on the page", tag, p.name)
			}
		}
	}
}

// TestFlowPagesStrongArguments: the arguments of the texts that show one
// in <strong> (the phone number, the application, the organization) are
// in it, escaped, in every language.
func TestFlowPagesStrongArguments(t *testing.T) {
	u := newUI(t)
	for _, tag := range languages {
		c := sampleCommon
		c.Lang = tag
		c.AppName = "<Acme & Co>"
		for _, r := range []struct {
			name   string
			render func(w http.ResponseWriter)
			want   []string
		}{
			{"smscode", func(w http.ResponseWriter) {
				u.SMSCode(w, http.StatusOK, SMSCodePage{Common: c, Phone: "••••4567"})
			}, []string{"<strong>••••4567</strong>"}},
			{"consent", func(w http.ResponseWriter) {
				u.Consent(w, http.StatusOK, ConsentPage{Common: c, OrgName: "Org <b>"})
			}, []string{"<strong>&lt;Acme &amp; Co&gt;</strong>", "<strong>Org &lt;b&gt;</strong>"}},
		} {
			rec := httptest.NewRecorder()
			r.render(rec)
			for _, w := range r.want {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("%s %s: the page lacks %s", tag, r.name, w)
				}
			}
		}
	}
}

// TestPasskeyScriptTexts: the passkey page hands its script the texts it
// shows in data-* attributes of the status line (no inline script, the
// CSP unchanged), and the script reads them.
func TestPasskeyScriptTexts(t *testing.T) {
	u := newUI(t)
	c := sampleCommon
	c.Lang = language.Japanese
	rec := httptest.NewRecorder()
	u.Passkey(rec, http.StatusOK, PasskeyPage{Common: c, Ceremony: CeremonyGet, Options: `{"publicKey":{}}`, Method: MethodPasskey})
	doc := parseHTML(t, rec.Body.String())
	st := find(doc.root, func(n *node) bool { return n.attr["id"] == "passkey-status" })
	if st == nil {
		t.Fatal("no #passkey-status")
	}
	if got, want := st.attr["data-unsupported"], u.Text(language.Japanese, "passkey.unsupported"); got != want {
		t.Errorf("data-unsupported = %q, want %q", got, want)
	}
	if got := st.attr["data-failed"]; !strings.Contains(got, "%s") || got != u.Text(language.Japanese, "passkey.prompt_failed", "%s") {
		t.Errorf("data-failed = %q, want the Japanese text with %%s for the error", got)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); csp != scriptPolicy {
		t.Errorf("CSP %q, want %q", csp, scriptPolicy)
	}
	js, err := staticFiles.ReadFile("static/passkey.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{`text("unsupported"`, `text("failed"`, `"data-" + name`} {
		if !strings.Contains(string(js), name) {
			t.Errorf("passkey.js does not read %s", name)
		}
	}
}

// TestTextOfNoKey: the empty key is the empty text, so that a caller may
// pass "" for "no error" through UI.Text.
func TestTextOfNoKey(t *testing.T) {
	u := newUI(t)
	for _, tag := range languages {
		if got := u.Text(tag, ""); got != "" {
			t.Errorf("%s: Text(\"\") = %q", tag, got)
		}
	}
}
