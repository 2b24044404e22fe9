package webui

import (
	"embed"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"path"
	"slices"
	"strings"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"
)

//go:embed locales/*.json
var localeFiles embed.FS

// Languages are the languages of the pages, English (the source and the
// fallback) first. Each has its catalog locales/<tag>.json.
var languages = []language.Tag{language.English, language.German, language.French, language.Spanish, language.Japanese}

// Languages returns the tags of the pages' languages, English first: what
// discovery lists as ui_locales_supported.
func Languages() []string {
	tags := make([]string, len(languages))
	for i, t := range languages {
		tags[i] = t.String()
	}
	return tags
}

var matcher = language.NewMatcher(languages)

// LangCookie is the cookie that remembers a language picked on a page;
// its value is one of Languages.
const LangCookie = "oidcd_lang"

// Negotiate chooses the language of a page: the first of the
// authorization request's ui_locales (space-separated BCP 47 tags, OIDC
// Core 3.1.2.1) that matches one of Languages, else the language the
// person picked (the LangCookie's value), else the best match of the
// Accept-Language header, else English. Malformed tags and headers are
// ignored; a regional tag matches its language (de-AT is German).
func Negotiate(uiLocales, picked, acceptLanguage string) language.Tag {
	for _, s := range strings.Fields(uiLocales) {
		if t, ok := match(s); ok {
			return t
		}
	}
	if t, ok := match(picked); ok {
		return t
	}
	if len(acceptLanguage) <= 1024 {
		if tags, _, err := language.ParseAcceptLanguage(acceptLanguage); err == nil && len(tags) > 0 {
			if _, i, conf := matcher.Match(tags...); conf != language.No {
				return languages[i]
			}
		}
	}
	return language.English
}

// UILocale is the language that ui_locales asks for, as one of Languages,
// or "" when none of its tags matches: what a pending authorization
// request keeps (small and bounded, whatever the request sent).
func UILocale(uiLocales string) string {
	if len(uiLocales) > 512 {
		return ""
	}
	for _, s := range strings.Fields(uiLocales) {
		if t, ok := match(s); ok {
			return t.String()
		}
	}
	return ""
}

// match is the supported language of one BCP 47 tag.
func match(s string) (language.Tag, bool) {
	if s == "" || len(s) > 64 {
		return language.Und, false
	}
	t, err := language.Parse(s)
	if err != nil {
		return language.Und, false
	}
	_, i, conf := matcher.Match(t)
	if conf == language.No {
		return language.Und, false
	}
	return languages[i], true
}

// langIndex is the index of tag in languages, 0 (English) for any other.
func langIndex(tag language.Tag) int {
	if i := slices.Index(languages, tag); i >= 0 {
		return i
	}
	return 0
}

// loadCatalog reads locales/*.json into a catalog. A file is one JSON
// object: a key named by meaning (signin.email.label) to its text, with
// fmt verbs (%s, %d) for arguments; or, for a text with a count, to an
// object of CLDR plural categories ("one", "other", ...) whose first
// argument is the count. Every language's file is required.
func loadCatalog() (*catalog.Builder, map[language.Tag]map[string]any, error) {
	b := catalog.NewBuilder(catalog.Fallback(language.English))
	all := map[language.Tag]map[string]any{}
	for _, tag := range languages {
		name := path.Join("locales", tag.String()+".json")
		body, err := localeFiles.ReadFile(name)
		if err != nil {
			return nil, nil, fmt.Errorf("webui: %w", err)
		}
		msgs, err := parseLocale(body)
		if err != nil {
			return nil, nil, fmt.Errorf("webui: %s: %w", name, err)
		}
		for key, v := range msgs {
			switch v := v.(type) {
			case string:
				err = b.SetString(tag, key, v)
			case map[string]string:
				err = b.Set(tag, key, plural.Selectf(1, "%d", pluralCases(v)...))
			}
			if err != nil {
				return nil, nil, fmt.Errorf("webui: %s: %s: %w", name, key, err)
			}
		}
		all[tag] = msgs
	}
	return b, all, nil
}

// parseLocale reads one catalog file: each value a string or a map of
// plural categories to strings.
func parseLocale(body []byte) (map[string]any, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	msgs := make(map[string]any, len(raw))
	for key, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			msgs[key] = s
			continue
		}
		var cases map[string]string
		if err := json.Unmarshal(v, &cases); err != nil {
			return nil, fmt.Errorf("%s: a string or an object of plural forms", key)
		}
		if _, ok := cases["other"]; !ok {
			return nil, fmt.Errorf("%s: plural forms without \"other\"", key)
		}
		for c := range cases {
			if !slices.Contains(pluralCategories, c) {
				return nil, fmt.Errorf("%s: %q is not a plural category", key, c)
			}
		}
		msgs[key] = cases
	}
	return msgs, nil
}

// pluralCategories are CLDR's, in the order they are tried ("other"
// last, as it matches any count).
var pluralCategories = []string{"zero", "one", "two", "few", "many", "other"}

func pluralCases(m map[string]string) []any {
	var cases []any
	for _, c := range pluralCategories {
		if s, ok := m[c]; ok {
			cases = append(cases, c, s)
		}
	}
	return cases
}

// Language is one entry of a page's language picker.
type Language struct {
	Tag, Name string // Name in the language itself (Deutsch, 日本語)
	Selected  bool   // the page's language
}

// Text is a message of the catalogs in the language tag, with its
// arguments: what a caller puts in a page's Error or Title on a page that
// is translated.
func (u *UI) Text(tag language.Tag, key string, args ...any) string {
	return u.text(langIndex(tag), key, args...)
}

// text is Text in the language of index i. A text without arguments is
// looked up, formatted once at start (a Printer's Sprintf costs a few
// allocations per call, on every text of every page).
func (u *UI) text(i int, key string, args ...any) string {
	if len(args) == 0 {
		if s, ok := u.fixed[i][key]; ok {
			return s
		}
	}
	return u.printers[i].Sprintf(key, args...)
}

// fixedTexts formats once, in each language, the texts that take no
// argument (no verb, not a plural).
func fixedTexts(ps []*message.Printer, msgs map[language.Tag]map[string]any) []map[string]string {
	fixed := make([]map[string]string, len(languages))
	for i, tag := range languages {
		fixed[i] = map[string]string{}
		for key, v := range msgs[tag] {
			if s, ok := v.(string); ok && !strings.Contains(s, "%") {
				fixed[i][key] = ps[i].Sprintf(key)
			}
		}
	}
	return fixed
}

// localeFuncs are the template functions bound to the language of index
// i: t (a catalog message), tStrong (a message whose one %s argument is
// shown in <strong>), lang (the BCP 47 tag, for <html lang>) and
// languages (the picker's entries).
func (u *UI) localeFuncs(i int) template.FuncMap {
	return template.FuncMap{
		"t": func(key string, args ...any) string { return u.text(i, key, args...) },
		"tStrong": func(key, arg string) template.HTML {
			before, after, _ := strings.Cut(u.text(i, key, "\x00"), "\x00")
			// #nosec G203 -- every part is escaped here
			return template.HTML(html.EscapeString(before) + "<strong>" + html.EscapeString(arg) + "</strong>" + html.EscapeString(after))
		},
		"lang":      func() string { return languages[i].String() },
		"languages": func() []Language { return u.pickList(i) },
	}
}

func (u *UI) pickList(selected int) []Language {
	list := make([]Language, len(languages))
	for j, t := range languages {
		list[j] = Language{Tag: t.String(), Name: u.text(j, "lang.name"), Selected: j == selected}
	}
	return list
}

func newPrinters(b *catalog.Builder) []*message.Printer {
	ps := make([]*message.Printer, len(languages))
	for i, t := range languages {
		ps[i] = message.NewPrinter(t, message.Catalog(b))
	}
	return ps
}
