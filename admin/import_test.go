package admin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

const importPath = "/admin/v1/users/import"

// bcryptOfSecret is "correct horse battery staple" hashed by libxcrypt.
const bcryptOfSecret = "$2b$04$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS"

func TestImportUsers(t *testing.T) {
	e := newEnv(t)
	org := e.createOrg("acme")
	e.createUser(`{"email":"taken@example.com"}`)
	body := `{"users":[
		{"email":"ann@example.com","email_verified":true,"password_hash":"` + bcryptOfSecret + `","organizations":["` + org.ID + `"]},
		{"email":"TAKEN@example.com"},
		{"email":"md5@example.com","password_hash":"$1$saltsalt$qjXMvbEw8oaL.CzflDugX/"},
		{"email":"not an address"},
		{"email":"ghost@example.com","organizations":["` + unknownID + `"]},
		{"email":"bob@example.com","phone":"+15551234567"}
	]}`
	w := e.must(200, "POST", importPath, body)
	ans := decodeAs[importAnswer](t, w)
	if ans.Created != 2 || ans.Exists != 1 || ans.Failed != 3 || len(ans.Data) != 6 {
		t.Fatalf("answer: %s", w.Body)
	}
	wantStatus := []string{fsm.ImportCreated, fsm.ImportExists, fsm.ImportFailed, fsm.ImportFailed, fsm.ImportFailed, fsm.ImportCreated}
	wantField := []string{"", "", "password_hash", "email", "organizations", ""}
	wantCode := []string{"", "", "unsupported", codeInvalid, "not_found", ""}
	for i, r := range ans.Data {
		if r.Index != i || r.Status != wantStatus[i] {
			t.Errorf("person %d: %+v, want status %s", i, r, wantStatus[i])
			continue
		}
		if wantField[i] == "" {
			if r.Error != nil || !isUUID(r.ID) {
				t.Errorf("person %d: %+v, want an id and no error", i, r)
			}
			continue
		}
		if r.Error == nil || r.Error.Code != httpx.CodeValidation || !hasDetail(*r.Error, wantField[i], wantCode[i]) {
			t.Errorf("person %d: error %+v, want %s/%s", i, r.Error, wantField[i], wantCode[i])
		}
	}
	if !strings.Contains(w.Body.String(), "md5-crypt") || strings.Contains(w.Body.String(), "qjXMvbEw8oaL") {
		t.Errorf("the md5-crypt error must name the scheme and not echo the hash: %s", w.Body)
	}

	ann, err := e.state.UserByEmail("ann@example.com")
	if err != nil || ann.PasswordHash != bcryptOfSecret || !ann.EmailVerified || ann.ID != ans.Data[0].ID {
		t.Fatalf("ann: %+v %v", ann, err)
	}
	if ms, _ := e.state.MembershipsOfUser(ann.ID); len(ms) != 1 || ms[0].OrgID != org.ID || ms[0].Status != fsm.MembershipActive {
		t.Fatalf("ann's memberships: %+v", ms)
	}
	if got := decodeAs[User](t, e.must(200, "GET", "/admin/v1/users/"+ann.ID, "")); got.PasswordScheme != "bcrypt" {
		t.Errorf("GET shows password_scheme %q, want bcrypt", got.PasswordScheme)
	}

	// Idempotent by address: the same request again creates nobody.
	again := decodeAs[importAnswer](t, e.must(200, "POST", importPath, body))
	if again.Created != 0 || again.Exists != 3 || again.Data[0].ID != ann.ID {
		t.Fatalf("second send: %+v", again)
	}
}

func TestImportUsersRequest(t *testing.T) {
	e := newEnv(t)
	var many strings.Builder
	many.WriteString(`{"users":[`)
	for i := range fsm.MaxImportBatch + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"email":"p%d@example.com"}`, i)
	}
	many.WriteString("]}")
	e.run(t, []tc{
		{name: "no users", method: "POST", path: importPath, body: `{"users":[]}`, status: 400, code: httpx.CodeValidation, field: "users", dcode: codeRequired},
		{name: "users absent", method: "POST", path: importPath, body: `{}`, status: 400, code: httpx.CodeValidation, field: "users", dcode: codeRequired},
		{name: "too many", method: "POST", path: importPath, body: many.String(), status: 400, code: httpx.CodeValidation, field: "users", dcode: codeTooMany},
		{name: "unknown field", method: "POST", path: importPath, body: `{"users":[{"email":"a@example.com","password":"x"}]}`, status: 400, code: httpx.CodeValidation},
		{name: "GET", method: "GET", path: importPath, status: 405, code: httpx.CodeBadRequest},
	})
	huge := `{"users":[{"email":"a@example.com","password_hash":"` + strings.Repeat("x", MaxImportBody) + `"}]}`
	if w := e.do("POST", importPath, huge); w.Code != 413 {
		t.Fatalf("a body over %d bytes: got %d", MaxImportBody, w.Code)
	}
	// A full batch of the largest people fits the body limit.
	var full strings.Builder
	full.WriteString(`{"users":[`)
	for i := range fsm.MaxImportBatch {
		if i > 0 {
			full.WriteString(",")
		}
		b, _ := json.Marshal(importUser{Email: fmt.Sprintf("%s%d@example.com", strings.Repeat("a", 200), i),
			Phone: fmt.Sprintf("+1555%07d", i), PasswordHash: "$pbkdf2-sha512$i=210000,l=64$" + strings.Repeat("A", 171) + "$" + strings.Repeat("A", 86)})
		full.Write(b)
	}
	full.WriteString("]}")
	if full.Len() > MaxImportBody {
		t.Fatalf("a full batch is %d bytes, over the limit %d", full.Len(), MaxImportBody)
	}
	if ans := decodeAs[importAnswer](t, e.must(200, "POST", importPath, full.String())); ans.Created != fsm.MaxImportBatch {
		t.Fatalf("a full batch: %d created, %d failed", ans.Created, ans.Failed)
	}
}
