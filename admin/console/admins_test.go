package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/admin"
	"github.com/oidcd/oidcd/internal/httpx"
)

// The admin API's /admins and /api-keys routes and its person-token check
// are built on other branches; until they are merged, fakeAPI stands in
// for them in front of the console's real private API instance, with the
// shapes the contract names:
//
//   - a person's access token is accepted while it is active and its
//     subject holds a grant; otherwise 401 with a bearer challenge;
//   - an org_admin is refused GET/POST /admins by role (403 FORBIDDEN,
//     no challenge);
//   - GET /admins and GET /api-keys answer {data, pagination}; POST
//     /api-keys answers 201 with the key shown once.
//
// Every other route goes to the real API with the console's own token.
type fakeAPI struct {
	real  http.Handler
	inner string // the console's private token

	mu     sync.Mutex
	active map[string]string // active access token -> sub
	grants []grant
	keys   []apiKey
	bearer []string // the bearer of each call, in order
}

func (f *fakeAPI) grantOf(sub string) (grant, bool) {
	for _, g := range f.grants {
		if g.UserID == sub {
			return g, true
		}
	}
	return grant{}, false
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	f.bearer = append(f.bearer, tok)
	role := admin.RoleAdmin
	if tok != f.inner {
		g, ok := f.grantOf(f.active[tok])
		if _, active := f.active[tok]; !active || !ok {
			f.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			httpx.WriteError(w, r, http.StatusUnauthorized, httpx.CodeUnauthorized, "invalid admin credential")
			return
		}
		role = g.Role
	}
	f.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, admin.Prefix)
	switch {
	case path == "/admins" || strings.HasPrefix(path, "/admins/"):
		if role != admin.RoleAdmin && !(role == admin.RoleAuditor && r.Method == "GET") {
			httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden, "this credential may not do that")
			return
		}
		f.serveGrants(w, r, strings.TrimPrefix(path, "/admins"))
	case path == "/api-keys" || strings.HasPrefix(path, "/api-keys/"):
		f.serveKeys(w, r, strings.TrimPrefix(path, "/api-keys"))
	default:
		r.Header.Set("Authorization", "Bearer "+f.inner)
		f.real.ServeHTTP(w, r)
	}
}

func (f *fakeAPI) serveGrants(w http.ResponseWriter, r *http.Request, rest string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case rest == "" && r.Method == "GET":
		httpx.WriteJSON(w, 200, admin.List[grant]{Data: f.grants, Pagination: admin.Pagination{Page: 1, PageSize: 20, TotalItems: len(f.grants), TotalPages: 1}})
	case rest == "" && r.Method == "POST":
		var in grant
		_ = json.NewDecoder(r.Body).Decode(&in)
		if in.Role != admin.RoleAdmin && in.Role != admin.RoleOrgAdmin && in.Role != admin.RoleAuditor {
			httpx.WriteError(w, r, 400, httpx.CodeValidation, "request validation failed", httpx.Detail{Field: "role", Message: "must be admin, org_admin or auditor", Code: "invalid"})
			return
		}
		in.ID, in.CreatedAt = uuid.NewString(), time.Now().UTC()
		f.grants = append(f.grants, in)
		httpx.WriteJSON(w, 201, in)
	case r.Method == "DELETE":
		id := strings.TrimPrefix(rest, "/")
		for i, g := range f.grants {
			if g.ID == id {
				f.grants = append(f.grants[:i], f.grants[i+1:]...)
				w.WriteHeader(204)
				return
			}
		}
		httpx.WriteError(w, r, 404, httpx.CodeNotFound, "not found")
	default:
		httpx.WriteError(w, r, 404, httpx.CodeNotFound, "no such route")
	}
}

func (f *fakeAPI) serveKeys(w http.ResponseWriter, r *http.Request, rest string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case rest == "" && r.Method == "GET":
		httpx.WriteJSON(w, 200, admin.List[apiKey]{Data: f.keys, Pagination: admin.Pagination{Page: 1, PageSize: 20, TotalItems: len(f.keys), TotalPages: 1}})
	case rest == "" && r.Method == "POST":
		var in struct {
			Name      string `json:"name"`
			Role      string `json:"role"`
			OrgID     string `json:"organization_id"`
			ExpiresIn int64  `json:"expires_in"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if in.ExpiresIn < 1 || in.ExpiresIn > 365*86400 {
			httpx.WriteError(w, r, 400, httpx.CodeValidation, "request validation failed", httpx.Detail{Field: "expires_in", Message: "must be between 1 second and a year", Code: "out_of_range"})
			return
		}
		k := apiKey{ID: uuid.NewString(), Name: in.Name, Role: in.Role, OrgID: in.OrgID, ExpiresAt: time.Now().Add(time.Duration(in.ExpiresIn) * time.Second).UTC()}
		f.keys = append(f.keys, k)
		k.Key = "oidcd_ak_" + strings.Repeat("x", 40)
		httpx.WriteJSON(w, 201, k)
	case r.Method == "DELETE":
		id := strings.TrimPrefix(rest, "/")
		for i, k := range f.keys {
			if k.ID == id {
				f.keys = append(f.keys[:i], f.keys[i+1:]...)
				w.WriteHeader(204)
				return
			}
		}
		httpx.WriteError(w, r, 404, httpx.CodeNotFound, "not found")
	default:
		httpx.WriteError(w, r, 404, httpx.CodeNotFound, "no such route")
	}
}

// apiEnv is env with fakeAPI in front of the console's private API.
type apiEnv struct {
	*env
	api *fakeAPI
}

func newAPIEnv(t *testing.T) *apiEnv {
	e := newEnv(t)
	api := &fakeAPI{real: e.console.api, inner: e.console.apiToken, active: map[string]string{}}
	e.console.api = api
	return &apiEnv{env: e, api: api}
}

// person makes a person with a grant of role, returning their id.
func (e *apiEnv) person(email, role string) string {
	e.t.Helper()
	var u admin.User
	if err := e.console.call(httptestRequest(), "POST", "/users", map[string]any{"email": email, "email_verified": true}, &u); err != nil {
		e.t.Fatal(err)
	}
	e.api.mu.Lock()
	e.api.grants = append(e.api.grants, grant{ID: uuid.NewString(), UserID: u.ID, Role: role, CreatedAt: time.Now().UTC()})
	e.api.mu.Unlock()
	return u.ID
}

func httptestRequest() *http.Request {
	r, _ := http.NewRequest("GET", "/", nil)
	return r
}

// org makes an active organization named after slug, returning its id.
func (e *apiEnv) org(slug string) string {
	e.t.Helper()
	var o admin.Org
	if err := e.console.call(httptestRequest(), "POST", "/organizations", map[string]string{"slug": slug, "name": strings.ToUpper(slug[:1]) + slug[1:]}, &o); err != nil {
		e.t.Fatal(err)
	}
	return o.ID
}

func TestGrantsPage(t *testing.T) {
	e := newAPIEnv(t)
	e.signIn()
	var u admin.User
	if err := e.console.call(httptestRequest(), "POST", "/users", map[string]any{"email": "grace@example.com"}, &u); err != nil {
		t.Fatal(err)
	}
	r := e.get(Prefix + "admins")
	wantStatus(t, "administrators", r, http.StatusOK)
	wantBody(t, "administrators", r, "No administrators yet.", `<a href="/console/admins" aria-current="page">Administrators</a>`, "Signed in as <strong>the admin token</strong>")

	r = e.post(Prefix+"admins", url.Values{"user": {"nobody@example.com"}, "role": {"admin"}})
	wantStatus(t, "unknown email", r, http.StatusBadRequest)
	wantBody(t, "unknown email", r, "no person has this email", `value="nobody@example.com"`)

	r = e.post(Prefix+"admins", url.Values{"user": {"grace@example.com"}, "role": {"superuser"}})
	wantStatus(t, "bad role", r, http.StatusBadRequest)
	wantBody(t, "bad role", r, "must be admin, org_admin or auditor")

	r = e.post(Prefix+"admins", url.Values{"user": {"Grace@Example.com"}, "role": {"auditor"}})
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"admins?done=grant-created" {
		t.Fatalf("add by email: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	if g := e.api.grants; len(g) != 1 || g[0].UserID != u.ID || g[0].Role != "auditor" || g[0].OrgID != "" {
		t.Fatalf("grants: got %+v", g)
	}
	r = e.get(Prefix + "admins")
	wantBody(t, "administrators", r, "grace@example.com", "auditor", "/console/admins/"+e.api.grants[0].ID+"/delete")

	r = e.post(Prefix+"admins/"+e.api.grants[0].ID+"/delete", url.Values{"csrf_token": {"00000000000000000000000000000000"}})
	wantStatus(t, "delete without the CSRF token", r, http.StatusForbidden)
	r = e.post(Prefix+"admins/"+e.api.grants[0].ID+"/delete", nil)
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"admins?done=grant-deleted" {
		t.Fatalf("delete: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	if len(e.api.grants) != 0 {
		t.Errorf("grants after delete: %+v", e.api.grants)
	}

	// By id, with an organization.
	org := e.org("acme")
	r = e.post(Prefix+"admins", url.Values{"user": {u.ID}, "role": {"org_admin"}, "organization_id": {org}})
	wantStatus(t, "add by id", r, http.StatusSeeOther)
	r = e.get(Prefix + "admins")
	wantBody(t, "administrators", r, "org_admin", "Acme")
}

func TestAPIKeysPage(t *testing.T) {
	e := newAPIEnv(t)
	e.signIn()
	r := e.get(Prefix + "api-keys")
	wantStatus(t, "API keys", r, http.StatusOK)
	wantBody(t, "API keys", r, "No API keys yet.", `<option value="7776000" selected>90 days</option>`)

	r = e.post(Prefix+"api-keys", url.Values{"name": {"backup job"}, "role": {"auditor"}, "expires_in": {"never"}})
	wantStatus(t, "no expiry", r, http.StatusBadRequest)
	wantBody(t, "no expiry", r, "choose how long the key works", `value="backup job"`)

	r = e.post(Prefix+"api-keys", url.Values{"name": {"backup job"}, "role": {"auditor"}, "expires_in": {"2592000"}})
	wantStatus(t, "create", r, http.StatusCreated)
	wantBody(t, "create", r, `<code class="secret" id="api-key">oidcd_ak_`, "shown only this once", "backup job", "auditor")

	r = e.get(Prefix + "api-keys")
	wantBody(t, "API keys", r, "backup job", "auditor", time.Now().Add(30*24*time.Hour).UTC().Format("2006-01-02"))
	if strings.Contains(r.Body, "oidcd_ak_") {
		t.Error("the list shows the key")
	}
	id := e.api.keys[0].ID
	r = e.post(Prefix+"api-keys/"+id+"/delete", nil)
	if r.Status != http.StatusSeeOther || r.Location != Prefix+"api-keys?done=apikey-deleted" {
		t.Fatalf("delete: got %d to %q\n%s", r.Status, r.Location, r.Body)
	}
	wantBody(t, "after delete", e.get(Prefix+"api-keys?done=apikey-deleted"), "API key deleted", "No API keys yet.")
}

func TestFlexList(t *testing.T) {
	var a, b flexList[grant]
	if err := json.Unmarshal([]byte(` [{"id":"g1","role":"admin"}]`), &a); err != nil || len(a.Data) != 1 || a.Pagination.TotalItems != 1 {
		t.Errorf("array: got %+v, %v", a, err)
	}
	if err := json.Unmarshal([]byte(`{"data":[{"id":"g1"},{"id":"g2"}],"pagination":{"page":1,"total_items":2,"total_pages":1}}`), &b); err != nil || len(b.Data) != 2 || b.Pagination.TotalItems != 2 {
		t.Errorf("object: got %+v, %v", b, err)
	}
}
