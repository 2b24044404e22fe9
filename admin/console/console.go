package console

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/seal"
)

// Prefix is where the console lives; mount New's handler as
// mux.Handle(console.Prefix, h).
const Prefix = "/console/"

// Cookie names and lifetimes.
const (
	cookieSession = "oidcd_console"
	cookieCSRF    = "oidcd_console_csrf"
	// SessionLifetime is how long a console sign-in lasts.
	SessionLifetime = 8 * time.Hour
	// purposeSession binds sealed session values to this use of the
	// browser key (seal binds the purpose as additional data).
	purposeSession = "oidcd.console.session.v1"
	maxFormBytes   = 64 << 10
)

// Config wires the console to one node.
type Config struct {
	// Admin is the node's admin API configuration. The console serves its
	// own in-process instance of that API (see New) and calls it for every
	// read and write. Admin.TokenHash (or, when nil, the replicated hash)
	// decides who may sign in, and Admin.Guard (the node's, shared with
	// the admin API; nil: one of the console's own) counts the token
	// form's guesses.
	Admin admin.Config
	// Issuer is the provider's issuer. On the public listener its scheme
	// decides the cookies' Secure attribute (secureFor).
	Issuer string
	// OwnListener: the console is served on a listener of its own
	// (--admin-addr), which a browser reaches directly (a management
	// network) rather than through the issuer's balancer, so only the
	// request's own TLS says whether the browser speaks https.
	OwnListener bool
	// BrowserKey returns the cluster's 32-byte browser key (opened from
	// its stored form), which seals the session cookie so that every node
	// accepts it; an error while it is not replicated yet.
	BrowserKey func() ([]byte, error)
	// Secret is held by every node outside the replicated state (derived
	// from the cluster key and the KEK when one is set). It keys the
	// session's fingerprint, so a copy of the state or of a backup, which
	// holds the browser key and the admin token's hash, cannot forge a
	// console session; adopting a KEK changes it and ends every session.
	Secret []byte

	// CallbackBase is the console's own external base URL, where the
	// browser comes back from the provider: the redirect URI of a person's
	// sign-in is CallbackBase + "/console/callback", which must be one of
	// the built-in client's (admin.ClientID) redirect URIs. Empty: the
	// issuer when the console shares the public listener; on a listener
	// of its own (OwnListener), the scheme and host the browser used to
	// reach it, since the browser reaches that listener directly.
	CallbackBase string
	// Exchange redeems an authorization code of the built-in client at
	// the provider's token endpoint (public client, PKCE). Node fills it
	// with ExchangeVia over its own protocol handler, so the exchange is
	// made in process and counted against the browser's address. Nil:
	// HTTPExchange to Issuer + "/oauth2/token".
	Exchange func(ctx context.Context, code, verifier, redirectURI string) (Tokens, error)
}

// Console is the admin console's HTTP handler.
type Console struct {
	api       http.Handler // a private admin API instance
	apiToken  string       // the only token api accepts; never leaves the process
	tokenHash func() string
	guard     *admin.Guard // the node's: counts the token form's guesses
	secret    []byte
	key       func() ([]byte, error)
	now       func() time.Time
	log       *slog.Logger
	// httpsIssuer and ownListener decide secureFor.
	httpsIssuer bool
	ownListener bool
	mux         *http.ServeMux

	// A person's sign-in through the provider (person.go).
	issuer       string
	callbackBase string
	adminACR     string
	exchange     func(ctx context.Context, code, verifier, redirectURI string) (Tokens, error)

	// mail: the provider sends mail (admin.Config.Mail); without it the
	// forms that would send some are not shown.
	mail bool

	boxMu sync.Mutex
	box   *seal.Box
}

var _ http.Handler = (*Console)(nil)

// New returns the console. It builds a private instance of the admin API
// from cfg.Admin whose only accepted token is a random value generated
// here and held in memory: the console authenticates the operator itself
// (admin token once, then a sealed session cookie) and then calls that API
// in-process, so every validation, stamp and error is the API's own.
//
// The token form counts its guesses in cfg.Admin.Guard, the node's guard
// that the admin API counts in too. The private instance gets a guard of
// its own instead: its token cannot be guessed (it never leaves the
// process) and always matches, so counting its calls against the
// person's address in the node's guard would only let an address locked
// out by someone's guesses (one office behind one NAT) break every page
// of an operator signed in from it, and let a busy console's calls in
// flight refuse the address's right tokens on the API.
func New(cfg Config) *Console {
	ac := cfg.Admin
	if ac.Now == nil {
		ac.Now = time.Now
	}
	if ac.Logger == nil {
		ac.Logger = slog.New(slog.DiscardHandler)
	}
	if ac.Guard == nil {
		ac.Guard = admin.NewGuard(ac.Now)
	}
	tokenHash := ac.TokenHash
	if tokenHash == nil {
		st := ac.State
		tokenHash = func() string {
			h, _ := st.AdminTokenHash() // a read error lets nobody in
			return h
		}
	}
	c := &Console{
		apiToken:    admin.GenerateToken(),
		tokenHash:   tokenHash,
		guard:       ac.Guard,
		secret:      cfg.Secret,
		key:         cfg.BrowserKey,
		now:         ac.Now,
		log:         ac.Logger,
		httpsIssuer: strings.HasPrefix(cfg.Issuer, "https://"),
		ownListener: cfg.OwnListener,

		issuer:       strings.TrimSuffix(cfg.Issuer, "/"),
		callbackBase: strings.TrimSuffix(cfg.CallbackBase, "/"),
		adminACR:     ac.AdminACR,
		exchange:     cfg.Exchange,
		mail:         ac.Mail,
	}
	if c.adminACR == "" {
		c.adminACR = defaultAdminACR
	}
	if c.exchange == nil {
		c.exchange = HTTPExchange(nil, c.issuer+tokenPath)
	}
	inner := admin.HashToken(c.apiToken)
	ac.TokenHash = func() string { return inner }
	ac.Guard = admin.NewGuard(ac.Now)
	c.api = admin.New(ac)
	c.mux = http.NewServeMux()
	c.routes()
	return c
}

// ServeHTTP serves everything under Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mux.ServeHTTP(w, r)
}

// session is what the sealed session cookie holds, for one of two kinds
// of sign-in, with the CSRF token the session is bound to:
//
//   - The admin token: a fingerprint of the token's stored hash (so
//     changing the token ends every console session, and the cookie holds
//     neither the token nor its hash).
//   - A person, through the provider (Token set): their access token,
//     which every call of the admin API carries as the bearer, so the
//     API's own check (acr, grant, liveness) decides each request; the
//     fingerprint is keyed over that token. Sub, Name and Role are what
//     the header shows, as they were at sign-in.
type session struct {
	Fingerprint string `json:"f"`
	CSRF        string `json:"c"`
	Token       string `json:"t,omitempty"`
	Sub         string `json:"s,omitempty"`
	Name        string `json:"n,omitempty"`
	Role        string `json:"r,omitempty"`
}

// person reports whether s is a person's session.
func (s session) person() bool { return s.Token != "" }

// fingerprint derives the session's proof from the admin token's stored
// hash, keyed with the node's secret; "" for no hash.
func (c *Console) fingerprint(tokenHash string) string {
	if tokenHash == "" {
		return ""
	}
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("oidcd-console\x00" + tokenHash))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// personFingerprint is a person session's proof over their access token,
// keyed with the node's secret like fingerprint.
func (c *Console) personFingerprint(accessToken string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("oidcd-console-person\x00" + accessToken))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// errNoBrowserKey: the replicated browser key is not there yet.
var errNoBrowserKey = errors.New("console: browser key not available yet")

// sealer returns the Box over the cluster's browser key, so any node opens
// a session cookie that another node sealed.
func (c *Console) sealer() (*seal.Box, error) {
	c.boxMu.Lock()
	defer c.boxMu.Unlock()
	if c.box != nil {
		return c.box, nil
	}
	if c.key == nil {
		return nil, errNoBrowserKey
	}
	key, err := c.key()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoBrowserKey, err)
	}
	b, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	c.box = b
	return b, nil
}

// currentSession returns the request's session when its cookie opens and
// still matches the admin token and the CSRF cookie.
func (c *Console) currentSession(r *http.Request) (session, bool) {
	ck, err := r.Cookie(c.cookieName(r, cookieSession))
	if err != nil {
		return session{}, false
	}
	box, err := c.sealer()
	if err != nil {
		return session{}, false
	}
	var s session
	if box.Open(purposeSession, ck.Value, c.now(), &s) != nil {
		return session{}, false
	}
	want := ""
	if s.person() {
		want = c.personFingerprint(s.Token)
	} else {
		want = c.fingerprint(c.tokenHash())
	}
	if want == "" || subtle.ConstantTimeCompare([]byte(s.Fingerprint), []byte(want)) != 1 {
		return session{}, false
	}
	if csrf := c.cookieValue(r, cookieCSRF); csrf == "" || subtle.ConstantTimeCompare([]byte(csrf), []byte(s.CSRF)) != 1 {
		return session{}, false
	}
	return s, true
}

// secureFor reports whether the cookies of r's answer are Secure. A
// browser drops a Secure cookie set over plain HTTP and never sends one
// back over it (the console then answers "the form was stale" forever),
// and a cookie that is not Secure may leak over plain HTTP, so the
// attribute follows the scheme the browser speaks:
//
//   - r came over TLS (--tls-cert on the node): https.
//   - The console has a listener of its own (--admin-addr) and r came over
//     plain HTTP: the browser is on that listener directly, a management
//     network, whatever the issuer's scheme. (An admin listener behind a
//     TLS-terminating balancer gets cookies that are not Secure; they
//     still work, HttpOnly and SameSite=Strict.)
//   - The console shares the public listener and r came over plain HTTP:
//     the browser speaks the issuer's scheme to the balancer in front
//     (an https issuer there is TLS terminated at the balancer; an http
//     issuer is loopback or development).
//
// TestCookiesFitTheListener walks these cases.
func (c *Console) secureFor(r *http.Request) bool {
	switch {
	case r.TLS != nil:
		return true
	case c.ownListener:
		return false
	}
	return c.httpsIssuer
}

// cookieName and cookiePath are the name and path of the console's cookie
// name on r's listener. A Secure cookie gets the __Host- prefix, which a
// browser accepts only Secure, with path / and no Domain, so that a
// sibling subdomain can neither plant nor shadow the CSRF cookie the
// double submit trusts (HttpOnly and SameSite=Strict keep it from other
// pages). A cookie that is not Secure keeps its plain name, since a
// browser refuses a __Host- cookie without Secure, and the console's path.
func (c *Console) cookieName(r *http.Request, name string) string {
	if c.secureFor(r) {
		return "__Host-" + name
	}
	return name
}

func (c *Console) cookiePath(r *http.Request) string {
	if c.secureFor(r) {
		return "/"
	}
	return Prefix
}

// cookieValue is the value of the console's cookie name on r, "" if none.
func (c *Console) cookieValue(r *http.Request, name string) string {
	ck, err := r.Cookie(c.cookieName(r, name))
	if err != nil {
		return ""
	}
	return ck.Value
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	c.setCookieSameSite(w, r, name, value, maxAge, http.SameSiteStrictMode)
}

// setCookieSameSite is setCookie with another SameSite mode: Lax only for
// the sign-in flow's cookie, which must come back on the provider's
// redirect to the callback, a navigation that may start on another site.
func (c *Console) setCookieSameSite(w http.ResponseWriter, r *http.Request, name, value string, maxAge int, sameSite http.SameSite) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the scheme the browser speaks on this listener (secureFor; TestCookiesFitTheListener)
	http.SetCookie(w, &http.Cookie{
		Name:     c.cookieName(r, name),
		Value:    value,
		Path:     c.cookiePath(r),
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   c.secureFor(r),
		SameSite: sameSite,
	})
}

// csrfToken returns the browser's CSRF token, setting a fresh cookie when
// it has none of the right shape.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if v := c.cookieValue(r, cookieCSRF); isToken(v) {
		return v
	}
	v := httpx.NewID()
	c.setCookie(w, r, cookieCSRF, v, 0)
	return v
}

// isToken reports whether v has the shape of httpx.NewID (32 hex digits).
func isToken(v string) bool {
	if len(v) != 32 {
		return false
	}
	for _, r := range v {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// checkCSRF reports whether the posted csrf_token equals the CSRF cookie
// (double submit). The form must have been parsed.
func (c *Console) checkCSRF(r *http.Request) bool {
	ck := c.cookieValue(r, cookieCSRF)
	field := r.PostForm.Get("csrf_token")
	return isToken(ck) && subtle.ConstantTimeCompare([]byte(ck), []byte(field)) == 1
}

// startSession signs the browser in with the admin token.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, csrf string) error {
	return c.seal(w, r, session{Fingerprint: c.fingerprint(c.tokenHash()), CSRF: csrf}, SessionLifetime)
}

// seal sets the session cookie holding s for lifetime, and the CSRF
// cookie it is bound to.
func (c *Console) seal(w http.ResponseWriter, r *http.Request, s session, lifetime time.Duration) error {
	box, err := c.sealer()
	if err != nil {
		return err
	}
	v, err := box.Seal(purposeSession, s, c.now().Add(lifetime))
	if err != nil {
		return err
	}
	c.setCookie(w, r, cookieSession, v, int(lifetime/time.Second))
	// The CSRF cookie outlives a browser restart as long as the session.
	c.setCookie(w, r, cookieCSRF, s.CSRF, int(lifetime/time.Second))
	return nil
}

func (c *Console) endSession(w http.ResponseWriter, r *http.Request) {
	c.setCookie(w, r, cookieSession, "", -1)
}

// apiError is a non-2xx answer of the admin API.
type apiError struct {
	Status  int
	Code    string
	Message string
	Details []httpx.Detail
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// recorder is the ResponseWriter of an in-process API call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rec *recorder) Header() http.Header { return rec.header }
func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
}
func (rec *recorder) Write(p []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	return rec.body.Write(p)
}

// call sends one request to the private admin API: method, a path under
// admin.Prefix (with query), an optional JSON body, and out to decode a
// 2xx answer into (nil to ignore it). The request keeps r's context, and
// with it the correlation id, so the API's logs line up with the page's.
func (c *Console) call(r *http.Request, method, path string, body, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, admin.Prefix+path, rd)
	if err != nil {
		return err
	}
	req.RemoteAddr = httpx.ClientAddr(r)
	// A person's session calls as that person: the API's own check
	// decides. Otherwise (the admin token's session) the private token.
	bearer := c.apiToken
	rs := requestSession(r.Context())
	if rs != nil && rs.s.person() {
		bearer = rs.s.Token
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}}
	c.api.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rs != nil && rs.s.person() && refusesPerson(rec.status, rec.header) {
		// The person is no longer an administrator here (grant removed,
		// SSO session ended, acr too low): authenticated ends the session.
		rs.ended.Store(true)
	}
	if rec.status >= 300 {
		var env httpx.Envelope
		if json.Unmarshal(rec.body.Bytes(), &env) != nil || env.Error.Code == "" {
			return &apiError{Status: rec.status, Code: httpx.CodeInternal, Message: "unexpected answer"}
		}
		return &apiError{Status: rec.status, Code: env.Error.Code, Message: env.Error.Message, Details: env.Error.Details}
	}
	if out != nil && rec.status != http.StatusNoContent {
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return fmt.Errorf("console: decode %s %s: %w", method, path, err)
		}
	}
	return nil
}

// pathID escapes an id for a path segment of the admin API.
func pathID(id string) string { return url.PathEscape(id) }

// ctxTimeout bounds the work of one console request.
func ctxTimeout(r *http.Request) (*http.Request, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	return r.WithContext(ctx), cancel
}
