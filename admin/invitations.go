package admin

import (
	"cmp"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Invitations (docs/operators/invitations.md). POST /invitations asks an
// address to join an organization: the message with its link
// {issuer}/invite/{token} is committed with the invitation, and the link
// works once, until expires_at or until the invitation is withdrawn
// (DELETE, which deletes it and its link). The invitation stays listed
// until the state's reap clears it, a while after it was accepted or
// expired.

// Invitation statuses.
const (
	InvitationPending  = "pending"
	InvitationAccepted = "accepted"
	InvitationExpired  = "expired"
)

// Invitation is an invitation as the API shows it; never its link.
type Invitation struct {
	ID         string     `json:"id"`
	Email      string     `json:"email"`
	OrgID      string     `json:"organization_id"`
	Status     string     `json:"status"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	AcceptedAt *time.Time `json:"accepted_at,omitempty"`
	AcceptedBy string     `json:"accepted_by,omitempty"` // the person who followed the link
}

// invitationStatus is in's status at now.
func invitationStatus(in fsm.Invitation, now time.Time) string {
	switch {
	case !in.AcceptedAt.IsZero():
		return InvitationAccepted
	case !now.Before(in.ExpiresAt):
		return InvitationExpired
	}
	return InvitationPending
}

func invitationOut(in fsm.Invitation, now time.Time) Invitation {
	out := Invitation{ID: in.ID, Email: in.Email, OrgID: in.OrgID, Status: invitationStatus(in, now),
		CreatedAt: in.CreatedAt, ExpiresAt: in.ExpiresAt, AcceptedBy: in.AcceptedBy}
	if !in.AcceptedAt.IsZero() {
		at := in.AcceptedAt
		out.AcceptedAt = &at
	}
	return out
}

// invitationBody is the body of POST /invitations. ExpiresIn is seconds,
// as an API key's; Locale the language of the message (mailLocale).
type invitationBody struct {
	Email     string `json:"email"`
	OrgID     string `json:"organization_id"`
	ExpiresIn *int64 `json:"expires_in"`
	Locale    string `json:"locale"`
}

// check validates the body; it returns the organization id in canonical
// form and the lifetime, and sets Locale to the message's language.
func (b *invitationBody) check() (string, time.Duration, problems) {
	var p problems
	p.email("email", b.Email)
	org := p.uuid("organization_id", b.OrgID)
	b.Locale = p.mailLocale("locale", b.Locale)
	life := DefaultInvitationLifetime
	if b.ExpiresIn != nil {
		lo, hi := int64(MinInvitationLifetime/time.Second), int64(MaxInvitationLifetime/time.Second)
		if n := *b.ExpiresIn; n < lo || n > hi {
			p.add("expires_in", codeOutOfRange, "must be a number of seconds from %d (an hour) to %d (30 days)", lo, hi)
		} else {
			life = time.Duration(n) * time.Second
		}
	}
	return org, life, p
}

// createInvitation is POST /invitations.
func (a *api) createInvitation(w http.ResponseWriter, r *http.Request) {
	if !a.mailReady(w, r) {
		return
	}
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var b invitationBody
	if !decode(w, r, &b) {
		return
	}
	orgID, life, p := b.check()
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	// A retry is answered before the checks below: the person may have
	// accepted the invitation since (a member now), and no second
	// message goes out.
	id := a.createID(r, key)
	r, rp := withReplay(r, &replay{key: key, id: id, read: func() (any, bool, error) {
		got, err := a.State.Invitation(id)
		return invitationOut(got, a.now()), strings.EqualFold(got.Email, b.Email) && got.OrgID == orgID, err
	}})
	if a.replayed(w, r, rp) {
		return
	}
	o, err := a.State.Org(orgID)
	switch {
	case errors.Is(err, fsm.ErrNotFound) || (err == nil && o.Status == fsm.OrgDeleted):
		httpx.WriteError(w, r, http.StatusUnprocessableEntity, httpx.CodeValidation, "a referenced record does not exist",
			httpx.Detail{Field: "organization_id", Message: "no such organization", Code: "not_found"})
		return
	case err != nil:
		a.unavailable(w, r, "read state", err)
		return
	}
	if member, err := a.isMember(b.Email, orgID); err != nil {
		a.unavailable(w, r, "read state", err)
		return
	} else if member {
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict, "the address's person is a member of this organization already",
			httpx.Detail{Field: "email", Message: "already a member (active or suspended)", Code: "conflict"})
		return
	}
	token, hash, ok := a.newToken(w, r)
	if !ok {
		return
	}
	out, ok := a.sealed(w, r, email.Invitation, b.Locale, b.Email, "", email.Data{Link: a.linkURL("invite", token), OrgName: o.Name, Expires: life})
	if !ok {
		return
	}
	now := a.now()
	in := fsm.Invitation{ID: id, Email: b.Email, OrgID: orgID, LinkHash: hash, CreatedAt: now, ExpiresAt: now.Add(life)}
	r = withTouch(r, orgID, in.ID)
	ev := mailEvent(r, fsm.EventInvitation, "sent", map[string]string{"email": b.Email})
	res, ok := a.commitCreate(w, r, fsm.StampIn(r.Context(), fsm.MustCommand(fsm.TypeCreateInvitation,
		fsm.CreateInvitation{Invitation: in, Email: out, At: now, Rules: adminMailRules(b.Email)}), a.now(), ev), rp)
	if !ok {
		return
	}
	stored, err := valueOr(res, func() (fsm.Invitation, error) { return a.State.Invitation(in.ID) })
	if err != nil {
		stored = in
	}
	httpx.WriteJSON(w, http.StatusCreated, invitationOut(stored, now))
}

// isMember reports whether the person with address addr (any case) holds
// a membership, active or suspended, in org: an invitation would only
// send them a link that changes nothing.
func (a *api) isMember(addr, org string) (bool, error) {
	u, err := a.State.UserByEmail(addr)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	_, err = a.State.MembershipOf(u.ID, org)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// listInvitations is GET /invitations: newest first, optionally those of
// one organization (organization_id) or of one status (status); an
// org_admin's, those of its organization.
func (a *api) listInvitations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var p problems
	org := ""
	if q.Has("organization_id") {
		org = p.uuid("organization_id", q.Get("organization_id"))
	}
	status := q.Get("status")
	if q.Has("status") {
		p.oneOf("status", status, InvitationPending, InvitationAccepted, InvitationExpired)
	}
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	if scope := orgScope(r); scope != "" {
		org = scope // authorize refused any other organization
	}
	now := a.now()
	read := func(pg fsm.Page) ([]fsm.Invitation, int, error) {
		// Every invitation is read and sorted: they are few (each is
		// reaped a while after it is accepted or expires).
		all, _, err := a.State.Invitations(fsm.Page{Page: 1, PageSize: math.MaxInt32})
		if err != nil {
			return nil, 0, err
		}
		all = slices.DeleteFunc(all, func(in fsm.Invitation) bool {
			return (org != "" && in.OrgID != org) || (status != "" && invitationStatus(in, now) != status)
		})
		slices.SortFunc(all, func(x, y fsm.Invitation) int {
			return cmp.Or(y.CreatedAt.Compare(x.CreatedAt), cmp.Compare(x.ID, y.ID))
		})
		start := min((pg.Page-1)*pg.PageSize, len(all))
		end := min(start+pg.PageSize, len(all))
		return all[start:end], len(all), nil
	}
	serveList(a, w, r, read, func(in fsm.Invitation) Invitation { return invitationOut(in, now) })
}

// getInvitation is GET /invitations/{id}.
func (a *api) getInvitation(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	in, err := a.State.Invitation(id)
	if err != nil {
		a.readFailed(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, invitationOut(in, a.now()))
}

// deleteInvitation is DELETE /invitations/{id}: the invitation is
// withdrawn and its link stops working on every node with this write.
func (a *api) deleteInvitation(w http.ResponseWriter, r *http.Request) {
	id, ok := pathUUID(w, r)
	if !ok {
		return
	}
	ev := mailEvent(r, fsm.EventInvitation, "withdrawn", nil)
	if _, ok := a.applyAs(w, r, fsm.MustCommand(fsm.TypeDeleteInvitation, fsm.DeleteInvitation{ID: id}), ev); !ok {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// VerifyEmailSent is the answer of POST /users/{id}/verify-email: to
// which address the link went, and until when it works.
type VerifyEmailSent struct {
	UserID    string    `json:"user_id"`
	Email     string    `json:"email"`
	ExpiresAt time.Time `json:"expires_at"`
}

// verifyEmailBody is the optional body of POST /users/{id}/verify-email:
// the language of the message (mailLocale).
type verifyEmailBody struct {
	Locale string `json:"locale"`
}

// verifyEmail is POST /users/{id}/verify-email: a link to prove the
// person's current address ({issuer}/verify-email/{token}, 24 hours)
// goes to that address; following it sets email_verified. A newer link
// voids the person's older ones (fsm.IssueLink). A person of a directory
// is refused: their address is the directory's to vouch for. The body
// is optional: none is English.
func (a *api) verifyEmail(w http.ResponseWriter, r *http.Request) {
	if !a.mailReady(w, r) {
		return
	}
	var b verifyEmailBody
	if r.ContentLength != 0 && !decode(w, r, &b) {
		return
	}
	var p problems
	locale := p.mailLocale("locale", b.Locale)
	if len(p) > 0 {
		writeInvalid(w, r, p)
		return
	}
	u, ok := a.pathUser(w, r)
	if !ok {
		return
	}
	if u.DirectoryID != "" {
		httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict,
			"this person signs in with a directory, whose address is the directory's: change or confirm it there")
		return
	}
	token, hash, ok := a.newToken(w, r)
	if !ok {
		return
	}
	out, ok := a.sealed(w, r, email.VerifyEmail, locale, u.Email, u.ID, email.Data{Link: a.linkURL("verify-email", token), Email: u.Email, Expires: VerifyEmailLifetime})
	if !ok {
		return
	}
	now := a.now()
	link := fsm.Link{Hash: hash, Purpose: fsm.LinkVerifyEmail, UserID: u.ID, Email: u.Email, CreatedAt: now, ExpiresAt: now.Add(VerifyEmailLifetime)}
	ev := mailEvent(r, fsm.EventVerifyEmail, "sent", nil)
	ev.Subject = u.ID
	if _, ok := a.applyAs(w, r, fsm.MustCommand(fsm.TypeIssueLink, fsm.IssueLink{Rules: adminMailRules(u.Email), Link: &link, Email: []fsm.OutgoingEmail{out}, At: now}), ev); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusAccepted, VerifyEmailSent{UserID: u.ID, Email: u.Email, ExpiresAt: link.ExpiresAt})
}

// Administrators' messages to one address (invitations and address
// checks together) are limited, so that no administrator, an org_admin
// least of all, can flood a mailbox: AdminMailLimit an AdminMailWindow,
// counted in the write that would send the next (429 RATE_LIMITED).
const (
	AdminMailLimit  = 5
	AdminMailWindow = time.Hour
)

// adminMailRules is the throttle of administrators' messages to addr: a
// key made of the hash of the mailbox it reaches (email.MailboxKey: case,
// subaddresses and gmail's dots folded, so "ann+1@" and "ann+2@" are one
// count), so the throttle table holds no address. It is kept apart from
// the limits of the people's own pages (package signin): a stranger's
// requests must not block an administrator's invitation, nor an
// administrator's onboarding use up a person's own resets.
func adminMailRules(addr string) []fsm.ThrottleRule {
	return []fsm.ThrottleRule{{Key: "admin-mail:" + email.MailboxKey(addr), Limit: AdminMailLimit, Window: AdminMailWindow, Lockout: AdminMailWindow}}
}
