package main

import (
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

const signinPage = `<!doctype html><html><body><main>
<h1>Sign in</h1>
<form method="post" action="/authorize/signin">
<input type="hidden" name="csrf_token" value="tok-123">
<input type="hidden" name="step" value="sealed-step">
<label for="email">Email address</label><input type="email" id="email" name="email" autocomplete="username" value="">
<label for="password">Password</label><input type="password" id="password" name="password" autocomplete="current-password">
<button type="submit" name="method" value="password">Sign in</button>
<button type="submit" name="method" value="sms">Text me a code</button>
</form>
<form method="post" action="/other"><button name="decision" value="deny">No</button></form>
</main></body></html>`

func TestFindForm(t *testing.T) {
	doc, err := html.Parse(strings.NewReader(signinPage))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, value string
		action      string
		fields      url.Values
		ok          bool
	}{
		{"method", "password", "/authorize/signin", url.Values{"csrf_token": {"tok-123"}, "step": {"sealed-step"}, "email": {""}, "password": {""}}, true},
		{"decision", "deny", "/other", url.Values{}, true},
		{"decision", "allow", "", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			action, fields, ok := findForm(doc, c.name, c.value)
			if ok != c.ok || action != c.action {
				t.Fatalf("got %q, %v; want %q, %v", action, ok, c.action, c.ok)
			}
			if ok && fields.Encode() != c.fields.Encode() {
				t.Errorf("fields: got %q, want %q", fields.Encode(), c.fields.Encode())
			}
		})
	}
}

func TestCallbackCode(t *testing.T) {
	cases := []struct {
		loc, code, kind string
	}{
		{redirectURI + "?code=abc&state=s1", "abc", ""},
		{redirectURI + "?error=login_required&error_description=x&state=s1", "", "authorize login_required"},
		{redirectURI + "?code=abc&state=other", "", "state_mismatch"},
		{redirectURI + "?state=s1", "", "no_code"},
	}
	for _, c := range cases {
		u, _ := url.Parse(c.loc)
		if !isCallback(u) {
			t.Fatalf("isCallback(%s) = false", c.loc)
		}
		code, err := callbackCode(u, "s1")
		kind := ""
		if err != nil {
			kind = classify(err)
		}
		if code != c.code || kind != c.kind {
			t.Errorf("%s: got %q, %q; want %q, %q", c.loc, code, kind, c.code, c.kind)
		}
	}
	if u, _ := url.Parse("http://127.0.0.1:1/other?code=x"); isCallback(u) {
		t.Error("another path taken for the callback")
	}
}

func TestParseRSS(t *testing.T) {
	status := "Name:\toidcd\nVmPeak:\t  900000 kB\nVmRSS:\t   12345 kB\nThreads:\t9\n"
	got, err := parseRSS(strings.NewReader(status))
	if err != nil || got != 12345*1024 {
		t.Errorf("got %d, %v; want %d", got, err, 12345*1024)
	}
	if _, err := parseRSS(strings.NewReader("Name:\tkthreadd\n")); err == nil {
		t.Error("no VmRSS line: want an error")
	}
}
