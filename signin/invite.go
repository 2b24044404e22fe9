package signin

// Invitations: an administrator's invitation (the admin API) sends a link
// to /invite/{token}. For an address without an account, the page asks
// for a password and creates the person, with a verified address and an
// active membership of the organization. A person who has an account
// signs in on the page, with /account's steps (the password under the
// sign-in's throttle, then the second factor they have), and accepts:
// they gain the membership, their password untouched. A used, expired or
// withdrawn link shows the invalid-link page and changes nothing.

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/webui"
)

// Steps of an invitation's page beyond /account's sign-in and
// verification.
const (
	accountInviteNew    = "invite-password" // a new person's password
	accountInviteAccept = "invite-accept"   // a signed-in person accepts
)

// invitation is the invitation an /invite page is about.
type invitation struct {
	link fsm.Link
	org  fsm.Org
	// invited is the account the invited address has (nil: none yet).
	invited *fsm.User
}

func (p *Signin) handleInvite(w http.ResponseWriter, r *http.Request) {
	a := &account{p: p, w: w, r: r, now: p.now()}
	if !a.loadInvitation(tokenHash(r.PathValue("token"))) {
		return
	}
	if ok, _ := a.load(); !ok {
		return
	}
	a.inviteReady(http.StatusOK)
}

func (p *Signin) handleInvitePost(w http.ResponseWriter, r *http.Request) {
	a := &account{p: p, w: w, r: r, now: p.now()}
	form, ok := a.handleForm()
	if !ok || !a.loadInvitation(a.step.Link) {
		return
	}
	ok, found := a.load()
	if !ok {
		return
	}
	if pickedLanguage(form) {
		// The picker of any of the invitation's pages: the step it is at,
		// again, in the language picked.
		a.pickLanguage(form)
		a.inviteReady(http.StatusOK)
		return
	}
	switch a.step.Stage {
	case accountInviteNew:
		a.inviteNew(form)
	case accountSignIn:
		if a.inv.invited == nil {
			a.inviteReady(http.StatusOK)
			return
		}
		a.signIn(form)
	case accountVerify, accountInviteAccept:
		if !found || a.sess.ID != a.step.SSOID || a.inv.invited == nil || a.user.ID != a.inv.invited.ID {
			a.inviteReady(http.StatusOK)
			return
		}
		if a.step.Stage == accountVerify {
			a.verify(form)
			return
		}
		a.inviteAccept()
	default:
		a.page(http.StatusBadRequest, a.text(authn.MsgBadRequest))
	}
}

// selfPage is the self-service view of the same request, for the pages
// the invitation shares with the other links.
func (a *account) selfPage() *selfPage {
	return &selfPage{p: a.p, w: a.w, r: a.r, now: a.now, csrf: a.csrf}
}

// loadInvitation reads the live invitation whose link's token hashes to
// hash; false when it has answered (the invalid-link page for a link
// unknown, used, expired or withdrawn, or whose organization is gone).
func (a *account) loadInvitation(hash string) bool {
	s := a.selfPage()
	l, ok := s.link(hash, fsm.LinkInvitation)
	if !ok {
		return false
	}
	st := a.p.cfg.State
	if _, err := st.Invitation(l.InvitationID); err != nil {
		if errors.Is(err, fsm.ErrNotFound) {
			s.invalidLink()
		} else {
			s.unavailable("invitation: " + err.Error())
		}
		return false
	}
	org, err := st.Org(l.OrgID)
	if err != nil || org.Status != fsm.OrgActive {
		if err == nil || errors.Is(err, fsm.ErrNotFound) {
			s.invalidLink()
		} else {
			s.unavailable("organization: " + err.Error())
		}
		return false
	}
	a.inv = &invitation{link: l, org: org}
	u, err := st.UserByEmail(l.Email)
	switch {
	case err == nil:
		a.inv.invited = &u
	case !errors.Is(err, fsm.ErrNotFound):
		s.unavailable("user by email: " + err.Error())
		return false
	}
	return true
}

// inviteReady shows the step the invitation is at: a new person's
// password; for a person with an account, the sign-in until this
// browser's session is theirs and fresh, then their second factor when
// they have one, then the button that accepts.
func (a *account) inviteReady(status int) {
	if a.inv.invited == nil {
		a.showInviteNew(status, "")
		return
	}
	if a.sess.ID == "" || a.user.ID != a.inv.invited.ID {
		a.showSignIn(status, "")
		return
	}
	if !a.inviteGate() {
		return
	}
	c, ok := a.common(accountStep{Stage: accountInviteAccept, SSOID: a.sess.ID})
	if !ok {
		return
	}
	c.Title = a.text(keyInviteTitle, a.inv.org.Name)
	a.p.cfg.UI.Confirm(a.w, status, webui.ConfirmPage{Common: c, Button: a.text(keyInviteAccept),
		Lead: a.text(keyInviteLeadMember, a.inv.org.Name, a.user.Email), LanguagePicker: true})
}

// inviteGate passes when this session may accept: the proof /account
// asks before a change (the password verified in the last 15 minutes when
// the person has one, and one of their second factors when they have
// any); a person with neither (text messages alone) needs a session of
// the last 15 minutes. Otherwise it asks for what is missing.
func (a *account) inviteGate() bool {
	f, err := a.p.cfg.State.Factors(a.user.ID)
	if err != nil && !errors.Is(err, fsm.ErrNotFound) {
		a.unavailable("factors: " + err.Error())
		return false
	}
	switch a.proofNeeded(f) {
	case proofPassword:
		a.showSignIn(http.StatusOK, "")
		return false
	case proofFactor:
		a.showVerify(http.StatusOK, f, "")
		return false
	case proofAdmin:
		if !a.fresh() {
			a.page(http.StatusForbidden, a.text(keyInviteFresh))
			return false
		}
	}
	return true
}

func (a *account) showInviteNew(status int, errMsg string) {
	c, ok := a.common(accountStep{Stage: accountInviteNew})
	if !ok {
		return
	}
	c.Title = a.text(keyInviteTitle, a.inv.org.Name)
	a.p.cfg.UI.NewPassword(a.w, status, webui.NewPasswordPage{Common: c, Email: a.inv.link.Email, Error: errMsg, Button: a.text(keyCreateAccount),
		Lead: a.text(keyInviteLeadNew, a.inv.org.Name), LanguagePicker: true})
}

// inviteEvent is the audit stamp of an accepted invitation.
func (a *account) inviteEvent(subject string) fsm.Audit {
	return fsm.Audit{Type: fsm.EventInvitation, Actor: fsm.ActorPerson, Subject: subject, OrgID: a.inv.org.ID,
		Detail: map[string]string{"action": "accepted"}}
}

// inviteNew creates the invited person: the password policy of
// /account, the node's hasher, then fsm.UseLink with the new person (a
// fresh id, the invited address, verified) and an active membership. The
// person is not signed in: the page says they can.
func (a *account) inviteNew(form url.Values) {
	if a.inv.invited != nil {
		a.inviteReady(http.StatusOK)
		return
	}
	next, _ := authn.FormValue(form, "new_password")
	if msg := newPasswordProblem(next); msg != "" {
		a.showInviteNew(http.StatusBadRequest, a.text(msg))
		return
	}
	ctx := a.r.Context()
	h, err := a.p.cfg.Hasher.Hash(ctx, next)
	if err != nil {
		a.unavailable("hash: " + err.Error())
		return
	}
	u := fsm.User{ID: uuid.NewString(), Email: a.inv.link.Email, EmailVerified: true, PasswordHash: h, CreatedAt: a.now, UpdatedAt: a.now}
	cmd := fsm.UseLink{Hash: a.inv.link.Hash, Purpose: fsm.LinkInvitation, At: a.now, NewUser: &u, Membership: uuid.NewString()}
	res, err := a.p.cfg.Applier.Apply(ctx, a.p.stamp(ctx, fsm.MustCommand(fsm.TypeUseLink, cmd), a.inviteEvent(u.ID)))
	if err == nil {
		err = res.Err
	}
	s := a.selfPage()
	var conflict *fsm.ConflictError
	switch {
	case errors.As(err, &conflict) && conflict.Field == "email":
		// The address has an account by now: that person signs in.
		if other, err := a.p.cfg.State.UserByEmail(a.inv.link.Email); err == nil {
			a.inv.invited = &other
			a.inviteReady(http.StatusConflict)
			return
		}
		s.message(http.StatusConflict, a.text(keyAccountExistsTitle), a.text(keyAccountExists), PathAccount, a.text(keySignIn))
		return
	case !s.useLinkFailed(err):
		return
	}
	a.p.log.Info("invitation accepted", "user_id", u.ID, "organization_id", a.inv.org.ID, "new", true)
	s.message(http.StatusOK, a.text(keyAccountMadeTitle), a.text(keyInviteMade, a.inv.org.Name), PathAccount, a.text(keyToAccount))
}

// inviteAccept gives the signed-in person the membership: fsm.UseLink
// with their id, which the apply refuses (ErrMismatch) unless their
// address is the invited one.
func (a *account) inviteAccept() {
	if !a.inviteGate() {
		return
	}
	ctx := a.r.Context()
	cmd := fsm.UseLink{Hash: a.inv.link.Hash, Purpose: fsm.LinkInvitation, At: a.now, UserID: a.user.ID, Membership: uuid.NewString()}
	res, err := a.p.cfg.Applier.Apply(ctx, a.p.stamp(ctx, fsm.MustCommand(fsm.TypeUseLink, cmd), a.inviteEvent(a.user.ID)))
	if err == nil {
		err = res.Err
	}
	s := a.selfPage()
	var conflict *fsm.ConflictError
	switch {
	case errors.Is(err, fsm.ErrMismatch):
		s.page(http.StatusForbidden, a.text(keyInviteOtherTitle), a.text(keyInviteOther))
		return
	case errors.As(err, &conflict) && conflict.Field == "membership":
		s.page(http.StatusConflict, a.text(keyInviteSuspendedTitle), a.text(keyInviteSuspended, a.inv.org.Name))
		return
	case !s.useLinkFailed(err):
		return
	}
	a.p.log.Info("invitation accepted", "user_id", a.user.ID, "organization_id", a.inv.org.ID, "new", false)
	s.message(http.StatusOK, a.text(keyInviteJoinedTitle, a.inv.org.Name), a.text(keyInviteJoined), PathAccount, a.text(keyToAccount))
}
