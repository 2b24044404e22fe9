package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

func TestCheckLoopbackURL(t *testing.T) {
	cases := []struct {
		in, want string // want "" = refused
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080"},
		{"https://127.0.0.1", "https://127.0.0.1"},
		{"http://127.1.2.3:9000", "http://127.1.2.3:9000"},
		{"http://127.255.255.254:1", "http://127.255.255.254:1"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"http://localhost:8080", "http://localhost:8080"},
		{"http://LOCALHOST:8080", "http://LOCALHOST:8080"},
		{"http://localhost.:8080", "http://localhost.:8080"},
		{"http://[::ffff:127.0.0.1]:8080", "http://[::ffff:127.0.0.1]:8080"},
		{"http://127.0.0.1:8080/prefix/", "http://127.0.0.1:8080/prefix"},
		{"http://10.0.0.1:8080", ""},
		{"http://128.0.0.1:8080", ""},
		{"http://0.0.0.0:8080", ""},
		{"http://[::]:8080", ""},
		{"http://192.168.1.10", ""},
		{"http://example.com", ""},
		{"http://localhost.example.com", ""},
		{"http://127.0.0.1.nip.io", ""},
		{"http://sub.localhost", ""},
		{"ftp://127.0.0.1", ""},
		{"127.0.0.1:8080", ""},
		{"http://user:pw@127.0.0.1:8080", ""},
		{"http://127.0.0.1:8080/?q=1", ""},
		{"", ""},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := checkLoopbackURL(c.in)
			switch {
			case c.want == "" && err == nil:
				t.Errorf("got %q, want refusal", got)
			case c.want != "" && err != nil:
				t.Errorf("refused: %v", err)
			case got != c.want:
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	if _, err := checkLoopbackURL("http://10.1.2.3"); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("refusal should say why: %v", err)
	}
}

func TestLoopbackOnlyDialGuard(t *testing.T) {
	cases := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:80", true},
		{"127.9.9.9:80", true},
		{"[::1]:80", true},
		{"10.0.0.1:80", false},
		{"[2001:db8::1]:443", false},
		{"0.0.0.0:80", false},
		{"localhost:80", false}, // at dial time the address is already resolved
	}
	for _, c := range cases {
		err := loopbackOnly("tcp", c.addr, nil)
		if (err == nil) != c.ok {
			t.Errorf("loopbackOnly(%q) = %v, want ok %v", c.addr, err, c.ok)
		}
	}
	// The transport really refuses: a request elsewhere never leaves.
	hc := &http.Client{Transport: newTransport(1)}
	_, err := hc.Get("http://192.0.2.1:9/")
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("GET of a non-loopback address: %v, want the guard's refusal", err)
	}
}

func TestClassify(t *testing.T) {
	retrieve := func(status int, body string) error {
		return &oauth2.RetrieveError{Response: &http.Response{StatusCode: status}, Body: []byte(body)}
	}
	cases := []struct {
		err  error
		want string
	}{
		{failf("inactive", "x"), "inactive"},
		{fmt.Errorf("wrapped: %w", failf("authorize login_required", "x")), "authorize login_required"},
		{statusError(503, []byte(`{"error":"temporarily_unavailable"}`), "/userinfo"), "503 temporarily_unavailable"},
		{statusError(429, []byte(`{"error":{"code":"RATE_LIMITED","message":"slow down"}}`), "/oauth2/introspect"), "429 RATE_LIMITED"},
		{statusError(502, []byte(`<html>bad gateway</html>`), "/"), "502"},
		{retrieve(400, `{"error":"invalid_grant"}`), "400 invalid_grant"},
		{retrieve(500, `oops`), "500"},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), "timeout"},
		{&url.Error{Op: "Get", URL: "http://127.0.0.1:1", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, "conn"},
		{errors.New("something else"), "other"},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
