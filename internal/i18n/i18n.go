// Package i18n holds the languages of what people read (the pages and
// the mail) and the catalogs of their texts.
//
// A catalog is a set of JSON files, <dir>/<tag>/*.json for each of
// Languages: one object per file, a key named by meaning
// (signin.email.label) to its text, with fmt verbs (%s, %d) for
// arguments; or, for a text with a count, to an object of CLDR plural
// categories ("one", "other", ...) whose first argument is the count. A
// language's files are merged (a key in two files is an error), so that
// parts of the product can keep their texts apart. English is the source
// and the fallback; every language's directory is required. The texts
// are formatted by golang.org/x/text/message, and languages are matched
// by golang.org/x/text/language.
package i18n

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"
)

// languages are the languages of the pages and the mail, English (the
// source and the fallback) first.
var languages = []language.Tag{language.English, language.German, language.French, language.Spanish, language.Japanese}

// Languages returns the languages, English first.
func Languages() []language.Tag { return slices.Clone(languages) }

// Tags returns the BCP 47 tags of Languages: what discovery lists as
// ui_locales_supported.
func Tags() []string {
	tags := make([]string, len(languages))
	for i, t := range languages {
		tags[i] = t.String()
	}
	return tags
}

var matcher = language.NewMatcher(languages)

// autonyms are the languages' names in themselves, by index.
var autonyms = []string{"English", "Deutsch", "Français", "Español", "日本語"}

// Autonym is the name of one of Languages in itself (Deutsch, 日本語),
// for a choice of language; "" for any other tag.
func Autonym(tag language.Tag) string {
	if i := slices.Index(languages, tag); i >= 0 {
		return autonyms[i]
	}
	return ""
}

// Negotiate chooses a language: the first of uiLocales (space-separated
// BCP 47 tags, OIDC Core 3.1.2.1) that matches one of Languages, else
// picked (one tag, such as a cookie's value), else the best match of the
// Accept-Language header, else English. Malformed tags and headers are
// ignored; a regional tag matches its language (de-AT is German).
func Negotiate(uiLocales, picked, acceptLanguage string) language.Tag {
	for _, s := range strings.Fields(uiLocales) {
		if t, ok := Match(s); ok {
			return t
		}
	}
	if t, ok := Match(picked); ok {
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

// UILocale is the language that ui_locales asks for, as one of
// Languages' tags, or "" when none of its tags matches: small and
// bounded, whatever the request sent.
func UILocale(uiLocales string) string {
	if len(uiLocales) > 512 {
		return ""
	}
	for _, s := range strings.Fields(uiLocales) {
		if t, ok := Match(s); ok {
			return t.String()
		}
	}
	return ""
}

// Match is the language of Languages that one BCP 47 tag names: the one
// of the tag's own base language, whatever its region or script (es-MX
// is Spanish, en-GB English). A tag of any other language matches none,
// even where CLDR would fall back to one of ours (it takes tlh, Klingon,
// for English, and gsw for German): a list of tags (ui_locales, OIDC Core
// 3.1.2.1) is the person's order of preference, so a later tag they
// named, or the language they picked, is a better answer than a guess
// made from an earlier one.
func Match(s string) (language.Tag, bool) {
	if s == "" || len(s) > 64 {
		return language.Und, false
	}
	t, err := language.Parse(s)
	if err != nil {
		return language.Und, false
	}
	// Exact: the tag names its language (und-ES only implies one).
	base, conf := t.Base()
	if conf != language.Exact {
		return language.Und, false
	}
	for _, l := range languages {
		if b, _ := l.Base(); b == base {
			return l, true
		}
	}
	return language.Und, false
}

// Index is the index of tag in Languages, 0 (English) for any other.
func Index(tag language.Tag) int {
	if i := slices.Index(languages, tag); i >= 0 {
		return i
	}
	return 0
}

// Catalog is one set of texts in every language. It is safe for
// concurrent use.
type Catalog struct {
	printers []*message.Printer  // by index in languages
	fixed    []map[string]string // by index: the texts without arguments, formatted once
	msgs     []map[string]any    // by index: the files' values, string or map[string]string
}

// Load reads the catalog under dir of fsys (see the package comment).
func Load(fsys fs.FS, dir string) (*Catalog, error) {
	b := catalog.NewBuilder(catalog.Fallback(language.English))
	c := &Catalog{}
	for _, tag := range languages {
		msgs, err := readLanguage(fsys, path.Join(dir, tag.String()))
		if err != nil {
			return nil, fmt.Errorf("i18n: %w", err)
		}
		for key, v := range msgs {
			switch v := v.(type) {
			case string:
				err = b.SetString(tag, key, v)
			case map[string]string:
				err = b.Set(tag, key, plural.Selectf(1, "%d", pluralCases(v)...))
			}
			if err != nil {
				return nil, fmt.Errorf("i18n: %s/%s: %s: %w", dir, tag, key, err)
			}
		}
		c.msgs = append(c.msgs, msgs)
	}
	if err := agree(dir, c.msgs); err != nil {
		return nil, err
	}
	for i, tag := range languages {
		p := message.NewPrinter(tag, message.Catalog(b))
		c.printers = append(c.printers, p)
		fixed := map[string]string{}
		for key, v := range c.msgs[i] {
			if s, ok := v.(string); ok && !strings.Contains(s, "%") {
				fixed[key] = p.Sprintf(key)
			}
		}
		c.fixed = append(c.fixed, fixed)
	}
	return c, nil
}

// agree checks that every language has exactly English's keys, each with
// English's placeholders in the same order, and is a plural exactly
// where English's is: a key missing would show itself on a page, and a
// placeholder missing or out of order would show %!s(MISSING).
func agree(dir string, msgs []map[string]any) error {
	var errs []error
	en := msgs[0]
	for i, tag := range languages[1:] {
		got := msgs[i+1]
		missing, extra := KeyDiff(en, got)
		for _, k := range missing {
			errs = append(errs, fmt.Errorf("%s/%s lacks the key %q of %s/en", dir, tag, k, dir))
		}
		for _, k := range extra {
			errs = append(errs, fmt.Errorf("%s/%s has the key %q that %s/en does not", dir, tag, k, dir))
		}
	}
	for i, tag := range languages {
		for _, key := range slices.Sorted(maps.Keys(msgs[i])) {
			if _, ok := en[key]; !ok {
				continue
			}
			want, wantPlural, _ := Placeholders(en[key])
			got, plural, formsOK := Placeholders(msgs[i][key])
			if !slices.Equal(got, want) || plural != wantPlural || !formsOK {
				errs = append(errs, fmt.Errorf("%s/%s: %s has placeholders %v (plural %v, forms agree %v); English has %v (plural %v)",
					dir, tag, key, got, plural, formsOK, want, wantPlural))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("i18n: the languages disagree: %w", errors.Join(errs...))
	}
	return nil
}

// KeyDiff names the keys of want that got lacks (missing) and the keys of
// got that want lacks (extra), sorted.
func KeyDiff(want, got map[string]any) (missing, extra []string) {
	for k := range want {
		if _, ok := got[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}

var verbRE = regexp.MustCompile(`%[-+# 0]*[0-9]*(?:\.[0-9]+)?[a-zA-Z%]`)

// verbs lists the fmt verbs of a text, %% left out.
func verbs(s string) []string {
	var vs []string
	for _, v := range verbRE.FindAllString(s, -1) {
		if v != "%%" {
			vs = append(vs, v)
		}
	}
	return vs
}

// Placeholders is the verbs of a message: of the text, or of the "other"
// form of a plural; for a plural, also whether every form has at most
// the "other" form's verbs, in its order.
func Placeholders(v any) (vs []string, plural, formsOK bool) {
	switch v := v.(type) {
	case string:
		return verbs(v), false, true
	case map[string]string:
		other := verbs(v["other"])
		for _, s := range v {
			if f := verbs(s); len(f) > len(other) || !slices.Equal(f, other[:len(f)]) {
				return other, true, false
			}
		}
		return other, true, true
	}
	return nil, false, false
}

// readLanguage merges the files of one language's directory.
func readLanguage(fsys fs.FS, dir string) (map[string]any, error) {
	files, err := fs.Glob(fsys, dir+"/*.json")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no catalog files", dir)
	}
	all := map[string]any{}
	for _, name := range files {
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		msgs, err := parseFile(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for k, v := range msgs {
			if _, dup := all[k]; dup {
				return nil, fmt.Errorf("%s: %s is also in another file of %s", name, k, dir)
			}
			all[k] = v
		}
	}
	return all, nil
}

// parseFile reads one catalog file: each value a string or a map of
// plural categories to strings.
func parseFile(body []byte) (map[string]any, error) {
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

// Text is the message key in the language tag (English for a language
// not in Languages), with its arguments. A key no language has comes
// back as itself.
func (c *Catalog) Text(tag language.Tag, key string, args ...any) string {
	return c.TextAt(Index(tag), key, args...)
}

// TextAt is Text in the language of index i of Languages. A text without
// arguments is looked up, formatted once at Load (a Printer's Sprintf
// costs a few allocations per call).
func (c *Catalog) TextAt(i int, key string, args ...any) string {
	if len(args) == 0 {
		if s, ok := c.fixed[i][key]; ok {
			return s
		}
	}
	return c.printers[i].Sprintf(key, args...)
}

// Messages returns the values of one language's files (a string, or a
// map[string]string of plural forms), for tests that compare languages.
func (c *Catalog) Messages(tag language.Tag) map[string]any {
	i := slices.Index(languages, tag)
	if i < 0 {
		return nil
	}
	return c.msgs[i]
}

// DateTimeKey is the catalog key of the layout (Go's time.Format) of a
// date and time in each language: a catalog that shows times holds it
// (for example "2 Jan 2006, 15:04 MST" in English, "02.01.2006, 15:04
// MST" in German).
const DateTimeKey = "time.datetime"

// DateTime formats t in the language tag with the catalog's DateTimeKey
// layout, in t's location (a layout writes numbers, as Go's names of
// months and days are English).
func (c *Catalog) DateTime(tag language.Tag, t time.Time) string {
	layout := c.Text(tag, DateTimeKey)
	if layout == DateTimeKey {
		layout = "2006-01-02 15:04 MST"
	}
	return t.Format(layout)
}
