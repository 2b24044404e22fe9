package logout

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/federation"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
)

// The trip through the upstream's end session (end_upstream_session):
// which sign-outs take it, what the upstream is sent, and what the way
// back (/federation/{slug}/logged-out) does with the state it carries.

// upstreamToken stands for the upstream's ID token the SSO session
// keeps; logout hands it on as it is and never reads it.
const upstreamToken = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"

// fakeUpstream is an upstream provider's discovery document on a
// loopback port (the real federation client reads it), with or without
// an end_session_endpoint, or answering 500.
type fakeUpstream struct {
	srv    *httptest.Server
	noEnd  bool
	broken atomic.Bool
}

func newFakeUpstream(t *testing.T, noEnd bool) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{noEnd: noEnd}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" || u.broken.Load() {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		doc := map[string]any{"issuer": u.srv.URL, "authorization_endpoint": u.srv.URL + "/auth", "token_endpoint": u.srv.URL + "/token",
			"jwks_uri": u.srv.URL + "/jwks", "response_types_supported": []string{"code"}, "id_token_signing_alg_values_supported": []string{"RS256"}}
		if !u.noEnd {
			doc["end_session_endpoint"] = u.srv.URL + "/session/end?ui=1"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// newUpstreamHarness is the harness with the federation client and the
// browser key, as node wires them.
func newUpstreamHarness(t *testing.T, log *logBuffer) *harness {
	t.Helper()
	h := newFedHarness(t, log)
	if err := h.s.cfg.Sessions.EnsureBrowserKey(context.Background(), h.applier); err != nil {
		t.Fatal(err)
	}
	return h
}

// logBuffer is a log the handlers write while the test reads it.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns what was logged since the last take.
func (l *logBuffer) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

// newFedHarness is the harness with the federation client, at the state
// format providers need, without a browser key; its log goes to log.
func newFedHarness(t *testing.T, log *logBuffer) *harness {
	t.Helper()
	h := newHarness(t, func(c *Config) {
		c.Upstreams = federation.NewClient(federation.Options{})
		if log != nil {
			c.Logger = slog.New(slog.NewTextHandler(log, nil))
		}
	})
	if err := h.applier.SetFormat(fsm.CurrentFormat); err != nil {
		t.Fatal(err)
	}
	// The back-channel tokens leave at once, so no sign-out waits out
	// FrontChannelWait.
	h.runSender()
	return h
}

// provider registers an upstream provider of slug at issuer.
func (h *harness) provider(slug, issuer string, endUpstream bool) string {
	h.t.Helper()
	id := uuid.NewString()
	// The upstream vouches for example.com, so its first sign-in links
	// to hUser (p0@example.com).
	h.apply(fsm.TypePutIdentityProvider, fsm.PutIdentityProvider{Create: true, Provider: fsm.IdentityProvider{
		ID: id, Slug: slug, DisplayName: slug, Issuer: issuer, ClientID: "oidcd-at-" + slug, Scopes: []string{"openid"},
		EmailDomains: []string{"example.com"}, Provisioning: fsm.ProvisionLink, EndUpstreamSession: endUpstream,
		Enabled: true, CreatedAt: h.clock.Now()}})
	return id
}

// fedSession opens a live SSO session of hUser as a sign-in through the
// provider does (a password session when providerID is ""), keeping the
// upstream's ID token (token) when not "".
func (h *harness) fedSession(providerID, token string) browserSSO {
	h.t.Helper()
	if providerID == "" {
		return h.ssoSession(hUser)
	}
	now := h.clock.Now()
	s := browserSSO{id: uuid.NewString(), secret: httpx.NewID()}
	res := h.apply(fsm.TypeFederatedSignIn, fsm.FederatedSignIn{ProviderID: providerID, Subject: "alice-upstream",
		Email: "p0@example.com", EmailVerified: true, IdentityID: uuid.NewString(), UserID: uuid.NewString(), At: now,
		Session: &fsm.StartSSOSession{TokenHash: authn.HashToken(s.secret), Session: fsm.SSOSession{
			ID: s.id, AuthTime: now, AMR: []string{"pwd"}, ACR: "urn:service:sso:acr:pwd",
			CreatedAt: now, LastSeen: now, IdleExpiresAt: now.Add(2 * time.Hour), ExpiresAt: now.Add(12 * time.Hour),
			UpstreamSID: "up-" + s.id, UpstreamIDToken: token,
		}}})
	if out := res.Value.(fsm.FederatedSignInResult); out.User.ID != hUser {
		h.t.Fatalf("the federated sign-in is %s's, want %s's", out.User.ID, hUser)
	}
	return s
}

// loggedOut calls GET /federation/{slug}/logged-out with the raw query.
func (h *harness) loggedOut(slug, rawQuery string) response {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.srv.URL+authn.PathFederation+slug+"/logged-out?"+rawQuery, nil)
	return h.do(req, "")
}

// atUpstream checks that r sends the browser to up's end session with the
// hint, the client id and our post-logout URI, and returns the state.
func atUpstream(t *testing.T, r response, up *fakeUpstream, clientID, postLogout string) string {
	t.Helper()
	if r.status != http.StatusFound {
		t.Fatalf("got %d, want 302 to the upstream\n%s", r.status, r.body)
	}
	loc, err := url.Parse(r.location())
	if err != nil || loc.Scheme+"://"+loc.Host+loc.Path != up.srv.URL+"/session/end" {
		t.Fatalf("Location %q, want the upstream's end_session_endpoint %s/session/end", r.location(), up.srv.URL)
	}
	q := loc.Query()
	for k, want := range map[string]string{"ui": "1", "id_token_hint": upstreamToken, "client_id": clientID, "post_logout_redirect_uri": postLogout} {
		if got := q.Get(k); got != want {
			t.Errorf("upstream's %s: got %q, want %q", k, got, want)
		}
	}
	if q.Get("state") == "" {
		t.Fatalf("no state to the upstream: %s", r.location())
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	return q.Get("state")
}

func TestLogoutEndsTheUpstreamSession(t *testing.T) {
	log := &logBuffer{}
	h := newUpstreamHarness(t, log)
	up := newFakeUpstream(t, false)
	upOff := newFakeUpstream(t, false)
	upNoEnd := newFakeUpstream(t, true)
	upBroken := newFakeUpstream(t, false)
	upBroken.broken.Store(true)
	corp := h.provider("corp", up.srv.URL, true)
	off := h.provider("off", upOff.srv.URL, false)
	noEnd := h.provider("noend", upNoEnd.srv.URL, true)
	broken := h.provider("broken", upBroken.srv.URL, true)
	rpState := "rp state/ü&x=1"
	longState := strings.Repeat("s", 3000)

	tests := []struct {
		name     string
		provider string // "" for a password session
		token    string // the upstream's ID token the session keeps
		post     bool
		redirect bool   // the request has a post_logout_redirect_uri
		state    string // the application's state
		upstream *fakeUpstream
		// otherHint: the hint is of another session of the person, so
		// the browser's session is not ended.
		otherHint bool
		// endedByUpstream: the upstream's logout token ended the session
		// before.
		endedByUpstream bool
		// warn is the warning logged when the upstream is skipped.
		warn string
	}{
		{name: "redirect and state", provider: corp, token: upstreamToken, redirect: true, state: rpState, upstream: up},
		{name: "signed-out page", provider: corp, token: upstreamToken, upstream: up},
		{name: "POST with redirect", provider: corp, token: upstreamToken, post: true, redirect: true, state: "rp-post-state", upstream: up},
		{name: "password session", redirect: true, state: rpState},
		{name: "provider without end_upstream_session", provider: off, token: upstreamToken, redirect: true, state: rpState},
		{name: "no token kept", provider: corp, redirect: true, state: rpState},
		{name: "no end_session_endpoint", provider: noEnd, token: upstreamToken, redirect: true, state: rpState, warn: "the upstream has no end_session_endpoint"},
		{name: "discovery failing", provider: broken, token: upstreamToken, redirect: true, state: rpState, warn: "the upstream's discovery failed"},
		{name: "discovery failing, no redirect", provider: broken, token: upstreamToken, warn: "the upstream's discovery failed"},
		{name: "state too long to carry", provider: corp, token: upstreamToken, redirect: true, state: longState, warn: "the application's state is too long"},
		{name: "hint of another session", provider: corp, token: upstreamToken, redirect: true, state: rpState, otherHint: true},
		{name: "ended by the upstream's logout", provider: corp, token: upstreamToken, redirect: true, state: rpState, endedByUpstream: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sess := h.fedSession(tt.provider, tt.token)
			hintSess := sess
			if tt.otherHint {
				hintSess = h.fedSession(tt.provider, tt.token)
			}
			_, hint := h.signIn(hintSess, hUser, hAppA, hOrgA)
			if tt.endedByUpstream {
				h.apply(fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: sess.id, At: h.clock.Now(), Reason: fsm.EndUpstreamLogout})
			}
			params := url.Values{"id_token_hint": {hint}}
			if tt.redirect {
				params.Set("post_logout_redirect_uri", hRedirect)
			}
			if tt.state != "" {
				params.Set("state", tt.state)
			}
			log.take()
			var r response
			if tt.post {
				r = h.post(params, sess.secret)
			} else {
				r = h.get(params.Encode(), sess.secret)
			}
			if !tt.otherHint && !h.ended(sess.id) {
				t.Fatal("the SSO session was not ended here")
			}
			if tt.otherHint && h.ended(sess.id) {
				t.Fatal("the browser's session was ended by another session's hint")
			}
			wantFinal := ""
			if tt.redirect {
				wantFinal = httpx.AppendQuery(hRedirect, url.Values{"state": {tt.state}})
			}
			if tt.upstream == nil {
				// Unchanged: the redirect or the page, straight away.
				switch {
				case tt.redirect && (r.status != http.StatusFound || r.location() != wantFinal):
					t.Fatalf("got %d Location %q, want 302 to %q", r.status, r.location(), wantFinal)
				case !tt.redirect && (r.status != http.StatusOK || !strings.Contains(r.body, "You are signed out.")):
					t.Fatalf("got %d Location %q, want the signed-out page\n%s", r.status, r.location(), r.body)
				}
				logged := log.take()
				if warned := strings.Contains(logged, "level=WARN msg=\"logout: the upstream's session is not ended"); warned != (tt.warn != "") || !strings.Contains(logged, tt.warn) {
					t.Fatalf("want the warning %q in the log, got:\n%s", tt.warn, logged)
				}
				return
			}
			state := atUpstream(t, r, tt.upstream, "oidcd-at-corp", h.s.cfg.Issuer+"/federation/corp/logged-out")
			if strings.Contains(state, "app.example") || (tt.state != "" && strings.Contains(state, url.QueryEscape(tt.state))) {
				t.Fatalf("the state to the upstream shows where the browser goes next: %q", state)
			}
			back := h.loggedOut("corp", url.Values{"state": {state}}.Encode())
			switch {
			case tt.redirect && (back.status != http.StatusFound || back.location() != wantFinal):
				t.Fatalf("back from the upstream: got %d Location %q, want 302 to %q", back.status, back.location(), wantFinal)
			case !tt.redirect && (back.status != http.StatusOK || back.location() != "" || !strings.Contains(back.body, "You are signed out.")):
				t.Fatalf("back from the upstream: got %d Location %q, want the signed-out page\n%s", back.status, back.location(), back.body)
			}
		})
	}
}

// TestLogoutUpstreamWithoutBrowserKey: a node that has no browser key yet
// cannot seal the way back, so the sign-out goes on without the upstream.
func TestLogoutUpstreamWithoutBrowserKey(t *testing.T) {
	log := &logBuffer{}
	h := newFedHarness(t, log)
	up := newFakeUpstream(t, false)
	sess := h.fedSession(h.provider("corp", up.srv.URL, true), upstreamToken)
	_, hint := h.signIn(sess, hUser, hAppA, hOrgA)
	r := h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirect, "state", "s"), sess.secret)
	if want := hRedirect + "?state=s"; r.status != http.StatusFound || r.location() != want || !h.ended(sess.id) {
		t.Fatalf("got %d Location %q (ended %v), want 302 to %q and the session ended", r.status, r.location(), h.ended(sess.id), want)
	}
	if got := log.take(); !strings.Contains(got, "level=WARN msg=\"logout: the upstream's session is not ended: no browser key\"") {
		t.Fatalf("no warning in the log:\n%s", got)
	}
}

// TestLoggedOutRefusesWhatItDidNotSeal: the way back redirects only to
// what a sign-out here validated and sealed, and only while the client
// still registers it; anything else is the signed-out page (200), never
// a redirect, never an error.
func TestLoggedOutRefusesWhatItDidNotSeal(t *testing.T) {
	h := newUpstreamHarness(t, nil)
	up := newFakeUpstream(t, false)
	corp := h.provider("corp", up.srv.URL, true)
	h.provider("other", up.srv.URL, true)
	box, err := h.s.cfg.Sessions.Box()
	if err != nil {
		t.Fatal(err)
	}
	seal := func(purpose string, v afterUpstream, ttl time.Duration) string {
		s, err := box.Seal(purpose, v, h.clock.Now().Add(ttl))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// A real trip, whose state is kept for the cases below.
	sess := h.fedSession(corp, upstreamToken)
	_, hint := h.signIn(sess, hUser, hAppA, hOrgA)
	real := atUpstream(t, h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirect, "state", "s"), sess.secret),
		up, "oidcd-at-corp", h.s.cfg.Issuer+"/federation/corp/logged-out")
	if r := h.loggedOut("corp", q("state", real)); r.status != http.StatusFound || r.location() != hRedirect+"?state=s" {
		t.Fatalf("the real state: got %d Location %q", r.status, r.location())
	}
	tampered := []byte(real)
	tampered[len(tampered)/2] ^= 1
	good := afterUpstream{Slug: "corp", ClientID: hAppA, RedirectURI: hRedirect, State: "s"}

	tests := []struct {
		name, slug, query string
	}{
		{"no state", "corp", ""},
		{"empty state", "corp", q("state", "")},
		{"two states", "corp", q("state", real, "state", real)},
		{"malformed query", "corp", "state=%zz"},
		{"forged", "corp", q("state", "not-sealed-by-us")},
		{"tampered", "corp", q("state", string(tampered))},
		{"sealed for another purpose", "corp", q("state", seal("account", good, time.Minute))},
		{"expired", "corp", q("state", seal(upstreamPurpose, good, -time.Second))},
		{"another provider's path", "other", q("state", real)},
		{"unknown provider's path", "nobody", q("state", real)},
		{"URI not registered", "corp", q("state", seal(upstreamPurpose, afterUpstream{Slug: "corp", ClientID: hAppA, RedirectURI: "https://evil.example/cb"}, time.Minute))},
		{"URI of another client", "corp", q("state", seal(upstreamPurpose, afterUpstream{Slug: "corp", ClientID: "nobody", RedirectURI: hRedirect}, time.Minute))},
		{"suspended client", "corp", q("state", seal(upstreamPurpose, afterUpstream{Slug: "corp", ClientID: hSuspended, RedirectURI: hRedirect}, time.Minute))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.loggedOut(tt.slug, tt.query)
			if r.status != http.StatusOK || r.location() != "" || !strings.Contains(r.body, "You are signed out.") {
				t.Fatalf("got %d Location %q, want 200 and the signed-out page\n%s", r.status, r.location(), r.body)
			}
			if strings.Contains(r.body, "evil.example") || strings.Contains(r.body, "app.example") {
				t.Fatalf("the page names a redirect URI:\n%s", r.body)
			}
		})
	}

	// A state that lived: 15 minutes later the way back shows the page.
	sess = h.fedSession(corp, upstreamToken)
	_, hint = h.signIn(sess, hUser, hAppA, hOrgA)
	late := atUpstream(t, h.get(q("id_token_hint", hint, "post_logout_redirect_uri", hRedirect, "state", "s"), sess.secret),
		up, "oidcd-at-corp", h.s.cfg.Issuer+"/federation/corp/logged-out")
	h.clock.Add(upstreamStateTTL + time.Second)
	if r := h.loggedOut("corp", q("state", late)); r.status != http.StatusOK || r.location() != "" {
		t.Fatalf("a state past its %v: got %d Location %q, want the signed-out page", upstreamStateTTL, r.status, r.location())
	}
}

// TestLoggedOutURIIsWhatAdminPrints: the post-logout URI the sign-out
// sends the upstream is the one the admin API and CLI tell the operator
// to register there, and this route serves it.
func TestLoggedOutURIIsWhatAdminPrints(t *testing.T) {
	h := newUpstreamHarness(t, nil)
	for _, issuer := range []string{h.s.cfg.Issuer, h.s.cfg.Issuer + "/"} {
		_, _, printed := admin.FederationURIs(issuer, "corp")
		if got := LoggedOutURI(issuer, "corp"); got != printed {
			t.Fatalf("LoggedOutURI(%q) = %q, admin prints %q", issuer, got, printed)
		}
	}
	_, _, printed := admin.FederationURIs(h.s.cfg.Issuer, "corp")
	resp, err := http.Get(printed + "?state=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, want the signed-out page", printed, resp.StatusCode)
	}
}
