package chrometest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

var pages = map[string]string{
	"/labeled": `<form method="post">
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username">
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<label for="org">Organization</label><select id="org" name="org"><option>a</option></select>
<label for="note">Note</label><textarea id="note" name="note"></textarea>
<label><input type="checkbox" name="remember"> Remember</label>
<input type="hidden" name="csrf" value="x">
<input type="text" name="invisible" style="display:none">
<input type="submit" name="method" value="password"><button name="method" value="sms">Text</button>
</form>`,
	"/unlabeled": `<form method="post">
<input name="q">
<label for="code">Code</label><input id="code" name="code" type="text">
<select name="pick"><option>a</option></select>
<label for="x">Not for it</label><input type="checkbox" name="cb">
<input type="hidden" name="csrf" value="x">
<input type="submit" value="go">
</form>`,
}

func server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html lang=en><title>t</title><body>%s</body></html>", body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fakeT records what CheckForm reports instead of failing the real test.
type fakeT struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func TestFormProblems(t *testing.T) {
	srv := server(t)
	ctx := New(t)
	tests := []struct {
		path string
		want []string
	}{
		{"/labeled", nil},
		{"/unlabeled", []string{
			`input type="text" name="q": no <label>`,
			`input type="text" name="q": no autocomplete`,
			`input type="text" name="code" id="code": no autocomplete`,
			`select name="pick": no <label>`,
			`input type="checkbox" name="cb": no <label>`,
		}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.path, "/"), func(t *testing.T) {
			Do(t, ctx, chromedp.Navigate(srv.URL+tt.path))
			got, err := FormProblems(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}

			f := &fakeT{TB: t}
			CheckForm(f, ctx)
			if failed := len(f.errors) > 0; failed != (tt.want != nil) {
				t.Errorf("CheckForm reported %q, want failure %v", f.errors, tt.want != nil)
			}
		})
	}
}

func TestScreenshot(t *testing.T) {
	srv := server(t)
	dir := t.TempDir()
	t.Setenv("OIDCD_SCREENSHOTS", dir)
	ctx := New(t)
	Do(t, ctx, chromedp.Navigate(srv.URL+"/labeled"))
	if got := Location(t, ctx); got != srv.URL+"/labeled" {
		t.Errorf("got location %q, want %q", got, srv.URL+"/labeled")
	}
	Screenshot(t, ctx, "labeled")
	b, err := os.ReadFile(filepath.Join(dir, "labeled.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "\x89PNG\r\n\x1a\n") {
		t.Errorf("got %d bytes starting %q, want a PNG", len(b), b[:min(8, len(b))])
	}
}
