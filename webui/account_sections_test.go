package webui

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestAccountSectionMessages: a notice or error about the password or the
// address is shown in its section, tied to that section's fields, whose
// form lands the page there; any other stays at the top.
func TestAccountSectionMessages(t *testing.T) {
	u := newUI(t)
	c := Common{CSRFToken: "csrf", Action: "/account", Step: "step"}
	base := AccountPage{Common: c, Email: "ada@example.com", HasPassword: true, EmailChange: true, EmailVerified: true}
	tests := []struct {
		name    string
		page    func(p *AccountPage)
		alertID string   // "" for no alert
		invalid []string // inputs tied to the alert
		notice  string   // the section heading's id the notice follows, "top" for the top
		refill  string   // new_email's value
	}{
		{"plain", func(p *AccountPage) {}, "", nil, "", ""},
		{"other action error", func(p *AccountPage) { p.Section, p.Error = "totp-remove", "That change could not be made." },
			"form-error", nil, "", ""},
		{"other action notice", func(p *AccountPage) { p.Section, p.Notice = "totp-remove", "Removed." }, "", nil, "top", ""},
		{"address error", func(p *AccountPage) {
			p.Section, p.Error, p.NewEmail = "email-change", "That is your address already.", "ada@example.com"
		}, "new-email-error", []string{"new_email"}, "", "ada@example.com"},
		{"address pending", func(p *AccountPage) { p.Section, p.Notice = "email-change", "Pending: we sent a link." },
			"", nil, "email-address", ""},
		{"address of a directory person", func(p *AccountPage) {
			p.Section, p.Error, p.EmailChange = "email-change", "Your email address is kept by your directory.", false
		}, "form-error", nil, "", ""},
		{"password error", func(p *AccountPage) { p.Section, p.Error = "password-change", "Your current password is not correct." },
			"password-error", []string{"current_password", "new_password"}, "", ""},
		{"password changed", func(p *AccountPage) { p.Section, p.Notice = "password-change", "Your password was changed." },
			"", nil, "password", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base
			tt.page(&p)
			rec := httptest.NewRecorder()
			u.Account(rec, 200, p)
			doc := parseHTML(t, rec.Body.String())
			if tt.alertID != "form-error" {
				// A top error is about a button (a factor removed, a
				// session ended), not about a field.
				checkAlerts(t, doc)
			}
			alerts := doc.root.find(func(n *node) bool { return n.attr["role"] == "alert" })
			switch {
			case tt.alertID == "" && len(alerts) != 0:
				t.Errorf("alerts %d, want none", len(alerts))
			case tt.alertID != "" && (len(alerts) != 1 || alerts[0].attr["id"] != tt.alertID):
				t.Errorf("alerts %d, want one with id %q", len(alerts), tt.alertID)
			}
			for _, in := range visibleInputs(doc) {
				name := in.attr["name"]
				tied := slices.Contains(strings.Fields(in.attr["aria-describedby"]), tt.alertID) && in.attr["aria-invalid"] == "true"
				if want := slices.Contains(tt.invalid, name); tied != want {
					t.Errorf("input %s tied to %q: %v, want %v (aria-describedby %q aria-invalid %q)",
						name, tt.alertID, tied, want, in.attr["aria-describedby"], in.attr["aria-invalid"])
				}
			}
			if p.EmailChange {
				if got := inputNamed(t, doc, "new_email").attr["value"]; got != tt.refill {
					t.Errorf("new_email value %q, want %q", got, tt.refill)
				}
			}
			notices := doc.root.find(func(n *node) bool { return n.attr["role"] == "status" })
			if tt.notice == "" {
				if len(notices) != 0 {
					t.Errorf("notices %d, want none", len(notices))
				}
			} else if len(notices) != 1 || sectionOf(notices[0]) != tt.notice {
				t.Errorf("notice in section %q, want %q", sectionOf(notices[0]), tt.notice)
			}
			for _, f := range doc.root.all("form") {
				btn := f.find(func(n *node) bool { return n.tag == "button" && n.attr["name"] == "action" })
				if len(btn) == 0 {
					continue
				}
				want := "/account"
				switch btn[0].attr["value"] {
				case "email-change":
					want = "/account#email-address"
				case "password-change":
					want = "/account#password"
				}
				if got := f.attr["action"]; got != want {
					t.Errorf("form of %s posts to %q, want %q", btn[0].attr["value"], got, want)
				}
			}
		})
	}
}

// sectionOf is the id of the nearest h2 before n among its siblings, or
// "top" before the first one.
func sectionOf(n *node) string {
	id := "top"
	for _, s := range n.parent.children {
		if s == n {
			break
		}
		if s.tag == "h2" {
			id = s.attr["id"]
		}
	}
	return id
}

// TestSignInLead: a sign-in's lead (an invitation's) is a plain paragraph
// under the heading, not an alert, and leaves the fields valid.
func TestSignInLead(t *testing.T) {
	u := newUI(t)
	rec := httptest.NewRecorder()
	u.SignIn(rec, 200, SignInPage{Common: Common{Title: "Sign in to accept the invitation", CSRFToken: "c", Action: "/invite", Step: "s"},
		Lead: "This invitation is for ada@example.com.", Email: "ada@example.com"})
	doc := parseHTML(t, rec.Body.String())
	checkAlerts(t, doc)
	if n := len(doc.root.find(func(n *node) bool { return n.attr["role"] == "alert" })); n != 0 {
		t.Errorf("alerts %d, want none", n)
	}
	ps := doc.root.find(func(n *node) bool {
		return n.tag == "p" && strings.Contains(n.textContent(), "This invitation is for ada@example.com.")
	})
	if len(ps) != 1 || ps[0].attr["class"] != "" {
		t.Errorf("lead paragraphs %d, want one plain", len(ps))
	}
	if in := inputNamed(t, doc, "email"); in.has("aria-invalid") {
		t.Errorf("email marked invalid without an error")
	}
}
