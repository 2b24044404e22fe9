package i18n

import (
	"slices"
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
	en := `{"a": "to %s", "plain": "Plain", "n": {"one": "a minute", "other": "%d minutes"}, "time.datetime": "2 Jan 2006, 15:04 MST"}`
	fsys := catalogFS(en, map[string]string{
		"de": `{"a": "zu %s", "plain": "Schlicht", "n": {"one": "eine Minute", "other": "%d Minuten"}, "time.datetime": "02.01.2006, 15:04 MST"}`,
		"fr": `{"a": "à %s", "plain": "Simple", "n": {"one": "une minute", "other": "%d minutes"}, "time.datetime": "02/01/2006 15:04 MST"}`,
		"ja": `{"a": "%sへ", "plain": "プレーン", "n": {"other": "%d 分"}, "time.datetime": "2006/01/02 15:04 MST"}`,
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
		{language.French, "à x", "Simple", "une minute", "5 minutes", "26/11/2026 15:04 UTC"},
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

// TestNegotiate: ui_locales beats the picked language, which beats
// Accept-Language; anything unknown or malformed falls through.
func TestNegotiate(t *testing.T) {
	for _, c := range []struct {
		name                     string
		ui, picked, accept, want string
	}{
		{"nothing", "", "", "", "en"},
		{"ui_locales", "fr", "de", "es", "fr"},
		{"ui_locales first supported", "zh-Hant ja-JP fr", "", "", "ja"},
		{"ui_locales unknown falls to picked", "zh ko", "de", "fr", "de"},
		{"ui_locales malformed falls to picked", "x_y-!! 12345", "es", "", "es"},
		{"picked beats Accept-Language", "", "ja", "de-DE,de;q=0.9", "ja"},
		{"picked malformed", "", "<script>", "fr-CA", "fr"},
		{"picked unknown", "", "ko", "es", "es"},
		{"de-AT is German", "", "", "de-AT", "de"},
		{"ja-JP is Japanese", "", "", "ja-JP,en;q=0.5", "ja"},
		{"quality order", "", "", "en;q=0.2, es;q=0.9", "es"},
		{"unknown is English", "", "", "zh-CN, ko", "en"},
		{"malformed header", "", "", "de;q=x;;,,==", "en"},
		{"regional ui_locales", "es-MX", "", "", "es"},
		{"oversized header", "", "", strings.Repeat("de,", 400), "en"},
		{"ui_locales unknown then regional", "xx-YY de-AT", "", "", "de"},
		{"a language not offered", "", "", "pt-BR", "en"},
		{"all three given", "ja de", "fr", "es", "ja"},
	} {
		if got := Negotiate(c.ui, c.picked, c.accept); got.String() != c.want {
			t.Errorf("%s: Negotiate(%q, %q, %q) = %s, want %s", c.name, c.ui, c.picked, c.accept, got, c.want)
		}
	}
}

func TestUILocale(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"de-CH fr", "de"},
		{"zh ja", "ja"},
		{"zh ko", ""},
		{"!!! en-GB", "en"},
		{strings.Repeat("de ", 200), ""},
		{"pt ja-JP", "ja"},
	} {
		if got := UILocale(c.in); got != c.want {
			t.Errorf("UILocale(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestUILocalesPreference: ui_locales is an order of preference (OIDC
// Core 3.1.2.1), so its first tag of one of Languages' own base languages
// wins; a tag of another language is skipped, even one CLDR falls back
// from to one of ours (tlh to English), and a list without any falls
// through to the language picked and then to Accept-Language.
func TestUILocalesPreference(t *testing.T) {
	for _, c := range []struct {
		ui, accept string
		uiLocale   string // what UILocale keeps of ui: "" when no tag matched
		want       string // the language Negotiate chooses
	}{
		{"tlh es", "", "es", "es"},
		{"fr-CA de", "", "fr", "fr"},
		{"tlh", "", "", "en"},
		{"tlh", "de", "", "de"},
		{"ja", "de", "ja", "ja"},
		{"en-GB", "fr", "en", "en"},
		{"es-MX", "", "es", "es"},
		{"zh es-MX", "", "es", "es"},
		{"zh", "ja", "", "ja"},
		{"gsw fr", "", "fr", "fr"},
		{"i-klingon ja", "", "ja", "ja"},
		{"und-ES de", "", "de", "de"},
	} {
		if got := UILocale(c.ui); got != c.uiLocale {
			t.Errorf("UILocale(%q): got %q, want %q", c.ui, got, c.uiLocale)
		}
		if got := Negotiate(c.ui, "", c.accept).String(); got != c.want {
			t.Errorf("Negotiate(%q, \"\", %q): got %q, want %q", c.ui, c.accept, got, c.want)
		}
	}
}

// TestLanguages: what discovery lists, English first.
func TestTags(t *testing.T) {
	if got, want := Tags(), []string{"en", "de", "fr", "es", "ja"}; !slices.Equal(got, want) {
		t.Errorf("Tags() = %v, want %v", got, want)
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
