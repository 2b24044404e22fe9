package admin

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// The roles of the tests: the break-glass token, an auditor, and an
// org_admin of each of two organizations (O and P; set by scene).
var (
	asAdmin   = Credential{Kind: CredentialToken, Role: RoleAdmin}
	asAuditor = Credential{Kind: CredentialAPIKey, ID: "k-audit", Role: RoleAuditor}
)

func orgAdmin(org string) Credential {
	return Credential{Kind: CredentialPerson, Sub: "00000000-0000-4000-8000-0000000000ad", Role: RoleOrgAdmin, OrgID: org}
}

// scene is two organizations and what is in them: alice belongs to O
// alone, bob to O and P, carol to P alone, dave to none; the clients are
// O's, P's, one serving O and P (owned by O), one serving O alone (a
// multi-organization client, owned by O), one owned by O serving every
// organization.
type scene struct {
	*env
	o, p                           Org
	alice, bob, carol, dave        User
	aliceO, bobO, bobP, carolP     Membership
	appO, appP, shared, onlyO, all Client
	invO, invP                     fsm.Invitation // pending invitations to O and to P
}

func newScene(t testing.TB, opts ...func(*Config)) *scene {
	e := newEnv(t, opts...)
	s := &scene{env: e}
	s.o, s.p = e.createOrg("acme"), e.createOrg("globex")
	s.alice = e.createUser(`{"email":"alice@example.com","phone":"+15550100001"}`)
	s.bob = e.createUser(`{"email":"bob@example.com"}`)
	s.carol = e.createUser(`{"email":"carol@example.com"}`)
	s.dave = e.createUser(`{"email":"dave@example.com"}`)
	s.aliceO = e.createMembership(s.alice.ID, s.o.ID)
	s.bobO = e.createMembership(s.bob.ID, s.o.ID)
	s.bobP = e.createMembership(s.bob.ID, s.p.ID)
	s.carolP = e.createMembership(s.carol.ID, s.p.ID)
	s.appO = e.createClient(clientJSON(s.o.ID, map[string]any{"client_id": "app-o"}))
	s.appP = e.createClient(clientJSON(s.p.ID, map[string]any{"client_id": "app-p"}))
	s.shared = e.createClient(clientJSON(s.o.ID, map[string]any{"client_id": "app-shared", "multi_organization": true,
		"organizations": []string{s.o.ID, s.p.ID}}))
	s.onlyO = e.createClient(clientJSON(s.o.ID, map[string]any{"client_id": "app-only-o", "multi_organization": true,
		"organizations": []string{s.o.ID}}))
	s.all = e.createClient(clientJSON(s.o.ID, map[string]any{"client_id": "app-all", "multi_organization": true}))
	s.invO = e.invite("erin@example.com", s.o.ID)
	s.invP = e.invite("frank@example.com", s.p.ID)
	return s
}

// bareAPI is the API of e's state, for handlers served without
// authenticate.
func (e *env) bareAPI() *api {
	return &api{Config: Config{State: e.state, Applier: e.hook, Keys: e.keys, Cluster: e.cluster, Hasher: e.hasher,
		Now: e.clock.now, Logger: slog.New(slog.DiscardHandler), NewID: uuid.NewString,
		MaxSnapshotBytes: DefaultMaxSnapshotBytes, Guard: NewGuard(e.clock.now),
		Mail: e.cfg.Mail, Issuer: e.cfg.Issuer, KEK: e.cfg.KEK}}
}

// as sends a request made with c to the API's routes, authorized, but
// without authenticate: the credential is put in the request's context
// as authenticate puts it.
func (e *env) as(c Credential, method, path, body string) *httptest.ResponseRecorder {
	e.t.Helper()
	a := e.bareAPI()
	mux := http.NewServeMux()
	a.routes(mux)
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	r = r.WithContext(WithCredential(r.Context(), c))
	w := httptest.NewRecorder()
	httpx.Correlation(mux).ServeHTTP(w, r)
	return w
}

// decisionMux serves every declared route (those of Routes and the ones
// whose handlers live elsewhere alike) with a handler that only records
// that it was reached: what authorize decided, and nothing else.
func (e *env) decisionMux(reached *bool) http.Handler {
	a := e.bareAPI()
	mux := http.NewServeMux()
	for key := range declarations {
		method, path, _ := strings.Cut(key, " ")
		mux.HandleFunc(method+" "+Prefix+path, a.authorize(method, path, func(w http.ResponseWriter, r *http.Request) {
			*reached = true
			w.WriteHeader(299)
		}))
	}
	return httpx.Correlation(mux)
}

// TestEveryRouteIsDeclared: no route is served without saying what it
// touches (authorize refuses such a route to everybody).
func TestEveryRouteIsDeclared(t *testing.T) {
	for _, rt := range Routes() {
		if _, ok := declarations[rt]; !ok {
			t.Errorf("%s has no authorization declaration (authz.go)", rt)
		}
	}
}

// TestEveryDeclarationIsARoute: no declaration names a route that is not
// served, so a route renamed or removed takes its declaration with it.
func TestEveryDeclarationIsARoute(t *testing.T) {
	served := Routes()
	for key := range declarations {
		if !slices.Contains(served, key) {
			t.Errorf("%s is declared (authz.go) but not served", key)
		}
	}
}

// TestUndeclaredRouteIsRefused: a handler wrapped for a route without a
// declaration answers 403 to every role, the admin too.
func TestUndeclaredRouteIsRefused(t *testing.T) {
	e := newEnv(t)
	h := e.bareAPI().authorize("GET", "/nowhere", func(w http.ResponseWriter, r *http.Request) { t.Fatal("reached") })
	r := httptest.NewRequest("GET", "/admin/v1/nowhere", nil)
	r = r.WithContext(WithCredential(r.Context(), asAdmin))
	w := httptest.NewRecorder()
	httpx.Correlation(h).ServeHTTP(w, r)
	checkEnvelope(t, w, 403, httpx.CodeForbidden)
}

// expect is what each role may do on one route, in the order admin,
// auditor, org_admin of O, org_admin of P, for a request on O's
// records: a (reaches the handler), f (403) or h (404, as if missing).
var expect = map[string]string{
	"GET /organizations":                 "aaaa",
	"POST /organizations":                "afff",
	"GET /organizations/{id}":            "aaah",
	"DELETE /organizations/{id}":         "afff",
	"GET /users":                         "aaaa",
	"POST /users":                        "afaa",
	"POST /users/import":                 "afff",
	"GET /users/{id}":                    "aaah",
	"PATCH /users/{id}":                  "afah",
	"DELETE /users/{id}":                 "afah",
	"POST /users/{id}/totp":              "afah",
	"DELETE /users/{id}/totp":            "afah",
	"POST /users/{id}/recovery-codes":    "afah",
	"GET /users/{id}/factors":            "aaah",
	"DELETE /users/{id}/lockouts":        "afah",
	"GET /lockouts":                      "aaff",
	"DELETE /lockouts/{key}":             "afff",
	"GET /memberships":                   "aaaa",
	"POST /memberships":                  "afaf",
	"GET /memberships/{id}":              "aaah",
	"PATCH /memberships/{id}":            "afah",
	"DELETE /memberships/{id}":           "afah",
	"GET /clients":                       "aaaa",
	"POST /clients":                      "afaf",
	"GET /clients/{id}":                  "aaah",
	"PATCH /clients/{id}":                "afah",
	"DELETE /clients/{id}":               "afah",
	"GET /directories":                   "aaff",
	"POST /directories":                  "afff",
	"GET /directories/{id}":              "aaff",
	"PATCH /directories/{id}":            "afff",
	"DELETE /directories/{id}":           "afff",
	"GET /keys":                          "aaff",
	"POST /keys/rotate":                  "afff",
	"GET /cluster":                       "aaff",
	"DELETE /cluster/nodes/{id}":         "afff",
	"POST /cluster/members/{id}/promote": "afff",
	"POST /cluster/members/{id}/demote":  "afff",
	"GET /snapshot":                      "afff",
	"POST /snapshot":                     "afff",
	"GET /status":                        "aaff",
	"GET /audit":                         "aaaa",
	"GET /audit/verify":                  "aaff",
	"POST /admins":                       "afff",
	"GET /admins":                        "aaff",
	"DELETE /admins/{id}":                "afff",
	"POST /api-keys":                     "afaf",
	"GET /api-keys":                      "aaff",
	"DELETE /api-keys/{id}":              "afff",
	"POST /admin-token":                  "afff",
	"PATCH /organizations/{id}":          "afah",
	"POST /users/{id}/verify-email":      "afah",
	"GET /invitations":                   "aaaa",
	"POST /invitations":                  "afaf",
	"GET /invitations/{id}":              "aaah",
	"DELETE /invitations/{id}":           "afah",
	"GET /branding":                      "aaff",
	"PUT /branding":                      "afff",

	"GET /identity-providers":                     "aaaa",
	"POST /identity-providers":                    "afaf",
	"GET /identity-providers/{id}":                "aaah",
	"PATCH /identity-providers/{id}":              "afah",
	"DELETE /identity-providers/{id}":             "afah",
	"GET /users/{id}/identities":                  "aaah",
	"DELETE /users/{id}/identities/{identity_id}": "afah",
}

// TestAuthorizeEveryRouteEveryRole walks every route, served or
// declared, with every role, on records of O (bodies naming O), and
// checks that the decision is the one expect states: the handler is
// reached, or the answer is the 403 or 404 envelope and the handler is
// not reached. HEAD is walked as its GET.
func TestAuthorizeEveryRouteEveryRole(t *testing.T) {
	s := newScene(t)
	roles := []struct {
		name string
		c    Credential
	}{{"admin", asAdmin}, {"auditor", asAuditor}, {"org_admin of O", orgAdmin(s.o.ID)}, {"org_admin of P", orgAdmin(s.p.ID)}}
	ids := map[string]string{ // the {id} of each path prefix: O's records
		"/organizations/": s.o.ID, "/users/": s.alice.ID, "/memberships/": s.aliceO.ID, "/clients/": s.appO.ClientID,
		"/directories/": uuid.NewString(), "/cluster/": "node-2", "/admins/": uuid.NewString(), "/api-keys/": uuid.NewString(),
		"/invitations/": s.invO.ID, "/identity-providers/": s.orgIdP(t),
	}
	bodies := map[string]string{
		"POST /memberships":         `{"user_id":"` + s.alice.ID + `","org_id":"` + s.o.ID + `"}`, // O's already (joiner)
		"POST /clients":             clientJSON(s.o.ID, nil),
		"PATCH /clients/{id}":       `{"name":"Renamed"}`,
		"POST /api-keys":            `{"name":"ci","role":"org_admin","organization_id":"` + s.o.ID + `","expires_in":3600}`,
		"POST /invitations":         `{"email":"new@example.com","organization_id":"` + s.o.ID + `"}`,
		"PATCH /organizations/{id}": `{"name":"Renamed"}`,
		"PUT /branding":             `{"display_name":"Site"}`,

		"POST /identity-providers":       idpJSON(map[string]any{"slug": "o-new", "organization_id": s.o.ID}),
		"PATCH /identity-providers/{id}": `{"display_name":"Renamed"}`,
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range declarations {
			if !yield(k) {
				return
			}
		}
	})
	for _, rt := range Routes() {
		if !slices.Contains(keys, rt) {
			keys = append(keys, rt) // TestEveryRouteIsDeclared names it; here it must be refused
		}
	}
	var reached bool
	h := s.decisionMux(&reached)
	for _, key := range keys {
		want, ok := expect[key]
		if !ok {
			t.Errorf("%s: no expectation in this test", key)
			continue
		}
		method, path, _ := strings.Cut(key, " ")
		for prefix, id := range ids {
			if strings.HasPrefix(path, prefix) {
				path = strings.Replace(path, "{id}", id, 1)
			}
		}
		path = strings.Replace(path, "{key}", "pw%3Asomeone", 1)
		methods := []string{method}
		if method == "GET" {
			methods = append(methods, "HEAD")
		}
		for i, role := range roles {
			for _, m := range methods {
				t.Run(key+" "+m+" as "+role.name, func(t *testing.T) {
					body := bodies[key]
					r := httptest.NewRequest(m, Prefix+path, strings.NewReader(body))
					if body != "" {
						r.Header.Set("Content-Type", "application/json")
					}
					r = r.WithContext(WithCredential(r.Context(), role.c))
					reached = false
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					switch want[i] {
					case 'a':
						if !reached {
							t.Fatalf("refused, want allowed: %d %s", w.Code, w.Body)
						}
					case 'f', 'h':
						if reached {
							t.Fatalf("allowed, want refused")
						}
						status, code := 403, httpx.CodeForbidden
						if want[i] == 'h' {
							status, code = 404, httpx.CodeNotFound
						}
						if m == "HEAD" {
							if w.Code != status {
								t.Fatalf("status %d, want %d", w.Code, status)
							}
							return
						}
						checkEnvelope(t, w, status, code)
					}
				})
			}
		}
	}
}

// TestAuthorizeMalformedCredential: an org_admin without an organization,
// and a role nobody knows, may do nothing.
func TestAuthorizeMalformedCredential(t *testing.T) {
	e := newEnv(t)
	for _, c := range []Credential{{Kind: CredentialPerson, Role: RoleOrgAdmin}, {Kind: CredentialAPIKey, Role: "root"}} {
		for _, key := range []string{"GET /organizations", "GET /users", "GET /audit", "POST /users"} {
			d := declarations[key]
			if v, _ := decide(c, d, &scope{}); v != forbid {
				t.Errorf("%+v %s: verdict %d, want forbid", c, key, v)
			}
		}
		checkEnvelope(t, e.as(c, "GET", "/admin/v1/organizations", ""), 403, httpx.CodeForbidden)
	}
}

// TestOrgAdminAttacks: what an org_admin of O might try beyond O, with
// real records and the real handlers. Each is refused (403, or 404 for a
// record outside O), and changes nothing.
func TestOrgAdminAttacks(t *testing.T) {
	s := newScene(t)
	o := orgAdmin(s.o.ID)
	type attack struct {
		name, method, path, body string
		status                   int
	}
	u := "/admin/v1/users/"
	for _, at := range []attack{
		// Another organization, or O itself beyond what it may do.
		{"delete own organization", "DELETE", "/admin/v1/organizations/" + s.o.ID, "", 403},
		{"delete another organization", "DELETE", "/admin/v1/organizations/" + s.p.ID, "", 403},
		{"read another organization", "GET", "/admin/v1/organizations/" + s.p.ID, "", 404},
		{"create an organization", "POST", "/admin/v1/organizations", `{"slug":"evil","name":"Evil"}`, 403},
		// A member of another organization.
		{"add own member to another org", "POST", "/admin/v1/memberships", `{"user_id":"` + s.alice.ID + `","org_id":"` + s.p.ID + `"}`, 403},
		{"suspend another org's membership", "PATCH", "/admin/v1/memberships/" + s.bobP.ID, `{"status":"suspended"}`, 404},
		{"delete another org's membership", "DELETE", "/admin/v1/memberships/" + s.carolP.ID, "", 404},
		{"read another org's membership", "GET", "/admin/v1/memberships/" + s.bobP.ID, "", 404},
		// A person who is also, or only, in another organization.
		{"reset a shared person's password", "PATCH", u + s.bob.ID, `{"password":"correct horse battery"}`, 403},
		{"change a shared person's email", "PATCH", u + s.bob.ID, `{"email":"bob@evil.example"}`, 403},
		{"erase a shared person", "DELETE", u + s.bob.ID, "", 403},
		{"enroll a shared person's totp", "POST", u + s.bob.ID + "/totp", "", 403},
		{"remove a shared person's totp", "DELETE", u + s.bob.ID + "/totp", "", 403},
		{"new recovery codes of a shared person", "POST", u + s.bob.ID + "/recovery-codes", "", 403},
		{"clear a shared person's lockouts", "DELETE", u + s.bob.ID + "/lockouts", "", 403},
		{"reset another org's person", "PATCH", u + s.carol.ID, `{"password":"correct horse battery"}`, 404},
		{"read another org's person", "GET", u + s.carol.ID, "", 404},
		{"read another org's person's factors", "GET", u + s.carol.ID + "/factors", "", 404},
		{"reset a person of no organization", "PATCH", u + s.dave.ID, `{"password":"correct horse battery"}`, 404},
		{"erase a person of no organization", "DELETE", u + s.dave.ID, "", 404},
		// Clients.
		{"move a client to another org", "PATCH", "/admin/v1/clients/app-o", `{"organization_id":"` + s.p.ID + `"}`, 403},
		{"make a client serve another org", "PATCH", "/admin/v1/clients/app-o", `{"multi_organization":true,"organizations":["` + s.o.ID + `","` + s.p.ID + `"]}`, 403},
		{"make a client serve every org", "PATCH", "/admin/v1/clients/app-only-o", `{"organizations":[]}`, 403},
		{"change a client serving another org", "PATCH", "/admin/v1/clients/app-shared", `{"name":"Mine"}`, 403},
		{"delete a client serving another org", "DELETE", "/admin/v1/clients/app-shared", "", 403},
		{"delete a client serving every org", "DELETE", "/admin/v1/clients/app-all", "", 403},
		{"change another org's client", "PATCH", "/admin/v1/clients/app-p", `{"name":"Mine"}`, 404},
		{"change another org's client with a bad body", "PATCH", "/admin/v1/clients/app-p", `{"name":`, 404},
		{"read another org's client", "GET", "/admin/v1/clients/app-p", "", 404},
		{"create a client for another org", "POST", "/admin/v1/clients", clientJSON(s.p.ID, nil), 403},
		{"create a client serving another org", "POST", "/admin/v1/clients", clientJSON(s.o.ID, map[string]any{"multi_organization": true,
			"organizations": []string{s.o.ID, s.p.ID}}), 403},
		{"create a client serving every org", "POST", "/admin/v1/clients", clientJSON(s.o.ID, map[string]any{"multi_organization": true}), 403},
		// The audit trail of another organization.
		{"read another org's audit events", "GET", "/admin/v1/audit?organization_id=" + s.p.ID, "", 403},
		{"verify the whole trail", "GET", "/admin/v1/audit/verify", "", 403},
		// What is the site's.
		{"list keys", "GET", "/admin/v1/keys", "", 403},
		{"rotate keys", "POST", "/admin/v1/keys/rotate", `{}`, 403},
		{"read the cluster", "GET", "/admin/v1/cluster", "", 403},
		{"remove a node", "DELETE", "/admin/v1/cluster/nodes/node-2", "", 403},
		{"promote a node", "POST", "/admin/v1/cluster/members/node-2/promote", "", 403},
		{"list directories", "GET", "/admin/v1/directories", "", 403},
		{"create a directory", "POST", "/admin/v1/directories", `{}`, 403},
		{"take a backup", "GET", "/admin/v1/snapshot", "", 403},
		{"restore a backup", "POST", "/admin/v1/snapshot", "x", 403},
		{"import people", "POST", "/admin/v1/users/import", `{"users":[]}`, 403},
		{"list every lockout", "GET", "/admin/v1/lockouts", "", 403},
		{"clear a lockout by key", "DELETE", "/admin/v1/lockouts/ip%3A203.0.113.9", "", 403},
		{"read the node's status", "GET", "/admin/v1/status", "", 403},
		{"read the site's branding", "GET", "/admin/v1/branding", "", 403},
		{"set the site's branding", "PUT", "/admin/v1/branding", `{"display_name":"Evil"}`, 403},
		// Another organization's settings, invitations and people's
		// addresses.
		{"rename another organization", "PATCH", "/admin/v1/organizations/" + s.p.ID, `{"name":"Mine"}`, 404},
		{"open another organization's registration", "PATCH", "/admin/v1/organizations/" + s.p.ID,
			`{"registration":{"enabled":true,"email_domains":["evil.example"]}}`, 404},
		{"brand another organization", "PATCH", "/admin/v1/organizations/" + s.p.ID, `{"branding":{"display_name":"Evil"}}`, 404},
		{"clear another organization's branding", "PATCH", "/admin/v1/organizations/" + s.p.ID, `{"branding":{"logo":""}}`, 404},
		{"rename another organization with a bad body", "PATCH", "/admin/v1/organizations/" + s.p.ID, `{"name":`, 404},
		{"invite to another organization", "POST", "/admin/v1/invitations", `{"email":"mallory@example.com","organization_id":"` + s.p.ID + `"}`, 403},
		{"invite to another organization, in capitals", "POST", "/admin/v1/invitations",
			`{"email":"mallory@example.com","organization_id":"` + strings.ToUpper(s.p.ID) + `"}`, 403},
		{"invite to no organization", "POST", "/admin/v1/invitations", `{"email":"mallory@example.com","organization_id":"` + unknownID + `"}`, 403},
		{"invite with the organization repeated", "POST", "/admin/v1/invitations",
			`{"email":"mallory@example.com","organization_id":"` + s.o.ID + `","organization_id":"` + s.p.ID + `"}`, 403},
		{"list another organization's invitations", "GET", "/admin/v1/invitations?organization_id=" + s.p.ID, "", 403},
		{"read another organization's invitation", "GET", "/admin/v1/invitations/" + s.invP.ID, "", 404},
		{"withdraw another organization's invitation", "DELETE", "/admin/v1/invitations/" + s.invP.ID, "", 404},
		{"verify a shared person's address", "POST", u + s.bob.ID + "/verify-email", "", 403},
		{"verify another org's person's address", "POST", u + s.carol.ID + "/verify-email", "", 404},
		{"verify the address of a person of no organization", "POST", u + s.dave.ID + "/verify-email", "", 404},
	} {
		t.Run(at.name, func(t *testing.T) {
			before := s.app.FSM.Applied()
			w := s.as(o, at.method, at.path, at.body)
			code := httpx.CodeForbidden
			if at.status == 404 {
				code = httpx.CodeNotFound
			}
			checkEnvelope(t, w, at.status, code)
			if got := s.app.FSM.Applied(); got != before {
				t.Errorf("applied index moved from %d to %d", before, got)
			}
		})
	}
}

// TestOrgAdminAttacksOnGrants: grants, API keys and the break-glass
// token, whose handlers are served elsewhere: the decision alone.
func TestOrgAdminAttacksOnGrants(t *testing.T) {
	s := newScene(t)
	var reached bool
	h := s.decisionMux(&reached)
	key := func(role, org string) string {
		b := `{"name":"ci","role":"` + role + `","expires_in":3600`
		if org != "" {
			b += `,"organization_id":"` + org + `"`
		}
		return b + "}"
	}
	for _, at := range []struct {
		name, method, path, body string
		allowed                  bool
	}{
		{"grant itself admin", "POST", "/admins", `{"user_id":"` + s.alice.ID + `","role":"admin"}`, false},
		{"grant itself org_admin of another org", "POST", "/admins", `{"user_id":"` + s.alice.ID + `","role":"org_admin","organization_id":"` + s.p.ID + `"}`, false},
		{"grant a member org_admin of O", "POST", "/admins", `{"user_id":"` + s.alice.ID + `","role":"org_admin","organization_id":"` + s.o.ID + `"}`, false},
		{"list grants", "GET", "/admins", "", false},
		{"remove a grant", "DELETE", "/admins/" + uuid.NewString(), "", false},
		{"an admin API key", "POST", "/api-keys", key(RoleAdmin, ""), false},
		{"an auditor API key", "POST", "/api-keys", key(RoleAuditor, ""), false},
		{"an admin API key for O", "POST", "/api-keys", key(RoleAdmin, s.o.ID), false},
		{"an org_admin API key for another org", "POST", "/api-keys", key(RoleOrgAdmin, s.p.ID), false},
		{"an org_admin API key for no org", "POST", "/api-keys", key(RoleOrgAdmin, ""), false},
		{"an org_admin API key for O, the org repeated", "POST", "/api-keys", `{"role":"org_admin","organization_id":"` + s.o.ID + `","organization_id":"` + s.p.ID + `"}`, false},
		{"an org_admin API key for O, the role in capitals", "POST", "/api-keys", `{"ROLE":"admin","role":"org_admin","Role":"admin","organization_id":"` + s.o.ID + `"}`, false},
		{"list API keys", "GET", "/api-keys", "", false},
		{"delete an API key", "DELETE", "/api-keys/" + uuid.NewString(), "", false},
		{"replace the break-glass token", "POST", "/admin-token", "", false},
		{"an org_admin API key for O", "POST", "/api-keys", key(RoleOrgAdmin, strings.ToUpper(s.o.ID)), true},
	} {
		t.Run(at.name, func(t *testing.T) {
			r := httptest.NewRequest(at.method, Prefix+at.path, strings.NewReader(at.body))
			r.Header.Set("Content-Type", "application/json")
			r = r.WithContext(WithCredential(r.Context(), orgAdmin(s.o.ID)))
			reached = false
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if reached != at.allowed {
				t.Fatalf("reached %v, want %v: %d %s", reached, at.allowed, w.Code, w.Body)
			}
			if !at.allowed {
				checkEnvelope(t, w, 403, httpx.CodeForbidden)
			}
		})
	}
}

// TestOrgAdminMay: what an org_admin of O does in O, with the real
// handlers.
func TestOrgAdminMay(t *testing.T) {
	s := newScene(t)
	o := orgAdmin(s.o.ID)
	must := func(status int, method, path, body string) *httptest.ResponseRecorder {
		t.Helper()
		w := s.as(o, method, path, body)
		if w.Code != status {
			t.Fatalf("%s %s: got %d, want %d: %s", method, path, w.Code, status, w.Body)
		}
		return w
	}
	u := "/admin/v1/users/"
	must(200, "GET", "/admin/v1/organizations/"+s.o.ID, "")
	must(200, "GET", u+s.bob.ID, "") // a member of O, also of P: read, not changed
	must(200, "GET", u+s.bob.ID+"/factors", "")
	must(200, "PATCH", u+s.alice.ID, `{"phone":"+15550100002"}`)
	must(201, "POST", u+s.alice.ID+"/totp", "")
	must(201, "POST", u+s.alice.ID+"/recovery-codes", "")
	must(204, "DELETE", u+s.alice.ID+"/totp", "")
	must(204, "DELETE", u+s.alice.ID+"/lockouts", "")
	must(200, "PATCH", "/admin/v1/memberships/"+s.bobO.ID, `{"status":"suspended"}`)
	// Someone of P joins O (an admin's write: an org_admin's is refused,
	// TestOrgAdminPullsNoOneIn); O's admin still may not change them.
	m := decodeAs[Membership](t, s.must(201, "POST", "/admin/v1/memberships", `{"user_id":"`+s.carol.ID+`","org_id":"`+strings.ToUpper(s.o.ID)+`"}`))
	checkEnvelope(t, s.as(o, "PATCH", u+s.carol.ID, `{"phone":"+15550100003"}`), 403, httpx.CodeForbidden)
	must(204, "DELETE", "/admin/v1/memberships/"+m.ID, "")
	must(200, "PATCH", "/admin/v1/clients/app-o", `{"name":"Renamed"}`)
	must(200, "PATCH", "/admin/v1/clients/app-only-o", `{"name":"Renamed"}`)
	must(200, "GET", "/admin/v1/clients/app-shared", "") // serves O: read, not changed
	must(201, "POST", "/admin/v1/clients", clientJSON(s.o.ID, map[string]any{"multi_organization": true, "organizations": []string{s.o.ID}}))
	must(204, "DELETE", "/admin/v1/clients/app-o", "")
	must(204, "DELETE", u+s.alice.ID, "")
	checkEnvelope(t, s.as(o, "GET", u+s.alice.ID, ""), 404, httpx.CodeNotFound)
}

// TestOrgAdminCreatesMembers: a person an org_admin creates is a member
// of its organization from the same write, and the audit event of that
// write names the organization and the person.
func TestOrgAdminCreatesMembers(t *testing.T) {
	s := newScene(t)
	o := orgAdmin(s.o.ID)
	w := s.as(o, "POST", "/admin/v1/users", `{"email":"erin@example.com","password":"correct horse battery"}`)
	if w.Code != 201 {
		t.Fatalf("got %d: %s", w.Code, w.Body)
	}
	erin := decodeAs[User](t, w)
	if erin.Email != "erin@example.com" || erin.PasswordScheme != "argon2id" {
		t.Errorf("answer %+v", erin)
	}
	ms, err := s.state.MembershipsOfUser(erin.ID)
	if err != nil || len(ms) != 1 || ms[0].OrgID != s.o.ID || ms[0].Status != fsm.MembershipActive {
		t.Fatalf("memberships %+v %v, want one active in O", ms, err)
	}
	evs, _ := s.state.AuditEvents(fsm.AuditQuery{Type: fsm.EventAdmin, Newest: true, Limit: 1})
	if len(evs) != 1 || evs[0].OrgID != s.o.ID || evs[0].Detail["target"] != erin.ID || evs[0].Detail["action"] != "POST /users" {
		t.Errorf("event %+v, want POST /users naming O and the person", evs)
	}
	// Now O's own: changed and erased by O's admin.
	if w := s.as(o, "PATCH", "/admin/v1/users/"+erin.ID, `{"phone":"+15550100009"}`); w.Code != 200 {
		t.Errorf("change: %d %s", w.Code, w.Body)
	}
	// The address of someone else, of any organization: 409 as for an
	// admin, and no membership made.
	checkEnvelope(t, s.as(o, "POST", "/admin/v1/users", `{"email":"CAROL@example.com"}`), 409, httpx.CodeConflict)
	if ms, _ := s.state.MembershipsOfUser(s.carol.ID); len(ms) != 1 {
		t.Errorf("carol's memberships %+v, want only P's", ms)
	}
	checkEnvelope(t, s.as(o, "POST", "/admin/v1/users", `{"email":"frank@example.com","phone":"+15550100001"}`), 409, httpx.CodeConflict)
	// Person and membership are one write: for an organization deleted
	// since, neither is made.
	if w := s.as(asAdmin, "DELETE", "/admin/v1/organizations/"+s.p.ID, ""); w.Code != 204 {
		t.Fatalf("delete P: %d %s", w.Code, w.Body)
	}
	checkEnvelope(t, s.as(orgAdmin(s.p.ID), "POST", "/admin/v1/users", `{"email":"hank@example.com"}`), 409, httpx.CodeConflict)
	if _, err := s.state.UserByEmail("hank@example.com"); err == nil {
		t.Errorf("a person was made without the membership")
	}
	// An admin's person is made without a membership, as before.
	w = s.as(asAdmin, "POST", "/admin/v1/users", `{"email":"gina@example.com"}`)
	if ms, _ := s.state.MembershipsOfUser(decodeAs[User](t, w).ID); len(ms) != 0 {
		t.Errorf("admin's person has memberships %+v", ms)
	}
}

// TestOrgAdminLists: the lists of an org_admin hold what is in O only.
func TestOrgAdminLists(t *testing.T) {
	s := newScene(t)
	o := orgAdmin(s.o.ID)
	list := func(path string) []string {
		t.Helper()
		w := s.as(o, "GET", path, "")
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		l := decodeAs[List[struct {
			ID       string `json:"id"`
			ClientID string `json:"client_id"`
		}]](t, w)
		var ids []string
		for _, d := range l.Data {
			ids = append(ids, d.ID+d.ClientID)
		}
		if l.Pagination.TotalItems != len(ids) && !strings.Contains(path, "page") {
			t.Errorf("%s: total %d, %d shown", path, l.Pagination.TotalItems, len(ids))
		}
		slices.Sort(ids)
		return ids
	}
	same := func(path string, got []string, want ...string) {
		t.Helper()
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", path, got, want)
		}
	}
	same("orgs", list("/admin/v1/organizations"), s.o.ID)
	same("orgs page 2", list("/admin/v1/organizations?page=2"))
	same("users", list("/admin/v1/users"), s.alice.ID, s.bob.ID)
	same("users paged", append(list("/admin/v1/users?page_size=1&page=1"), list("/admin/v1/users?page_size=1&page=2")...), s.alice.ID, s.bob.ID)
	same("users by email, in O", list("/admin/v1/users?email=BOB@example.com"), s.bob.ID)
	same("users by email, not in O", list("/admin/v1/users?email=carol@example.com"))
	same("users by email, of none", list("/admin/v1/users?email=dave@example.com"))
	same("memberships", list("/admin/v1/memberships"), s.aliceO.ID, s.bobO.ID)
	same("memberships of bob", list("/admin/v1/memberships?user_id="+s.bob.ID), s.bobO.ID)
	same("memberships of carol", list("/admin/v1/memberships?user_id="+s.carol.ID))
	same("clients", list("/admin/v1/clients"), "app-o", "app-shared", "app-only-o", "app-all")

	// Every other role sees everything.
	for _, c := range []Credential{asAdmin, asAuditor} {
		w := s.as(c, "GET", "/admin/v1/users", "")
		if l := decodeAs[List[User]](t, w); l.Pagination.TotalItems != 4 {
			t.Errorf("%s: %d people, want 4", c.Role, l.Pagination.TotalItems)
		}
	}
}

// TestOrgAdminAudit: an org_admin reads the events that name O: the
// admin events of writes that touched O (whoever made them) among them,
// never those of P; the trail still verifies with the organization in
// the new events.
func TestOrgAdminAudit(t *testing.T) {
	s := newScene(t)
	// Writes of the admin on records of O, of P, and of a person of both.
	s.as(asAdmin, "PATCH", "/admin/v1/clients/app-o", `{"name":"Renamed"}`)
	s.as(asAdmin, "PATCH", "/admin/v1/clients/app-p", `{"name":"Renamed"}`)
	s.as(asAdmin, "PATCH", "/admin/v1/memberships/"+s.carolP.ID, `{"status":"suspended"}`)
	s.as(asAdmin, "PATCH", "/admin/v1/users/"+s.alice.ID, `{"phone":"+15550100007"}`)
	s.as(asAdmin, "PATCH", "/admin/v1/users/"+s.bob.ID, `{"phone":"+15550100008"}`)
	s.as(orgAdmin(s.o.ID), "PATCH", "/admin/v1/memberships/"+s.aliceO.ID, `{"status":"active"}`)

	for _, path := range []string{"/admin/v1/audit", "/admin/v1/audit?organization_id=" + s.o.ID, "/admin/v1/audit?type=admin&order=desc"} {
		w := s.as(orgAdmin(s.o.ID), "GET", path, "")
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		page := decodeAs[auditPage](t, w)
		var targets []string
		for _, ev := range page.Data {
			if ev.OrgID != s.o.ID {
				t.Errorf("%s: event %d names %q", path, ev.Seq, ev.OrgID)
			}
			targets = append(targets, ev.Detail["target"])
		}
		for _, want := range []string{"app-o", s.alice.ID, s.aliceO.ID, s.aliceO.ID} {
			if !slices.Contains(targets, want) {
				t.Errorf("%s: no event of %s among %v", path, want, targets)
			}
		}
		if slices.Contains(targets, "app-p") || slices.Contains(targets, s.bob.ID) {
			t.Errorf("%s: events of P or of a person of two organizations: %v", path, targets)
		}
	}
	if w := s.as(asAuditor, "GET", "/admin/v1/audit?organization_id="+s.p.ID, ""); w.Code != 200 || !strings.Contains(w.Body.String(), "app-p") {
		t.Errorf("auditor: %d %s", w.Code, w.Body)
	}
	v := decodeAs[fsm.AuditVerification](t, s.as(asAuditor, "GET", "/admin/v1/audit/verify", ""))
	if !v.OK {
		t.Errorf("the trail does not verify: %+v", v)
	}
}

// TestAuditorWritesNothing: an auditor's writes are refused before any
// handler runs; its reads are answered, a backup excepted.
func TestAuditorWritesNothing(t *testing.T) {
	s := newScene(t)
	before := s.app.FSM.Applied()
	for _, rq := range [][3]string{
		{"POST", "/admin/v1/organizations", `{"slug":"x","name":"X"}`},
		{"DELETE", "/admin/v1/users/" + s.alice.ID, ""},
		{"PATCH", "/admin/v1/clients/app-o", `{"name":"X"}`},
		{"POST", "/admin/v1/keys/rotate", `{}`},
		{"GET", "/admin/v1/snapshot", ""},
	} {
		checkEnvelope(t, s.as(asAuditor, rq[0], rq[1], rq[2]), 403, httpx.CodeForbidden)
	}
	if got := s.app.FSM.Applied(); got != before {
		t.Errorf("applied index moved from %d to %d", before, got)
	}
	for _, path := range []string{"/admin/v1/users/" + s.carol.ID, "/admin/v1/clients/app-p", "/admin/v1/lockouts", "/admin/v1/status"} {
		if w := s.as(asAuditor, "GET", path, ""); w.Code != 200 {
			t.Errorf("GET %s: %d %s", path, w.Code, w.Body)
		}
	}
}

// TestOrgAdminMayNotChangeWiderAdministrators: a person of O alone who
// holds a grant wider than the org_admin's (admin, auditor, org_admin of
// another organization) is not the org_admin's to change: a password or
// factor reset would be a way into that grant. An org_admin of O is.
func TestOrgAdminMayNotChangeWiderAdministrators(t *testing.T) {
	const o, p = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
	c := orgAdmin(o)
	for _, key := range []string{"PATCH /users/{id}", "DELETE /users/{id}", "POST /users/{id}/totp", "POST /users/{id}/recovery-codes"} {
		d := declarations[key]
		for _, tt := range []struct {
			grants []grantRef
			want   verdict
		}{
			{nil, allow},
			{[]grantRef{{RoleOrgAdmin, o}}, allow},
			{[]grantRef{{RoleAdmin, ""}}, forbid},
			{[]grantRef{{RoleAuditor, ""}}, forbid},
			{[]grantRef{{RoleOrgAdmin, p}}, forbid},
			{[]grantRef{{RoleOrgAdmin, o}, {RoleOrgAdmin, p}}, forbid},
		} {
			if v, _ := decide(c, d, &scope{orgs: []string{o}, grants: tt.grants}); v != tt.want {
				t.Errorf("%s, grants %v: verdict %d, want %d", key, tt.grants, v, tt.want)
			}
		}
		if v, _ := decide(c, declarations["GET /users/{id}"], &scope{orgs: []string{o}, grants: []grantRef{{RoleAdmin, ""}}}); v != allow {
			t.Errorf("reading an admin of O: verdict %d, want allow", v)
		}
	}
}

// TestOrgAdminWriteReadsCurrentState: an org_admin's write is decided
// after a read index, as a GET is, so a membership added anywhere just
// before is seen; without one (no leader) the answer is 503 and nothing
// is proposed.
func TestOrgAdminWriteReadsCurrentState(t *testing.T) {
	s := newScene(t)
	a := s.bareAPI()
	calls := 0
	a.ReadIndex = func(context.Context) error { calls++; return errDown }
	mux := http.NewServeMux()
	a.routes(mux)
	r := httptest.NewRequest("PATCH", "/admin/v1/users/"+s.alice.ID, strings.NewReader(`{"phone":"+15550100002"}`))
	r.Header.Set("Content-Type", "application/json")
	r = r.WithContext(WithCredential(r.Context(), orgAdmin(s.o.ID)))
	before := s.app.FSM.Applied()
	w := httptest.NewRecorder()
	httpx.Correlation(mux).ServeHTTP(w, r)
	checkEnvelope(t, w, 503, httpx.CodeUnavailable)
	if calls != 1 || s.app.FSM.Applied() != before {
		t.Errorf("read index calls %d, applied %d -> %d", calls, before, s.app.FSM.Applied())
	}
}

// TestWithoutCredentialIsRefused: a request that reaches a route with no
// credential in its context (authenticate resolves one for every request
// it lets in, so only a wiring mistake could) has no role: every
// declaration refuses it and the handler is never reached.
func TestWithoutCredentialIsRefused(t *testing.T) {
	r := httptest.NewRequest("GET", "/admin/v1/keys", nil)
	if c := credentialOf(r); c.Role != "" {
		t.Errorf("credential %+v, want none", c)
	}
	for route, d := range declarations {
		if v, _ := decide(credentialOf(r), d, &scope{}); v != forbid {
			t.Errorf("%s without a credential: verdict %v, want forbid", route, v)
		}
	}
	reached := false
	h := (&api{}).authorize("GET", "/keys", func(http.ResponseWriter, *http.Request) { reached = true })
	w := httptest.NewRecorder()
	h(w, r)
	if reached || w.Code != http.StatusForbidden {
		t.Errorf("without a credential: %d, handler reached %v; want 403, not reached", w.Code, reached)
	}
}
