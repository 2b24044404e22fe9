package oidc

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/session"
	"github.com/oidcd/oidcd/signin"
	"github.com/oidcd/oidcd/webui"
)

// testClock is an adjustable clock shared by the provider and the test.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// Fixed ids of the seeded world.
const (
	hOrgA     = "0a000000-0000-4000-8000-000000000001"
	hOrgB     = "0b000000-0000-4000-8000-000000000002"
	hOrgC     = "0c000000-0000-4000-8000-000000000003"
	hUser     = "1a000000-0000-4000-8000-000000000001"
	hUserB    = "1b000000-0000-4000-8000-000000000002" // member of no organization
	hMemA     = "2a000000-0000-4000-8000-000000000001"
	hMemB     = "2b000000-0000-4000-8000-000000000002"
	hEmail    = "ann@example.com"
	hEmailB   = "bob@example.com"
	hPassword = "correct horse battery"

	hConfidential = "conf-app" // confidential, org A, openid email profile, consent needed
	hSecret       = "conf-secret-0123456789"
	hPublic       = "public-app" // public, org A, skip_consent
	hMulti        = "multi-app"  // public, multi-organization (A, B, C), skip_consent
	hOtherOrgApp  = "other-app"  // confidential, owned by org B
	hOtherSecret  = "other-secret-0123456789"
	hSiblingApp   = "sibling-app" // confidential, owned by org A (same owner as conf-app)
	hSiblingSec   = "sibling-secret-0123456789"
	hRedirect     = "https://app.example/cb"
	hLoopback     = "http://127.0.0.1:9999/cb" // every client's second redirect URI
)

// harness is a Provider over a real bbolt FSM, real keys and real pages,
// served by httptest on 127.0.0.1.
type harness struct {
	t       testing.TB
	clock   *testClock
	applier *fsmtest.Applier
	keys    *keys.Manager
	p       *Provider
	steps   *signin.Signin
	srv     *httptest.Server
	hasher  *password.Hasher
	// issued keeps every code record as issued: once redeemed, the store
	// keeps only what replay detection needs.
	issued map[string]fsm.Code
}

// issuedCode is the record of code as it was issued, read before any
// redemption slimmed it (signedInCode codes are kept in h.issued).
func (h *harness) issuedCode(code string) fsm.Code {
	h.t.Helper()
	if c, ok := h.issued[code]; ok {
		return c
	}
	c, err := h.applier.State().Code(authn.HashToken(code))
	if err != nil || !c.RedeemedAt.IsZero() {
		h.t.Fatalf("code record: %v (redeemed %v)", err, c.RedeemedAt)
	}
	return c
}

// harnessOption is one option of newHarness: a func(*Config), which
// tweaks the provider's Config before New (it runs after the defaults, so
// it may replace the issuer), or withoutBrowserKey. The type is any so
// that plain func(*Config) literals stay valid options; newHarness fails
// the test on anything else.
type harnessOption any

// withoutBrowserKey seeds everything but the browser key: a node that has
// not received it yet.
var withoutBrowserKey harnessOption = noBrowserKey{}

type noBrowserKey struct{}

func newHarness(t testing.TB, opts ...harnessOption) *harness {
	t.Helper()
	var tweaks []func(*Config)
	browserKey := true
	for _, o := range opts {
		switch o := o.(type) {
		case func(*Config):
			tweaks = append(tweaks, o)
		case noBrowserKey:
			browserKey = false
		default:
			t.Fatalf("newHarness: unknown option %T", o)
		}
	}
	// The clock starts at the real time: cookie expiry set from it is
	// judged by the cookie jar against the real clock.
	h := &harness{t: t, clock: &testClock{t: time.Now().UTC().Truncate(time.Second)}}
	h.applier = fsmtest.New(t)
	h.hasher = password.New(password.Params{Memory: 64, Time: 1, Threads: 1}, 4)
	h.keys = keys.New(keys.Config{State: h.applier.State(), Applier: h.applier, Now: h.clock.Now})
	if err := h.keys.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	ui, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewUnstartedServer(nil)
	issuer := "http://" + h.srv.Listener.Addr().String()
	cfg := Config{
		Issuer: issuer, State: h.applier.State(), Applier: h.applier, Keys: h.keys, UI: ui,
		Now: h.clock.Now, RateLimit: "off",
	}
	for _, f := range tweaks {
		f(&cfg)
	}
	// One browser session for the flow and the sign-in, as node builds it.
	if cfg.Sessions == nil {
		if cfg.Sessions, err = session.New(session.Config{Issuer: cfg.Issuer, State: cfg.State}); err != nil {
			t.Fatal(err)
		}
	}
	// The sign-in steps come from package signin, as node wires them.
	h.steps, err = signin.New(signin.Config{
		Issuer: cfg.Issuer, State: cfg.State, Applier: cfg.Applier, UI: cfg.UI, Hasher: h.hasher,
		Now: cfg.Now, Registerer: cfg.Registerer, Sessions: cfg.Sessions, ReadIndex: cfg.ReadIndex,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Steps = h.steps
	h.p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.p.Register(mux)
	h.steps.Register(mux)
	h.srv.Config.Handler = mux
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	h.seed(browserKey)
	return h
}

func (h *harness) apply(typ fsm.Type, v any) fsm.Result {
	h.t.Helper()
	res, err := h.applier.Apply(context.Background(), fsm.MustCommand(typ, v))
	if err != nil || res.Err != nil {
		h.t.Fatalf("%s: %v %v", typ, err, res.Err)
	}
	return res
}

func (h *harness) hash(s string) string {
	h.t.Helper()
	out, err := h.hasher.Hash(context.Background(), s)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) seed(browserKey bool) {
	now := h.clock.Now()
	if browserKey {
		h.apply(fsm.TypeSetSecret, fsm.SetSecret{Name: fsm.SecretBrowserKey, Value: bytes.Repeat([]byte{7}, 32)})
	}
	for _, o := range []struct{ id, slug string }{{hOrgA, "alpha"}, {hOrgB, "beta"}, {hOrgC, "gamma"}} {
		h.apply(fsm.TypeCreateOrg, fsm.CreateOrg{ID: o.id, Slug: o.slug, Name: "Org " + o.slug, CreatedAt: now})
	}
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: hUser, Email: hEmail, EmailVerified: true, PasswordHash: h.hash(hPassword), CreatedAt: now}})
	h.apply(fsm.TypeCreateUser, fsm.CreateUser{User: fsm.User{ID: hUserB, Email: hEmailB, PasswordHash: h.hash(hPassword), CreatedAt: now}})
	h.apply(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{ID: hMemA, UserID: hUser, OrgID: hOrgA, Status: fsm.MembershipActive}})
	h.apply(fsm.TypeCreateMembership, fsm.CreateMembership{Membership: fsm.Membership{ID: hMemB, UserID: hUser, OrgID: hOrgB, Status: fsm.MembershipActive}})
	clients := []fsm.Client{
		{ID: hConfidential, Name: "Confidential App", Type: fsm.ClientConfidential, SecretHash: password.HashSecret(hSecret),
			Scopes: []string{"openid", "email", "profile"}, OrganizationID: hOrgA},
		{ID: hPublic, Name: "Public App", Type: fsm.ClientPublic, Scopes: []string{"openid", "email"}, OrganizationID: hOrgA, SkipConsent: true},
		{ID: hMulti, Name: "Multi App", Type: fsm.ClientPublic, Scopes: []string{"openid"}, OrganizationID: hOrgA,
			MultiOrganization: true, Organizations: []string{hOrgA, hOrgB, hOrgC}, SkipConsent: true},
		{ID: hOtherOrgApp, Name: "Other Org App", Type: fsm.ClientConfidential, SecretHash: password.HashSecret(hOtherSecret), Scopes: []string{"openid"}, OrganizationID: hOrgB},
		{ID: hSiblingApp, Name: "Sibling App", Type: fsm.ClientConfidential, SecretHash: password.HashSecret(hSiblingSec), Scopes: []string{"openid"}, OrganizationID: hOrgA, SkipConsent: true},
	}
	for _, c := range clients {
		c.RedirectURIs = []string{hRedirect, hLoopback}
		c.AccessTokenTTL = 600
		c.CreatedAt, c.UpdatedAt = now, now
		h.apply(fsm.TypeCreateClient, fsm.PutClient{Create: true, Client: c})
	}
}

// signedInCode opens an SSO session for user and issues a code directly
// through the FSM, as the authorize flow would, for token-side tests that
// do not want to drive the pages. It returns the raw code value.
func (h *harness) signedInCode(clientID, userID, orgID string, scopes []string, nonce, verifier string) string {
	h.t.Helper()
	now := h.clock.Now()
	ssoID, _ := h.ssoSession(userID)
	code := authn.NewID()
	h.apply(fsm.TypeIssueCode, fsm.IssueCode{NewSID: authn.NewID(), IdleExpiresAt: now.Add(2 * time.Hour), Code: fsm.Code{
		Hash: authn.HashToken(code), ClientID: clientID, RedirectURI: hRedirect, UserID: userID, OrgID: orgID,
		SSOSessionID: ssoID, Scopes: scopes, Nonce: nonce, Challenge: authn.S256(verifier),
		AuthTime: now, AMR: []string{AMRPassword}, ACR: ACRPwd, RequestedAt: now, IssuedAt: now, ExpiresAt: now.Add(60 * time.Second),
	}})
	c, err := h.applier.State().Code(authn.HashToken(code))
	if err != nil {
		h.t.Fatal(err)
	}
	if h.issued == nil {
		h.issued = map[string]fsm.Code{}
	}
	h.issued[code] = c
	return code
}

// ssoSession opens a live SSO session for userID, signed in by password
// now, and returns its id and the secret its cookie would carry.
func (h *harness) ssoSession(userID string) (id, secret string) {
	h.t.Helper()
	now := h.clock.Now()
	id, secret = authn.NewID(), authn.NewID()
	h.apply(fsm.TypeStartSSOSession, fsm.StartSSOSession{TokenHash: authn.HashToken(secret), Session: fsm.SSOSession{
		ID: id, UserID: userID, AuthTime: now, AMR: []string{AMRPassword}, ACR: ACRPwd,
		CreatedAt: now, LastSeen: now, IdleExpiresAt: now.Add(2 * time.Hour), ExpiresAt: now.Add(12 * time.Hour),
	}})
	return id, secret
}
