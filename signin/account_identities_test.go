package signin

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/federation"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/webui"
)

// The person's side of federation on /account, over a stand-in upstream
// OpenID provider (fakeUpstream: discovery, keys and a token endpoint on
// 127.0.0.1, and a "login" the test performs in place of the person) and
// the real federation client. Package oidc's callback is stood in for by
// fedCallback, which hands the federation cookie to AccountLinkCallback
// as oidc does when the cookie holds no authorization request.

// Providers of the world.
const (
	hOrgB      = "0b000000-0000-4000-8000-000000000002"
	hIdPCorp   = "2c000000-0000-4000-8000-000000000001" // the site's, "Corp"
	hIdPAlpha  = "2c000000-0000-4000-8000-000000000002" // organization alpha's
	hIdPOther  = "2c000000-0000-4000-8000-000000000003" // organization beta's
	hIdPOff    = "2c000000-0000-4000-8000-000000000004" // the site's, disabled
	hIdPPartnr = "2c000000-0000-4000-8000-000000000005" // the site's, "Partner"
)

var (
	upstreamKeyOnce sync.Once
	upstreamKey     *rsa.PrivateKey
)

// fakeUpstream is the stand-in upstream provider.
type fakeUpstream struct {
	t   testing.TB
	srv *httptest.Server
	key jwk.Key

	mu     sync.Mutex
	grants map[string]upstreamGrant // by code
}

type upstreamGrant struct{ sub, email, nonce, challenge string }

func newFakeUpstream(t testing.TB) *fakeUpstream {
	t.Helper()
	upstreamKeyOnce.Do(func() {
		var err error
		if upstreamKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	key, err := jwk.FromRaw(upstreamKey)
	if err != nil {
		t.Fatal(err)
	}
	_ = key.Set(jwk.KeyIDKey, "k1")
	_ = key.Set(jwk.AlgorithmKey, jwa.RS256)
	u := &fakeUpstream{t: t, key: key, grants: map[string]upstreamGrant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": u.issuer(), "authorization_endpoint": u.issuer() + "/authorize", "token_endpoint": u.issuer() + "/token",
			"jwks_uri": u.issuer() + "/jwks", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"S256"}, "id_token_signing_alg_values_supported": []string{"RS256"},
			"subject_types_supported": []string{"public"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		pub, err := jwk.PublicKeyOf(u.key)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		set := jwk.NewSet()
		_ = set.AddKey(pub)
		writeJSON(w, set)
	})
	mux.HandleFunc("POST /token", u.serveToken)
	u.srv = httptest.NewServer(mux)
	t.Cleanup(u.srv.Close)
	return u
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (u *fakeUpstream) issuer() string { return u.srv.URL }

// login is the person signing in at the upstream as sub, for the
// authorization request oidcd sent the browser to (to): the callback's
// query, with the code and the request's state.
func (u *fakeUpstream) login(to, sub, email string) url.Values {
	u.t.Helper()
	at, err := url.Parse(to)
	if err != nil || !strings.HasPrefix(to, u.issuer()+"/authorize?") {
		u.t.Fatalf("oidcd sent the browser to %q, not to the upstream's authorization endpoint", to)
	}
	q := at.Query()
	code := authn.NewID()
	u.mu.Lock()
	u.grants[code] = upstreamGrant{sub: sub, email: email, nonce: q.Get("nonce"), challenge: q.Get("code_challenge")}
	u.mu.Unlock()
	return url.Values{"code": {code}, "state": {q.Get("state")}}
}

func (u *fakeUpstream) serveToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "form", 400)
		return
	}
	u.mu.Lock()
	g, ok := u.grants[r.PostForm.Get("code")]
	delete(u.grants, r.PostForm.Get("code"))
	u.mu.Unlock()
	if !ok || authn.S256(r.PostForm.Get("code_verifier")) != g.challenge {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]string{"error": "invalid_grant"})
		return
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": u.issuer(), "sub": g.sub, "aud": "oidcd", "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"nonce": g.nonce, "email": g.email, "email_verified": true})
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, "k1")
	tok, err := jws.Sign(claims, jws.WithKey(jwa.RS256, u.key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	writeJSON(w, map[string]any{"access_token": authn.NewID(), "token_type": "Bearer", "expires_in": 300, "id_token": string(tok)})
}

// newFedHarness is the harness with a federation client, an upstream and
// the providers: Corp and Partner (the site's, enabled), Retired (the
// site's, disabled), Alpha SSO (organization alpha's) and Beta SSO
// (organization beta's), all at the stand-in upstream.
func newFedHarness(t *testing.T) (*harness, *fakeUpstream) {
	t.Helper()
	up := newFakeUpstream(t)
	h := newHarness(t, func(c *Config) { c.Federation = federation.NewClient(federation.Options{}) })
	if err := h.applier.SetFormat(fsm.CurrentFormat); err != nil { // identity providers need it
		t.Fatal(err)
	}
	now := h.clock.Now()
	h.apply(fsm.TypeCreateOrg, fsm.CreateOrg{ID: hOrgB, Slug: "beta", Name: "Org beta", CreatedAt: now})
	for _, p := range []struct {
		id, slug, name, org string
		enabled             bool
	}{
		{hIdPCorp, "corp", "Corp", "", true}, {hIdPPartnr, "partner", "Partner", "", true}, {hIdPOff, "retired", "Retired", "", false},
		{hIdPAlpha, "alpha-sso", "Alpha SSO", hOrgA, true}, {hIdPOther, "beta-sso", "Beta SSO", hOrgB, true},
	} {
		h.apply(fsm.TypePutIdentityProvider, fsm.PutIdentityProvider{Create: true, Provider: fsm.IdentityProvider{
			ID: p.id, Slug: p.slug, DisplayName: p.name, Issuer: up.issuer(), ClientID: "oidcd", Scopes: []string{"openid", "email"},
			OrgID: p.org, Provisioning: fsm.ProvisionCreate, Enabled: p.enabled, CreatedAt: now, UpdatedAt: now,
		}})
	}
	return h, up
}

// member makes userID a member of orgID with status.
func (h *harness) member(userID, orgID, status string) {
	h.t.Helper()
	now := h.clock.Now()
	h.apply(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{ID: uuid.NewString(), UserID: userID, OrgID: orgID,
		Status: status, CreatedAt: now, UpdatedAt: now}})
}

// link links userID to subject at providerID, as /account does.
func (h *harness) link(userID, providerID, subject, email string) fsm.Identity {
	h.t.Helper()
	res := h.apply(fsm.TypeFederatedSignIn, fsm.FederatedSignIn{ProviderID: providerID, Subject: subject, Email: email,
		IdentityID: uuid.NewString(), UserID: uuid.NewString(), AccountUserID: userID, At: h.clock.Now()})
	return res.Value.(fsm.FederatedSignInResult).Identity
}

// setProviderEnabled turns a provider on or off.
func (h *harness) setProviderEnabled(id string, on bool) {
	h.t.Helper()
	ip, err := h.applier.State().IdentityProvider(id)
	if err != nil {
		h.t.Fatal(err)
	}
	ip.Enabled = on
	h.apply(fsm.TypePutIdentityProvider, fsm.PutIdentityProvider{Provider: ip})
}

// upstreamSession signs b in through providerID as subject (the person
// the link names, or a new one the provider creates), as a federated
// sign-in does: the session verifies no credential here.
func (b *browser) upstreamSession(providerID, subject, email string) fsm.SSOSession {
	b.t.Helper()
	now := b.h.clock.Now()
	s := fsm.SSOSession{ID: uuid.NewString(), AuthTime: now, AMR: []string{authn.AMRPassword}, ACR: authn.ACRPwd, CreatedAt: now, LastSeen: now}
	s.IdleExpiresAt, s.ExpiresAt = b.h.p.sessions.Lifetimes(now)
	secret := authn.NewID()
	res := b.h.apply(fsm.TypeFederatedSignIn, fsm.FederatedSignIn{ProviderID: providerID, Subject: subject, Email: email, EmailVerified: true,
		IdentityID: uuid.NewString(), UserID: uuid.NewString(), At: now, Session: &fsm.StartSSOSession{Session: s, TokenHash: authn.HashToken(secret)}})
	out := res.Value.(fsm.FederatedSignInResult)
	u, _ := url.Parse(b.h.srv.URL)
	b.jar.SetCookies(u, []*http.Cookie{{Name: session.SSOCookie, Value: secret, Path: "/"}})
	s.UserID, s.IdentityID, s.ProviderID = out.User.ID, out.Identity.ID, providerID
	return s
}

// fedCallback is the browser coming back from the upstream to
// /federation/{slug}/callback with query, as package oidc hands it over:
// the federation cookie is read and cleared, and the sign-in takes it as
// an account link (a cookie that is none is oidc's 400).
func (b *browser) fedCallback(slug string, query url.Values) page {
	b.t.Helper()
	target := b.abs(authn.PathFederation + slug + "/callback?" + query.Encode())
	req := httptest.NewRequest(http.MethodGet, target, nil)
	tu, _ := url.Parse(target)
	for _, c := range b.jar.Cookies(tu) {
		req.AddCookie(c)
	}
	req.SetPathValue("slug", slug)
	rec := httptest.NewRecorder()
	step := b.h.p.sessions.FedCookie(req)
	b.h.p.sessions.ClearFedCookie(rec)
	if !b.h.p.AccountLinkCallback(rec, req, step) {
		rec.Code = http.StatusBadRequest
		rec.Body.WriteString("oidc: no request of this browser")
	}
	res := rec.Result()
	b.jar.SetCookies(tu, res.Cookies())
	return page{status: rec.Code, header: res.Header, body: rec.Body.String()}
}

// startLink posts the Link button of slug on the account page p and
// returns where the browser is sent.
func (b *browser) startLink(p page, slug string) string {
	b.t.Helper()
	got := b.submit(formWith(b.t, p, "provider", slug), "provider", slug, nil)
	if got.status != http.StatusSeeOther {
		b.t.Fatalf("link %s: %d, want 303 to the upstream\n%s", slug, got.status, got.body)
	}
	return got.header.Get("Location")
}

// shown is an English text of the pages, escaped as a page shows it.
func shown(t *testing.T, key string, args ...any) string {
	t.Helper()
	return html.EscapeString(testText(t, language.English, key, args...))
}

// section is what /account's providers section offers: the slugs of
// its Link buttons and the identity ids of its Unlink forms.
func section(t *testing.T, p page) (links, unlinks []string) {
	t.Helper()
	for _, f := range parseForms(t, p.body) {
		for _, b := range f.buttons {
			if b[0] == "provider" {
				links = append(links, b[1])
			}
			if b == [2]string{"action", actionIdentityUnlink} {
				unlinks = append(unlinks, f.hidden.Get("identity_id"))
			}
		}
	}
	return links, unlinks
}

// TestAccountIdentitiesListed: the section lists the person's links,
// also one at a disabled provider, and offers the enabled providers they
// could sign in through and have no link at: the site's, and those of
// organizations they are an active member of, never another
// organization's. Without any, the section is not there.
func TestAccountIdentitiesListed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		providers bool
		setup     func(h *harness) []string // the identity ids to list
		links     []string
	}{
		{"no provider at all", false, func(h *harness) []string { return nil }, nil},
		{"the site's and the own organization's", true, func(h *harness) []string {
			h.member(hUser, hOrgA, fsm.MembershipActive)
			return nil
		}, []string{"alpha-sso", "corp", "partner"}},
		{"a suspended membership", true, func(h *harness) []string {
			h.member(hUser, hOrgA, fsm.MembershipSuspended)
			return nil
		}, []string{"corp", "partner"}},
		{"linked, also at a provider disabled since", true, func(h *harness) []string {
			h.setProviderEnabled(hIdPOff, true)
			old := h.link(hUser, hIdPOff, "ann-old", "")
			h.setProviderEnabled(hIdPOff, false)
			return []string{h.link(hUser, hIdPCorp, "ann-at-corp", "ann@corp.example").ID, old.ID}
		}, []string{"partner"}},
		{"every provider linked", true, func(h *harness) []string {
			return []string{h.link(hUser, hIdPCorp, "ann-at-corp", "").ID, h.link(hUser, hIdPPartnr, "ann-at-partner", "").ID}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			if tc.providers {
				h, _ = newFedHarness(t)
			} else {
				h = newHarness(t, func(c *Config) { c.Federation = federation.NewClient(federation.Options{}) })
			}
			ids := tc.setup(h)
			p := h.browser().accountSignIn(hEmail, hPassword)
			links, unlinks := section(t, p)
			if !slices.Equal(links, tc.links) {
				t.Errorf("Link buttons %q, want %q", links, tc.links)
			}
			slices.Sort(ids)
			slices.Sort(unlinks)
			if !slices.Equal(unlinks, ids) {
				t.Errorf("Unlink forms %q, want %q", unlinks, ids)
			}
			shown := strings.Contains(p.body, shown(t, "account.identities.heading"))
			if want := len(tc.links)+len(ids) > 0; shown != want {
				t.Errorf("section shown %v, want %v", shown, want)
			}
			if strings.Contains(tc.name, "disabled") {
				for _, s := range []string{"Corp", "ann@corp.example", "Retired"} {
					if !strings.Contains(p.body, s) {
						t.Errorf("the page lacks %q", s)
					}
				}
			}
		})
	}
}

// TestAccountLinkNeedsTheStrongestCredential: linking adds a way in, so
// it needs what every credential change needs, afresh in this session;
// only then does the browser leave for the upstream, with a fresh state,
// nonce and PKCE challenge, prompt=login, and the link sealed in the
// federation cookie.
func TestAccountLinkNeedsTheStrongestCredential(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(h *harness, b *browser) page // the account's home
		status int                               // of the page shown instead
		want   string                            // a text of that page, "" for the upstream
	}{
		{"a session opened through an upstream", func(h *harness, b *browser) page {
			h.link(hUser, hIdPPartnr, "ann-at-partner", "")
			b.upstreamSession(hIdPPartnr, "ann-at-partner", "")
			return b.get(PathAccount)
		}, http.StatusOK, shown(t, msgConfirmPassword)},
		{"nothing of one's own here but the upstream", func(h *harness, b *browser) page {
			b.upstreamSession(hIdPPartnr, "dora-at-partner", "dora@partner.example")
			return b.get(PathAccount)
		}, http.StatusForbidden, shown(t, keyAskAdminFederated)},
		{"the password, and an authenticator app not verified", func(h *harness, b *browser) page {
			h.enrollTOTP(hUser)
			return b.accountSignIn(hEmail, hPassword)
		}, http.StatusOK, shown(t, keyVerifyTitle)},
		{"the password, too long ago", func(h *harness, b *browser) page {
			b.accountSignIn(hEmail, hPassword)
			h.clock.Add(accountFresh - time.Minute)
			p := b.get(PathAccount)
			h.clock.Add(2 * time.Minute)
			return p
		}, http.StatusOK, "Sign in to your account"},
		{"the password, just now", func(h *harness, b *browser) page { return b.accountSignIn(hEmail, hPassword) }, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, up := newFedHarness(t)
			b := h.browser()
			home := tc.setup(h, b)
			got := b.submit(formWith(t, home, "provider", "corp"), "provider", "corp", nil)
			fed := b.cookie(authn.PathFederation, session.FedCookie)
			if tc.want != "" {
				if got.status != tc.status || !strings.Contains(got.body, tc.want) || fed != "" {
					t.Fatalf("status %d, federation cookie %v, want %d with %q\n%s", got.status, fed != "", tc.status, tc.want, got.body)
				}
				return
			}
			if got.status != http.StatusSeeOther || fed == "" {
				t.Fatalf("status %d, federation cookie %v, want 303 and the cookie", got.status, fed != "")
			}
			to, err := url.Parse(got.header.Get("Location"))
			if err != nil || !strings.HasPrefix(to.String(), up.issuer()+"/authorize?") {
				t.Fatalf("sent to %q", got.header.Get("Location"))
			}
			q := to.Query()
			if len(q.Get("state")) < 43 || len(q.Get("nonce")) < 43 || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
				q.Get("prompt") != "login" || q.Get("redirect_uri") != h.srv.URL+"/federation/corp/callback" || q.Get("client_id") != "oidcd" {
				t.Fatalf("authorization request %v", q)
			}
			if strings.Contains(fed, q.Get("state")) || strings.Contains(fed, q.Get("nonce")) {
				t.Fatal("the federation cookie holds the state or nonce in the clear")
			}
		})
	}
}

// TestAccountLinkCallback: back from the upstream, the link is made for
// the signed-in person in this browser, its session kept; every refusal
// is the account's page (or an expired page) with nothing linked, never a
// 500.
func TestAccountLinkCallback(t *testing.T) {
	const sub = "ann-at-corp"
	for _, tc := range []struct {
		name string
		// wait is the time from the sign-in to the departure; before
		// runs between the departure and the callback, and may change
		// the query or return another browser to come back in.
		wait   time.Duration
		before func(h *harness, up *fakeUpstream, b *browser, q url.Values) *browser
		status int
		want   string
		linked bool
	}{
		{"linked", 0, nil, http.StatusOK, shown(t, keyIdentityLinked, "Corp"), true},
		{"the subject is someone else's", 0, func(h *harness, _ *fakeUpstream, b *browser, _ url.Values) *browser {
			h.link(hUserB, hIdPCorp, sub, "")
			return b
		}, http.StatusConflict, shown(t, keyIdentityElsewhere, "Corp"), false},
		{"the person declined at the upstream", 0, func(_ *harness, _ *fakeUpstream, b *browser, q url.Values) *browser {
			q.Del("code")
			q.Set("error", "access_denied")
			return b
		}, http.StatusOK, shown(t, keyIdentityUpstream, "Corp"), false},
		{"the upstream is gone", 0, func(_ *harness, up *fakeUpstream, b *browser, _ url.Values) *browser {
			up.srv.Close()
			return b
		}, http.StatusBadGateway, shown(t, keyIdentityUpstreamDown, "Corp"), false},
		{"another state", 0, func(_ *harness, _ *fakeUpstream, b *browser, q url.Values) *browser {
			q.Set("state", authn.NewID())
			return b
		}, http.StatusBadRequest, shown(t, keyIdentityExpired), false},
		{"the cookie lifted into another browser", 0, func(h *harness, _ *fakeUpstream, b *browser, _ url.Values) *browser {
			other := h.browser()
			u, _ := url.Parse(h.srv.URL + authn.PathFederation)
			other.jar.SetCookies(u, []*http.Cookie{{Name: session.FedCookie, Value: b.cookie(authn.PathFederation, session.FedCookie), Path: authn.PathFederation}})
			return other
		}, http.StatusBadRequest, shown(t, keyIdentityExpired), false},
		{"no longer fresh", accountFresh - time.Minute, func(h *harness, _ *fakeUpstream, b *browser, _ url.Values) *browser {
			h.clock.Add(2 * time.Minute) // the link started a minute before the sign-in was too old
			return b
		}, http.StatusOK, "Sign in to your account", false},
		{"expired", 0, func(h *harness, _ *fakeUpstream, b *browser, _ url.Values) *browser {
			h.clock.Add(fedCookieTTL + time.Minute)
			return b
		}, http.StatusBadRequest, "oidc: no request of this browser", false},
		{"signed out meanwhile", 0, func(h *harness, _ *fakeUpstream, b *browser, _ url.Values) *browser {
			sessions, _, _ := h.applier.State().SSOSessionsOf(hUser, h.clock.Now())
			for _, s := range sessions {
				h.apply(fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: s.ID, At: h.clock.Now(), Reason: fsm.EndLogout})
			}
			return b
		}, http.StatusOK, "Sign in to your account", false},
		{"the provider disabled meanwhile", 0, func(h *harness, _ *fakeUpstream, b *browser, _ url.Values) *browser {
			h.setProviderEnabled(hIdPCorp, false)
			return b
		}, http.StatusBadRequest, shown(t, keyIdentityUnavailable), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, up := newFedHarness(t)
			if tc.linked {
				// Ann's laptop: a link is a change of a way in, so
				// her other sessions end with it.
				h.browser().accountSignIn(hEmail, hPassword)
			}
			b := h.browser()
			home := b.accountSignIn(hEmail, hPassword)
			if tc.wait > 0 {
				h.clock.Add(tc.wait)
				home = b.get(PathAccount)
			}
			sso := b.cookie("/", session.SSOCookie)
			q := up.login(b.startLink(home, "corp"), sub, "ann@corp.example")
			back := b
			if tc.before != nil {
				back = tc.before(h, up, b, q)
			}
			got := back.fedCallback("corp", q)
			if got.status != tc.status || !strings.Contains(got.body, tc.want) {
				t.Fatalf("status %d, want %d with %q\n%s", got.status, tc.status, tc.want, got.body)
			}
			if back.cookie(authn.PathFederation, session.FedCookie) != "" {
				t.Error("the federation cookie outlived its callback")
			}
			ids, err := h.applier.State().Identities(hUser)
			if err != nil {
				t.Fatal(err)
			}
			if linked := len(ids) == 1 && ids[0].Subject == sub && ids[0].ProviderID == hIdPCorp; linked != tc.linked || len(ids) > 1 {
				t.Fatalf("ann's links %+v, want linked %v", ids, tc.linked)
			}
			if !tc.linked {
				return
			}
			// No session opened: the browser keeps its own, now the
			// only one (the laptop's ended).
			sessions, _, _ := h.applier.State().SSOSessionsOf(hUser, h.clock.Now())
			if b.cookie("/", session.SSOCookie) != sso || len(sessions) != 1 || sessions[0].IdentityID != "" {
				t.Errorf("sessions after the link: %+v", sessions)
			}
			if links, unlinks := section(t, got); slices.Contains(links, "corp") || !slices.Equal(unlinks, []string{ids[0].ID}) {
				t.Errorf("the page after the link offers %q and unlinks %q", links, unlinks)
			}
			found := false
			for _, e := range h.accountEvents(hUser) {
				found = found || e.Detail["action"] == actionIdentityLink && e.Detail["provider"] == "corp" && e.Actor == fsm.ActorPerson
			}
			if !found {
				t.Errorf("no identity-link event: %+v", h.accountEvents(hUser))
			}
		})
	}
}

// TestAccountUnlink: a person unlinks their own link only, never their
// last way in; every session opened through the link ends, and when this
// browser's did, the page asks to sign in again.
func TestAccountUnlink(t *testing.T) {
	const carl = "carl@corp.example"
	for _, tc := range []struct {
		name string
		// setup returns the browser on its account's home and the
		// identity id to unlink.
		setup  func(t *testing.T, h *harness) (*browser, page, string)
		status int
		want   string
		gone   bool // the link is gone
		after  func(t *testing.T, h *harness, b *browser, p page)
	}{
		{"another person's link", func(t *testing.T, h *harness) (*browser, page, string) {
			h.link(hUser, hIdPCorp, "ann-at-corp", "")
			bobs := h.link(hUserB, hIdPPartnr, "bob-at-partner", "")
			return h.browser(), page{}, bobs.ID
		}, http.StatusBadRequest, shown(t, keyNoIdentity), false, nil},
		{"the last way in", func(t *testing.T, h *harness) (*browser, page, string) {
			// Carl came through Corp and has no password, only recovery
			// codes, which are no way in.
			b := h.browser()
			s := b.upstreamSession(hIdPCorp, "carl-at-corp", carl)
			codes := h.enrollRecovery(s.UserID)
			p := b.submit(formWith(t, b.get(PathAccount), "action", actionIdentityUnlink), "action", actionIdentityUnlink, nil)
			if !strings.Contains(p.body, shown(t, keyVerifyTitle)) {
				t.Fatalf("unlink without a verified factor: %d\n%s", p.status, p.body)
			}
			p = b.submit(postForm(t, p, "method"), "method", webui.MethodRecovery, map[string]string{"code": codes[0]})
			if p.status != http.StatusOK || !strings.Contains(p.body, shown(t, keyConfirmed)) {
				t.Fatalf("recovery code: %d\n%s", p.status, p.body)
			}
			return b, p, s.IdentityID
		}, http.StatusConflict, shown(t, keyLastWayIn, "Corp"), false, nil},
		{"the link this session came through", func(t *testing.T, h *harness) (*browser, page, string) {
			idn := h.link(hUser, hIdPCorp, "ann-at-corp", "")
			b := h.browser()
			b.upstreamSession(hIdPCorp, "ann-at-corp", "")
			p := b.submit(formWith(t, b.get(PathAccount), "action", actionIdentityUnlink), "action", actionIdentityUnlink, nil)
			if !strings.Contains(p.body, shown(t, msgConfirmPassword)) {
				t.Fatalf("unlink from an upstream's session: %d\n%s", p.status, p.body)
			}
			p = b.signIn(p, hEmail, hPassword)
			return b, p, idn.ID
		}, http.StatusOK, shown(t, keyIdentitySignedOut, "Corp"), true, func(t *testing.T, h *harness, b *browser, p page) {
			if b.cookie("/", session.SSOCookie) != "" {
				t.Error("the ended session's cookie stays")
			}
			if sessions, _, _ := h.applier.State().SSOSessionsOf(hUser, h.clock.Now()); len(sessions) != 0 {
				t.Errorf("live sessions after the unlink: %+v", sessions)
			}
			// The page is the account's sign-in; signing in opens a new
			// session with the password.
			if p = b.signIn(p, hEmail, hPassword); p.status != http.StatusOK || !strings.Contains(p.body, `value="password-change"`) {
				t.Fatalf("signing in again: %d\n%s", p.status, p.body)
			}
		}},
		{"a link while signed in with the password", func(t *testing.T, h *harness) (*browser, page, string) {
			idn := h.link(hUser, hIdPCorp, "ann-at-corp", "")
			h.browser().upstreamSession(hIdPCorp, "ann-at-corp", "")
			b := h.browser()
			return b, b.accountSignIn(hEmail, hPassword), idn.ID
		}, http.StatusOK, shown(t, keyIdentityUnlinked, "Corp"), true, func(t *testing.T, h *harness, b *browser, p page) {
			sessions, _, _ := h.applier.State().SSOSessionsOf(hUser, h.clock.Now())
			if len(sessions) != 1 || sessions[0].IdentityID != "" {
				t.Errorf("the session through the link lives on: %+v", sessions)
			}
			if _, unlinks := section(t, p); len(unlinks) != 0 {
				t.Errorf("unlink forms after the unlink: %q", unlinks)
			}
			found := false
			for _, e := range h.accountEvents(hUser) {
				found = found || e.Detail["action"] == actionIdentityUnlink && e.Detail["provider"] == "corp"
			}
			if !found {
				t.Errorf("no identity-unlink event: %+v", h.accountEvents(hUser))
			}
			evs, err := h.applier.State().AuditEvents(fsm.AuditQuery{Type: fsm.EventIdentity, Subject: hUser, Limit: 10})
			if err != nil || !slices.ContainsFunc(evs, func(e fsm.Event) bool { return e.Detail["action"] == "unlinked" && e.Detail["provider"] == "corp" }) {
				t.Errorf("no identity event of the unlink: %+v %v", evs, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newFedHarness(t)
			b, home, id := tc.setup(t, h)
			if home.body == "" {
				home = b.accountSignIn(hEmail, hPassword)
			}
			got := b.submit(formWith(t, home, "action", actionIdentityUnlink), "action", actionIdentityUnlink, map[string]string{"identity_id": id})
			if got.status != tc.status || !strings.Contains(got.body, tc.want) {
				t.Fatalf("status %d, want %d with %q\n%s", got.status, tc.status, tc.want, got.body)
			}
			owner := ""
			if idn, err := identityByID(h, id); err == nil {
				owner = idn.UserID
			}
			if gone := owner == ""; gone != tc.gone {
				t.Fatalf("the link gone: %v, want %v", gone, tc.gone)
			}
			if tc.after != nil {
				tc.after(t, h, b, got)
			}
		})
	}
}

// identityByID finds a link by id among everyone's.
func identityByID(h *harness, id string) (fsm.Identity, error) {
	users, _, err := h.applier.State().Users(fsm.Page{PageSize: 100})
	if err != nil {
		return fsm.Identity{}, err
	}
	for _, u := range users {
		ids, err := h.applier.State().Identities(u.ID)
		if err != nil {
			return fsm.Identity{}, err
		}
		for _, idn := range ids {
			if idn.ID == id {
				return idn, nil
			}
		}
	}
	return fsm.Identity{}, fsm.ErrNotFound
}
