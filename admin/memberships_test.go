package admin

import (
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

func TestMemberships(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	o2 := e.createOrg("globex")
	u := e.createUser(`{"email":"a@example.com"}`)
	u2 := e.createUser(`{"email":"b@example.com"}`)
	const path = "/admin/v1/memberships"
	body := func(user, org, extra string) string {
		return `{"user_id":"` + user + `","org_id":"` + org + `"` + extra + `}`
	}
	bad := func(name, b, field, code string) tc {
		return tc{name: name, method: "POST", path: path, body: b, status: 400, code: httpx.CodeValidation, field: field, dcode: code}
	}
	e.run(t, []tc{
		{name: "good", method: "POST", path: path, body: body(u.ID, o.ID, ""), status: 201},
		{name: "suspended", method: "POST", path: path, body: body(u.ID, o2.ID, `,"status":"suspended"`), status: 201},
		{name: "duplicate", method: "POST", path: path, body: body(u.ID, o.ID, ""), status: 409, code: httpx.CodeConflict, field: "org_id"},
		{name: "unknown user", method: "POST", path: path, body: body(unknownID, o.ID, ""), status: 422, code: httpx.CodeValidation, field: "user_id", dcode: "not_found"},
		{name: "unknown org", method: "POST", path: path, body: body(u2.ID, unknownID, ""), status: 422, code: httpx.CodeValidation, field: "org_id", dcode: "not_found"},
		bad("missing user", `{"org_id":"`+o.ID+`"}`, "user_id", codeRequired),
		bad("missing org", `{"user_id":"`+u.ID+`"}`, "org_id", codeRequired),
		bad("bad user uuid", body("u1", o.ID, ""), "user_id", codeInvalidUUID),
		bad("bad org uuid", body(u.ID, "acme", ""), "org_id", codeInvalidUUID),
		bad("bad status", body(u2.ID, o.ID, `,"status":"banned"`), "status", codeInvalid),
		bad("status null", body(u2.ID, o.ID, `,"status":1`), "status", "invalid_type"),
	})

	ms := decodeAs[List[Membership]](t, e.must(200, "GET", path, ""))
	if len(ms.Data) != 2 {
		t.Fatalf("got %d memberships, want 2", len(ms.Data))
	}
	var m Membership
	for _, x := range ms.Data {
		if x.OrgID == o.ID {
			m = x
		}
	}
	if m.UserID != u.ID || m.Status != fsm.MembershipActive || !isUUID(m.ID) {
		t.Errorf("got %+v, want an active membership of %s", m, u.ID)
	}
	e.createMembership(u2.ID, o.ID)

	t.Run("filter by user", func(t *testing.T) {
		got := decodeAs[List[Membership]](t, e.must(200, "GET", path+"?user_id="+u.ID+"&page_size=1&page=2", ""))
		want := Pagination{Page: 2, PageSize: 1, TotalItems: 2, TotalPages: 2, HasPrevious: true}
		if got.Pagination != want || len(got.Data) != 1 || got.Data[0].UserID != u.ID {
			t.Errorf("got %+v, want one of %s and %+v", got, u.ID, want)
		}
		got = decodeAs[List[Membership]](t, e.must(200, "GET", path+"?user_id="+u.ID+"&page=5", ""))
		if len(got.Data) != 0 || got.Pagination.TotalItems != 2 {
			t.Errorf("got %+v, want no items of 2", got)
		}
	})

	mpath := path + "/" + m.ID
	e.run(t, append(paginationErrors(path), []tc{
		{name: "filter bad user", method: "GET", path: path + "?user_id=x", status: 400, code: httpx.CodeValidation, field: "user_id", dcode: codeInvalidUUID},
		{name: "get", method: "GET", path: mpath, status: 200},
		{name: "get unknown", method: "GET", path: path + "/" + unknownID, status: 404, code: httpx.CodeNotFound},
		{name: "get bad id", method: "GET", path: path + "/x", status: 400, code: httpx.CodeValidation, field: "id"},
		{name: "suspend", method: "PATCH", path: mpath, body: `{"status":"suspended"}`, status: 200},
		{name: "patch missing status", method: "PATCH", path: mpath, body: `{}`, status: 400, code: httpx.CodeValidation, field: "status", dcode: codeRequired},
		{name: "patch bad status", method: "PATCH", path: mpath, body: `{"status":"deleted"}`, status: 400, code: httpx.CodeValidation, field: "status", dcode: codeInvalid},
		{name: "patch other field", method: "PATCH", path: mpath, body: `{"status":"active","org_id":"` + o2.ID + `"}`, status: 400, code: httpx.CodeValidation, field: "org_id", dcode: "unknown_field"},
		{name: "patch unknown", method: "PATCH", path: path + "/" + unknownID, body: `{"status":"active"}`, status: 404, code: httpx.CodeNotFound},
		{name: "patch bad id", method: "PATCH", path: path + "/nope", body: `{"status":"active"}`, status: 400, code: httpx.CodeValidation, field: "id"},
	}...))
	got := decodeAs[Membership](t, e.must(200, "GET", mpath, ""))
	if got.Status != fsm.MembershipSuspended {
		t.Errorf("got %q, want %q", got.Status, fsm.MembershipSuspended)
	}
	got = decodeAs[Membership](t, e.must(200, "PATCH", mpath, `{"status":"active"}`))
	if want := (Membership{ID: m.ID, UserID: u.ID, OrgID: o.ID, Status: fsm.MembershipActive}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	e.run(t, []tc{
		{name: "delete", method: "DELETE", path: mpath, status: 204},
		{name: "delete again", method: "DELETE", path: mpath, status: 404, code: httpx.CodeNotFound},
		{name: "delete bad id", method: "DELETE", path: path + "/1", status: 400, code: httpx.CodeValidation, field: "id"},
		{name: "re-add", method: "POST", path: path, body: body(u.ID, o.ID, ""), status: 201},
	})
}
