package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/net/html"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/internal/testkit/htmlform"
)

// maxBody caps what is read of any answer.
const maxBody = 1 << 20

// opError is a failed operation; kind is its key in the report.
type opError struct{ kind, msg string }

func (e *opError) Error() string { return e.kind + ": " + e.msg }

func failf(kind, format string, args ...any) error {
	return &opError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// statusError is an unexpected HTTP status, with the OAuth error code of
// the body when it has one.
func statusError(status int, body []byte, where string) error {
	kind := fmt.Sprint(status)
	if code := oauthCode(body); code != "" {
		kind += " " + code
	}
	return &opError{kind: kind, msg: fmt.Sprintf("%s: %s", where, snippet(body))}
}

// oauthCode finds the error code of a JSON error body: {"error": "code"}
// (OAuth) or {"error": {"code": "CODE"}} (the JSON error envelope).
func oauthCode(body []byte) string {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Error) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v.Error, &s) == nil {
		return s
	}
	var env struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(v.Error, &env) == nil {
		return env.Code
	}
	return ""
}

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// classify names the kind of a failed operation: the opError kind, the
// HTTP status and OAuth code of a failed token exchange, "timeout" when
// the operation ran out of time, "conn" when a connection failed.
func classify(err error) string {
	var oe *opError
	var re *oauth2.RetrieveError
	var ne net.Error
	switch {
	case errors.As(err, &oe):
		return oe.kind
	case errors.As(err, &re):
		if re.Response == nil {
			return "token"
		}
		kind := fmt.Sprint(re.Response.StatusCode)
		if code := oauthCode(re.Body); code != "" {
			kind += " " + code
		}
		return kind
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, new(*net.OpError)), errors.As(err, new(*url.Error)), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "conn"
	default:
		return "other"
	}
}

// newBrowser is a browser with an empty cookie jar that never follows a
// redirect by itself.
func (b *bench) newBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Transport: b.tr, Jar: jar, CheckRedirect: noRedirect}
}

// page is an answer with its body read.
type page struct {
	url      *url.URL
	status   int
	location *url.URL // resolved, nil when none
	body     []byte
}

// fetch sends one request (a form post when form is not nil) and reads
// the whole answer.
func fetch(ctx context.Context, hc *http.Client, method, rawURL string, form url.Values) (*page, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("User-Agent", "oidcd-bench")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	p := &page{url: resp.Request.URL, status: resp.StatusCode, body: b}
	if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode/100 == 3 {
		if p.location, err = p.url.Parse(loc); err != nil {
			return nil, failf("bad_location", "%q: %v", loc, err)
		}
	}
	return p, nil
}

// isCallback reports whether u is the registered redirect URI.
func isCallback(u *url.URL) bool {
	cb, _ := url.Parse(redirectURI)
	return u.Scheme == cb.Scheme && u.Host == cb.Host && u.Path == cb.Path
}

// signIn runs a browser through /authorize on target at (following the
// provider's own redirects, filling the password form and, should one
// appear, allowing consent) until it is sent to the redirect URI, then
// exchanges the code at target ex with PKCE and verifies the ID token:
// signature, issuer, audience, expiry, nonce and subject. silent asks for
// prompt=none, which must not show any page.
func (b *bench) signIn(ctx context.Context, hc *http.Client, at, ex string, p person, silent bool) (*oauth2.Token, error) {
	verifier, state, nonce := oauth2.GenerateVerifier(), randomHex(12), randomHex(12)
	cfg := b.oauthConfig(at, ex)
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)}
	if silent {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "none"))
	}
	method, next, form := "GET", cfg.AuthCodeURL(state, opts...), url.Values(nil)
	host := targetHost(at)
	var code string
	submitted := false
	for step := 0; code == ""; step++ {
		if step == 10 {
			return nil, failf("too_many_steps", "sign-in did not end after %d pages", step)
		}
		pg, err := fetch(ctx, hc, method, next, form)
		if err != nil {
			return nil, err
		}
		if loc := pg.location; loc != nil {
			switch {
			case isCallback(loc):
				if code, err = callbackCode(loc, state); err != nil {
					return nil, err
				}
			case loc.Host == host:
				method, next, form = "GET", loc.String(), nil
			default:
				return nil, failf("redirect_elsewhere", "%s redirected to %s", pg.url.Path, loc)
			}
			continue
		}
		if silent {
			return nil, failf("page_on_silent", "prompt=none answered %d at %s", pg.status, pg.url.Path)
		}
		if pg.status != http.StatusOK && pg.status != http.StatusBadRequest {
			return nil, statusError(pg.status, pg.body, pg.url.Path)
		}
		doc, err := html.Parse(bytes.NewReader(pg.body))
		if err != nil {
			return nil, failf("bad_html", "%s: %v", pg.url.Path, err)
		}
		if action, values, ok := findForm(doc, "method", "password"); ok {
			if submitted {
				return nil, failf("signin_rejected", "the sign-in form came back with status %d", pg.status)
			}
			submitted = true
			values.Set("email", p.email)
			values.Set("password", p.password)
			values.Set("method", "password")
			method, next, form = "POST", resolve(pg.url, action), values
			continue
		}
		if action, values, ok := findForm(doc, "decision", "allow"); ok {
			values.Set("decision", "allow")
			method, next, form = "POST", resolve(pg.url, action), values
			continue
		}
		if pg.status == http.StatusBadRequest {
			return nil, failf("400 page", "error page at %s", pg.url.Path)
		}
		return nil, failf("unexpected_page", "status %d at %s", pg.status, pg.url.Path)
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, b.rp), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, err
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, failf("no_id_token", "the token response has no id_token")
	}
	idt, err := b.verifier.Verify(ctx, raw)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, failf("id_token_invalid", "%v", err)
	}
	switch {
	case idt.Nonce != nonce:
		return nil, failf("nonce_mismatch", "got %q, want %q", idt.Nonce, nonce)
	case idt.Subject != p.id:
		return nil, failf("wrong_sub", "got %q, want %q", idt.Subject, p.id)
	}
	return tok, nil
}

// callbackCode reads the code from the redirect to the client, or the
// error the provider sent there ("authorize login_required").
func callbackCode(loc *url.URL, state string) (string, error) {
	q := loc.Query()
	switch {
	case q.Get("error") != "":
		return "", failf("authorize "+q.Get("error"), "%s", q.Get("error_description"))
	case q.Get("state") != state:
		return "", failf("state_mismatch", "got %q, want %q", q.Get("state"), state)
	case q.Get("code") == "":
		return "", failf("no_code", "redirect without code: %s", loc)
	}
	return q.Get("code"), nil
}

// resolve turns a form action into an absolute URL ("" posts back to the
// page itself).
func resolve(base *url.URL, action string) string {
	u, err := base.Parse(action)
	if err != nil {
		return base.String()
	}
	return u.String()
}

// findForm returns the action and the inputs (hidden and text: the CSRF
// token and step handle among them) of the post form that holds the
// submit button name=value, as the sign-in pages are laid out.
func findForm(doc *html.Node, name, value string) (string, url.Values, bool) {
	return htmlform.Find(doc, name, value)
}
