package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/internal/kek"
)

const testIssuer = "https://id.example.test"

// testKEK seals the messages of the mail tests.
var testKEK = func() *kek.KEK {
	k, err := kek.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		panic(err)
	}
	return k
}()

// withMail is the option of an API that sends mail.
func withMail(c *Config) {
	c.Mail, c.Issuer, c.KEK = true, testIssuer, testKEK
}

// invite stores a pending invitation of addr to org directly in the
// state (for the tests that need one whatever Mail says).
func (e *env) invite(addr, org string) fsm.Invitation {
	e.t.Helper()
	_, hash, err := email.NewToken()
	if err != nil {
		e.t.Fatal(err)
	}
	now := e.clock.now().UTC()
	in := fsm.Invitation{ID: uuid.NewString(), Email: addr, OrgID: org, LinkHash: hash, CreatedAt: now, ExpiresAt: now.Add(DefaultInvitationLifetime)}
	msg := fsm.OutgoingEmail{To: addr, Kind: fsm.EmailInvitation, Body: []byte{0, '{', '}'}}
	res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeCreateInvitation, fsm.CreateInvitation{Invitation: in, Email: msg, At: now}))
	if err != nil || res.Err != nil {
		e.t.Fatalf("invite: %v %v", err, res.Err)
	}
	return in
}

// sentTo finds the one pending message of kind to addr, opens it, and
// returns it with its record.
func (e *env) sentTo(kind, addr string) (fsm.Email, email.Message) {
	e.t.Helper()
	pending, err := e.state.PendingEmails(1000)
	if err != nil {
		e.t.Fatal(err)
	}
	var found []fsm.Email
	for _, m := range pending {
		if m.Kind == kind && m.To == addr {
			found = append(found, m)
		}
	}
	if len(found) == 0 {
		e.t.Fatalf("no pending %s message to %s among %d", kind, addr, len(pending))
	}
	m := found[len(found)-1]
	if !kek.Sealed(m.Body) {
		e.t.Errorf("the %s message to %s is not sealed under the KEK", kind, addr)
	}
	msg, err := email.Open(testKEK, m)
	if err != nil {
		e.t.Fatalf("open the %s message: %v", kind, err)
	}
	return m, msg
}

// linkOf is the token of a message's link to page, and the link the
// state keeps under its hash.
func (e *env) linkOf(msg email.Message, page string) (string, fsm.Link) {
	e.t.Helper()
	prefix := testIssuer + "/" + page + "/"
	token, ok := strings.CutPrefix(msg.Link, prefix)
	if !ok || len(token) < 43 || !strings.Contains(msg.Text, msg.Link) {
		e.t.Fatalf("link %q: want %s<token>, also in the text", msg.Link, prefix)
	}
	l, err := e.state.Link(email.HashToken(token))
	if err != nil {
		e.t.Fatalf("the link's token hashes to no stored link: %v", err)
	}
	return token, l
}

// lastEvent is the newest audit event of type typ.
func (e *env) lastEvent(typ string) fsm.Event {
	e.t.Helper()
	evs, err := e.state.AuditEvents(fsm.AuditQuery{Type: typ, Newest: true, Limit: 1})
	if err != nil || len(evs) != 1 {
		e.t.Fatalf("no %s event (%v)", typ, err)
	}
	return evs[0]
}

// noTokenInTrail fails when any audit event holds token.
func (e *env) noTokenInTrail(token string) {
	e.t.Helper()
	evs, err := e.state.AuditEvents(fsm.AuditQuery{Limit: fsm.MaxAuditPage})
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := json.Marshal(evs)
	if strings.Contains(string(b), token) || strings.Contains(string(b), email.HashToken(token)) {
		e.t.Errorf("the audit trail holds a link's token or its hash")
	}
}

func TestCreateInvitation(t *testing.T) {
	e := newEnv(t, withMail)
	o := e.createOrg("acme")
	w := e.must(201, "POST", "/admin/v1/invitations", `{"email":"Ann@Example.com","organization_id":"`+strings.ToUpper(o.ID)+`"}`)
	in := decodeAs[Invitation](t, w)
	if in.Email != "Ann@Example.com" || in.OrgID != o.ID || in.Status != InvitationPending || in.AcceptedAt != nil {
		t.Errorf("answer %+v", in)
	}
	if got := in.ExpiresAt.Sub(in.CreatedAt); got != DefaultInvitationLifetime {
		t.Errorf("lifetime: got %v, want %v", got, DefaultInvitationLifetime)
	}
	stored, err := e.state.Invitation(in.ID)
	if err != nil || stored.Email != in.Email || stored.OrgID != o.ID || !stored.ExpiresAt.Equal(in.ExpiresAt) {
		t.Fatalf("stored %+v, %v", stored, err)
	}

	// The message: sealed, in the outbox, with the link whose token
	// hashes to the stored link of this invitation.
	m, msg := e.sentTo(fsm.EmailInvitation, "Ann@Example.com")
	if m.State != fsm.EmailPending || m.UserID != "" || m.Locale != "en" {
		t.Errorf("message record %+v", m)
	}
	if !strings.Contains(msg.Text, "Org acme") || !strings.Contains(msg.HTML, "Org acme") || !strings.Contains(msg.Text, "7 days") {
		t.Errorf("message text %q, want the organization's name and the lifetime", msg.Text)
	}
	token, l := e.linkOf(msg, "invite")
	if l.Purpose != fsm.LinkInvitation || l.InvitationID != in.ID || l.OrgID != o.ID || l.Email != in.Email || !l.ExpiresAt.Equal(in.ExpiresAt) {
		t.Errorf("link %+v", l)
	}
	if l.Hash != stored.LinkHash {
		t.Errorf("link hash %q, invitation's %q", l.Hash, stored.LinkHash)
	}
	if strings.Contains(w.Body.String(), token) {
		t.Error("the answer holds the link's token")
	}

	// The audit event: type invitation, who acted, never the token.
	ev := e.lastEvent(fsm.EventInvitation)
	if ev.Actor != fsm.ActorAdmin || ev.OrgID != o.ID || ev.Detail["action"] != "sent" || ev.Detail["route"] != "POST /invitations" ||
		ev.Detail["target"] != in.ID || ev.Detail["email"] != in.Email || ev.Detail[fsm.DetailCredential] != `{"kind":"token"}` {
		t.Errorf("event %+v", ev)
	}
	e.noTokenInTrail(token)
	if page := decodeAs[auditPage](t, e.must(200, "GET", "/admin/v1/audit?type=invitation", "")); len(page.Data) != 1 || page.Data[0].Seq != ev.Seq {
		t.Errorf("GET /audit?type=invitation: %+v, want the one event", page.Data)
	}

	// Bounds of expires_in, each end.
	for _, n := range []int64{3600, 2592000} {
		w := e.must(201, "POST", "/admin/v1/invitations", fmt.Sprintf(`{"email":"b%d@example.com","organization_id":"%s","expires_in":%d}`, n, o.ID, n))
		if in := decodeAs[Invitation](t, w); in.ExpiresAt.Sub(in.CreatedAt) != time.Duration(n)*time.Second {
			t.Errorf("expires_in %d: lifetime %v", n, in.ExpiresAt.Sub(in.CreatedAt))
		}
	}
}

func TestCreateInvitationRefuses(t *testing.T) {
	e := newEnv(t, withMail)
	o := e.createOrg("acme")
	gone := e.createOrg("gone")
	e.must(204, "DELETE", "/admin/v1/organizations/"+gone.ID, "")
	member := e.createUser(`{"email":"member@example.com"}`)
	e.createMembership(member.ID, o.ID)
	const path = "/admin/v1/invitations"
	body := func(addr string, extra string) string {
		return `{"email":` + addr + `,"organization_id":"` + o.ID + `"` + extra + `}`
	}
	long := `"` + strings.Repeat("a", 243) + `@example.com"`
	e.run(t, []tc{
		{name: "no email", method: "POST", path: path, body: `{"organization_id":"` + o.ID + `"}`, status: 400, code: httpx.CodeValidation, field: "email", dcode: codeRequired},
		{name: "display name", method: "POST", path: path, body: body(`"Ann <ann@example.com>"`, ""), status: 400, code: httpx.CodeValidation, field: "email", dcode: codeInvalid},
		{name: "angle brackets", method: "POST", path: path, body: body(`"<ann@example.com>"`, ""), status: 400, code: httpx.CodeValidation, field: "email", dcode: codeInvalid},
		{name: "line break", method: "POST", path: path, body: body(`"ann@example.com\r\nBcc: x@example.net"`, ""), status: 400, code: httpx.CodeValidation, field: "email", dcode: codeInvalid},
		{name: "two addresses", method: "POST", path: path, body: body(`"ann@example.com, bob@example.com"`, ""), status: 400, code: httpx.CodeValidation, field: "email", dcode: codeInvalid},
		{name: "no at", method: "POST", path: path, body: body(`"ann"`, ""), status: 400, code: httpx.CodeValidation, field: "email", dcode: codeInvalid},
		{name: "too long", method: "POST", path: path, body: body(long, ""), status: 400, code: httpx.CodeValidation, field: "email", dcode: codeTooLong},
		{name: "email a number", method: "POST", path: path, body: body(`5`, ""), status: 400, code: httpx.CodeValidation, field: "email", dcode: "invalid_type"},
		{name: "no organization", method: "POST", path: path, body: `{"email":"ann@example.com"}`, status: 400, code: httpx.CodeValidation, field: "organization_id", dcode: codeRequired},
		{name: "organization not a uuid", method: "POST", path: path, body: `{"email":"ann@example.com","organization_id":"acme"}`, status: 400, code: httpx.CodeValidation, field: "organization_id", dcode: codeInvalidUUID},
		{name: "expires_in too short", method: "POST", path: path, body: body(`"ann@example.com"`, `,"expires_in":3599`), status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: codeOutOfRange},
		{name: "expires_in too long", method: "POST", path: path, body: body(`"ann@example.com"`, `,"expires_in":2592001`), status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: codeOutOfRange},
		{name: "expires_in zero", method: "POST", path: path, body: body(`"ann@example.com"`, `,"expires_in":0`), status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: codeOutOfRange},
		{name: "expires_in negative", method: "POST", path: path, body: body(`"ann@example.com"`, `,"expires_in":-60`), status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: codeOutOfRange},
		{name: "expires_in a duration", method: "POST", path: path, body: body(`"ann@example.com"`, `,"expires_in":"7d"`), status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: "invalid_type"},
		{name: "expires_in a fraction", method: "POST", path: path, body: body(`"ann@example.com"`, `,"expires_in":3600.5`), status: 400, code: httpx.CodeValidation, field: "expires_in", dcode: "invalid_type"},
		{name: "unknown locale", method: "POST", path: path, body: body(`"ann@example.com"`, `,"locale":"ko"`), status: 400, code: httpx.CodeValidation, field: "locale", dcode: codeInvalid},
		{name: "regional locale", method: "POST", path: path, body: body(`"ann@example.com"`, `,"locale":"de-CH"`), status: 400, code: httpx.CodeValidation, field: "locale", dcode: codeInvalid},
		{name: "locale in capitals", method: "POST", path: path, body: body(`"ann@example.com"`, `,"locale":"DE"`), status: 400, code: httpx.CodeValidation, field: "locale", dcode: codeInvalid},
		{name: "locale with a line break", method: "POST", path: path, body: body(`"ann@example.com"`, `,"locale":"de\r\nBcc: x@example.net"`), status: 400, code: httpx.CodeValidation, field: "locale", dcode: codeInvalid},
		{name: "locale a list", method: "POST", path: path, body: body(`"ann@example.com"`, `,"locale":["de"]`), status: 400, code: httpx.CodeValidation, field: "locale", dcode: "invalid_type"},
		{name: "unknown field", method: "POST", path: path, body: body(`"ann@example.com"`, `,"link":"x"`), status: 400, code: httpx.CodeValidation, field: "link", dcode: "unknown_field"},
		{name: "not JSON", method: "POST", path: path, body: `{"email":`, status: 400, code: httpx.CodeBadRequest},
		{name: "unknown organization", method: "POST", path: path, body: `{"email":"ann@example.com","organization_id":"` + unknownID + `"}`, status: 422, code: httpx.CodeValidation, field: "organization_id", dcode: "not_found"},
		{name: "deleted organization", method: "POST", path: path, body: `{"email":"ann@example.com","organization_id":"` + gone.ID + `"}`, status: 422, code: httpx.CodeValidation, field: "organization_id", dcode: "not_found"},
		{name: "a member already", method: "POST", path: path, body: body(`"MEMBER@example.com"`, ""), status: 409, code: httpx.CodeConflict, field: "email", dcode: "conflict"},
	})
	if l, _, _ := e.state.Invitations(fsm.Page{Page: 1, PageSize: 10}); len(l) != 0 {
		t.Errorf("invitations after refusals: %+v", l)
	}
	if p, _ := e.state.PendingEmails(10); len(p) != 0 {
		t.Errorf("messages after refusals: %+v", p)
	}
}

// TestWithoutMail: a provider without mail refuses what would send it,
// with a 409 that says why, and proposes nothing; the rest works.
func TestWithoutMail(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	u := e.createUser(`{"email":"ann@example.com"}`)
	in := e.invite("bob@example.com", o.ID)
	for _, rq := range [][2]string{
		{"/admin/v1/invitations", `{"email":"ann@example.com","organization_id":"` + o.ID + `"}`},
		{"/admin/v1/invitations", `not even JSON`},
		{"/admin/v1/users/" + u.ID + "/verify-email", ""},
	} {
		before := e.app.FSM.Applied()
		env := checkEnvelope(t, e.do("POST", rq[0], rq[1]), 409, httpx.CodeConflict)
		if !strings.Contains(env.Message, "sends no mail") || !strings.Contains(env.Message, "--email-outbox") {
			t.Errorf("POST %s: message %q, want it to say mail is not configured", rq[0], env.Message)
		}
		if e.app.FSM.Applied() != before {
			t.Errorf("POST %s proposed a write", rq[0])
		}
	}
	e.must(200, "GET", "/admin/v1/invitations", "")
	e.must(200, "GET", "/admin/v1/invitations/"+in.ID, "")
	e.must(204, "DELETE", "/admin/v1/invitations/"+in.ID, "")
	e.must(200, "PATCH", "/admin/v1/organizations/"+o.ID, `{"registration":{"enabled":true,"email_domains":["example.com"]}}`)
}

func TestListInvitations(t *testing.T) {
	e := newEnv(t, withMail)
	o, p := e.createOrg("acme"), e.createOrg("globex")
	create := func(addr, org string, expiresIn int) Invitation {
		t.Helper()
		return decodeAs[Invitation](t, e.must(201, "POST", "/admin/v1/invitations",
			fmt.Sprintf(`{"email":%q,"organization_id":%q,"expires_in":%d}`, addr, org, expiresIn)))
	}
	short := create("short@example.com", o.ID, 3600)
	a1 := create("a1@example.com", o.ID, 86400)
	b1 := create("b1@example.com", p.ID, 86400)
	a2 := create("a2@example.com", o.ID, 86400)
	// a2 is accepted: a new person follows its link.
	_, msg := e.sentTo(fsm.EmailInvitation, "a2@example.com")
	token, _ := e.linkOf(msg, "invite")
	newcomer := fsm.User{ID: uuid.NewString(), Email: "a2@example.com", PasswordHash: "$argon2id$x"}
	res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeUseLink, fsm.UseLink{Hash: email.HashToken(token), Purpose: fsm.LinkInvitation,
		At: e.clock.now().UTC(), NewUser: &newcomer, Membership: uuid.NewString()}))
	if err != nil || res.Err != nil {
		t.Fatalf("accept: %v %v", err, res.Err)
	}
	// And the short one expires.
	e.clock.mu.Lock()
	e.clock.t = e.clock.t.Add(2 * time.Hour)
	e.clock.mu.Unlock()

	ids := func(path string) ([]string, []string, Pagination) {
		t.Helper()
		l := decodeAs[List[Invitation]](t, e.must(200, "GET", path, ""))
		var ids, statuses []string
		for _, in := range l.Data {
			ids = append(ids, in.ID)
			statuses = append(statuses, in.Status)
		}
		return ids, statuses, l.Pagination
	}
	same := func(what string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	got, statuses, pg := ids("/admin/v1/invitations")
	same("all, newest first", got, a2.ID, b1.ID, a1.ID, short.ID)
	same("statuses", statuses, InvitationAccepted, InvitationPending, InvitationPending, InvitationExpired)
	if pg.TotalItems != 4 || pg.TotalPages != 1 {
		t.Errorf("pagination %+v", pg)
	}
	got, _, _ = ids("/admin/v1/invitations?organization_id=" + strings.ToUpper(o.ID))
	same("of O", got, a2.ID, a1.ID, short.ID)
	got, _, _ = ids("/admin/v1/invitations?status=pending")
	same("pending", got, b1.ID, a1.ID)
	got, _, _ = ids("/admin/v1/invitations?status=expired&organization_id=" + o.ID)
	same("expired of O", got, short.ID)
	got, _, pg = ids("/admin/v1/invitations?page=2&page_size=3")
	same("page 2", got, short.ID)
	if pg.TotalItems != 4 || !pg.HasPrevious || pg.HasNext {
		t.Errorf("page 2: %+v", pg)
	}
	acc := decodeAs[Invitation](t, e.must(200, "GET", "/admin/v1/invitations/"+a2.ID, ""))
	if acc.Status != InvitationAccepted || acc.AcceptedAt == nil || acc.AcceptedBy != newcomer.ID {
		t.Errorf("accepted invitation %+v", acc)
	}
	e.run(t, []tc{
		{name: "organization not a uuid", method: "GET", path: "/admin/v1/invitations?organization_id=acme", status: 400, code: httpx.CodeValidation, field: "organization_id", dcode: codeInvalidUUID},
		{name: "unknown status", method: "GET", path: "/admin/v1/invitations?status=withdrawn", status: 400, code: httpx.CodeValidation, field: "status", dcode: codeInvalid},
		{name: "bad page", method: "GET", path: "/admin/v1/invitations?page=0", status: 400, code: httpx.CodeValidation, field: "page", dcode: codeOutOfRange},
		{name: "one, unknown", method: "GET", path: "/admin/v1/invitations/" + unknownID, status: 404, code: httpx.CodeNotFound},
		{name: "one, not a uuid", method: "GET", path: "/admin/v1/invitations/x", status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
	})
}

func TestWithdrawInvitation(t *testing.T) {
	e := newEnv(t, withMail)
	o := e.createOrg("acme")
	in := decodeAs[Invitation](t, e.must(201, "POST", "/admin/v1/invitations", `{"email":"ann@example.com","organization_id":"`+o.ID+`"}`))
	_, msg := e.sentTo(fsm.EmailInvitation, "ann@example.com")
	token, l := e.linkOf(msg, "invite")

	e.must(204, "DELETE", "/admin/v1/invitations/"+strings.ToUpper(in.ID), "")
	if _, err := e.state.Link(l.Hash); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("the link after the withdrawal: %v, want gone", err)
	}
	if _, err := e.state.Invitation(in.ID); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("the invitation after the withdrawal: %v, want gone", err)
	}
	// The link no longer does anything.
	res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeUseLink, fsm.UseLink{Hash: email.HashToken(token), Purpose: fsm.LinkInvitation,
		At: e.clock.now().UTC(), NewUser: &fsm.User{ID: uuid.NewString(), Email: "ann@example.com", PasswordHash: "$argon2id$x"}, Membership: uuid.NewString()}))
	if err != nil || !errors.Is(res.Err, fsm.ErrNotFound) {
		t.Errorf("following a withdrawn link: %v %v, want not found", err, res.Err)
	}
	ev := e.lastEvent(fsm.EventInvitation)
	if ev.Detail["action"] != "withdrawn" || ev.Detail["route"] != "DELETE /invitations/{id}" || ev.Detail["target"] != strings.ToUpper(in.ID) || ev.OrgID != o.ID {
		t.Errorf("event %+v", ev)
	}
	e.noTokenInTrail(token)
	e.run(t, []tc{
		{name: "again", method: "DELETE", path: "/admin/v1/invitations/" + in.ID, status: 404, code: httpx.CodeNotFound},
		{name: "read", method: "GET", path: "/admin/v1/invitations/" + in.ID, status: 404, code: httpx.CodeNotFound},
		{name: "not a uuid", method: "DELETE", path: "/admin/v1/invitations/x", status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
	})
}

func TestVerifyEmail(t *testing.T) {
	e := newEnv(t, withMail)
	u := e.createUser(`{"email":"Ann@Example.com"}`)
	w := e.must(202, "POST", "/admin/v1/users/"+u.ID+"/verify-email", "")
	sent := decodeAs[VerifyEmailSent](t, w)
	if sent.UserID != u.ID || sent.Email != u.Email {
		t.Errorf("answer %+v", sent)
	}
	m, msg := e.sentTo(fsm.EmailVerify, "Ann@Example.com")
	if m.UserID != u.ID || !strings.Contains(msg.Text, "1 day") || !strings.Contains(msg.Text, "Ann@Example.com") {
		t.Errorf("message to %s about %q: %q, want the address and the lifetime", m.To, m.UserID, msg.Text)
	}
	first, l := e.linkOf(msg, "verify-email")
	if l.Purpose != fsm.LinkVerifyEmail || l.UserID != u.ID || l.Email != u.Email || l.ExpiresAt.Sub(l.CreatedAt) != VerifyEmailLifetime || !l.ExpiresAt.Equal(sent.ExpiresAt) {
		t.Errorf("link %+v", l)
	}
	if strings.Contains(w.Body.String(), first) {
		t.Error("the answer holds the link's token")
	}
	ev := e.lastEvent(fsm.EventVerifyEmail)
	if ev.Subject != u.ID || ev.Actor != fsm.ActorAdmin || ev.Detail["action"] != "sent" || ev.Detail["route"] != "POST /users/{id}/verify-email" ||
		ev.Detail["target"] != u.ID || ev.Detail[fsm.DetailCredential] != `{"kind":"token"}` {
		t.Errorf("event %+v", ev)
	}

	// A second request voids the first link.
	e.must(202, "POST", "/admin/v1/users/"+u.ID+"/verify-email", "")
	if _, err := e.state.Link(email.HashToken(first)); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("the first link after a second: %v, want voided", err)
	}
	_, msg = e.sentTo(fsm.EmailVerify, "Ann@Example.com")
	second, _ := e.linkOf(msg, "verify-email")
	e.noTokenInTrail(first)
	e.noTokenInTrail(second)

	// A person of a directory: their address is the directory's.
	dirPerson := fsm.User{ID: uuid.NewString(), Email: "dora@corp.example", DirectoryID: uuid.NewString(), DirectoryUID: "dora",
		CreatedAt: e.clock.now(), UpdatedAt: e.clock.now()}
	if res, err := e.app.Apply(context.Background(), fsm.MustCommand(fsm.TypeCreateUser, fsm.CreateUser{User: dirPerson})); err != nil || res.Err != nil {
		t.Fatalf("directory person: %v %v", err, res.Err)
	}
	e.run(t, []tc{
		{name: "directory person", method: "POST", path: "/admin/v1/users/" + dirPerson.ID + "/verify-email", status: 409, code: httpx.CodeConflict},
		{name: "unknown person", method: "POST", path: "/admin/v1/users/" + unknownID + "/verify-email", status: 404, code: httpx.CodeNotFound},
		{name: "not a uuid", method: "POST", path: "/admin/v1/users/ann/verify-email", status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
		{name: "GET", method: "GET", path: "/admin/v1/users/" + u.ID + "/verify-email", status: 405, code: httpx.CodeBadRequest},
	})
	if env := checkEnvelope(t, e.do("POST", "/admin/v1/users/"+dirPerson.ID+"/verify-email", ""), 409, httpx.CodeConflict); !strings.Contains(env.Message, "directory") {
		t.Errorf("directory person: message %q", env.Message)
	}
}

// greetings are a word of each language's messages.
var greetings = map[string]string{"en": "Hello", "de": "Guten Tag", "fr": "Bonjour", "es": "Hola", "ja": "こんにちは"}

// TestMailLocale: an invitation and an address check are written in the
// language the request names, English when it names none, and the
// committed message records it; any other language is refused, with
// nothing written.
func TestMailLocale(t *testing.T) {
	e := newEnv(t, withMail)
	o := e.createOrg("acme")
	if len(i18n.Tags()) != len(greetings) {
		t.Fatalf("the mail's languages %v; the test knows %d", i18n.Tags(), len(greetings))
	}
	for _, locale := range append(i18n.Tags(), "") {
		want := cmp.Or(locale, "en")
		field := ""
		if locale != "" {
			field = `,"locale":"` + locale + `"`
		}
		addr := "invited-" + want + strings.Repeat("x", len(locale)) + "@example.com"
		e.must(201, "POST", "/admin/v1/invitations", `{"email":"`+addr+`","organization_id":"`+o.ID+`"`+field+`}`)
		m, msg := e.sentTo(fsm.EmailInvitation, addr)
		if m.Locale != want || msg.Locale != want || !strings.Contains(msg.Text, greetings[want]) || !strings.Contains(msg.HTML, `<html lang="`+want+`">`) {
			t.Errorf("invitation, locale %q: record %q, message %q:\n%s", locale, m.Locale, msg.Locale, msg.Text)
		}

		for i, body := range []string{`{"locale":"` + locale + `"}`, map[bool]string{true: "", false: `{"locale":"` + locale + `"}`}[locale == ""]} {
			u := e.createUser(fmt.Sprintf(`{"email":"check-%s-%d-%d@example.com"}`, want, len(locale), i))
			e.must(202, "POST", "/admin/v1/users/"+u.ID+"/verify-email", body)
			m, msg := e.sentTo(fsm.EmailVerify, u.Email)
			if m.Locale != want || msg.Locale != want || !strings.Contains(msg.Text, greetings[want]) {
				t.Errorf("verify-email, body %q: record %q, message %q:\n%s", body, m.Locale, msg.Locale, msg.Text)
			}
		}
	}

	u := e.createUser(`{"email":"refused@example.com"}`)
	path := "/admin/v1/users/" + u.ID + "/verify-email"
	before := e.app.FSM.Applied()
	e.run(t, []tc{
		{name: "unknown locale", method: "POST", path: path, body: `{"locale":"klingon"}`, status: 400, code: httpx.CodeValidation, field: "locale", dcode: codeInvalid},
		{name: "regional locale", method: "POST", path: path, body: `{"locale":"ja-JP"}`, status: 400, code: httpx.CodeValidation, field: "locale", dcode: codeInvalid},
		{name: "locale a number", method: "POST", path: path, body: `{"locale":7}`, status: 400, code: httpx.CodeValidation, field: "locale", dcode: "invalid_type"},
		{name: "unknown field", method: "POST", path: path, body: `{"lang":"de"}`, status: 400, code: httpx.CodeValidation, field: "lang", dcode: "unknown_field"},
		{name: "not JSON", method: "POST", path: path, body: `de`, status: 400, code: httpx.CodeBadRequest},
	})
	if e.app.FSM.Applied() != before {
		t.Error("a refused verify-email proposed a write")
	}
}

func TestUpdateOrg(t *testing.T) {
	e := newEnv(t)
	o := e.createOrg("acme")
	gone := e.createOrg("gone")
	e.must(204, "DELETE", "/admin/v1/organizations/"+gone.ID, "")
	path := "/admin/v1/organizations/" + o.ID
	patch := func(body string) Org {
		t.Helper()
		return decodeAs[Org](t, e.must(200, "PATCH", path, body))
	}
	if got := decodeAs[Org](t, e.must(200, "GET", path, "")).Registration; got.Enabled || got.EmailDomains == nil || len(got.EmailDomains) != 0 {
		t.Errorf("a new organization's registration: %+v, want off with no domains", got)
	}
	if got := patch(`{"name":"Acme Corporation"}`); got.Name != "Acme Corporation" || got.Slug != "acme" {
		t.Errorf("rename: %+v", got)
	}
	got := patch(`{"registration":{"enabled":true,"email_domains":["Example.COM","bücher.de","sub.example.org."," ＥＸＡＭＰＬＥ.net ","xn--mnchen-3ya.de"]}}`)
	want := []string{"example.com", "xn--bcher-kva.de", "sub.example.org", "example.net", "xn--mnchen-3ya.de"}
	if !got.Registration.Enabled || strings.Join(got.Registration.EmailDomains, ",") != strings.Join(want, ",") || got.Name != "Acme Corporation" {
		t.Errorf("enable: %+v, want domains %v", got, want)
	}
	if s, _ := e.state.Org(o.ID); s.Registration == nil || !s.Registration.Allows("ann@xn--bcher-kva.de") {
		t.Errorf("stored %+v", s.Registration)
	}
	// Fields left out keep their values.
	if got := patch(`{"registration":{"enabled":false}}`); got.Registration.Enabled || len(got.Registration.EmailDomains) != 5 {
		t.Errorf("disable: %+v, want the domains kept", got.Registration)
	}
	if got := patch(`{"registration":{"email_domains":["example.com"]}}`); got.Registration.Enabled || strings.Join(got.Registration.EmailDomains, ",") != "example.com" {
		t.Errorf("domains only: %+v", got.Registration)
	}
	list := decodeAs[List[Org]](t, e.must(200, "GET", "/admin/v1/organizations", ""))
	for _, l := range list.Data {
		if l.ID == o.ID && strings.Join(l.Registration.EmailDomains, ",") != "example.com" {
			t.Errorf("the list's registration: %+v", l.Registration)
		}
	}
	if ev := e.lastEvent(fsm.EventAdmin); ev.Detail["action"] != "PATCH /organizations/{id}" || ev.Detail["target"] != o.ID || ev.OrgID != o.ID {
		t.Errorf("event %+v", ev)
	}

	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf(`"d%d.example.com"`, i)
	}
	reg := func(enabled bool, domains ...string) string {
		return fmt.Sprintf(`{"registration":{"enabled":%v,"email_domains":[%s]}}`, enabled, strings.Join(domains, ","))
	}
	e.run(t, []tc{
		{name: "empty body", method: "PATCH", path: path, body: `{}`, status: 400, code: httpx.CodeValidation, field: "body", dcode: codeRequired},
		{name: "empty registration", method: "PATCH", path: path, body: `{"registration":{}}`, status: 400, code: httpx.CodeValidation, field: "registration", dcode: codeRequired},
		{name: "empty name", method: "PATCH", path: path, body: `{"name":" "}`, status: 400, code: httpx.CodeValidation, field: "name", dcode: codeRequired},
		{name: "slug", method: "PATCH", path: path, body: `{"slug":"other"}`, status: 400, code: httpx.CodeValidation, field: "slug", dcode: "unknown_field"},
		{name: "enabled without domains", method: "PATCH", path: path, body: reg(true), status: 400, code: httpx.CodeValidation, field: "registration.email_domains", dcode: codeRequired},
		{name: "duplicate", method: "PATCH", path: path, body: reg(true, `"example.com"`, `"EXAMPLE.com."`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[1]", dcode: "duplicate"},
		{name: "an address", method: "PATCH", path: path, body: reg(true, `"ann@example.com"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "a leading at", method: "PATCH", path: path, body: reg(true, `"@example.com"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "a URL", method: "PATCH", path: path, body: reg(true, `"https://example.com"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "one label", method: "PATCH", path: path, body: reg(true, `"localhost"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "an IP address", method: "PATCH", path: path, body: reg(true, `"192.0.2.1"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "an IP literal", method: "PATCH", path: path, body: reg(true, `"[192.0.2.1]"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "leading hyphen", method: "PATCH", path: path, body: reg(true, `"-acme.example"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "empty label", method: "PATCH", path: path, body: reg(true, `"acme..example"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "underscore", method: "PATCH", path: path, body: reg(true, `"ac_me.example"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "space inside", method: "PATCH", path: path, body: reg(true, `"ac me.example"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "label too long", method: "PATCH", path: path, body: reg(true, `"`+strings.Repeat("a", 64)+`.example"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "name too long", method: "PATCH", path: path, body: reg(true, `"`+strings.Repeat(strings.Repeat("a", 60)+".", 5)+`example"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "bad punycode", method: "PATCH", path: path, body: reg(true, `"xn--zz.example"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "empty domain", method: "PATCH", path: path, body: reg(false, `""`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[0]", dcode: codeInvalid},
		{name: "second bad, first fine", method: "PATCH", path: path, body: reg(true, `"example.com"`, `"bad domain"`), status: 400, code: httpx.CodeValidation, field: "registration.email_domains[1]", dcode: codeInvalid},
		{name: "too many", method: "PATCH", path: path, body: reg(true, many...), status: 400, code: httpx.CodeValidation, field: "registration.email_domains", dcode: codeTooMany},
		{name: "domains not a list", method: "PATCH", path: path, body: `{"registration":{"email_domains":"example.com"}}`, status: 400, code: httpx.CodeValidation, field: "registration.email_domains", dcode: "invalid_type"},
		{name: "unknown", method: "PATCH", path: "/admin/v1/organizations/" + unknownID, body: `{"name":"X"}`, status: 404, code: httpx.CodeNotFound},
		{name: "unknown, registration", method: "PATCH", path: "/admin/v1/organizations/" + unknownID, body: reg(false), status: 404, code: httpx.CodeNotFound},
		{name: "deleted", method: "PATCH", path: "/admin/v1/organizations/" + gone.ID, body: `{"name":"X"}`, status: 404, code: httpx.CodeNotFound},
		{name: "deleted, registration", method: "PATCH", path: "/admin/v1/organizations/" + gone.ID, body: reg(false), status: 404, code: httpx.CodeNotFound},
		{name: "not a uuid", method: "PATCH", path: "/admin/v1/organizations/acme", body: `{"name":"X"}`, status: 400, code: httpx.CodeValidation, field: "id", dcode: codeInvalidUUID},
	})
	// Exactly 100 is fine.
	if got := patch(reg(true, many[:100]...)); len(got.Registration.EmailDomains) != 100 {
		t.Errorf("100 domains: got %d", len(got.Registration.EmailDomains))
	}
}

func TestNormalDomain(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"example.com", "example.com"},
		{"Example.COM.", "example.com"},
		{"bücher.de", "xn--bcher-kva.de"},
		{"BÜCHER.DE", "xn--bcher-kva.de"},
		{"faß.de", "xn--fa-hia.de"},
		{"例え.jp", "xn--r8jz45g.jp"},
		{"a-b.example", "a-b.example"},
		{"1password.com", "1password.com"},
		{"", ""},
		{".", ""},
		{"example.com..", ""},
		{"ex ample.com", ""},
		{"example", ""},
		{"example.123", ""},
		{"a-.example", ""},
		{"xn--.example", ""},
	} {
		got, err := normalDomain(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("normalDomain(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("normalDomain(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestOrgAdminInvites: an org_admin of O invites to O, lists and
// withdraws O's invitations, sets O's registration and asks O's people
// to prove their address, with the real handlers; its lists hold O's
// invitations only.
func TestOrgAdminInvites(t *testing.T) {
	s := newScene(t, withMail)
	o := orgAdmin(s.o.ID)
	must := func(status int, method, path, body string) []byte {
		t.Helper()
		w := s.as(o, method, path, body)
		if w.Code != status {
			t.Fatalf("%s %s: got %d, want %d: %s", method, path, w.Code, status, w.Body)
		}
		return w.Body.Bytes()
	}
	var in Invitation
	json.Unmarshal(must(201, "POST", "/admin/v1/invitations", `{"email":"gina@example.com","organization_id":"`+s.o.ID+`"}`), &in)
	if in.OrgID != s.o.ID {
		t.Errorf("invitation %+v", in)
	}
	ev := s.lastEvent(fsm.EventInvitation)
	if ev.OrgID != s.o.ID || ev.Detail[fsm.DetailCredential] != `{"kind":"person","sub":"00000000-0000-4000-8000-0000000000ad"}` {
		t.Errorf("event %+v", ev)
	}
	var l List[Invitation]
	json.Unmarshal(must(200, "GET", "/admin/v1/invitations", ""), &l)
	for _, x := range l.Data {
		if x.OrgID != s.o.ID {
			t.Errorf("org_admin's list holds %+v", x)
		}
	}
	if l.Pagination.TotalItems != 2 {
		t.Errorf("org_admin's list: %d, want O's 2", l.Pagination.TotalItems)
	}
	must(200, "GET", "/admin/v1/invitations?organization_id="+s.o.ID, "")
	must(200, "GET", "/admin/v1/invitations/"+s.invO.ID, "")
	must(204, "DELETE", "/admin/v1/invitations/"+s.invO.ID, "")
	// An admin adds the domain; the org_admin opens registration there.
	s.must(200, "PATCH", "/admin/v1/organizations/"+s.o.ID, `{"registration":{"enabled":false,"email_domains":["acme.example"]}}`)
	must(200, "PATCH", "/admin/v1/organizations/"+s.o.ID, `{"name":"Acme","registration":{"enabled":true,"email_domains":["acme.example"]}}`)
	must(202, "POST", "/admin/v1/users/"+s.alice.ID+"/verify-email", "")
	// An auditor reads them, and changes nothing.
	for _, rq := range [][3]string{
		{"GET", "/admin/v1/invitations", ""}, {"GET", "/admin/v1/invitations/" + s.invP.ID, ""},
	} {
		if w := s.as(asAuditor, rq[0], rq[1], rq[2]); w.Code != 200 {
			t.Errorf("auditor %s %s: %d", rq[0], rq[1], w.Code)
		}
	}
	before := s.app.FSM.Applied()
	for _, rq := range [][3]string{
		{"POST", "/admin/v1/invitations", `{"email":"x@example.com","organization_id":"` + s.p.ID + `"}`},
		{"DELETE", "/admin/v1/invitations/" + s.invP.ID, ""},
		{"PATCH", "/admin/v1/organizations/" + s.p.ID, `{"name":"X"}`},
		{"POST", "/admin/v1/users/" + s.carol.ID + "/verify-email", ""},
	} {
		checkEnvelope(t, s.as(asAuditor, rq[0], rq[1], rq[2]), 403, httpx.CodeForbidden)
	}
	if s.app.FSM.Applied() != before {
		t.Error("an auditor's write was proposed")
	}
}

// TestAdminMailToOneAddressIsLimited: invitations and address checks to one
// address count together, AdminMailLimit an hour; the next is refused with
// 429 and nothing is stored or sent, and another address is not held up.
// The window's end lets the address be written to again.
func TestAdminMailToOneAddressIsLimited(t *testing.T) {
	e := newEnv(t, withMail)
	o := e.createOrg("acme")
	u := e.createUser(`{"email":"ann@example.com"}`)
	for i := range AdminMailLimit {
		if i%2 == 0 {
			e.must(202, "POST", "/admin/v1/users/"+u.ID+"/verify-email", "")
		} else {
			e.must(201, "POST", "/admin/v1/invitations", `{"email":"ANN@example.com","organization_id":"`+o.ID+`"}`)
		}
	}
	before, _ := e.state.PendingEmails(1000)
	env := checkEnvelope(t, e.do("POST", "/admin/v1/invitations", `{"email":"ann@example.com","organization_id":"`+o.ID+`"}`), 429, httpx.CodeRateLimited)
	if !strings.Contains(env.Message, "try again later") {
		t.Errorf("message %q", env.Message)
	}
	checkEnvelope(t, e.do("POST", "/admin/v1/users/"+u.ID+"/verify-email", ""), 429, httpx.CodeRateLimited)
	after, _ := e.state.PendingEmails(1000)
	if len(after) != len(before) || len(before) != AdminMailLimit {
		t.Errorf("messages: %d before the refusals, %d after; want %d and no more", len(before), len(after), AdminMailLimit)
	}
	if list, _, _ := e.state.Invitations(fsm.Page{Page: 1, PageSize: 100}); len(list) != AdminMailLimit/2 {
		t.Errorf("invitations stored: %d, want %d (the refused one is not)", len(list), AdminMailLimit/2)
	}
	e.must(201, "POST", "/admin/v1/invitations", `{"email":"bob@example.com","organization_id":"`+o.ID+`"}`)

	e.clock.mu.Lock()
	e.clock.t = e.clock.t.Add(AdminMailWindow + time.Second)
	e.clock.mu.Unlock()
	e.must(201, "POST", "/admin/v1/invitations", `{"email":"ann@example.com","organization_id":"`+o.ID+`"}`)
}
