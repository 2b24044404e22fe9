package axe

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oidcd/oidcd/internal/testkit/chrometest"
)

// strictCSP is the provider's pages' policy: no script at all.
const strictCSP = "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'"

// TestRunUnderStrictCSP: axe goes into a page whose policy allows no
// script, finds the faults of a faulty page (an unlabelled field, an
// image without alt, no lang) and none on a clean one.
func TestRunUnderStrictCSP(t *testing.T) {
	Script(t)
	pages := map[string]string{
		"/bad": `<!DOCTYPE html><html><head><title>Bad</title></head><body><main>
<img src="/x.png"><form><input name="q"></form></main></body></html>`,
		"/good": `<!DOCTYPE html><html lang="en"><head><title>Good</title></head><body><main>
<h1>Search</h1><form><label for="q">Query</label><input id="q" name="q"></form></main></body></html>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Security-Policy", strictCSP)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(body))
	}))
	defer srv.Close()
	ctx := chrometest.New(t)

	chrometest.Do(t, ctx, chromedp.Navigate(srv.URL+"/bad"))
	var ids []string
	for _, v := range Run(t, ctx) {
		ids = append(ids, v.ID)
		if len(v.Targets) == 0 || v.Help == "" || v.Impact == "" {
			t.Errorf("violation without its detail: %+v", v)
		}
	}
	for _, want := range []string{"html-has-lang", "image-alt", "label"} {
		if !slices.Contains(ids, want) {
			t.Errorf("bad page: violations %q, want %s among them", ids, want)
		}
	}
	// The page's own policy still holds: an inline script does not run.
	blocked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.createElement("script"); s.textContent = "window.ran = true"; document.body.append(s); return window.ran !== true; })()`))
	if err != nil || !blocked {
		t.Errorf("an inline script ran under the page's policy (blocked=%v, %v)", blocked, err)
	}

	chrometest.Do(t, ctx, chromedp.Navigate(srv.URL+"/good"))
	if vs := Run(t, ctx); len(vs) != 0 {
		t.Errorf("good page: %v", vs)
	}
}
