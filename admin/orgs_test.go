package admin

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

const unknownID = "3f2b8c1e-9d4a-4e6b-8c7d-1a2b3c4d5e6f"

func TestCreateOrg(t *testing.T) {
	e := newEnv(t)
	const path = "/admin/v1/organizations"
	e.run(t, []tc{
		{name: "good", method: "POST", path: path, body: `{"slug":"acme","name":"Acme Inc."}`, status: 201},
		{name: "slug of 63", method: "POST", path: path, body: `{"slug":"` + strings.Repeat("a", 63) + `","name":"Long"}`, status: 201},
		{name: "digits and hyphens", method: "POST", path: path, body: `{"slug":"a-1-b","name":"Ünïcode ✓"}`, status: 201},
		{name: "duplicate slug", method: "POST", path: path, body: `{"slug":"acme","name":"Other"}`, status: 409, code: httpx.CodeConflict, field: "slug", dcode: "conflict"},
		{name: "missing slug", method: "POST", path: path, body: `{"name":"X"}`, status: 400, code: httpx.CodeValidation, field: "slug", dcode: codeRequired},
		{name: "missing name", method: "POST", path: path, body: `{"slug":"x"}`, status: 400, code: httpx.CodeValidation, field: "name", dcode: codeRequired},
		{name: "empty object", method: "POST", path: path, body: `{}`, status: 400, code: httpx.CodeValidation, field: "name", dcode: codeRequired},
		{name: "blank name", method: "POST", path: path, body: `{"slug":"x","name":"   "}`, status: 400, code: httpx.CodeValidation, field: "name", dcode: codeRequired},
		{name: "name too long", method: "POST", path: path, body: `{"slug":"x","name":"` + strings.Repeat("é", 201) + `"}`, status: 400, code: httpx.CodeValidation, field: "name", dcode: codeTooLong},
		{name: "name with newline", method: "POST", path: path, body: `{"slug":"x","name":"a\nb"}`, status: 400, code: httpx.CodeValidation, field: "name", dcode: codeInvalid},
		{name: "slug too long", method: "POST", path: path, body: `{"slug":"` + strings.Repeat("a", 64) + `","name":"X"}`, status: 400, code: httpx.CodeValidation, field: "slug", dcode: codeTooLong},
		{name: "slug uppercase", method: "POST", path: path, body: `{"slug":"Acme","name":"X"}`, status: 400, code: httpx.CodeValidation, field: "slug", dcode: codeInvalid},
		{name: "slug underscore", method: "POST", path: path, body: `{"slug":"a_b","name":"X"}`, status: 400, code: httpx.CodeValidation, field: "slug", dcode: codeInvalid},
		{name: "slug space", method: "POST", path: path, body: `{"slug":"a b","name":"X"}`, status: 400, code: httpx.CodeValidation, field: "slug", dcode: codeInvalid},
		{name: "slug number", method: "POST", path: path, body: `{"slug":12,"name":"X"}`, status: 400, code: httpx.CodeValidation, field: "slug", dcode: "invalid_type"},
		{name: "name null is missing", method: "POST", path: path, body: `{"slug":"x","name":null}`, status: 400, code: httpx.CodeValidation, field: "name", dcode: codeRequired},
		{name: "empty body", method: "POST", path: path, body: "", hdr: []string{"Content-Type", "application/json"}, status: 400, code: httpx.CodeBadRequest},
	})

	t.Run("answer and state", func(t *testing.T) {
		got := e.createOrg("shape")
		if got.Slug != "shape" || got.Name != "Org shape" || got.Status != fsm.OrgActive || !isUUID(got.ID) {
			t.Errorf("got %+v, want slug shape, name \"Org shape\", status active, a UUID", got)
		}
		o, err := e.state.Org(got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if o.Slug != got.Slug || o.CreatedAt.IsZero() {
			t.Errorf("stored %+v, want slug %q and a creation time", o, got.Slug)
		}
	})
	t.Run("both problems at once", func(t *testing.T) {
		env := checkEnvelope(t, e.do("POST", path, `{"slug":"BAD","name":""}`), 400, httpx.CodeValidation)
		if len(env.Details) != 2 {
			t.Errorf("got %d details %+v, want 2", len(env.Details), env.Details)
		}
	})
	t.Run("duplicate wrote nothing", func(t *testing.T) {
		_, before, _ := e.state.Orgs(fsm.Page{Page: 1, PageSize: 100})
		e.do("POST", path, `{"slug":"acme","name":"Again"}`)
		_, after, _ := e.state.Orgs(fsm.Page{Page: 1, PageSize: 100})
		if after != before {
			t.Errorf("got %d organizations, want %d", after, before)
		}
	})
}

func TestGetOrg(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	e.run(t, []tc{
		{name: "good", method: "GET", path: "/admin/v1/organizations/" + o.ID, status: 200},
		{name: "upper-case id", method: "GET", path: "/admin/v1/organizations/" + strings.ToUpper(o.ID), status: 200},
		{name: "unknown", method: "GET", path: "/admin/v1/organizations/" + unknownID, status: 404, code: httpx.CodeNotFound},
		{name: "not a uuid", method: "GET", path: "/admin/v1/organizations/acme", status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
		{name: "uuid without hyphens", method: "GET", path: "/admin/v1/organizations/" + strings.ReplaceAll(o.ID, "-", ""), status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
		{name: "urn uuid", method: "GET", path: "/admin/v1/organizations/urn:uuid:" + o.ID, status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
	})
	got := decodeAs[Org](t, e.must(200, "GET", "/admin/v1/organizations/"+o.ID, ""))
	if !reflect.DeepEqual(got, o) {
		t.Errorf("got %+v, want %+v", got, o)
	}
}

func TestListOrgs(t *testing.T) {
	e := newEnv(t)
	const path = "/admin/v1/organizations"
	empty := decodeAs[List[Org]](t, e.must(200, "GET", path, ""))
	if empty.Data == nil || len(empty.Data) != 0 || empty.Pagination != (Pagination{Page: 1, PageSize: 20}) {
		t.Errorf("empty: got %+v, want [] and page 1 of 0", empty)
	}
	if body := e.must(200, "GET", path, "").Body.String(); !strings.Contains(body, `"data":[]`) {
		t.Errorf("empty: got %s, want \"data\":[]", body)
	}
	for i := range 25 {
		e.createOrg(fmt.Sprintf("org-%02d", i))
	}
	pages := []struct {
		query string
		n     int
		want  Pagination
	}{
		{"", 20, Pagination{Page: 1, PageSize: 20, TotalItems: 25, TotalPages: 2, HasNext: true}},
		{"?page=2", 5, Pagination{Page: 2, PageSize: 20, TotalItems: 25, TotalPages: 2, HasPrevious: true}},
		{"?page=3", 0, Pagination{Page: 3, PageSize: 20, TotalItems: 25, TotalPages: 2, HasPrevious: true}},
		{"?page_size=100", 25, Pagination{Page: 1, PageSize: 100, TotalItems: 25, TotalPages: 1}},
		{"?page_size=1&page=25", 1, Pagination{Page: 25, PageSize: 1, TotalItems: 25, TotalPages: 25, HasPrevious: true}},
		{"?page_size=10&page=2", 10, Pagination{Page: 2, PageSize: 10, TotalItems: 25, TotalPages: 3, HasNext: true, HasPrevious: true}},
		{"?page=9223372036854775807&page_size=100", 0, Pagination{Page: 9223372036854775807, PageSize: 100, TotalItems: 25, TotalPages: 1, HasPrevious: true}},
	}
	seen := map[string]bool{}
	for _, p := range pages {
		t.Run("page "+p.query, func(t *testing.T) {
			got := decodeAs[List[Org]](t, e.must(200, "GET", path+p.query, ""))
			if len(got.Data) != p.n {
				t.Errorf("items: got %d, want %d", len(got.Data), p.n)
			}
			if got.Pagination != p.want {
				t.Errorf("pagination: got %+v, want %+v", got.Pagination, p.want)
			}
			if p.query == "?page_size=10&page=2" {
				for _, o := range got.Data {
					seen[o.ID] = true
				}
			}
		})
	}
	if len(seen) != 10 {
		t.Errorf("distinct items on a page: got %d, want %d", len(seen), 10)
	}
	e.run(t, paginationErrors(path))
}

// paginationErrors is the bad-query table every list shares.
func paginationErrors(path string) []tc {
	bad := func(name, q, field, code string) tc {
		return tc{name: name, method: "GET", path: path + q, status: 400, code: httpx.CodeValidation, field: field, dcode: code}
	}
	return []tc{
		bad("page 0", "?page=0", "page", codeOutOfRange),
		bad("page negative", "?page=-1", "page", codeOutOfRange),
		bad("page word", "?page=abc", "page", codeInvalid),
		bad("page empty", "?page=", "page", codeInvalid),
		bad("page fraction", "?page=1.5", "page", codeInvalid),
		bad("page overflow", "?page=99999999999999999999", "page", codeInvalid),
		bad("page_size 0", "?page_size=0", "page_size", codeOutOfRange),
		bad("page_size 101", "?page_size=101", "page_size", codeOutOfRange),
		bad("page_size word", "?page_size=many", "page_size", codeInvalid),
		bad("both bad", "?page=0&page_size=0", "page_size", codeOutOfRange),
	}
}

func TestDeleteOrg(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	u := e.createUser(`{"email":"a@example.com"}`)
	e.run(t, []tc{
		{name: "good", method: "DELETE", path: "/admin/v1/organizations/" + o.ID, status: 204},
		{name: "again", method: "DELETE", path: "/admin/v1/organizations/" + o.ID, status: 204},
		{name: "unknown", method: "DELETE", path: "/admin/v1/organizations/" + unknownID, status: 404, code: httpx.CodeNotFound},
		{name: "not a uuid", method: "DELETE", path: "/admin/v1/organizations/acme", status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
		{name: "membership in deleted org", method: "POST", path: "/admin/v1/memberships",
			body: `{"user_id":"` + u.ID + `","org_id":"` + o.ID + `"}`, status: 422, code: httpx.CodeValidation, field: "org_id", dcode: "not_found"},
		{name: "slug stays taken", method: "POST", path: "/admin/v1/organizations", body: `{"slug":"acme","name":"New Acme"}`, status: 409, code: httpx.CodeConflict, field: "slug"},
	})
	got := decodeAs[Org](t, e.must(200, "GET", "/admin/v1/organizations/"+o.ID, ""))
	if got.Status != fsm.OrgDeleted {
		t.Errorf("got %q, want %q", got.Status, fsm.OrgDeleted)
	}
	if w := e.do("DELETE", "/admin/v1/organizations/"+o.ID, ""); w.Body.Len() != 0 {
		t.Errorf("got body %q, want none", w.Body)
	}
}
