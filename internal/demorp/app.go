package demorp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Paths of demo-rp, relative to its base URL. The provider's demo client
// registers callback and signed-out as redirect URIs and
// backchannel-logout as its back-channel logout URI.
const (
	PathCallback          = "/callback"
	PathSignedOut         = "/signed-out"
	PathBackchannelLogout = "/backchannel-logout"
)

// Bounds of the in-memory state, so a busy or hostile caller cannot grow it
// without limit.
const (
	maxLogins   = 1000
	maxSessions = 1000
	maxEvents   = 20
	maxJTIs     = 1000
	loginTTL    = 10 * time.Minute
)

const (
	cookieSession = "demorp_session"
	cookieState   = "demorp_state"
)

// Config configures the app.
type Config struct {
	Issuer       string // the provider's issuer (required)
	BaseURL      string // where this app is reached, e.g. http://127.0.0.1:9090 (required)
	ClientID     string // required
	ClientSecret string // empty: a public client
	Logger       *slog.Logger
	// HTTPClient talks to the provider; default a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	Now        func() time.Time
}

// App is the relying party's HTTP handler.
type App struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	mux    *http.ServeMux

	provMu sync.Mutex
	prov   *provider // discovered on first use; nil until then

	mu       sync.Mutex
	logins   map[string]login    // pending sign-ins by state
	sessions map[string]*session // by cookie value
	events   []Event             // back-channel logouts received, newest first
	jtis     map[string]time.Time
}

// provider is what discovery yields.
type provider struct {
	oidc        *oidc.Provider
	verifier    *oidc.IDTokenVerifier
	oauth       oauth2.Config
	endSession  string
	memberships string
}

type login struct {
	nonce, verifier string
	expires         time.Time
}

// session is this app's own session of a signed-in person.
type session struct {
	ID, CSRF    string
	IDToken     string // raw, sent back as id_token_hint
	Sub, SID    string
	Email       string
	Claims      string     // pretty JSON of the ID token's claims
	ClaimRows   []claimRow // the same, as a table a person reads
	UserInfo    string     // pretty JSON of the userinfo answer, or the error
	Memberships string     // pretty JSON of /api/v1/me/memberships, or the error
	Created     time.Time
	LogoutState string    // state sent with RP-initiated logout
	Ended       string    // why the session ended; "" while it lives
	EndedAt     time.Time // when
}

// Event is one back-channel logout request received.
type Event struct {
	At        time.Time
	Sub, SID  string
	JTI       string
	Ended     int    // sessions of this app it ended
	Error     string // why the token was refused; "" when accepted
	Duplicate bool   // a jti seen before
}

// New returns the app. It discovers the provider on first use, so it may
// start before the provider does.
func New(cfg Config) (*App, error) {
	if cfg.Issuer == "" || cfg.BaseURL == "" || cfg.ClientID == "" {
		return nil, errors.New("demorp: Issuer, BaseURL and ClientID are required")
	}
	if _, err := url.ParseRequestURI(cfg.BaseURL); err != nil {
		return nil, fmt.Errorf("demorp: base URL: %w", err)
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	a := &App{cfg: cfg, log: cfg.Logger, client: client, mux: http.NewServeMux(),
		logins: map[string]login{}, sessions: map[string]*session{}, jtis: map[string]time.Time{}}
	a.mux.HandleFunc("GET /{$}", a.home)
	a.mux.HandleFunc("GET /login", a.login)
	a.mux.HandleFunc("GET "+PathCallback, a.callback)
	a.mux.HandleFunc("POST /logout", a.logout)
	a.mux.HandleFunc("GET "+PathSignedOut, a.signedOut)
	a.mux.HandleFunc("POST "+PathBackchannelLogout, a.backchannelLogout)
	a.mux.HandleFunc("GET /style.css", serveStyle)
	return a, nil
}

// ServeHTTP serves the app.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Events returns the back-channel logouts received, newest first.
func (a *App) Events() []Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.events)
}

// withClient puts the app's HTTP client in ctx for go-oidc and oauth2.
func (a *App) withClient(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, a.client)
}

// provider discovers the provider once; a failure is retried on the next
// call.
func (a *App) provider(ctx context.Context) (*provider, error) {
	a.provMu.Lock()
	defer a.provMu.Unlock()
	if a.prov != nil {
		return a.prov, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(a.withClient(ctx), a.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovery at %s: %w", a.cfg.Issuer, err)
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&extra); err != nil {
		return nil, err
	}
	ep := p.Endpoint()
	if a.cfg.ClientSecret == "" {
		ep.AuthStyle = oauth2.AuthStyleInParams // a public client sends client_id in the form
	} else {
		ep.AuthStyle = oauth2.AuthStyleInHeader
	}
	a.prov = &provider{
		oidc:     p,
		verifier: p.Verifier(&oidc.Config{ClientID: a.cfg.ClientID, Now: a.cfg.Now}),
		oauth: oauth2.Config{
			ClientID:     a.cfg.ClientID,
			ClientSecret: a.cfg.ClientSecret,
			Endpoint:     ep,
			RedirectURL:  a.cfg.BaseURL + PathCallback,
			Scopes:       []string{oidc.ScopeOpenID, "email", "profile"},
		},
		endSession:  extra.EndSession,
		memberships: a.cfg.Issuer + "/api/v1/me/memberships",
	}
	return a.prov, nil
}

func randomString() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b[:])
}

func (a *App) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	// #nosec G124 -- HttpOnly and SameSite are set; Secure follows the scheme of the demo app's base URL
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: strings.HasPrefix(a.cfg.BaseURL, "https://"),
		// Lax: the cookie must come along on the provider's redirect back.
		SameSite: http.SameSiteLaxMode,
	})
}

// current returns a copy of the browser's session, live or ended.
func (a *App) current(r *http.Request) *session {
	ck, err := r.Cookie(cookieSession)
	if err != nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[ck.Value]
	if !ok {
		return nil
	}
	cp := *s
	return &cp
}

// ----- pages -----

func (a *App) home(w http.ResponseWriter, r *http.Request) {
	v := a.newView(r)
	a.render(w, http.StatusOK, v)
}

// login starts a sign-in: state, nonce and a PKCE verifier, remembered
// here and bound to the browser by a cookie holding the state.
func (a *App) login(w http.ResponseWriter, r *http.Request) {
	p, err := a.provider(r.Context())
	if err != nil {
		a.problem(w, r, http.StatusBadGateway, "The provider is not reachable", err)
		return
	}
	state, nonce, verifier := randomString(), randomString(), oauth2.GenerateVerifier()
	now := a.cfg.Now()
	a.mu.Lock()
	for s, l := range a.logins {
		if now.After(l.expires) {
			delete(a.logins, s)
		}
	}
	if len(a.logins) >= maxLogins {
		a.mu.Unlock()
		a.problem(w, r, http.StatusServiceUnavailable, "Too many sign-ins at once", errors.New("try again in a few minutes"))
		return
	}
	a.logins[state] = login{nonce: nonce, verifier: verifier, expires: now.Add(loginTTL)}
	a.mu.Unlock()
	a.setCookie(w, cookieState, state, int(loginTTL/time.Second))
	http.Redirect(w, r, p.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), http.StatusFound)
}

// callback finishes a sign-in: it checks state against the browser's
// cookie, exchanges the code with the PKCE verifier, verifies the ID token
// (signature, iss, aud, exp by go-oidc; nonce and at_hash here), then reads
// userinfo and the memberships with the access token.
func (a *App) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		a.problem(w, r, http.StatusOK, "The provider did not sign you in", fmt.Errorf("%s: %s", e, q.Get("error_description")))
		return
	}
	state := q.Get("state")
	ck, err := r.Cookie(cookieState)
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(state)) != 1 {
		a.problem(w, r, http.StatusBadRequest, "Sign-in refused", errors.New("state does not match this browser's sign-in"))
		return
	}
	a.setCookie(w, cookieState, "", -1)
	a.mu.Lock()
	l, ok := a.logins[state]
	delete(a.logins, state) // single use
	a.mu.Unlock()
	if !ok || a.cfg.Now().After(l.expires) {
		a.problem(w, r, http.StatusBadRequest, "Sign-in refused", errors.New("unknown or expired state; sign in again"))
		return
	}
	p, err := a.provider(r.Context())
	if err != nil {
		a.problem(w, r, http.StatusBadGateway, "The provider is not reachable", err)
		return
	}
	ctx := a.withClient(r.Context())
	tok, err := p.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(l.verifier))
	if err != nil {
		a.problem(w, r, http.StatusBadGateway, "The code exchange failed", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		a.problem(w, r, http.StatusBadGateway, "No ID token", errors.New("the token response has no id_token"))
		return
	}
	idt, err := p.verifier.Verify(ctx, raw)
	if err != nil {
		a.problem(w, r, http.StatusBadGateway, "The ID token is not valid", err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(l.nonce)) != 1 {
		a.problem(w, r, http.StatusBadGateway, "The ID token is not valid", errors.New("nonce does not match"))
		return
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			a.problem(w, r, http.StatusBadGateway, "The ID token is not valid", err)
			return
		}
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		a.problem(w, r, http.StatusBadGateway, "The ID token is not valid", err)
		return
	}
	s := &session{ID: randomString(), CSRF: randomString(), IDToken: raw, Sub: idt.Subject, Claims: pretty(claims), ClaimRows: claimRows(claims), Created: a.cfg.Now()}
	s.SID, _ = claims["sid"].(string)
	if ui, err := p.oidc.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err != nil {
		s.UserInfo = "error: " + err.Error()
	} else {
		var m map[string]any
		_ = ui.Claims(&m)
		s.UserInfo, s.Email = pretty(m), ui.Email
		if ui.Subject != idt.Subject {
			s.UserInfo = "error: userinfo sub " + ui.Subject + " differs from the ID token's"
		}
	}
	s.Memberships = a.memberships(ctx, p, tok.AccessToken)
	a.mu.Lock()
	if len(a.sessions) >= maxSessions {
		a.dropOldest()
	}
	a.sessions[s.ID] = s
	a.mu.Unlock()
	a.setCookie(w, cookieSession, s.ID, 0)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// dropOldest forgets the oldest session; a.mu is held.
func (a *App) dropOldest() {
	var oldest *session
	for _, s := range a.sessions {
		if oldest == nil || s.Created.Before(oldest.Created) {
			oldest = s
		}
	}
	if oldest != nil {
		delete(a.sessions, oldest.ID)
	}
}

// memberships calls GET /api/v1/me/memberships with the access token and
// returns its answer as pretty JSON (or the error).
func (a *App) memberships(ctx context.Context, p *provider, accessToken string) string {
	req, err := http.NewRequestWithContext(ctx, "GET", p.memberships, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	resp, err := a.client.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "error: " + err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("error: %s: %s", resp.Status, body)
	}
	var buf bytes.Buffer
	if json.Indent(&buf, body, "", "  ") != nil {
		return string(body)
	}
	return buf.String()
}

func pretty(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// logout ends the local session and sends the browser to the provider's
// end-session endpoint (RP-initiated logout) with the ID token as hint;
// the provider ends its session and comes back to /signed-out.
func (a *App) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	s := a.current(r)
	if s == nil || r.ParseForm() != nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.CSRF)) != 1 {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	p, err := a.provider(r.Context())
	if err != nil {
		a.problem(w, r, http.StatusBadGateway, "The provider is not reachable", err)
		return
	}
	state := randomString()
	a.mu.Lock()
	if live, ok := a.sessions[s.ID]; ok {
		live.LogoutState = state
		if live.Ended == "" {
			live.Ended, live.EndedAt = "you signed out", a.cfg.Now()
		}
	}
	a.mu.Unlock()
	q := url.Values{
		"id_token_hint":            {s.IDToken},
		"post_logout_redirect_uri": {a.cfg.BaseURL + PathSignedOut},
		"client_id":                {a.cfg.ClientID},
		"state":                    {state},
	}
	http.Redirect(w, r, p.endSession+"?"+q.Encode(), http.StatusSeeOther)
}

// signedOut is where the provider sends the browser after logout.
func (a *App) signedOut(w http.ResponseWriter, r *http.Request) {
	v := a.newView(r)
	if s := v.Session; s != nil && s.LogoutState != "" && subtle.ConstantTimeCompare([]byte(r.URL.Query().Get("state")), []byte(s.LogoutState)) == 1 {
		v.Notice = "You are signed out here and at the provider."
		a.mu.Lock()
		delete(a.sessions, s.ID)
		a.mu.Unlock()
	} else {
		v.Notice = "Signed out at the provider."
	}
	a.setCookie(w, cookieSession, "", -1)
	v.Session = nil
	a.render(w, http.StatusOK, v)
}

// backchannelLogout receives a logout token (OpenID Connect Back-Channel
// Logout 1.0): go-oidc checks the signature against the
// provider's JWKS, iss, exp, the event, that there is no nonce, and a jti
// and a sub or sid; here aud must be exactly this client_id. It ends the
// session with that sid, or every session of sub when there is no sid.
func (a *App) backchannelLogout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	ev := Event{At: a.cfg.Now()}
	fail := func(status int, err error) {
		ev.Error = err.Error()
		a.record(ev)
		a.log.Warn("back-channel logout refused", "err", err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_request", "error_description": err.Error()})
	}
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, err)
		return
	}
	raw := r.PostForm.Get("logout_token")
	if raw == "" {
		fail(http.StatusBadRequest, errors.New("no logout_token"))
		return
	}
	p, err := a.provider(r.Context())
	if err != nil {
		fail(http.StatusServiceUnavailable, err)
		return
	}
	lt, err := p.verifier.VerifyLogout(a.withClient(r.Context()), raw)
	if err != nil {
		fail(http.StatusBadRequest, err)
		return
	}
	if len(lt.Audience) != 1 || lt.Audience[0] != a.cfg.ClientID {
		fail(http.StatusBadRequest, fmt.Errorf("aud %q is not exactly %q", lt.Audience, a.cfg.ClientID))
		return
	}
	ev.Sub, ev.SID, ev.JTI = lt.Subject, lt.SessionID, lt.TokenID
	a.mu.Lock()
	if _, seen := a.jtis[lt.TokenID]; seen {
		ev.Duplicate = true
	} else {
		for j, at := range a.jtis {
			if ev.At.Sub(at) > loginTTL {
				delete(a.jtis, j)
			}
		}
		for j := range a.jtis {
			if len(a.jtis) < maxJTIs {
				break
			}
			delete(a.jtis, j)
		}
		a.jtis[lt.TokenID] = ev.At
		for _, s := range a.sessions {
			if s.Ended != "" {
				continue
			}
			match := s.Sub == lt.Subject
			if lt.SessionID != "" {
				match = s.SID == lt.SessionID && (lt.Subject == "" || s.Sub == lt.Subject)
			}
			if match {
				s.Ended, s.EndedAt = "the provider sent a back-channel logout", ev.At
				ev.Ended++
			}
		}
	}
	a.mu.Unlock()
	a.record(ev)
	a.log.Info("back-channel logout", "sub", ev.Sub, "sid", ev.SID, "jti", ev.JTI, "ended", ev.Ended, "duplicate", ev.Duplicate)
	w.WriteHeader(http.StatusOK)
}

func (a *App) record(ev Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append([]Event{ev}, a.events[:min(len(a.events), maxEvents-1)]...)
}

// problem renders the home page with an error.
func (a *App) problem(w http.ResponseWriter, r *http.Request, status int, title string, err error) {
	a.log.Warn(title, "err", err)
	v := a.newView(r)
	v.ErrorTitle, v.Error = title, err.Error()
	a.render(w, status, v)
}

// claimRow is one ID-token claim as the page shows it.
type claimRow struct{ Name, Value, Meaning string }

// claimMeanings explains the claims an oidcd ID token carries.
func claimMeanings() map[string]string {
	return map[string]string{
		"iss":             "who issued the token (the provider)",
		"sub":             "the person's stable id at the provider",
		"aud":             "who the token is for (this app's client_id)",
		"exp":             "when the token expires",
		"iat":             "when it was issued",
		"auth_time":       "when the person last authenticated",
		"nonce":           "echoes this app's nonce (replay protection)",
		"acr":             "how strongly the person authenticated",
		"amr":             "the methods used: pwd, otp, hwk, sms, rcv",
		"sid":             "this app's session at the provider (back-channel logout names it)",
		"organization_id": "the organization this sign-in is for",
		"email":           "the person's address",
		"email_verified":  "whether the address was verified",
		"at_hash":         "binds the access token to this ID token",
		"azp":             "the party the token was issued to",
		"jti":             "the token's unique id",
		"rat":             "when the app asked for this sign-in",
	}
}

// claimRows lays claims out sorted by name, times as times.
func claimRows(claims map[string]any) []claimRow {
	meanings := claimMeanings()
	names := make([]string, 0, len(claims))
	for k := range claims {
		names = append(names, k)
	}
	slices.Sort(names)
	rows := make([]claimRow, 0, len(names))
	for _, k := range names {
		v := claims[k]
		var text string
		switch x := v.(type) {
		case string:
			text = x
		case float64:
			if k == "exp" || k == "iat" || k == "auth_time" || k == "nbf" {
				text = time.Unix(int64(x), 0).UTC().Format("2006-01-02 15:04:05 UTC")
			} else {
				text = strconv.FormatFloat(x, 'f', -1, 64)
			}
		case []any:
			parts := make([]string, len(x))
			for i, e := range x {
				parts[i] = fmt.Sprint(e)
			}
			text = strings.Join(parts, ", ")
			if len(x) == 0 {
				text = "(empty)"
			}
		default:
			text = fmt.Sprint(x)
		}
		rows = append(rows, claimRow{Name: k, Value: text, Meaning: meanings[k]})
	}
	return rows
}

// Outcome says in words what a back-channel logout did here.
func (e Event) Outcome() string {
	switch {
	case e.Error != "":
		return "refused: " + e.Error
	case e.Duplicate:
		return "a repeat of an earlier token (jti " + e.JTI + "), ignored"
	case e.Ended == 0:
		return "accepted; no live session of this app to end (already signed out here)"
	case e.Ended == 1:
		return "accepted; ended this app's session"
	}
	return fmt.Sprintf("accepted; ended %d sessions of this app", e.Ended)
}
