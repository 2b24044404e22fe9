package cli

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"strings"
)

// The pages `oidcd admin login` shows the browser on its loopback
// listener. They are the CLI's own, served from 127.0.0.1 and not the
// provider's origin, so they cannot link the provider's stylesheet; they
// look like the provider's pages (webui/static/style.css: the card on the
// grey page, its colours in both schemes, its type) through a small copy
// of that stylesheet in a <style> element, which the page's content
// security policy allows by its hash and nothing else. Like the rest of
// the CLI, they are in English.

// loginCSS is the loopback pages' stylesheet: the card, the colours and
// the type of webui/static/style.css, and nothing the pages do not use.
const loginCSS = `
:root{color-scheme:light dark;--bg:#f3f4f6;--card:#fff;--text:#111827;--muted:#4b5563;--border:#9ca3af;--primary:#1d4ed8;--primary-hover:#1e40af;--alert-bg:#fef2f2;--alert-border:#b91c1c;--alert-text:#7f1d1d}
@media (prefers-color-scheme:dark){:root{--bg:#111318;--card:#1c1f26;--text:#f3f4f6;--muted:#c2c7d0;--border:#6b7280;--primary:#93b4ff;--primary-hover:#b8ceff;--alert-bg:#3b1216;--alert-border:#f87171;--alert-text:#fecaca}}
*,*::before,*::after{box-sizing:border-box}
html{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans",sans-serif;line-height:1.5;-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{margin:0;min-height:100vh;min-height:100dvh;display:flex;flex-direction:column;align-items:center;padding:1rem;background:var(--bg);color:var(--text)}
body>:first-child{margin-top:auto}
body>:last-child{margin-bottom:auto}
.card{width:100%;max-width:26rem;padding:1.5rem;background:var(--card);border:1px solid var(--border);border-radius:.75rem;overflow-wrap:anywhere}
.card>:last-child{margin-bottom:0}
@media (max-width:22rem){body{padding:.5rem}.card{padding:1rem}}
.site{margin-bottom:1rem;font-size:1.25rem;font-weight:600;line-height:1.25}
h1{margin:0 0 .5rem;font-size:1.5rem;line-height:1.25}
p{margin:0 0 1rem}
.lead,.hint{color:var(--muted)}
a{color:var(--primary);text-underline-offset:.15em}
a:hover{color:var(--primary-hover)}
a:focus-visible{outline:3px solid var(--primary);outline-offset:2px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:.9em}
.alert{padding:.75rem 1rem;color:var(--alert-text);background:var(--alert-bg);border-left:4px solid var(--alert-border);border-radius:.25rem}
.next a{font-weight:600}
@media (forced-colors:active){a:focus-visible{outline-color:Highlight}}
`

// loginCSP is the loopback pages' content security policy: nothing but
// loginCSS, by its hash; no script, no image, no form, no frame.
var loginCSP = func() string {
	sum := sha256.Sum256([]byte(loginCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// loginView is one loopback page: a heading, what happened, and
// optionally what to do next (a sentence around a link), and the
// provider's answer as it came.
type loginView struct {
	Title   string
	Message string
	// Next, when set, is the step to take: Before, the link, After.
	Next *loginNext
	// Error is the provider's error as it came (code: description).
	Error string
	Hint  string
	CSS   template.CSS
}

type loginNext struct {
	Before, URL, After string
}

var loginTemplate = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>{{.Title}} – oidcd admin login</title>
<style>{{.CSS}}</style>
</head>
<body>
<p class="site">oidcd admin login</p>
<main class="card">
<h1>{{.Title}}</h1>
<p class="lead">{{.Message}}</p>
{{- with .Next}}
<p class="next">{{.Before}}<a href="{{.URL}}">{{.URL}}</a>{{.After}}</p>
{{- end}}
{{- with .Error}}
<p class="alert">The provider answered: <code>{{.}}</code></p>
{{- end}}
{{- with .Hint}}
<p class="hint">{{.}}</p>
{{- end}}
</main>
</body>
</html>
`))

// noSecondFactor is the provider's answer to a person who must sign in
// with a second factor (--admin-acr) and has none enrolled
// (oidc/authorize.go; its description is matched whole by clients).
const noSecondFactor = "access_denied: strong authentication required; no second factor enrolled"

// enrolURL is where a person enrols a second factor: the provider's
// /account page.
func enrolURL(issuer string) string {
	return strings.TrimRight(issuer, "/") + "/account"
}

// Texts of the pages, and of the terminal where they say the same.
const (
	enrolBefore = "Enrol a second factor (an authenticator app or a passkey) at "
	enrolAfter  = ", then run oidcd admin login again."
)

// failedView is the page of a sign-in that came back with err.
func failedView(err, issuer string) loginView {
	if err == noSecondFactor {
		return loginView{
			Title:   "A second factor is needed",
			Message: "Administrators sign in with a second factor, and this account has none yet.",
			Next:    &loginNext{Before: enrolBefore, URL: enrolURL(issuer), After: enrolAfter},
			Error:   err,
			Hint:    "The terminal says the same. You may close this window.",
		}
	}
	return loginView{
		Title:   "Sign-in failed",
		Message: "oidcd admin login did not sign you in.",
		Error:   err,
		Hint:    "See the terminal for what to do next. You may close this window.",
	}
}

// signedInView is the page of a sign-in that brought a code.
var signedInView = loginView{
	Title:   "Signed in",
	Message: "oidcd admin login has your sign-in. You may close this window and return to the terminal.",
}

// page writes a loopback page.
func page(w http.ResponseWriter, status int, v loginView) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", loginCSP)
	w.WriteHeader(status)
	v.CSS = template.CSS(loginCSS)
	_ = loginTemplate.Execute(w, v)
}
