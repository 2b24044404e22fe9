package oidc

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/fsmtest"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/webui"
)

// bareWorld is a Provider over a real FSM with one organization, person
// and skip-consent public client, for benchmarks (newHarness takes a
// *testing.T) and for a node without the browser key.
type bareWorld struct {
	p       *Provider
	mux     *http.ServeMux
	applier *fsmtest.Applier
	now     time.Time
}

func newBareWorld(tb testing.TB, browserKey bool) *bareWorld {
	tb.Helper()
	w := &bareWorld{applier: fsmtest.New(tb), now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return w.now }
	km := keys.New(keys.Config{State: w.applier.State(), Applier: w.applier, Now: clock})
	if err := km.Tick(context.Background()); err != nil {
		tb.Fatal(err)
	}
	ui, err := webui.New()
	if err != nil {
		tb.Fatal(err)
	}
	w.p, err = New(Config{
		Issuer: "https://idp.example", State: w.applier.State(), Applier: w.applier, Keys: km, UI: ui,
		Hasher: password.New(password.Params{Memory: 64, Time: 1, Threads: 1}, 4), Now: clock, RateLimit: "off",
	})
	if err != nil {
		tb.Fatal(err)
	}
	w.mux = http.NewServeMux()
	w.p.Register(w.mux)
	must := func(typ fsm.Type, v any) {
		res, err := w.applier.Apply(context.Background(), fsm.MustCommand(typ, v))
		if err != nil || res.Err != nil {
			tb.Fatalf("%s: %v %v", typ, err, res.Err)
		}
	}
	if browserKey {
		must(fsm.TypeSetSecret, fsm.SetSecret{Name: fsm.SecretBrowserKey, Value: bytes.Repeat([]byte{7}, 32)})
	}
	must(fsm.TypeCreateOrg, fsm.CreateOrg{ID: hOrgA, Slug: "alpha", Name: "Org alpha", CreatedAt: w.now})
	must(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: hUser, Email: hEmail, CreatedAt: w.now}})
	must(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{ID: hMemA, UserID: hUser, OrgID: hOrgA, Status: fsm.MembershipActive}})
	must(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: fsm.Client{
		ID: hPublic, Name: "Public App", Type: fsm.ClientPublic, Scopes: []string{"openid", "email"},
		OrganizationID: hOrgA, SkipConsent: true, RedirectURIs: []string{hRedirect}, AccessTokenTTL: 600,
	}})
	return w
}

// session opens a live SSO session and returns its cookie secret.
func (w *bareWorld) session(tb testing.TB) string {
	secret := newID()
	res, err := w.applier.Apply(context.Background(), fsm.MustCommand(fsm.TypeStartSSOSession, fsm.StartSSOSession{
		TokenHash: hashToken(secret), Session: fsm.SSOSession{
			ID: newID(), UserID: hUser, AuthTime: w.now, AMR: []string{AMRPassword}, ACR: ACRPwd,
			CreatedAt: w.now, LastSeen: w.now, IdleExpiresAt: w.now.Add(2 * time.Hour), ExpiresAt: w.now.Add(12 * time.Hour),
		}}))
	if err != nil || res.Err != nil {
		tb.Fatal(err, res.Err)
	}
	return secret
}

func (w *bareWorld) get(path, secret string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if secret != "" {
		req.AddCookie(&http.Cookie{Name: cookieSession, Value: secret})
	}
	rec := httptest.NewRecorder()
	w.mux.ServeHTTP(rec, req)
	return rec
}

// TestNoBrowserKey: a node that has not received the browser key yet
// cannot show a form: 503, and silent sign-in still works.
func TestNoBrowserKey(t *testing.T) {
	w := newBareWorld(t, false)
	rec := w.get(authzPath(authzQuery(hPublic)), "")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Location") != "" {
		t.Errorf("got %d %q, want 503 without Location", rec.Code, rec.Header().Get("Location"))
	}
	if !strings.Contains(rec.Body.String(), `class="reference"`) {
		t.Errorf("no reference on the 503 page")
	}
	rec = w.get(authzPath(authzQuery(hPublic)), w.session(t))
	if rec.Code != http.StatusFound || !strings.HasPrefix(rec.Header().Get("Location"), hRedirect+"?code=") {
		t.Errorf("silent sign-in: got %d %q, want 302 with a code", rec.Code, rec.Header().Get("Location"))
	}
}

// TestSecureCookies: with an https issuer every cookie is Secure.
func TestSecureCookies(t *testing.T) {
	w := newBareWorld(t, true)
	rec := w.get(authzPath(authzQuery(hPublic)), "")
	cookies := rec.Result().Cookies()
	if len(cookies) == 0 {
		t.Fatal("no cookie set with the sign-in form")
	}
	for _, c := range cookies {
		if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
			t.Errorf("cookie %s: got %+v, want Secure, HttpOnly, SameSite=Lax", c.Name, c)
		}
	}
}

// BenchmarkSilentAuthorize: GET /authorize with a live session cookie,
// answered 302 with a code (validation, session read, membership read,
// one IssueCode apply on a real bbolt FSM).
func BenchmarkSilentAuthorize(b *testing.B) {
	w := newBareWorld(b, true)
	secret := w.session(b)
	path := authzPath(authzQuery(hPublic))
	b.ReportAllocs()
	for b.Loop() {
		rec := w.get(path, secret)
		if rec.Code != http.StatusFound || !strings.Contains(rec.Header().Get("Location"), "code=") {
			b.Fatalf("got %d %q", rec.Code, rec.Header().Get("Location"))
		}
	}
}
