package webui

import (
	"html"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/language"
)

// TestAccountIdentities: /account's "Sign-in providers" section is
// there only when the person has a link or may make one; each link has
// its own form with identity_id and an Unlink button described by the
// line it is on; the providers to link are buttons provider=<slug> of one
// form posting action=identity-link; every text is the language's.
func TestAccountIdentities(t *testing.T) {
	u := newUI(t)
	all := readCatalogs(t)
	when := time.Date(2026, time.March, 4, 17, 5, 0, 0, time.UTC)
	links := []IdentityLine{{ID: "11111111-1111-4111-8111-111111111111", Provider: "Corp <SSO>", Email: "ada@corp.example"},
		{ID: "22222222-2222-4222-8222-222222222222", Provider: "Partner"}}
	buttons := []ProviderButton{{Slug: "google", DisplayName: "Google"}, {Slug: "entra", DisplayName: "Entra ID"}}
	for _, tag := range []language.Tag{language.English, language.German, language.French, language.Spanish, language.Japanese} {
		c := sampleCommon
		c.Lang, c.AppName = tag, ""
		date := u.DateTime(tag, when)
		for i := range links {
			links[i].Linked, links[i].Used = date, date
		}
		for _, tc := range []struct {
			name     string
			links    []IdentityLine
			buttons  []ProviderButton
			shown    bool
			wantKeys []string
		}{
			{"no providers", nil, nil, false, nil},
			{"links and providers to link", links, buttons, true, []string{"account.identities.heading", "account.identities.unlink", "account.identities.hint"}},
			{"only providers to link", nil, buttons, true, []string{"account.identities.heading", "account.identities.none", "account.identities.hint"}},
			{"only links", links[:1], nil, true, []string{"account.identities.heading", "account.identities.unlink"}},
		} {
			t.Run(tag.String()+"/"+tc.name, func(t *testing.T) {
				rec := httptest.NewRecorder()
				u.Account(rec, 200, AccountPage{Common: c, Email: "ada@example.com", Identities: tc.links, LinkProviders: tc.buttons})
				body := rec.Body.String()
				doc := parseHTML(t, body)
				checkAlerts(t, doc)
				heading := doc.root.find(func(n *node) bool { return n.tag == "h2" && n.attr["id"] == "providers" })
				if (len(heading) == 1) != tc.shown {
					t.Fatalf("section shown %v, want %v", len(heading) == 1, tc.shown)
				}
				if !tc.shown {
					return
				}
				for _, key := range tc.wantKeys {
					v, _ := all[tag][key].(string)
					if v == "" || tag != language.English && v == all[language.English][key] {
						t.Errorf("%s is not translated: %q", key, v)
					}
					if !strings.Contains(body, html.EscapeString(v)) {
						t.Errorf("the page lacks %s = %q", key, v)
					}
				}
				forms := doc.root.find(func(n *node) bool { return n.tag == "form" })
				unlinks := 0
				for _, f := range forms {
					ids := inputsNamed(f, "identity_id")
					btn := f.find(func(n *node) bool { return n.tag == "button" && n.attr["value"] == "identity-unlink" })
					if len(btn) == 0 {
						continue
					}
					unlinks++
					if len(ids) != 1 || len(btn) != 1 || btn[0].attr["name"] != "action" {
						t.Fatalf("an unlink form holds %d identity_id and %d buttons", len(ids), len(btn))
					}
					line := f.find(func(n *node) bool { return n.attr["id"] == btn[0].attr["aria-describedby"] })
					if len(line) != 1 || !strings.Contains(line[0].textContent(), u.Text(tag, "account.identities.since", date, date)) {
						t.Errorf("the Unlink button of %s is described by %v", ids[0].attr["value"], line)
					}
				}
				if unlinks != len(tc.links) {
					t.Errorf("%d unlink forms, want %d", unlinks, len(tc.links))
				}
				for _, l := range tc.links {
					if !strings.Contains(body, html.EscapeString(l.Provider)) || l.Email != "" && !strings.Contains(body, l.Email) {
						t.Errorf("the line of %s is missing", l.Provider)
					}
				}
				var linkForm []*node
				for _, f := range forms {
					for _, in := range inputsNamed(f, "action") {
						if in.attr["type"] == "hidden" && in.attr["value"] == "identity-link" {
							linkForm = append(linkForm, f)
						}
					}
				}
				if len(tc.buttons) == 0 {
					if len(linkForm) != 0 {
						t.Error("a link form without providers to link")
					}
					return
				}
				if len(linkForm) != 1 {
					t.Fatalf("%d link forms, want 1", len(linkForm))
				}
				var got []string
				for _, b := range linkForm[0].find(func(n *node) bool { return n.tag == "button" }) {
					if b.attr["name"] != "provider" || b.attr["type"] != "submit" {
						t.Errorf("link button %v", b.attr)
					}
					got = append(got, b.attr["value"]+"="+b.textContent())
				}
				var want []string
				for _, b := range tc.buttons {
					want = append(want, b.Slug+"="+u.Text(tag, "account.identities.link", b.DisplayName))
				}
				if !slices.Equal(got, want) {
					t.Errorf("link buttons %q, want %q", got, want)
				}
			})
		}
	}
}
