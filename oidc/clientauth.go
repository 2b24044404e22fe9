package oidc

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/password"
)

// maxFormBody caps the form bodies of the token, introspection and
// revocation endpoints; ours are a few hundred bytes.
const maxFormBody = 64 << 10

// formBufs are the buffers readTokenForm reads bodies into: io.ReadAll
// grew a new one on every request, a fifth of the bytes an introspection
// allocated. A buffer holds at most maxFormBody (and MinRead) bytes.
var formBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readTokenForm reads an application/x-www-form-urlencoded body of at most
// maxFormBody bytes. The query string is ignored: back-channel parameters
// travel in the body only. A parameter that appears twice is an error
// (RFC 6749 3.2), and so is any body that does not parse; none of these
// is ever a 500.
func readTokenForm(w http.ResponseWriter, r *http.Request) (url.Values, *Error) {
	if ct := r.Header.Get("Content-Type"); ct != formMediaType {
		// The media type as relying parties send it skips the parser;
		// parameters, case and spacing take it.
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != formMediaType {
			return nil, errTokContentType
		}
	}
	buf := formBufs.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxFormBody))
	body := buf.String()
	formBufs.Put(buf)
	if err != nil {
		return nil, errTokMalformed
	}
	form, err := parseForm(body)
	if err != nil {
		return nil, errTokMalformed
	}
	for _, v := range form {
		if len(v) > 1 {
			return nil, errTokRepeated
		}
	}
	return form, nil
}

const formMediaType = "application/x-www-form-urlencoded"

// parseForm is url.ParseQuery, with a shortcut for a body that holds
// nothing to unescape and no semicolon (a token's characters are all
// URL-safe): split on '&' and the first '=', as ParseQuery does, without
// its byte-by-byte unescaping of each part.
func parseForm(body string) (url.Values, error) {
	if strings.IndexByte(body, '%') >= 0 || strings.IndexByte(body, '+') >= 0 || strings.IndexByte(body, ';') >= 0 {
		return url.ParseQuery(body)
	}
	form := make(url.Values, 4)
	for body != "" {
		var part string
		part, body, _ = strings.Cut(body, "&")
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		form[k] = append(form[k], v)
	}
	return form, nil
}

// formParam returns a form parameter; a parameter sent with an empty value is
// treated as omitted (RFC 6749 3.2).
func formParam(form url.Values, name string) string {
	if v := form[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// credentials are what a request presents to identify its client.
type credentials struct {
	id        string // as sent; the rate-limit key uses it before authentication
	secret    string
	hasSecret bool
	basic     bool   // tried the Authorization header: a 401 carries the challenge
	err       *Error // the presentation itself is wrong
}

// clientCredentials reads HTTP Basic (each part form-urlencoded, RFC 6749
// 2.3.1) or the client_id and client_secret fields. Basic together with a
// client_secret field, or with a client_id field naming another client,
// is 400 invalid_request; Basic with the same client_id field is accepted
// (RFC 6749 allows client_id in the body). Any other Authorization scheme,
// or a Basic header that does not decode, fails client authentication;
// either way the client tried the header, so a 401 carries the Basic
// challenge.
func clientCredentials(r *http.Request, form url.Values) credentials {
	formID, formSecret := formParam(form, "client_id"), formParam(form, "client_secret")
	if r.Header.Get("Authorization") == "" {
		return credentials{id: formID, secret: formSecret, hasSecret: formSecret != ""}
	}
	user, pass, ok := r.BasicAuth()
	c := credentials{id: user, basic: true}
	if !ok {
		c.id, c.err = formID, errTokClient
		return c
	}
	id, err1 := url.QueryUnescape(user)
	secret, err2 := url.QueryUnescape(pass)
	switch {
	case err1 != nil || err2 != nil || id == "":
		id, c.err = user, errTokClient
	case formSecret != "" || (formID != "" && formID != id):
		c.err = errTokTwoAuth
	}
	c.id, c.secret, c.hasSecret = id, secret, true
	return c
}

// authenticateWith checks the credentials against the registration,
// read with lookup: fsm.State.Client for the whole record (the token
// endpoint), or fsm.State.ClientAuth (ClientAuthAndLimit) for only the
// fields checked here (the back-channel endpoints). Unknown client, wrong or missing secret
// of a confidential client, a secret from a public client, a public
// client where publicOK is false, and a suspended client all yield
// errTokClient. A store that cannot be read yields errTokUnavailable.
func (p *Provider) authenticateWith(ctx context.Context, c credentials, publicOK bool, lookup func(id string) (fsm.Client, error)) (fsm.Client, *Error) {
	if c.err != nil {
		return fsm.Client{}, c.err
	}
	if c.id == "" {
		return fsm.Client{}, errTokClient
	}
	cl, err := lookup(c.id)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return fsm.Client{}, errTokClient
	case err != nil:
		p.log.Error("read client", "err", err, "correlation_id", httpx.CorrelationID(ctx))
		return fsm.Client{}, errTokUnavailable
	}
	if cl.Type != fsm.ClientConfidential {
		if !publicOK || c.hasSecret || c.basic {
			return fsm.Client{}, errTokClient
		}
	} else if !c.hasSecret || !password.VerifySecret(c.secret, cl.SecretHash) {
		// Client secrets are 256-bit random values stored as SHA-256
		// (password.HashSecret): the check is constant-time and takes the
		// same few hundred nanoseconds whether or not the client exists.
		return fsm.Client{}, errTokClient
	}
	if cl.Suspended {
		return fsm.Client{}, errTokClient
	}
	return cl, nil
}

// writeClientError answers a client-authentication or request error; a
// 401 to a client that tried the Authorization header carries
// WWW-Authenticate: Basic realm="oidcd" (RFC 6749 5.2).
func writeClientError(w http.ResponseWriter, c credentials, e *Error) {
	if e.Status == http.StatusUnauthorized && c.basic {
		w.Header().Set("WWW-Authenticate", `Basic realm="oidcd"`)
	}
	writeOAuthError(w, e)
}
