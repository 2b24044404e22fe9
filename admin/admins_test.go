package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/internal/httpx"
)

func TestGrantRoutes(t *testing.T) {
	e := newEnv(t)
	org := e.createOrg("acme")
	org2 := e.createOrg("beta")
	ada := e.createUser(`{"email":"ada@example.com"}`)
	bob := e.createUser(`{"email":"bob@example.com"}`)
	const missing = "00000000-0000-4000-8000-000000000000"
	g := e.createGrant(`{"user_id":"` + ada.ID + `","role":"org_admin","organization_id":"` + org.ID + `"}`)
	if !isUUID(g.ID) || g.UserID != ada.ID || g.Role != RoleOrgAdmin || g.OrgID != org.ID || g.CreatedAt.IsZero() {
		t.Fatalf("created: got %+v", g)
	}
	body := func(user, role, org string) string {
		b, _ := json.Marshal(map[string]string{"user_id": user, "role": role, "organization_id": org})
		return string(b)
	}
	e.run(t, []tc{
		{name: "admin", method: "POST", path: "/admin/v1/admins", body: `{"user_id":"` + bob.ID + `","role":"admin"}`, status: 201},
		{name: "auditor beside org_admin", method: "POST", path: "/admin/v1/admins", body: `{"user_id":"` + ada.ID + `","role":"auditor"}`, status: 201},
		{name: "the same grant twice", method: "POST", path: "/admin/v1/admins", body: body(ada.ID, RoleOrgAdmin, org.ID), status: 409, code: httpx.CodeConflict, field: "role", dcode: "conflict"},
		{name: "org_admin of a second org", method: "POST", path: "/admin/v1/admins", body: body(ada.ID, RoleOrgAdmin, org2.ID), status: 409, code: httpx.CodeConflict, field: "organization_id", dcode: "conflict"},
		{name: "no such person", method: "POST", path: "/admin/v1/admins", body: `{"user_id":"` + missing + `","role":"admin"}`, status: 422, code: httpx.CodeValidation, field: "user_id", dcode: "not_found"},
		{name: "no such org", method: "POST", path: "/admin/v1/admins", body: body(bob.ID, RoleOrgAdmin, missing), status: 422, code: httpx.CodeValidation, field: "organization_id", dcode: "not_found"},
		{name: "org_admin without org", method: "POST", path: "/admin/v1/admins", body: `{"user_id":"` + bob.ID + `","role":"org_admin"}`, status: 400, code: httpx.CodeValidation, field: "organization_id", dcode: codeRequired},
		{name: "admin with an org", method: "POST", path: "/admin/v1/admins", body: body(bob.ID, RoleAdmin, org.ID), status: 400, code: httpx.CodeValidation, field: "organization_id", dcode: codeInvalid},
		{name: "unknown role", method: "POST", path: "/admin/v1/admins", body: `{"user_id":"` + bob.ID + `","role":"root"}`, status: 400, code: httpx.CodeValidation, field: "role", dcode: codeInvalid},
		{name: "no role", method: "POST", path: "/admin/v1/admins", body: `{"user_id":"` + bob.ID + `"}`, status: 400, code: httpx.CodeValidation, field: "role", dcode: codeRequired},
		{name: "user not a uuid", method: "POST", path: "/admin/v1/admins", body: `{"user_id":"ada","role":"admin"}`, status: 400, code: httpx.CodeValidation, field: "user_id", dcode: codeInvalidUUID},
		{name: "unknown field", method: "POST", path: "/admin/v1/admins", body: `{"user_id":"` + bob.ID + `","role":"auditor","rank":1}`, status: 400, code: httpx.CodeValidation},
		{name: "list", method: "GET", path: "/admin/v1/admins?page_size=2", status: 200},
		{name: "delete", method: "DELETE", path: "/admin/v1/admins/" + g.ID, status: 204},
		{name: "delete again", method: "DELETE", path: "/admin/v1/admins/" + g.ID, status: 404, code: httpx.CodeNotFound},
		{name: "delete not a uuid", method: "DELETE", path: "/admin/v1/admins/x", status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
		{name: "get one is not a route", method: "GET", path: "/admin/v1/admins/" + g.ID, status: 405, code: httpx.CodeBadRequest},
	})
	l := decodeAs[List[Grant]](t, e.must(200, "GET", "/admin/v1/admins", ""))
	if l.Pagination.TotalItems != 2 || len(l.Data) != 2 {
		t.Fatalf("list: got %+v, want the admin and the auditor", l)
	}
	for _, g := range l.Data {
		if g.Role == RoleOrgAdmin {
			t.Errorf("the deleted grant is listed: %+v", g)
		}
	}
	// Erasing the person takes their grants.
	e.must(204, "DELETE", "/admin/v1/users/"+bob.ID, "")
	if l := decodeAs[List[Grant]](t, e.must(200, "GET", "/admin/v1/admins", "")); l.Pagination.TotalItems != 1 {
		t.Errorf("after erasing bob: got %+v, want ada's auditor grant only", l.Data)
	}
}

func TestAPIKeyRoutes(t *testing.T) {
	e := newEnv(t)
	org := e.createOrg("acme")
	w := e.must(201, "POST", "/admin/v1/api-keys", `{"name":"deploy","role":"org_admin","organization_id":"`+org.ID+`","expires_in":86400}`)
	if got := w.Header().Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control: got %q, want no-store", got)
	}
	k := decodeAs[APIKey](t, w)
	if id, ok := parseAPIKey(k.Key); !ok || id != k.ID {
		t.Fatalf("key %q: want %s<id>_<secret> with id %s", k.Key, apiKeyPrefix, k.ID)
	}
	if k.Name != "deploy" || k.Role != RoleOrgAdmin || k.OrgID != org.ID || !k.ExpiresAt.Equal(k.CreatedAt.Add(24*time.Hour)) {
		t.Errorf("created: got %+v", k)
	}
	if stored, _ := e.state.APIKey(k.ID); stored.Hash == "" || strings.Contains(stored.Hash, k.Key[len(k.Key)-20:]) {
		t.Errorf("stored: %+v, want only a hash", stored)
	}
	body := func(expires string) string {
		return `{"name":"k","role":"auditor","expires_in":` + expires + `}`
	}
	e.run(t, []tc{
		{name: "a year", method: "POST", path: "/admin/v1/api-keys", body: body("31536000"), status: 201},
		{name: "a second", method: "POST", path: "/admin/v1/api-keys", body: body("1"), status: 201},
		{name: "over a year", method: "POST", path: "/admin/v1/api-keys", body: body("31536001"), status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: codeOutOfRange},
		{name: "zero", method: "POST", path: "/admin/v1/api-keys", body: body("0"), status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: codeOutOfRange},
		{name: "negative", method: "POST", path: "/admin/v1/api-keys", body: body("-5"), status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: codeOutOfRange},
		{name: "missing expiry", method: "POST", path: "/admin/v1/api-keys", body: `{"name":"k","role":"auditor"}`, status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: codeRequired},
		{name: "fractional expiry", method: "POST", path: "/admin/v1/api-keys", body: body("1.5"), status: 400, code: httpx.CodeValidation},
		{name: "no name", method: "POST", path: "/admin/v1/api-keys", body: `{"role":"auditor","expires_in":60}`, status: 400, code: httpx.CodeValidation, field: "name", dcode: codeRequired},
		{name: "unknown role", method: "POST", path: "/admin/v1/api-keys", body: `{"name":"k","role":"root","expires_in":60}`, status: 400, code: httpx.CodeValidation, field: "role", dcode: codeInvalid},
		{name: "org_admin without org", method: "POST", path: "/admin/v1/api-keys", body: `{"name":"k","role":"org_admin","expires_in":60}`, status: 400, code: httpx.CodeValidation, field: "organization_id", dcode: codeRequired},
		{name: "no such org", method: "POST", path: "/admin/v1/api-keys", body: `{"name":"k","role":"org_admin","organization_id":"00000000-0000-4000-8000-000000000000","expires_in":60}`,
			status: 422, code: httpx.CodeValidation, field: "organization_id", dcode: "not_found"},
	})
	w = e.must(200, "GET", "/admin/v1/api-keys", "")
	if strings.Contains(w.Body.String(), `"key"`) || strings.Contains(w.Body.String(), "hash") || strings.Contains(w.Body.String(), apiKeyPrefix) {
		t.Errorf("the list shows a key or its hash: %s", w.Body)
	}
	if l := decodeAs[List[APIKey]](t, w); l.Pagination.TotalItems != 3 {
		t.Errorf("list: got %d keys, want 3", l.Pagination.TotalItems)
	}

	// The key works until it expires, and not after.
	if w := e.do("GET", "/admin/v1/organizations", "", bearerHdr(k.Key)...); w.Code != 200 {
		t.Fatalf("the new key: got %d %s", w.Code, w.Body)
	}
	e.clock.mu.Lock()
	e.clock.t = k.ExpiresAt.Add(-time.Second) // the next reading is the expiry itself
	e.clock.mu.Unlock()
	checkEnvelope(t, e.do("GET", "/admin/v1/organizations", "", bearerHdr(k.Key)...), 401, httpx.CodeUnauthorized)

	// A deleted key stops working.
	k2 := e.createKey(`{"name":"ci","role":"admin","expires_in":3600}`)
	if w := e.do("GET", "/admin/v1/organizations", "", bearerHdr(k2.Key)...); w.Code != 200 {
		t.Fatalf("the second key: got %d", w.Code)
	}
	e.must(204, "DELETE", "/admin/v1/api-keys/"+k2.ID, "")
	checkEnvelope(t, e.do("GET", "/admin/v1/organizations", "", bearerHdr(k2.Key)...), 401, httpx.CodeUnauthorized)
	checkEnvelope(t, e.do("DELETE", "/admin/v1/api-keys/"+k2.ID, ""), 404, httpx.CodeNotFound)

	// Deleting the organization takes its keys.
	e.must(204, "DELETE", "/admin/v1/organizations/"+org.ID, "")
	if _, err := e.state.APIKey(k.ID); err == nil {
		t.Error("the deleted organization's key is still there")
	}
}

func TestAdminTokenReplace(t *testing.T) {
	e := newEnv(t)
	old := e.token
	w := e.must(201, "POST", "/admin/v1/admin-token", "")
	if got := w.Header().Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control: got %q, want no-store", got)
	}
	tok := decodeAs[struct {
		Token string `json:"token"`
	}](t, w).Token
	if tok == "" || tok == old {
		t.Fatalf("new token: got %q", tok)
	}
	checkEnvelope(t, e.do("GET", "/admin/v1/organizations", "", bearerHdr(old)...), 401, httpx.CodeUnauthorized)
	if w := e.do("GET", "/admin/v1/organizations", "", bearerHdr(tok)...); w.Code != 200 {
		t.Fatalf("the new token: got %d", w.Code)
	}
	if h, _ := e.state.AdminTokenHash(); h != HashToken(tok) {
		t.Errorf("stored hash: got %q, want the new token's", h)
	}
	// The trail records the replacement, by whom, and never a token.
	e.token = tok
	r := e.must(200, "GET", "/admin/v1/audit?type=admin&order=desc&limit=1", "")
	if b := r.Body.String(); !strings.Contains(b, `"action":"POST /admin-token"`) || !strings.Contains(b, `"credential":{"kind":"token"}`) ||
		strings.Contains(b, tok) || strings.Contains(b, old) {
		t.Errorf("audit event: %s", b)
	}
}
