package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
)

func decodeBody(t *testing.T, w interface{ Result() *http.Response }, v any) {
	t.Helper()
	if err := json.NewDecoder(w.Result().Body).Decode(v); err != nil {
		t.Fatalf("decode answer: %v", err)
	}
}

func mustApply(t *testing.T, a *fsmtest.Applier, cmd fsm.Command) {
	t.Helper()
	res, err := a.Apply(context.Background(), cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("apply %s: %v", cmd.Type, err)
	}
}

func TestCreateUser(t *testing.T) {
	e := newEnv(t)
	const path = "/admin/v1/users"
	bad := func(name, body, field, code string) tc {
		return tc{name: name, method: "POST", path: path, body: body, status: 400, code: httpx.CodeValidation, field: field, dcode: code}
	}
	e.run(t, []tc{
		{name: "email only", method: "POST", path: path, body: `{"email":"a@example.com"}`, status: 201},
		{name: "every field", method: "POST", path: path, body: `{"email":"b@example.com","email_verified":true,"password":"12345678","phone":"+15551234567"}`, status: 201},
		{name: "password of 1024", method: "POST", path: path, body: `{"email":"c@example.com","password":"` + strings.Repeat("p", 1024) + `"}`, status: 201},
		{name: "empty phone is none", method: "POST", path: path, body: `{"email":"d@example.com","phone":""}`, status: 201},
		{name: "duplicate email", method: "POST", path: path, body: `{"email":"a@example.com"}`, status: 409, code: httpx.CodeConflict, field: "email", dcode: "conflict"},
		{name: "duplicate email other case", method: "POST", path: path, body: `{"email":"A@Example.COM"}`, status: 409, code: httpx.CodeConflict, field: "email"},
		{name: "duplicate phone", method: "POST", path: path, body: `{"email":"e@example.com","phone":"+15551234567"}`, status: 409, code: httpx.CodeConflict, field: "phone"},
		bad("missing email", `{"password":"12345678"}`, "email", codeRequired),
		bad("empty email", `{"email":""}`, "email", codeRequired),
		bad("not an email", `{"email":"not-an-email"}`, "email", codeInvalid),
		bad("display name", `{"email":"Bob <bob@example.com>"}`, "email", codeInvalid),
		bad("spaces around", `{"email":" bob@example.com"}`, "email", codeInvalid),
		bad("email too long", `{"email":"`+strings.Repeat("a", 64)+"@"+strings.Repeat("b", 190)+`.com"}`, "email", codeTooLong),
		bad("password short", `{"email":"f@example.com","password":"1234567"}`, "password", codeTooShort),
		bad("password long", `{"email":"f@example.com","password":"`+strings.Repeat("p", 1025)+`"}`, "password", codeTooLong),
		bad("phone without plus", `{"email":"f@example.com","phone":"15551234567"}`, "phone", codeInvalid),
		bad("phone short", `{"email":"f@example.com","phone":"+1234567"}`, "phone", codeInvalid),
		bad("phone long", `{"email":"f@example.com","phone":"+1234567890123456"}`, "phone", codeInvalid),
		bad("phone leading zero", `{"email":"f@example.com","phone":"+0155512345"}`, "phone", codeInvalid),
		bad("phone spaces", `{"email":"f@example.com","phone":"+1 555 123 4567"}`, "phone", codeInvalid),
		bad("email_verified string", `{"email":"f@example.com","email_verified":"yes"}`, "email_verified", "invalid_type"),
		bad("password number", `{"email":"f@example.com","password":12345678}`, "password", "invalid_type"),
	})

	t.Run("answer and stored hash", func(t *testing.T) {
		u := e.createUser(`{"email":"g@example.com","password":"correct horse","phone":"+442071234567"}`)
		want := User{ID: u.ID, Email: "g@example.com", Phone: "+442071234567", PasswordScheme: "argon2id"}
		if u != want || !isUUID(u.ID) {
			t.Errorf("got %+v, want %+v with a UUID", u, want)
		}
		stored, err := e.state.User(u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := e.hasher.Verify(context.Background(), "correct horse", stored.PasswordHash); !ok || err != nil {
			t.Errorf("stored hash %q: got %v, %v, want true, nil", stored.PasswordHash, ok, err)
		}
		if body := e.must(200, "GET", "/admin/v1/users/"+u.ID, "").Body.String(); !strings.Contains(body, `"phone":"+442071234567"`) {
			t.Errorf("got %s, want the phone", body)
		}
	})
	t.Run("no password, no hash", func(t *testing.T) {
		u := e.createUser(`{"email":"h@example.com"}`)
		stored, _ := e.state.User(u.ID)
		if stored.PasswordHash != "" {
			t.Errorf("got %q, want no hash", stored.PasswordHash)
		}
		if body := e.must(200, "GET", "/admin/v1/users/"+u.ID, "").Body.String(); !strings.Contains(body, `"phone":""`) {
			t.Errorf("got %s, want \"phone\":\"\"", body)
		}
	})
	t.Run("failed validation wrote nothing", func(t *testing.T) {
		_, before, _ := e.state.Users(fsm.Page{Page: 1, PageSize: 100})
		e.do("POST", path, `{"email":"new@example.com","password":"short"}`)
		if _, err := e.state.UserByEmail("new@example.com"); err == nil {
			t.Errorf("got a user, want none")
		}
		_, after, _ := e.state.Users(fsm.Page{Page: 1, PageSize: 100})
		if after != before {
			t.Errorf("got %d users, want %d", after, before)
		}
	})
}

func TestUpdateUser(t *testing.T) {
	e := newEnv(t)
	u := e.createUser(`{"email":"a@example.com","email_verified":true,"password":"first password"}`)
	e.createUser(`{"email":"taken@example.com","phone":"+15550000000"}`)
	path := "/admin/v1/users/" + u.ID
	bad := func(name, body, field, code string) tc {
		return tc{name: name, method: "PATCH", path: path, body: body, status: 400, code: httpx.CodeValidation, field: field, dcode: code}
	}
	e.run(t, []tc{
		{name: "unknown", method: "PATCH", path: "/admin/v1/users/" + unknownID, body: `{"email_verified":true}`, status: 404, code: httpx.CodeNotFound},
		{name: "not a uuid", method: "PATCH", path: "/admin/v1/users/me", body: `{}`, status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
		{name: "duplicate email", method: "PATCH", path: path, body: `{"email":"TAKEN@example.com"}`, status: 409, code: httpx.CodeConflict, field: "email"},
		{name: "duplicate phone", method: "PATCH", path: path, body: `{"phone":"+15550000000"}`, status: 409, code: httpx.CodeConflict, field: "phone"},
		bad("empty email", `{"email":""}`, "email", codeRequired),
		bad("bad email", `{"email":"nope"}`, "email", codeInvalid),
		bad("bad phone", `{"phone":"555"}`, "phone", codeInvalid),
		bad("short password", `{"password":"x"}`, "password", codeTooShort),
		bad("wrong type", `{"email_verified":1}`, "email_verified", "invalid_type"),
	})

	steps := []struct {
		name string
		body string
		want User
	}{
		{"nothing", `{}`, User{Email: "a@example.com", EmailVerified: true}},
		{"case of email keeps verified", `{"email":"A@example.com"}`, User{Email: "A@example.com", EmailVerified: true}},
		{"new email is unverified", `{"email":"b@example.com"}`, User{Email: "b@example.com"}},
		{"new email verified", `{"email":"c@example.com","email_verified":true}`, User{Email: "c@example.com", EmailVerified: true}},
		{"set phone", `{"phone":"+15551112222"}`, User{Email: "c@example.com", EmailVerified: true, Phone: "+15551112222"}},
		{"clear phone", `{"phone":""}`, User{Email: "c@example.com", EmailVerified: true}},
		{"unverify", `{"email_verified":false}`, User{Email: "c@example.com"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			got := decodeAs[User](t, e.must(200, "PATCH", path, s.body))
			s.want.ID, s.want.PasswordScheme = u.ID, "argon2id"
			if got != s.want {
				t.Errorf("got %+v, want %+v", got, s.want)
			}
			if stored := decodeAs[User](t, e.must(200, "GET", path, "")); stored != s.want {
				t.Errorf("stored: got %+v, want %+v", stored, s.want)
			}
		})
	}
	t.Run("old email freed", func(t *testing.T) {
		e.createUser(`{"email":"a@example.com"}`)
	})
	t.Run("password", func(t *testing.T) {
		e.must(200, "PATCH", path, `{"password":"second password"}`)
		stored, _ := e.state.User(u.ID)
		for pw, want := range map[string]bool{"second password": true, "first password": false} {
			if ok, err := e.hasher.Verify(context.Background(), pw, stored.PasswordHash); ok != want || err != nil {
				t.Errorf("%q: got %v, %v, want %v, nil", pw, ok, err, want)
			}
		}
	})
}

func TestGetListDeleteUser(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	u := e.createUser(`{"email":"a@example.com"}`)
	m := e.createMembership(u.ID, o.ID)
	e.createUser(`{"email":"b@example.com"}`)
	list := decodeAs[List[User]](t, e.must(200, "GET", "/admin/v1/users", ""))
	if len(list.Data) != 2 || list.Pagination.TotalItems != 2 {
		t.Errorf("got %+v, want 2 users", list)
	}
	e.run(t, append(paginationErrors("/admin/v1/users"), []tc{
		{name: "get", method: "GET", path: "/admin/v1/users/" + u.ID, status: 200},
		{name: "get unknown", method: "GET", path: "/admin/v1/users/" + unknownID, status: 404, code: httpx.CodeNotFound},
		{name: "get bad id", method: "GET", path: "/admin/v1/users/123", status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
		{name: "delete bad id", method: "DELETE", path: "/admin/v1/users/123", status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
		{name: "delete", method: "DELETE", path: "/admin/v1/users/" + u.ID, status: 204},
		{name: "get deleted", method: "GET", path: "/admin/v1/users/" + u.ID, status: 404, code: httpx.CodeNotFound},
		{name: "delete again", method: "DELETE", path: "/admin/v1/users/" + u.ID, status: 404, code: httpx.CodeNotFound},
		{name: "membership gone", method: "GET", path: "/admin/v1/memberships/" + m.ID, status: 404, code: httpx.CodeNotFound},
		{name: "email free again", method: "POST", path: "/admin/v1/users", body: `{"email":"a@example.com"}`, status: 201},
	}...))
}

func TestSecondFactorRoutes(t *testing.T) {
	e := newEnv(t)
	u := e.createUser(`{"email":"a@example.com"}`)
	missing := "00000000-0000-4000-8000-00000000dead"
	e.run(t, []tc{
		{name: "totp bad id", method: "POST", path: "/admin/v1/users/x/totp", status: 400, code: httpx.CodeValidation, field: "id"},
		{name: "totp unknown user", method: "POST", path: "/admin/v1/users/" + missing + "/totp", status: 404, code: httpx.CodeNotFound},
		{name: "recovery unknown user", method: "POST", path: "/admin/v1/users/" + missing + "/recovery-codes", status: 404, code: httpx.CodeNotFound},
		{name: "factors unknown user", method: "GET", path: "/admin/v1/users/" + missing + "/factors", status: 404, code: httpx.CodeNotFound},
		{name: "no lockout to clear", method: "DELETE", path: "/admin/v1/lockouts/ip:192.0.2.9", status: 404, code: httpx.CodeNotFound},
	})

	var totp struct{ Secret, URI string }
	decodeBody(t, e.must(201, "POST", "/admin/v1/users/"+u.ID+"/totp", ""), &totp)
	if !strings.HasPrefix(totp.URI, "otpauth://totp/") || !strings.Contains(totp.URI, "secret="+totp.Secret) {
		t.Fatalf("totp answer: %+v", totp)
	}
	code, err := factor.TOTPCode(totp.Secret, e.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	f, _ := e.state.Factors(u.ID)
	if f.TOTP == nil {
		t.Fatalf("stored totp: %+v", f)
	}
	if _, ok := factor.TOTPStep(totp.Secret, code, e.clock.now()); !ok {
		t.Fatal("the answered secret does not verify its own code")
	}

	var rc struct{ Codes []string }
	decodeBody(t, e.must(201, "POST", "/admin/v1/users/"+u.ID+"/recovery-codes", ""), &rc)
	seen := map[string]bool{}
	for _, c := range rc.Codes {
		if len(c) != 11 || seen[c] {
			t.Fatalf("codes: %v", rc.Codes)
		}
		seen[c] = true
	}
	if len(rc.Codes) != 10 {
		t.Fatalf("%d codes, want 10", len(rc.Codes))
	}
	f, _ = e.state.Factors(u.ID)
	for _, stored := range f.Recovery {
		if seen[stored.Hash] {
			t.Fatal("a recovery code is stored in the clear")
		}
	}

	var fo factorsOut
	decodeBody(t, e.must(200, "GET", "/admin/v1/users/"+u.ID+"/factors", ""), &fo)
	if !fo.TOTP || fo.RecoveryCodes != 10 || fo.Passkeys == nil {
		t.Fatalf("factors: %+v", fo)
	}
	e.must(204, "DELETE", "/admin/v1/users/"+u.ID+"/totp", "")
	decodeBody(t, e.must(200, "GET", "/admin/v1/users/"+u.ID+"/factors", ""), &fo)
	if fo.TOTP {
		t.Fatalf("after DELETE: %+v", fo)
	}

	// A lockout is listed with its kind and person, and clearable.
	rule := fsm.ThrottleRule{Key: factor.KeyCode + u.ID, Limit: 1, Window: time.Minute, Lockout: time.Hour}
	mustApply(t, e.app, fsm.MustCommand(fsm.TypeThrottleHit, fsm.ThrottleHit{Rules: []fsm.ThrottleRule{rule}, At: e.clock.now()}))
	var lo struct{ Data []lockoutOut }
	decodeBody(t, e.must(200, "GET", "/admin/v1/lockouts", ""), &lo)
	if len(lo.Data) != 1 || lo.Data[0].Kind != "code" || lo.Data[0].UserID != u.ID {
		t.Fatalf("lockouts: %+v", lo)
	}
	e.must(204, "DELETE", "/admin/v1/users/"+u.ID+"/lockouts", "")
	decodeBody(t, e.must(200, "GET", "/admin/v1/lockouts", ""), &lo)
	if len(lo.Data) != 0 {
		t.Fatalf("after clearing: %+v", lo)
	}
	mustApply(t, e.app, fsm.MustCommand(fsm.TypeThrottleHit, fsm.ThrottleHit{Rules: []fsm.ThrottleRule{rule}, At: e.clock.now()}))
	e.must(204, "DELETE", "/admin/v1/lockouts/"+url.PathEscape(rule.Key), "")
}

// TestListUsersByEmail: ?email= answers the one person with that address,
// in any case, or an empty list.
func TestListUsersByEmail(t *testing.T) {
	e := newEnv(t)
	u := e.createUser(`{"email":"Ann@Example.com"}`)
	e.createUser(`{"email":"bob@example.com"}`)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"ann@example.com", []string{u.ID}},
		{"ANN@EXAMPLE.COM", []string{u.ID}},
		{"nobody@example.com", nil},
	} {
		l := decodeAs[List[User]](t, e.must(200, "GET", "/admin/v1/users?email="+url.QueryEscape(tc.query), ""))
		if len(l.Data) != len(tc.want) || l.Pagination.TotalItems != len(tc.want) || (len(tc.want) == 1 && l.Data[0].ID != tc.want[0]) {
			t.Errorf("%s: got %+v, want %v", tc.query, l, tc.want)
		}
	}
	e.run(t, []tc{{name: "empty email", method: "GET", path: "/admin/v1/users?email=", status: 400, code: httpx.CodeValidation, field: "email", dcode: codeInvalid}})
}
