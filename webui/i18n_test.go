package webui

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/internal/testkit/i18ntest"
)

// readCatalogs is every language's catalog: its keys and texts.
func readCatalogs(t *testing.T) map[language.Tag]map[string]any {
	t.Helper()
	cat, err := i18n.Load(localeFiles, "locales")
	if err != nil {
		t.Fatal(err)
	}
	all := map[language.Tag]map[string]any{}
	for _, tag := range languages {
		all[tag] = cat.Messages(tag)
	}
	return all
}

// TestCatalogKeys: the pages' catalogs load, which they do only when
// every language has exactly the keys English has, with its placeholders
// (i18n.Load; its own tests check the check).
func TestCatalogKeys(t *testing.T) {
	all := readCatalogs(t)
	if len(all[language.English]) == 0 {
		t.Fatal("no English texts")
	}
}

// TestPlurals: a count picks the language's plural form, and no form
// leaves an argument unused or missing.
func TestPlurals(t *testing.T) {
	u := newUI(t)
	for _, c := range []struct {
		tag   language.Tag
		n     int
		want  string
		wantN bool // the number appears
	}{
		{language.English, 1, "about a minute", false},
		{language.English, 5, "about 5 minutes", true},
		{language.German, 1, "etwa eine Minute", false},
		{language.German, 7, "etwa 7 Minuten", true},
		{language.French, 1, "environ une minute", false},
		{language.Spanish, 2, "unos 2 minutos", true},
		{language.Japanese, 1, "約 1 分", true},
		{language.Japanese, 9, "約 9 分", true},
	} {
		got := u.Text(c.tag, "signin.error.locked_minutes", c.n)
		if !strings.Contains(got, c.want) || strings.Contains(got, "%!") {
			t.Errorf("%s, %d: got %q, want it to hold %q", c.tag, c.n, got, c.want)
		}
	}
}

// TestSignInInEachLanguage renders the sign-in page, with every part
// shown, in each language: <html lang> names it, the texts are its
// catalog's, and no argument is missing.
func TestSignInInEachLanguage(t *testing.T) {
	u := newUI(t)
	all := readCatalogs(t)
	for _, tag := range languages {
		c := sampleCommon
		c.Lang = tag
		rec := httptest.NewRecorder()
		u.SignIn(rec, http.StatusOK, SignInPage{Common: c, SMSEnabled: true, ForgotURL: "/forgot", RegisterURL: "/register", LanguagePicker: true,
			Error: u.Text(tag, "signin.error.bad_password")})
		body := rec.Body.String()
		doc := parseHTML(t, body)
		htmlEl := find(doc.root, func(n *node) bool { return n.tag == "html" })
		if htmlEl == nil || htmlEl.attr["lang"] != tag.String() {
			t.Errorf("%s: <html> %v, want lang=%q", tag, htmlEl, tag)
		}
		for _, key := range []string{"signin.title", "signin.email.label", "signin.password.label", "signin.phone.label", "signin.forgot", "signin.register", "lang.label", "signin.error.bad_password"} {
			if want := html.EscapeString(all[tag][key].(string)); !strings.Contains(body, want) {
				t.Errorf("%s: the page lacks %s = %q", tag, key, want)
			}
		}
		if want := "<strong>Acme Books</strong>"; !strings.Contains(body, want) {
			t.Errorf("%s: the page lacks %q", tag, want)
		}
		if strings.Contains(body, "%!") {
			t.Errorf("%s: a formatting error on the page:\n%s", tag, body)
		}
		// The picker names each language in itself and selects this one.
		for _, other := range languages {
			name := html.EscapeString(i18n.Autonym(other))
			opt := fmt.Sprintf(`<option value="%s" lang="%s"`, other, other)
			if !strings.Contains(body, opt) || !strings.Contains(body, name) {
				t.Errorf("%s: the picker lacks %s (%s)", tag, opt, name)
			}
		}
		if want := fmt.Sprintf(`<option value="%s" lang="%s" selected>`, tag, tag); !strings.Contains(body, want) {
			t.Errorf("%s: the picker does not select %s", tag, tag)
		}
	}
}

func find(n *node, ok func(*node) bool) *node {
	if ok(n) {
		return n
	}
	for _, c := range n.children {
		if f := find(c, ok); f != nil {
			return f
		}
	}
	return nil
}

// notConverted are the templates that still hold English text; each
// page's conversion removes its name (see doc.go), and the test below
// then holds it to the catalog. Every page is converted.
var notConverted []string

// textAttrs are the attributes whose values people see or hear.
var textAttrs = []string{"placeholder", "aria-label", "title", "alt", "label"}

// strayText returns the texts of a template's HTML (text nodes and the
// values of textAttrs), with its actions taken out, that are more than
// whitespace, punctuation and symbols.
func strayText(src string) []string { return i18ntest.StrayHTML(src, textAttrs) }

// TestTemplatesHoldNoText: a converted template's every visible text
// comes from the catalog; the list of templates not converted yet may
// only shrink, and names no converted one.
func TestTemplatesHoldNoText(t *testing.T) {
	files, err := templateFiles.ReadDir("templates")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		body, err := templateFiles.ReadFile("templates/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		stray := strayText(string(body))
		switch {
		case slices.Contains(notConverted, f.Name()) && len(stray) == 0:
			t.Errorf("%s holds no text outside the catalog: take it off notConverted", f.Name())
		case !slices.Contains(notConverted, f.Name()) && len(stray) > 0:
			t.Errorf("%s holds text outside the catalog: %q", f.Name(), stray)
		}
	}
}

// TestStrayText checks the check on made-up templates.
func TestStrayText(t *testing.T) {
	for _, c := range []struct {
		src  string
		want []string
	}{
		{`<p>{{t "a"}}</p> · – ({{.X}})`, nil},
		{`<p>Sign in</p>`, []string{"Sign in"}},
		{`<input placeholder="name@example.com">`, []string{"name@example.com"}},
		{`<img alt="Logo" src="{{.U}}">`, []string{"Logo"}},
		{`<a aria-label="{{t "x"}}" title="Close">x</a>`, []string{"Close", "x"}},
		{`<p>{{if .A}}{{t "a"}}{{else}}Fallback{{end}}</p>`, []string{"Fallback"}},
		{`<p>日本語</p>`, []string{"日本語"}},
	} {
		if got := strayText(c.src); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.src, got, c.want)
		}
	}
}

// templateKeys lists the catalog keys that the t and tStrong calls of a
// template name (their first argument, a string constant).
func templateKeys(t *testing.T, name, src string) []string {
	t.Helper()
	funcs := []string{"styleURL", "scriptURL", "iconURL", "jsonData", "has", "pathOnly"}
	for k := range (&UI{}).localeFuncs(0) {
		funcs = append(funcs, k)
	}
	keys, err := i18ntest.Keys(name, src, funcs, "t", "tStrong")
	if err != nil {
		t.Error(err)
	}
	return keys
}

// TestTemplateKeysExist: every key a template names is in the English
// catalog (and so, by TestCatalogKeys, in every one); a missing one
// would show its key on the page.
func TestTemplateKeysExist(t *testing.T) {
	en := readCatalogs(t)[language.English]
	files, err := templateFiles.ReadDir("templates")
	if err != nil {
		t.Fatal(err)
	}
	used := 0
	for _, f := range files {
		body, err := templateFiles.ReadFile("templates/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range templateKeys(t, f.Name(), string(body)) {
			used++
			if _, ok := en[k]; !ok {
				t.Errorf("%s names the key %q, which en.json lacks", f.Name(), k)
			}
		}
	}
	if used == 0 {
		t.Error("no template names a catalog key: the walk is broken")
	}
}

// BenchmarkSignInLanguages renders the sign-in page, with an error and
// the picker, in English and in the other languages.
func BenchmarkSignInLanguages(b *testing.B) {
	u := newUI(b)
	for _, tag := range languages {
		b.Run(tag.String(), func(b *testing.B) {
			c := sampleCommon
			c.Lang = tag
			p := SignInPage{Common: c, Email: "ada@example.com", Error: u.Text(tag, "signin.error.bad_password"), SMSEnabled: true, LanguagePicker: true}
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				u.SignIn(rec, http.StatusOK, p)
			}
		})
	}
}
