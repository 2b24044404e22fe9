package i18n

import (
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/text/language"
)

// catalogFS is a catalog of one file per language, each with body (the
// English text of every key unless a language is given its own in
// bodies).
func catalogFS(body string, bodies map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for _, tag := range Tags() {
		b := body
		if tag == "ja" {
			// Japanese has one plural form, "other" (x/text refuses "one").
			b = strings.ReplaceAll(b, `"one": "a minute", `, "")
		}
		if o, ok := bodies[tag]; ok {
			b = o
		}
		fsys["loc/"+tag+"/a.json"] = &fstest.MapFile{Data: []byte(b)}
	}
	return fsys
}

func TestLoadRefuses(t *testing.T) {
	good := `{"a": "to %s", "n": {"one": "a minute", "other": "%d minutes"}}`
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"not an object", catalogFS(`["a"]`, nil), "cannot unmarshal"},
		{"a number", catalogFS(`{"a": 1}`, nil), "a string or an object"},
		{"plural without other", catalogFS(`{"a": {"one": "x"}}`, nil), "without \"other\""},
		{"not a category", catalogFS(`{"a": {"single": "x", "other": "y"}}`, nil), "not a plural category"},
		{"a key missing", catalogFS(good, map[string]string{"de": `{"a": "zu %s"}`}), `lacks the key "n"`},
		{"a key extra", catalogFS(good, map[string]string{"fr": `{"a": "à %s", "n": {"one": "x", "other": "%d x"}, "z": "z"}`}), `has the key "z"`},
		{"a placeholder missing", catalogFS(good, map[string]string{"es": `{"a": "a", "n": {"one": "x", "other": "%d x"}}`}), "es: a has placeholders []"},
		{"placeholders reordered", catalogFS(`{"a": "%s %d"}`, map[string]string{"ja": `{"a": "%d %s"}`}), "ja: a has placeholders [%d %s]"},
		{"not a plural where English is", catalogFS(good, map[string]string{"de": `{"a": "zu %s", "n": "%d Minuten"}`}), "plural false"},
		{"a plural form with a verb other lacks", catalogFS(good, map[string]string{"de": `{"a": "zu %s", "n": {"one": "%d %s", "other": "%d Minuten"}}`}), "forms agree false"},
		{"a language missing", func() fstest.MapFS { f := catalogFS(good, nil); delete(f, "loc/ja/a.json"); return f }(), "ja: no catalog files"},
		{"a key in two files", func() fstest.MapFS {
			f := catalogFS(good, nil)
			f["loc/en/b.json"] = &fstest.MapFile{Data: []byte(`{"a": "again"}`)}
			return f
		}(), "also in another file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.fsys, "loc")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestTextPluralsAndDates(t *testing.T) {
	en := `{"a": "to %s", "plain": "Plain", "n": {"one": "a minute", "other": "%d minutes"}, "time.datetime": "2 Jan 2006, 15:04 MST", "time.month_short.11": "Nov"}`
	fsys := catalogFS(en, map[string]string{
		"de": `{"a": "zu %s", "plain": "Schlicht", "n": {"one": "eine Minute", "other": "%d Minuten"}, "time.datetime": "02.01.2006, 15:04 MST", "time.month_short.11": "Nov."}`,
		"fr": `{"a": "à %s", "plain": "Simple", "n": {"one": "une minute", "other": "%d minutes"}, "time.datetime": "2 Jan 2006 15:04 MST", "time.month_short.11": "nov."}`,
		"ja": `{"a": "%sへ", "plain": "プレーン", "n": {"other": "%d 分"}, "time.datetime": "2006/01/02 15:04 MST", "time.month_short.11": "11月"}`,
	})
	c, err := Load(fsys, "loc")
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 11, 26, 15, 4, 0, 0, time.UTC)
	for _, tc := range []struct {
		tag                                language.Tag
		text, plain, one, five, dateString string
	}{
		{language.English, "to x", "Plain", "a minute", "5 minutes", "26 Nov 2026, 15:04 UTC"},
		{language.German, "zu x", "Schlicht", "eine Minute", "5 Minuten", "26.11.2026, 15:04 UTC"},
		{language.French, "à x", "Simple", "une minute", "5 minutes", "26 nov. 2026 15:04 UTC"},
		{language.Japanese, "xへ", "プレーン", "1 分", "5 分", "2026/11/26 15:04 UTC"},
		{language.MustParse("pt"), "to x", "Plain", "a minute", "5 minutes", "26 Nov 2026, 15:04 UTC"},
	} {
		got := []string{c.Text(tc.tag, "a", "x"), c.Text(tc.tag, "plain"), c.Text(tc.tag, "n", 1), c.Text(tc.tag, "n", 5), c.DateTime(tc.tag, when)}
		want := []string{tc.text, tc.plain, tc.one, tc.five, tc.dateString}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: got %q, want %q", tc.tag, got[i], want[i])
			}
		}
	}
}

func TestNegotiate(t *testing.T) {
	for _, c := range []struct {
		ui, picked, accept string
		want               language.Tag
	}{
		{"", "", "", language.English},
		{"ja de", "fr", "es", language.Japanese},
		{"xx-YY de-AT", "", "", language.German},
		{"", "fr", "de", language.French},
		{"", "klingon", "es-MX,es;q=0.9", language.Spanish},
		{"", "", "pt-BR", language.English},
		{"", "", strings.Repeat("de,", 400), language.English},
	} {
		if got := Negotiate(c.ui, c.picked, c.accept); got != c.want {
			t.Errorf("Negotiate(%q, %q, %.20q): %s, want %s", c.ui, c.picked, c.accept, got, c.want)
		}
	}
	if got := UILocale("pt ja-JP"); got != "ja" {
		t.Errorf("UILocale: %q, want ja", got)
	}
	if got := UILocale(strings.Repeat("x ", 300)); got != "" {
		t.Errorf("UILocale of a long list: %q, want none", got)
	}
}

func TestAutonyms(t *testing.T) {
	if len(autonyms) != len(languages) {
		t.Fatalf("%d autonyms for %d languages", len(autonyms), len(languages))
	}
	if Autonym(language.Japanese) != "日本語" || Autonym(language.German) != "Deutsch" || Autonym(language.Portuguese) != "" {
		t.Error("autonyms out of order")
	}
}
