package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
)

// fakePeople is a PersonTokens that knows a fixed set of tokens.
type fakePeople struct {
	mu     sync.Mutex
	tokens map[string]PersonToken
	err    error
	calls  atomic.Int64
}

func (p *fakePeople) Check(_ context.Context, token string) (PersonToken, error) {
	p.calls.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return PersonToken{}, p.err
	}
	return p.tokens[token], nil
}

func (p *fakePeople) set(token string, pt PersonToken) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tokens == nil {
		p.tokens = map[string]PersonToken{}
	}
	p.tokens[token] = pt
}

func withPeople(p *fakePeople, acr string) func(*Config) {
	return func(c *Config) { c.People, c.AdminACR = p, acr }
}

func bearerHdr(token string) []string { return []string{"Authorization", "Bearer " + token} }

// applyNow commits cmd straight to the state, as another node's write
// that this node applies.
func (e *env) applyNow(cmd fsm.Command) {
	e.t.Helper()
	if res, err := e.app.Apply(context.Background(), cmd); err != nil || res.Err != nil {
		e.t.Errorf("apply %s: %v %v", cmd.Type, err, res.Err)
	}
}

func TestAPIKeyForm(t *testing.T) {
	const id = "0b6c1a52-5a4e-4d5e-9a43-3b1f2f2b6c11"
	key, hash := newAPIKey(id)
	if got, ok := parseAPIKey(key); !ok || got != id {
		t.Fatalf("parse %q: got %q %v, want %q", key, got, ok, id)
	}
	secret := strings.TrimPrefix(key, apiKeyPrefix+id+"_")
	if len(secret) != 43 { // 32 bytes, base64url without padding
		t.Errorf("secret part: got %d characters, want 43 (256 bits)", len(secret))
	}
	if other, _ := newAPIKey(id); other == key {
		t.Errorf("two keys alike: %q", key)
	}
	if hash == "" || strings.Contains(hash, secret) || !tokenMatches(key, hash) {
		t.Errorf("hash %q: want the stored form of the key", hash)
	}
	tests := []struct {
		in string
		ok bool
	}{
		{apiKeyPrefix + id + "_s", true},
		{apiKeyPrefix + id + "_a_b", true}, // base64url has "_"
		{apiKeyPrefix + id + "_", false},
		{apiKeyPrefix + id, false},
		{apiKeyPrefix + "not-a-uuid-not-a-uuid-not-a-uuid-xx_s", false},
		{"oidcd_xx_" + id + "_s", false},
		{id + "_s", false},
		{"", false},
	}
	for _, tt := range tests {
		if _, ok := parseAPIKey(tt.in); ok != tt.ok {
			t.Errorf("parseAPIKey(%q): got %v, want %v", tt.in, ok, tt.ok)
		}
	}
}

func TestACRMeets(t *testing.T) {
	tests := []struct {
		acr, required string
		want          bool
	}{
		{authn.ACRMFA, authn.ACRMFA, true},
		{authn.ACRPwd, authn.ACRMFA, false},
		{authn.ACRPhone, authn.ACRMFA, false},
		{"", authn.ACRMFA, false},
		{authn.ACRMFA, "", true},
		{authn.ACRPwd, "", false},
		{authn.ACRPwd, authn.ACRPwd, true},
		{authn.ACRMFA, authn.ACRPwd, true},
		{authn.ACRPhone, authn.ACRPwd, false},
		{authn.ACRMFA, authn.ACRPhone, true},
		{authn.ACRPwd, authn.ACRPhone, false},
		{"urn:other", "urn:other", true},
		{authn.ACRMFA, "urn:other", false},
	}
	for _, tt := range tests {
		if got := acrMeets(tt.acr, tt.required); got != tt.want {
			t.Errorf("acrMeets(%q, %q): got %v, want %v", tt.acr, tt.required, got, tt.want)
		}
	}
}

func TestWidestGrant(t *testing.T) {
	g := func(role, org string) fsm.AdminGrant { return fsm.AdminGrant{ID: role, Role: role, OrgID: org} }
	tests := []struct {
		name   string
		grants []fsm.AdminGrant
		want   string
		org    string
	}{
		{"none", nil, "", ""},
		{"org_admin", []fsm.AdminGrant{g(RoleOrgAdmin, "o1")}, RoleOrgAdmin, "o1"},
		{"auditor over org_admin", []fsm.AdminGrant{g(RoleOrgAdmin, "o1"), g(RoleAuditor, "")}, RoleAuditor, ""},
		{"admin over all", []fsm.AdminGrant{g(RoleAuditor, ""), g(RoleAdmin, ""), g(RoleOrgAdmin, "o1")}, RoleAdmin, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := widestGrant(tt.grants)
			if got.Role != tt.want || got.OrgID != tt.org || ok != (tt.want != "") {
				t.Errorf("got %+v %v, want role %q org %q", got, ok, tt.want, tt.org)
			}
		})
	}
	// The two packages name the roles alike.
	if RoleAdmin != fsm.RoleAdmin || RoleOrgAdmin != fsm.RoleOrgAdmin || RoleAuditor != fsm.RoleAuditor {
		t.Error("admin's and fsm's roles differ")
	}
}

// TestCredentialInContext: the route sees the resolved Credential.
func TestCredentialInContext(t *testing.T) {
	people := &fakePeople{}
	fsmApp := newEnv(t) // only for its state and token
	var seen Credential
	a := &api{Config: Config{State: fsmApp.state, Applier: fsmApp.app, People: people, Guard: NewGuard(nil), Now: time.Now,
		TokenHash: func() string { return HashToken(fsmApp.token) }}}
	h := a.authenticate(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen, _ = CredentialFrom(r.Context()) }))
	r := httptest.NewRequest("GET", Prefix+"/status", nil)
	r.Header.Set("Authorization", "Bearer "+fsmApp.token)
	h.ServeHTTP(httptest.NewRecorder(), r)
	if want := (Credential{Kind: CredentialToken, Role: RoleAdmin}); seen != want {
		t.Errorf("got %+v, want %+v", seen, want)
	}
}
