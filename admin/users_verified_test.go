package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// TestOrgAdminVouchesOnlyForItsOwnAddresses: email_verified true from an
// org_admin of O is stored only for an address in O's registration
// domains (open or not), which only an admin adds, on POST and PATCH
// /users; anything else is stored false (a PATCH keeps what the person
// proved themselves), a pending invitation too, which the org_admin may
// send anywhere. An admin's true is taken as asked; import, which could
// set it for many, is an admin's alone.
func TestOrgAdminVouchesOnlyForItsOwnAddresses(t *testing.T) {
	s := newScene(t)
	o := orgAdmin(s.o.ID)
	s.must(http.StatusOK, "PATCH", "/admin/v1/organizations/"+s.o.ID, `{"registration":{"enabled":false,"email_domains":["acme.example","bücher.example"]}}`)
	s.must(http.StatusOK, "PATCH", "/admin/v1/organizations/"+s.p.ID, `{"registration":{"enabled":true,"email_domains":["globex.example"]}}`)
	withdrawn := s.invite("gina@example.com", s.o.ID)
	s.must(http.StatusNoContent, "DELETE", "/admin/v1/invitations/"+withdrawn.ID, "")
	s.expiredInvitation("hank@example.com", s.o.ID)
	s.invite("ivan@example.com", s.o.ID)

	for _, tt := range []struct {
		name, email string
		cred        Credential
		want        bool
	}{
		{"in a registration domain", "new@acme.example", o, true},
		{"in a registration domain, any case", "New.Person@ACME.Example", o, true},
		{"in an internationalized registration domain", "leser@xn--bcher-kva.example", o, true},
		{"in an internationalized domain as typed", "leser2@bücher.example", o, true},
		{"invited to O", "erin@example.com", o, false},
		{"invited to O, another case", "IVAN@Example.COM", o, false},
		{"in a sub-domain", "x@sub.acme.example", o, false},
		{"in a longer domain", "x@acme.example.evil.example", o, false},
		{"in a domain that ends like it", "x@notacme.example", o, false},
		{"in another organization's domain", "x@globex.example", o, false},
		{"invited to another organization", "frank@example.com", o, false},
		{"a withdrawn invitation", "gina@example.com", o, false},
		{"an expired invitation", "hank@example.com", o, false},
		{"a domain nobody claims", "ceo@bigcorp.example", o, false},
		{"an admin's", "ceo2@bigcorp.example", breakGlass, true},
	} {
		t.Run("POST "+tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"email": tt.email, "email_verified": true})
			w := s.as(tt.cred, "POST", "/admin/v1/users", string(body))
			if w.Code != http.StatusCreated {
				t.Fatalf("got %d %s, want 201", w.Code, w.Body)
			}
			got := decodeAs[User](t, w)
			if got.EmailVerified != tt.want {
				t.Errorf("answer's email_verified: got %v, want %v", got.EmailVerified, tt.want)
			}
			if u, err := s.state.User(got.ID); err != nil || u.EmailVerified != tt.want {
				t.Errorf("stored email_verified: got %v (%v), want %v", u.EmailVerified, err, tt.want)
			}
		})
	}

	// PATCH of alice, who is O's alone and unverified at example.com.
	patch := func(t *testing.T, c Credential, body string) User {
		t.Helper()
		w := s.as(c, "PATCH", "/admin/v1/users/"+s.alice.ID, body)
		if w.Code != http.StatusOK {
			t.Fatalf("PATCH %s: got %d %s", body, w.Code, w.Body)
		}
		got := decodeAs[User](t, w)
		if u, err := s.state.User(s.alice.ID); err != nil || u.EmailVerified != got.EmailVerified {
			t.Fatalf("stored %v (%v), answered %v", u.EmailVerified, err, got.EmailVerified)
		}
		return got
	}
	for _, step := range []struct {
		name  string
		cred  Credential
		body  string
		want  bool
		email string
	}{
		{"true for an address O does not cover", o, `{"email_verified":true}`, false, "alice@example.com"},
		{"true with a new address O does not cover", o, `{"email":"alice@evil.example","email_verified":true}`, false, "alice@evil.example"},
		{"true with a new address in O's domain", o, `{"email":"alice@acme.example","email_verified":true}`, true, "alice@acme.example"},
		{"a new address outside, without the field", o, `{"email":"alice@example.com"}`, false, "alice@example.com"},
		{"an admin's true", breakGlass, `{"email_verified":true}`, true, "alice@example.com"},
		{"true again, with another change", o, `{"phone":"+15550100009","email_verified":true}`, true, "alice@example.com"},
		{"false", o, `{"email_verified":false}`, false, "alice@example.com"},
		{"true once more, uncovered", o, `{"email_verified":true}`, false, "alice@example.com"},
	} {
		t.Run("PATCH "+step.name, func(t *testing.T) {
			got := patch(t, step.cred, step.body)
			if got.EmailVerified != step.want || got.Email != step.email {
				t.Errorf("got %q verified %v, want %q verified %v", got.Email, got.EmailVerified, step.email, step.want)
			}
		})
	}

	t.Run("import", func(t *testing.T) {
		before := s.app.FSM.Applied()
		w := s.as(o, "POST", "/admin/v1/users/import", `{"users":[{"email":"many@bigcorp.example","email_verified":true,"organizations":["`+s.o.ID+`"]}]}`)
		checkEnvelope(t, w, http.StatusForbidden, httpx.CodeForbidden)
		if got := s.app.FSM.Applied(); got != before {
			t.Errorf("applied index moved from %d to %d", before, got)
		}
	})
}

// expiredInvitation records an invitation of addr to org that expired an
// hour ago.
func (e *env) expiredInvitation(addr, org string) {
	e.t.Helper()
	_, hash, err := email.NewToken()
	if err != nil {
		e.t.Fatal(err)
	}
	now := e.clock.now().UTC()
	in := fsm.Invitation{ID: uuid.NewString(), Email: addr, OrgID: org, LinkHash: hash, CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)}
	msg := fsm.OutgoingEmail{To: addr, Kind: fsm.EmailInvitation, Body: []byte{0, '{', '}'}}
	res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeCreateInvitation, fsm.CreateInvitation{Invitation: in, Email: msg, At: now}))
	if err != nil || res.Err != nil {
		e.t.Fatalf("invitation: %v %v", err, res.Err)
	}
}

// TestOrgAdminAddsNoRegistrationDomain: a registration domain is an
// admin's claim that an organization's addresses are there (it lets
// anyone there register, and the org_admin vouch for them), so an
// org_admin's PATCH /organizations that adds one is 403, names it, and
// applies nothing, however it is spelled; opening, closing, removing and
// restating what an admin set are its own. Before, an org_admin of O put
// another organization's domain in O's list and then created people
// there with email_verified true.
func TestOrgAdminAddsNoRegistrationDomain(t *testing.T) {
	s := newScene(t)
	o := orgAdmin(s.o.ID)
	path := "/admin/v1/organizations/" + s.o.ID
	s.must(http.StatusOK, "PATCH", path, `{"registration":{"enabled":false,"email_domains":["acme.example","bücher.example"]}}`)
	s.must(http.StatusOK, "PATCH", "/admin/v1/organizations/"+s.p.ID, `{"registration":{"enabled":true,"email_domains":["globex.example"]}}`)
	reg := func() Registration {
		t.Helper()
		return decodeAs[Org](t, s.must(http.StatusOK, "GET", path, "")).Registration
	}
	for _, tt := range []struct {
		name, body string
		status     int
		domain     string // named in the 403
		want       string // the domains after
	}{
		{"another organization's domain", `{"registration":{"email_domains":["acme.example","globex.example"]}}`, 403, "globex.example", "acme.example,xn--bcher-kva.example"},
		{"a domain nobody claims, opening", `{"registration":{"enabled":true,"email_domains":["acme.example","gmail.com"]}}`, 403, "gmail.com", "acme.example,xn--bcher-kva.example"},
		{"a new list", `{"registration":{"email_domains":["evil.example"]}}`, 403, "evil.example", "acme.example,xn--bcher-kva.example"},
		{"a sub-domain of its own", `{"registration":{"email_domains":["acme.example","mail.acme.example"]}}`, 403, "mail.acme.example", "acme.example,xn--bcher-kva.example"},
		{"open with the admin's domains", `{"registration":{"enabled":true}}`, 200, "", "acme.example,xn--bcher-kva.example"},
		{"the admin's domains restated, another spelling", `{"registration":{"email_domains":["ACME.example.","bücher.example"]}}`, 200, "", "acme.example,xn--bcher-kva.example"},
		{"remove one", `{"registration":{"email_domains":["xn--bcher-kva.example"]}}`, 200, "", "xn--bcher-kva.example"},
		{"put back what it removed", `{"registration":{"email_domains":["xn--bcher-kva.example","acme.example"]}}`, 403, "acme.example", "xn--bcher-kva.example"},
		{"close", `{"registration":{"enabled":false}}`, 200, "", "xn--bcher-kva.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := s.app.FSM.Applied()
			w := s.as(o, "PATCH", path, tt.body)
			if tt.status == http.StatusForbidden {
				e := checkEnvelope(t, w, http.StatusForbidden, httpx.CodeForbidden)
				if !strings.Contains(e.Message, "("+tt.domain+")") {
					t.Errorf("message %q: want it to name %s", e.Message, tt.domain)
				}
				if got := s.app.FSM.Applied(); got != before {
					t.Errorf("applied index moved from %d to %d", before, got)
				}
			} else if w.Code != tt.status {
				t.Fatalf("got %d %s, want %d", w.Code, w.Body, tt.status)
			}
			if got := strings.Join(reg().EmailDomains, ","); got != tt.want {
				t.Errorf("domains %s, want %s", got, tt.want)
			}
		})
	}
	// The way the attacker went: no domain of another
	// organization in O's list, so no verified address there.
	w := s.as(o, "POST", "/admin/v1/users", `{"email":"ceo@globex.example","email_verified":true}`)
	if w.Code != http.StatusCreated || decodeAs[User](t, w).EmailVerified {
		t.Errorf("ceo@globex.example: got %d %s, want 201 unverified", w.Code, w.Body)
	}
	// An admin adds what it likes.
	s.must(http.StatusOK, "PATCH", path, `{"registration":{"email_domains":["xn--bcher-kva.example","acme.example","globex.example"]}}`)
	if got := strings.Join(reg().EmailDomains, ","); got != "xn--bcher-kva.example,acme.example,globex.example" {
		t.Errorf("after the admin's PATCH: %s", got)
	}
}
