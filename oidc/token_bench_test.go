package oidc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/fsmtest"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/webui"
)

// bcBench is a small seeded provider for benchmarks (newHarness takes a
// *testing.T): one organization, one person, a confidential and a public
// app. Requests go straight to the handler through a recorder.
type bcBench struct {
	b       *testing.B
	applier *fsmtest.Applier
	handler http.Handler
	now     time.Time
}

func newBCBench(b *testing.B) *bcBench {
	b.Helper()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	w := &bcBench{b: b, applier: fsmtest.New(b), now: now}
	hasher := password.New(password.Params{Memory: 64, Time: 1, Threads: 1}, 4)
	km := keys.New(keys.Config{State: w.applier.State(), Applier: w.applier, Now: clock})
	if err := km.Tick(context.Background()); err != nil {
		b.Fatal(err)
	}
	ui, err := webui.New()
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(Config{Issuer: "https://id.example", State: w.applier.State(), Applier: w.applier, Keys: km,
		UI: ui, Hasher: hasher, Now: clock, RateLimit: "off"})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	p.Register(mux)
	w.handler = mux
	secret := password.HashSecret(hSecret)
	w.apply(fsm.TypeCreateOrg, fsm.CreateOrg{ID: hOrgA, Slug: "alpha", Name: "Org alpha", CreatedAt: now})
	w.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: hUser, Email: hEmail, EmailVerified: true, CreatedAt: now}})
	w.apply(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{ID: hMemA, UserID: hUser, OrgID: hOrgA, Status: fsm.MembershipActive}})
	for _, c := range []fsm.Client{
		{ID: hConfidential, Type: fsm.ClientConfidential, SecretHash: secret, Scopes: []string{"openid", "email"}, OrganizationID: hOrgA},
		{ID: hPublic, Type: fsm.ClientPublic, Scopes: []string{"openid", "email"}, OrganizationID: hOrgA},
	} {
		c.RedirectURIs, c.AccessTokenTTL = []string{hRedirect}, 600
		w.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: c})
	}
	return w
}

func (w *bcBench) apply(typ fsm.Type, v any) {
	res, err := w.applier.Apply(context.Background(), fsm.MustCommand(typ, v))
	if err != nil || res.Err != nil {
		w.b.Fatalf("%s: %v %v", typ, err, res.Err)
	}
}

// code issues a code to clientID under a fresh SSO session.
func (w *bcBench) code(clientID string) string {
	sso, code := newID(), newID()
	w.apply(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: hashToken(newID()), Session: fsm.SSOSession{
		ID: sso, UserID: hUser, AuthTime: w.now, AMR: []string{AMRPassword}, ACR: ACRPwd,
		CreatedAt: w.now, LastSeen: w.now, IdleExpiresAt: w.now.Add(time.Hour), ExpiresAt: w.now.Add(time.Hour)}})
	w.apply(fsm.TypeIssueCode, fsm.IssueCode{NewSID: newID(), IdleExpiresAt: w.now.Add(time.Hour), Code: fsm.Code{
		Hash: hashToken(code), ClientID: clientID, RedirectURI: hRedirect, UserID: hUser, OrgID: hOrgA,
		SSOSessionID: sso, Scopes: []string{"openid", "email"}, Challenge: s256(bcVerifier),
		AuthTime: w.now, AMR: []string{AMRPassword}, ACR: ACRPwd, RequestedAt: w.now, IssuedAt: w.now, ExpiresAt: w.now.Add(time.Minute)}})
	return code
}

func (w *bcBench) post(path string, form url.Values, user, pass string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	rec := httptest.NewRecorder()
	w.handler.ServeHTTP(rec, req)
	return rec
}

// token exchanges a fresh code of the public app.
func (w *bcBench) token() string {
	form := bcTokenForm(w.code(hPublic))
	form.Set("client_id", hPublic)
	rec := w.post(PathToken, form, "", "")
	if rec.Code != http.StatusOK {
		w.b.Fatalf("token: %d %s", rec.Code, rec.Body)
	}
	s := rec.Body.String()
	i := strings.Index(s, `"access_token":"`) + len(`"access_token":"`)
	return s[i : i+strings.IndexByte(s[i:], '"')]
}

// BenchmarkTokenExchange: the token endpoint end to end (parse, client
// authentication, code read, two RS256 signatures, one FSM write). Issuing
// the code is outside the timer.
func BenchmarkTokenExchange(b *testing.B) {
	for _, c := range []struct{ name, client, secret string }{
		{"public", hPublic, ""},
		{"confidential", hConfidential, hSecret}, // plus one argon2id at test cost
	} {
		b.Run(c.name, func(b *testing.B) {
			w := newBCBench(b)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				form := bcTokenForm(w.code(c.client))
				user := c.client
				if c.secret == "" {
					form.Set("client_id", c.client)
					user = ""
				}
				b.StartTimer()
				if rec := w.post(PathToken, form, user, c.secret); rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// BenchmarkUserinfo: the bearer hot path (RS256 verify, claims, one
// read transaction).
func BenchmarkUserinfo(b *testing.B) {
	w := newBCBench(b)
	tok := w.token()
	req := httptest.NewRequest("GET", PathUserinfo, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		w.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkIntrospect: client authentication (argon2id at test cost) plus
// the bearer checks.
func BenchmarkIntrospect(b *testing.B) {
	w := newBCBench(b)
	form := url.Values{"token": {w.token()}}
	b.ReportAllocs()
	for b.Loop() {
		if rec := w.post(PathIntrospect, form, hConfidential, hSecret); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"active":true`) {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
