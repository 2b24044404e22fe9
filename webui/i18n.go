package webui

import (
	"embed"
	"html"
	"html/template"
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/internal/i18n"
)

//go:embed locales
var localeFiles embed.FS

// languages are the languages of the pages (i18n.Languages), English
// first.
var languages = i18n.Languages()

// LangCookie is the cookie that remembers a language picked on a page;
// its value is one of i18n.Tags.
const LangCookie = "oidcd_lang"

// Language is one entry of a page's language picker.
type Language struct {
	Tag, Name string // Name in the language itself (Deutsch, 日本語)
	Selected  bool   // the page's language
}

// Text is a message of the catalogs in the language tag, with its
// arguments: what a caller puts in a page's Error or Title on a page that
// is translated.
func (u *UI) Text(tag language.Tag, key string, args ...any) string {
	return u.cat.Text(tag, key, args...)
}

// DateTime is t in the language tag's way of writing a date and time.
func (u *UI) DateTime(tag language.Tag, t time.Time) string {
	return u.cat.DateTime(tag, t)
}

func (u *UI) text(i int, key string, args ...any) string {
	return u.cat.TextAt(i, key, args...)
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
		"lang":       func() string { return languages[i].String() },
		"brandStyle": brandStyle,
		"brandHead":  func(b Brand) template.HTML { return u.brandHead(i, b) },
		"brandFoot":  func(b Brand) template.HTML { return u.brandFoot(i, b) },
		"languages":  func() []Language { return u.pickList(i) },
	}
}

func (u *UI) pickList(selected int) []Language {
	list := make([]Language, len(languages))
	for j, t := range languages {
		list[j] = Language{Tag: t.String(), Name: i18n.Autonym(t), Selected: j == selected}
	}
	return list
}
