package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// An org_admin's membership write never crosses an organization
// (SECURITY.md, "Administrators who are people"): an org_admin of O adds
// to O only a person who is O's already; anyone else (a member of
// another organization, a person of no organization, one who holds a
// grant) joins O by accepting an invitation, their own sign-in. A person
// O cannot see is answered as an unknown user_id is, in the same steps.

// TestMembershipJoinerRule: decide's table for POST /memberships.
func TestMembershipJoinerRule(t *testing.T) {
	const o, p = "0a000000-0000-4000-8000-00000000000a", "0b000000-0000-4000-8000-00000000000b"
	d := declarations["POST /memberships"]
	person := func(orgs []string, grants ...grantRef) *joiner {
		return &joiner{known: true, orgs: orgs, grants: grants}
	}
	for _, tt := range []struct {
		name string
		c    Credential
		org  string // the body's org_id
		j    *joiner
		want verdict
	}{
		{"wholly O's", orgAdmin(o), o, person([]string{o}), allow},
		{"member of O and of another", orgAdmin(o), o, person([]string{o, p}), forbid},
		{"member of another only", orgAdmin(o), o, person([]string{p}), hideUser},
		{"member of O holding org_admin of O", orgAdmin(o), o, person([]string{o}, grantRef{RoleOrgAdmin, o}), forbid},
		{"member of O holding admin", orgAdmin(o), o, person([]string{o}, grantRef{RoleAdmin, ""}), forbid},
		{"holds a grant, no membership", orgAdmin(o), o, person(nil, grantRef{RoleAuditor, ""}), hideUser},
		{"member of another holding org_admin of O", orgAdmin(o), o, person([]string{p}, grantRef{RoleOrgAdmin, o}), hideUser},
		// A person who exists with no membership is nobody's new
		// person: they were someone's (or an admin made them for some
		// organization), and O would gain their password and factors.
		{"exists, of no organization", orgAdmin(o), o, person(nil), hideUser},
		{"no such person", orgAdmin(o), o, &joiner{}, hideUser},
		{"wholly O's, into another organization", orgAdmin(o), p, person([]string{o}), forbid},
		{"no such person, into another organization", orgAdmin(o), p, &joiner{}, forbid},
		{"admin: member of another", asAdmin, o, person([]string{p}), allow},
		{"admin: holds a grant", asAdmin, o, person([]string{p}, grantRef{RoleAdmin, ""}), allow},
		{"admin: of no organization", asAdmin, o, person(nil), allow},
		{"auditor", asAuditor, o, person([]string{o}), forbid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, why := decide(tt.c, d, &scope{orgs: []string{tt.org}, joiner: tt.j})
			if v != tt.want {
				t.Errorf("got verdict %d (%q), want %d", v, why, tt.want)
			}
		})
	}
	// A new person is one the org_admin creates: made a member of O in
	// the same write (POST /users, createMember).
	if v, _ := decide(orgAdmin(o), declarations["POST /users"], nil); v != allow {
		t.Errorf("POST /users by an org_admin: verdict %d, want allow", v)
	}
}

// joinScene is newScene with two people who hold grants: gil, a member
// of O holding org_admin of O, and hal, an admin of no organization.
type joinScene struct {
	*scene
	gil, hal User
}

func newJoinScene(t *testing.T) *joinScene {
	s := &joinScene{scene: newScene(t)}
	s.gil = s.createUser(`{"email":"gil@example.com"}`)
	s.createMembership(s.gil.ID, s.o.ID)
	s.must(201, "POST", "/admin/v1/admins", `{"user_id":"`+s.gil.ID+`","role":"org_admin","organization_id":"`+s.o.ID+`"}`)
	s.hal = s.createUser(`{"email":"hal@example.com"}`)
	s.must(201, "POST", "/admin/v1/admins", `{"user_id":"`+s.hal.ID+`","role":"admin"}`)
	return s
}

// sameAnswer is an error answer without what differs between any two
// (its correlation id and time): status and envelope.
func sameAnswer(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var env struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Error == nil {
		t.Fatalf("answer %d %s: not an error envelope", w.Code, w.Body)
	}
	delete(env.Error, "correlation_id")
	delete(env.Error, "timestamp")
	b, _ := json.Marshal(env.Error)
	return http.StatusText(w.Code) + " " + string(b)
}

// TestOrgAdminPullsNoOneIn: with the real handlers, an org_admin of O
// asking for a membership in O of a person it cannot see gets the answer
// of an id that names no one, word for word, and nothing is written; the
// person stays out of its sight. A person it sees but who is not wholly
// O's is refused 403, as changing them is; one who is O's conflicts
// (already a member). An admin adds anyone.
func TestOrgAdminPullsNoOneIn(t *testing.T) {
	s := newJoinScene(t)
	o := orgAdmin(s.o.ID)
	body := func(user string) string { return `{"user_id":"` + user + `","org_id":"` + s.o.ID + `"}` }
	unknown := s.as(o, "POST", "/admin/v1/memberships", body(uuid.NewString()))
	checkEnvelope(t, unknown, 422, httpx.CodeValidation)
	want := sameAnswer(t, unknown)
	if !strings.Contains(want, `"field":"user_id"`) || !strings.Contains(want, `"code":"not_found"`) {
		t.Fatalf("the answer for an unknown id: %s", want)
	}
	// The admin's answer for an unknown id comes from the write; the
	// org_admin's from the decision: the same words.
	if got := sameAnswer(t, s.as(asAdmin, "POST", "/admin/v1/memberships", body(uuid.NewString()))); got != want {
		t.Errorf("an admin's unknown id answers %s, an org_admin's %s", got, want)
	}
	for _, at := range []struct{ name, body string }{
		{"a member of another organization", body(s.carol.ID)},
		{"a member of another organization, in capitals", `{"user_id":"` + strings.ToUpper(s.carol.ID) + `","org_id":"` + strings.ToUpper(s.o.ID) + `"}`},
		{"a member of another organization, the id repeated", `{"user_id":"` + s.alice.ID + `","org_id":"` + s.o.ID + `","user_id":"` + s.carol.ID + `"}`},
		{"a member of another organization, the key in capitals", `{"USER_ID":"` + s.carol.ID + `","org_id":"` + s.o.ID + `"}`},
		{"a member of another organization, suspended", `{"user_id":"` + s.carol.ID + `","org_id":"` + s.o.ID + `","status":"suspended"}`},
		{"a person of no organization", body(s.dave.ID)},
		{"an admin of no organization", body(s.hal.ID)},
	} {
		t.Run(at.name, func(t *testing.T) {
			before := s.app.FSM.Applied()
			w := s.as(o, "POST", "/admin/v1/memberships", at.body)
			if got := sameAnswer(t, w); got != want {
				t.Errorf("got %s, want the unknown id's %s", got, want)
			}
			if got := s.app.FSM.Applied(); got != before {
				t.Errorf("applied index moved from %d to %d", before, got)
			}
		})
	}
	for _, who := range []User{s.carol, s.dave, s.hal} {
		for _, path := range []string{"/admin/v1/users/" + who.ID, "/admin/v1/users/" + who.ID + "/factors"} {
			checkEnvelope(t, s.as(o, "GET", path, ""), 404, httpx.CodeNotFound)
		}
		if ms, err := s.state.MembershipOf(who.ID, s.o.ID); err == nil {
			t.Errorf("%s became a member of O: %+v", who.Email, ms)
		}
	}
	// People O sees.
	checkEnvelope(t, s.as(o, "POST", "/admin/v1/memberships", body(s.bob.ID)), 403, httpx.CodeForbidden)
	checkEnvelope(t, s.as(o, "POST", "/admin/v1/memberships", body(s.gil.ID)), 403, httpx.CodeForbidden)
	checkEnvelope(t, s.as(o, "POST", "/admin/v1/memberships", body(s.alice.ID)), 409, httpx.CodeConflict)
	// A bad id is a bad id, before anything is looked up.
	w := s.as(o, "POST", "/admin/v1/memberships", body("not-a-uuid"))
	if e := checkEnvelope(t, w, 400, httpx.CodeValidation); len(e.Details) != 1 || e.Details[0].Code != codeInvalidUUID {
		t.Errorf("a bad user_id: %s", w.Body)
	}
	// Admins keep their power.
	m := decodeAs[Membership](t, s.must(201, "POST", "/admin/v1/memberships", body(s.carol.ID)))
	if m.UserID != s.carol.ID || m.OrgID != s.o.ID {
		t.Errorf("admin's membership %+v", m)
	}
}

// countingApplier counts the writes proposed through it.
type countingApplier struct {
	Applier
	n atomic.Int32
}

func (c *countingApplier) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	c.n.Add(1)
	return c.Applier.Apply(ctx, cmd)
}

// TestRefusedJoinerTakesTheUnknownPath: a person the org_admin may not
// add and an id that names no one take the same steps, so neither the
// answer nor its time tells them apart: one read index (the decision is
// made on the current state), the same reads, and no write proposed.
func TestRefusedJoinerTakesTheUnknownPath(t *testing.T) {
	s := newJoinScene(t)
	a := s.bareAPI()
	var indexes atomic.Int32
	a.ReadIndex = func(context.Context) error { indexes.Add(1); return nil }
	writes := &countingApplier{Applier: s.hook}
	a.Applier = writes
	mux := http.NewServeMux()
	a.routes(mux)
	h := httpx.Correlation(mux)
	post := func(user string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/admin/v1/memberships", strings.NewReader(`{"user_id":"`+user+`","org_id":"`+s.o.ID+`"}`))
		r.Header.Set("Content-Type", "application/json")
		r = r.WithContext(WithCredential(r.Context(), orgAdmin(s.o.ID)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	var first string
	for _, c := range []struct{ name, user string }{
		{"unknown", uuid.NewString()}, {"member of another", s.carol.ID}, {"of no organization", s.dave.ID}, {"admin", s.hal.ID},
	} {
		indexes.Store(0)
		writes.n.Store(0)
		got := sameAnswer(t, post(c.user))
		if first == "" {
			first = got
		}
		if got != first {
			t.Errorf("%s: answer %s, want %s", c.name, got, first)
		}
		if indexes.Load() != 1 || writes.n.Load() != 0 {
			t.Errorf("%s: %d read indexes and %d writes, want 1 and 0", c.name, indexes.Load(), writes.n.Load())
		}
	}
}

// TestMembershipPatchCannotMove: PATCH /memberships/{id} takes a status
// only; a body naming another person or organization is refused and
// changes nothing.
func TestMembershipPatchCannotMove(t *testing.T) {
	s := newScene(t)
	o := orgAdmin(s.o.ID)
	for _, b := range []string{
		`{"org_id":"` + s.p.ID + `"}`,
		`{"status":"active","org_id":"` + s.p.ID + `"}`,
		`{"status":"active","user_id":"` + s.carol.ID + `"}`,
		`{"status":"active","ORG_ID":"` + s.p.ID + `"}`,
	} {
		before := s.app.FSM.Applied()
		w := s.as(o, "PATCH", "/admin/v1/memberships/"+s.aliceO.ID, b)
		if w.Code != http.StatusBadRequest {
			t.Errorf("PATCH %s: got %d, want 400: %s", b, w.Code, w.Body)
		}
		if s.app.FSM.Applied() != before {
			t.Errorf("PATCH %s wrote", b)
		}
	}
	if m, err := s.state.Membership(s.aliceO.ID); err != nil || m.OrgID != s.o.ID || m.UserID != s.alice.ID {
		t.Errorf("alice's membership %+v %v", m, err)
	}
}
