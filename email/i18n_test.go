package email

import (
	"html"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/testkit/i18ntest"
)

// templates are every template's name.
var templates = []string{Invitation, VerifyEmail, PasswordReset, PasswordResetDirectory, EmailChanged, Registration, RegistrationExists}

// TestEveryTemplateIsListed: the list above is the templates the package
// knows, and each has its .txt and .html file.
func TestEveryTemplateIsListed(t *testing.T) {
	if len(templates) != len(kinds) {
		t.Fatalf("the test knows %d templates, the package %d", len(templates), len(kinds))
	}
	for _, name := range templates {
		for _, ext := range []string{".txt", ".html"} {
			if _, err := files.ReadFile("templates/" + name + ext); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// strayText returns the texts of a template, its actions taken out, that
// are more than whitespace, punctuation and symbols: for HTML, its text
// nodes and the attributes people see (the others are URLs and styles
// here); for plain text, the rest.
func strayText(name, src string) []string {
	if strings.HasSuffix(name, ".txt") {
		return i18ntest.StrayText(src)
	}
	return i18ntest.StrayHTML(src, []string{"title", "alt", "aria-label"})
}

// TestTemplatesHoldNoText: every word a message says comes from the
// catalog, subjects included.
func TestTemplatesHoldNoText(t *testing.T) {
	entries, err := files.ReadDir("templates")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range entries {
		body, err := files.ReadFile("templates/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if stray := strayText(f.Name(), string(body)); len(stray) > 0 {
			t.Errorf("%s holds text outside the catalog: %q", f.Name(), stray)
		}
	}
}

// TestStrayText checks the check on made-up templates.
func TestStrayText(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"a.txt", "{{define \"a.subject\"}}{{t \"a\" .X}}{{end -}}\n{{t \"b\"}}\n\n{{.Link}}\n", nil},
		{"a.txt", "Subject: {{t \"a\"}}\n", []string{"Subject:"}},
		{"a.txt", "{{t \"a\"}}\n\nThanks!\n", []string{"Thanks!"}},
		{"a.txt", "{{t \"a\"}}\nよろしく\n", []string{"よろしく"}},
		{"a.txt", "{{t \"a\"}} – ({{.X}}): …\n", nil},
		{"a.html", `<p>{{t "a"}}</p><p><a href="{{.Link}}">{{.Link}}</a></p>`, nil},
		{"a.html", `<p>Hello,</p>`, []string{"Hello,"}},
		{"a.html", `<p>{{if .A}}{{t "a"}}{{else}}Fallback{{end}}</p>`, []string{"Fallback"}},
		{"a.html", `<a title="Open">{{.Link}}</a>`, []string{"Open"}},
	} {
		if got := strayText(c.name, c.src); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: got %q, want %q", c.name, c.src, got, c.want)
		}
	}
}

// templateKeys lists the keys the t calls of a template name (their
// first argument, which must be a constant).
func templateKeys(t *testing.T, name, src string) []string {
	t.Helper()
	var fn []string
	for k := range funcs(0) {
		fn = append(fn, k)
	}
	keys, err := i18ntest.Keys(name, src, fn, "t")
	if err != nil {
		t.Error(err)
	}
	return keys
}

// TestTemplateKeysExist: every key a template names is in the English
// catalog (and so, as i18n.Load checks, in every language's), and every
// key of the catalog is named by a template or is a duration's.
func TestTemplateKeysExist(t *testing.T) {
	en := catalog.Messages(language.English)
	entries, err := files.ReadDir("templates")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, f := range entries {
		body, err := files.ReadFile("templates/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		keys := templateKeys(t, f.Name(), string(body))
		if len(keys) == 0 {
			t.Errorf("%s names no catalog key", f.Name())
		}
		for _, k := range keys {
			used[k] = true
			if _, ok := en[k]; !ok {
				t.Errorf("%s names the key %q, which locales/en lacks", f.Name(), k)
			}
		}
	}
	for k := range en {
		if !used[k] && !strings.HasPrefix(k, "duration.") {
			t.Errorf("locales/en holds %q, which no template names", k)
		}
	}
}

// words are a word of each language that its greeting holds and another
// that a message with a link holds.
var words = map[string][2]string{
	"en": {"Hello", "link"},
	"de": {"Guten Tag", "Link"},
	"fr": {"Bonjour", "lien"},
	"es": {"Hola", "enlace"},
	"ja": {"こんにちは", "リンク"},
}

// TestComposeEveryLanguage composes every template in every language.
func TestComposeEveryLanguage(t *testing.T) {
	if got := i18n.Tags(); len(got) != len(words) {
		t.Fatalf("i18n.Tags() = %v; the test knows %d", got, len(words))
	}
	d := Data{Site: "id.example.com", Link: "https://id.example.com/invite/T0KEN", OrgName: "Acme Books", Email: "ann@example.com",
		Directory: "Corp LDAP", ForgotURL: "https://id.example.com/password/forgot", Expires: 7 * 24 * time.Hour}
	for _, locale := range i18n.Tags() {
		for _, name := range templates {
			t.Run(locale+"/"+name, func(t *testing.T) {
				m, err := Compose(name, locale, d)
				if err != nil {
					t.Fatal(err)
				}
				if m.Locale != locale {
					t.Errorf("Locale = %q, want %q", m.Locale, locale)
				}
				if m.Subject == "" || strings.ContainsAny(m.Subject, "\r\n") || !strings.Contains(m.Subject, "id.example.com") {
					t.Errorf("Subject = %q", m.Subject)
				}
				if m.Text == "" || m.HTML == "" {
					t.Fatalf("empty part: text %q, html %q", m.Text, m.HTML)
				}
				for part, body := range map[string]string{"text": m.Text, "html": m.HTML, "subject": m.Subject} {
					if strings.Contains(body, "%!") {
						t.Errorf("%s: a formatting error: %q", part, body)
					}
				}
				if !strings.HasPrefix(m.Text, catalog.Text(tag(locale), "greeting")+"\n\n") {
					t.Errorf("text does not start with the greeting: %q", m.Text)
				}
				greet, linkWord := words[locale][0], words[locale][1]
				if !strings.Contains(m.Text, greet) || !strings.Contains(m.HTML, greet) {
					t.Errorf("no %q in the text or the HTML:\n%s\n%s", greet, m.Text, m.HTML)
				}
				if want := `<html lang="` + locale + `">`; !strings.Contains(m.HTML, want) {
					t.Errorf("HTML lacks %s", want)
				}
				link := map[string]string{EmailChanged: "", PasswordResetDirectory: "", RegistrationExists: d.ForgotURL}[name]
				if _, notice := map[string]bool{EmailChanged: true, PasswordResetDirectory: true, RegistrationExists: true}[name]; !notice {
					link = d.Link
				}
				if link != "" {
					if !strings.Contains(m.Text, "\n\n"+link+"\n\n") || !strings.Contains(m.HTML, `<a href="`+link+`">`+link+`</a>`) {
						t.Errorf("the link %s is not in both parts", link)
					}
				}
				if link == d.Link {
					if !strings.Contains(m.Text, linkWord) {
						t.Errorf("text lacks %q: %q", linkWord, m.Text)
					}
					if want := catalog.Text(tag(locale), "duration.days", 7); !strings.Contains(m.Text, want) || !strings.Contains(m.HTML, want) {
						t.Errorf("the lifetime %q is not in both parts", want)
					}
				}
				// The subject is the catalog's, in this language.
				if want := catalog.Text(tag(locale), name+".subject"); locale != "en" && m.Subject == catalog.Text(language.English, name+".subject") && want != catalog.Text(language.English, name+".subject") {
					t.Errorf("subject %q is English's", m.Subject)
				}
				if locale != "en" {
					en, err := Compose(name, "en", d)
					if err != nil {
						t.Fatal(err)
					}
					if en.Subject == m.Subject || en.Text == m.Text {
						t.Errorf("the message is English's:\n%s", m.Text)
					}
				}
			})
		}
	}
}

func tag(locale string) language.Tag { return language.MustParse(locale) }

// TestEnglishUnchanged: English messages say what they said before the
// catalog.
func TestEnglishUnchanged(t *testing.T) {
	m, err := Compose(PasswordReset, "en", Data{Site: "id.example.com", Link: "https://id.example.com/password/reset/T", Expires: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want := "Hello,\n\nSomeone, probably you, asked to reset the password of your account on id.example.com. To choose a new password, open this link:\n\n" +
		"https://id.example.com/password/reset/T\n\nThe link works once and for 30 minutes. Setting a new password signs you out everywhere. " +
		"If you did not ask for this, you can ignore this message: your password stays as it is.\n"
	if m.Subject != "Reset your password for id.example.com" || m.Text != want {
		t.Errorf("got %q\n%q", m.Subject, m.Text)
	}
}

// TestComposeFallsBack: a language without a catalog is English, and
// the message says so.
func TestComposeFallsBack(t *testing.T) {
	for _, locale := range []string{"", "xx", "zh-Hant", "de-CH", "DE", "ja_JP", "<script>", strings.Repeat("d", 100)} {
		m, err := Compose(VerifyEmail, locale, Data{Site: "s", Link: "https://s/l", Email: "a@b", Expires: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if m.Locale != "en" || !strings.HasPrefix(m.Text, "Hello,") || !strings.Contains(m.HTML, `<html lang="en">`) {
			t.Errorf("%q: locale %q, text %q", locale, m.Locale, m.Text)
		}
		if got := Locale(locale); got != "en" {
			t.Errorf("Locale(%q) = %q", locale, got)
		}
	}
	if _, err := Compose("nothing", "de", Data{}); err == nil {
		t.Error("an unknown template composed")
	}
}

// TestDurations: a link's lifetime in the message's language, its plural
// the language's.
func TestDurations(t *testing.T) {
	for _, c := range []struct {
		locale string
		d      time.Duration
		want   string
	}{
		{"en", 30 * time.Minute, "30 minutes"},
		{"en", time.Minute, "1 minute"},
		{"en", 90 * time.Second, "2 minutes"},
		{"en", 24 * time.Hour, "1 day"},
		{"en", 25 * time.Hour, "25 hours"},
		{"en", 7 * 24 * time.Hour, "7 days"},
		{"de", 30 * time.Minute, "30 Minuten"},
		{"de", time.Hour, "1 Stunde"},
		{"de", 7 * 24 * time.Hour, "7 Tage"},
		{"fr", 24 * time.Hour, "1 jour"},
		{"fr", 2 * time.Hour, "2 heures"},
		{"es", 7 * 24 * time.Hour, "7 días"},
		{"es", time.Minute, "1 minuto"},
		{"ja", 30 * time.Minute, "30分間"},
		{"ja", 24 * time.Hour, "1日間"},
		{"ja", 25 * time.Hour, "25時間"},
		{"en", 0, ""},
	} {
		i := slices.Index(i18n.Tags(), c.locale)
		if got := duration(i, c.d); got != c.want {
			t.Errorf("%s %v: got %q, want %q", c.locale, c.d, got, c.want)
		}
	}
}

// fmtErrorRE matches what fmt writes for a wrong or missing argument:
// %!s(MISSING), %!(EXTRA ...), %!d(string=...).
var fmtErrorRE = regexp.MustCompile(`%!\w?\(`)

// TestComposeEscapes: what a message is filled with cannot add a header
// line, markup or a formatting verb, in any language.
func TestComposeEscapes(t *testing.T) {
	evil := `<script>alert("x")</script> & %s %!d`
	for _, locale := range i18n.Tags() {
		d := Data{Site: "id.example.com", Link: `https://id.example.com/invite/a"b<c`, OrgName: "Evil\r\nBcc: x@evil.example\n" + evil,
			Email: evil + "@example.com", Directory: evil, ForgotURL: "https://id.example.com/forgot", Expires: time.Hour}
		for _, name := range templates {
			m, err := Compose(name, locale, d)
			if err != nil {
				t.Fatalf("%s %s: %v", locale, name, err)
			}
			if strings.ContainsAny(m.Subject, "\r\n") {
				t.Errorf("%s %s: the subject holds a line break: %q", locale, name, m.Subject)
			}
			if strings.Contains(m.HTML, "<script>") || strings.Contains(m.HTML, `a"b<c`) {
				t.Errorf("%s %s: unescaped input in the HTML:\n%s", locale, name, m.HTML)
			}
			if fmtErrorRE.MatchString(m.HTML + m.Text + m.Subject) {
				t.Errorf("%s %s: a formatting error:\n%s\n%s", locale, name, m.Subject, m.Text)
			}
			if _, err := Outgoing(noKEK, "ann@example.com", Kind(name), locale, "", m); err != nil {
				t.Errorf("%s %s: %v", locale, name, err)
			}
		}
		m, err := Compose(Invitation, locale, d)
		if err != nil {
			t.Fatal(err)
		}
		if want := html.EscapeString(evil); !strings.Contains(m.HTML, want) {
			t.Errorf("%s: the HTML lacks the escaped name %q", locale, want)
		}
		if !strings.Contains(m.Text, evil) {
			t.Errorf("%s: the text lacks the name as given", locale)
		}
	}
}

// TestOutgoingRecordsTheLanguageUsed: the outbox's locale is the one the
// message is written in, not the one asked for.
func TestOutgoingRecordsTheLanguageUsed(t *testing.T) {
	for _, c := range []struct{ asked, want string }{{"de", "de"}, {"ja", "ja"}, {"ko", "en"}, {"", "en"}} {
		m, err := Compose(EmailChanged, c.asked, Data{Site: "s", Email: "a@b"})
		if err != nil {
			t.Fatal(err)
		}
		out, err := Outgoing(noKEK, "a@b", fsm.EmailChanged, c.asked, "", m)
		if err != nil {
			t.Fatal(err)
		}
		if out.Locale != c.want {
			t.Errorf("asked %q: recorded %q, want %q", c.asked, out.Locale, c.want)
		}
		back, err := Open(noKEK, fsm.Email{To: out.To, Kind: out.Kind, Body: out.Body})
		if err != nil || back.Locale != c.want {
			t.Errorf("asked %q: opened %+v, %v", c.asked, back, err)
		}
	}
}

// noKEK seals nothing: bodies in the clear, as without --kek-file.
var noKEK *kek.KEK

// TestComposeConcurrently: the templates of every language are shared
// by the nodes' handlers (run with -race).
func TestComposeConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for j := range 20 {
				locale := i18n.Tags()[(g+j)%len(i18n.Tags())]
				m, err := Compose(templates[j%len(templates)], locale, Data{Site: "s", Link: "https://s/l", OrgName: "o", Email: "a@b", Directory: "d", ForgotURL: "https://s/f", Expires: time.Hour})
				if err != nil || m.Locale != locale {
					t.Errorf("%s: %v, locale %q", locale, err, m.Locale)
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkCompose composes an invitation in each language.
func BenchmarkCompose(b *testing.B) {
	d := Data{Site: "id.example.com", Link: "https://id.example.com/invite/T0KEN", OrgName: "Acme Books", Expires: 7 * 24 * time.Hour}
	for _, locale := range i18n.Tags() {
		b.Run(locale, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compose(Invitation, locale, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
