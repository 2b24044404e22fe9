package testcluster

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/testkit/htmlform"
)

// Browser is a person's browser for black-box tests: it keeps cookies, does
// not follow redirects (tests look at every Location), and submits forms
// the way the sign-in pages lay them out (package webui).
type Browser struct {
	t      testing.TB
	Client *http.Client
}

// NewBrowser returns a browser with an empty cookie jar.
func NewBrowser(t testing.TB) *Browser {
	jar, _ := cookiejar.New(nil)
	return &Browser{t: t, Client: &http.Client{
		Transport:     LoopbackTransport(),
		Jar:           jar,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Page is a fetched response with its body read.
type Page struct {
	URL    *url.URL
	Status int
	Header http.Header
	Body   string
}

// Location resolves the redirect target of the page ("" when none).
func (p *Page) Location() string {
	loc := p.Header.Get("Location")
	if loc == "" {
		return ""
	}
	u, err := p.URL.Parse(loc)
	if err != nil {
		return loc
	}
	return u.String()
}

// Get fetches rawURL.
func (b *Browser) Get(rawURL string) *Page {
	b.t.Helper()
	resp, err := b.Client.Get(rawURL)
	if err != nil {
		b.t.Fatalf("GET %s: %v", rawURL, err)
	}
	return b.read(resp)
}

func (b *Browser) read(resp *http.Response) *Page {
	b.t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return &Page{URL: resp.Request.URL, Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
}

// Follow fetches the page's Location while it redirects to base (the
// provider), stopping at the first page or at a redirect elsewhere (the
// relying party's callback).
func (b *Browser) Follow(p *Page, base string) *Page {
	b.t.Helper()
	for i := 0; i < 10; i++ {
		loc := p.Location()
		if loc == "" || !strings.HasPrefix(loc, base) {
			return p
		}
		p = b.Get(loc)
	}
	b.t.Fatalf("too many redirects from %s", p.URL)
	return nil
}

// Submit fills the page's form that contains the named button, sets
// fields, and posts it with that button pressed (name=value). An empty
// name presses a page's plain submit button, the one of a page that asks
// for one thing only.
func (b *Browser) Submit(p *Page, fields map[string]string, buttonName, buttonValue string) *Page {
	b.t.Helper()
	action, values, err := htmlform.FindIn(strings.NewReader(p.Body), buttonName, buttonValue)
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", p.URL, err, p.Body)
	}
	for k, v := range fields {
		values.Set(k, v)
	}
	if buttonName != "" {
		values.Set(buttonName, buttonValue)
	}
	target, err := p.URL.Parse(action)
	if err != nil {
		b.t.Fatal(err)
	}
	resp, err := b.Client.PostForm(target.String(), values)
	if err != nil {
		b.t.Fatalf("POST %s: %v", target, err)
	}
	return b.read(resp)
}
