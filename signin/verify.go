package signin

// Verified addresses: a person asks on /account for a new address (or to
// confirm the one they have), a verify_email link goes to it, and its
// page, /verify-email/{token}, makes it the account's, verified, once the
// person confirms with a POST. The old address stays until then, and is
// told of the change.

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/webui"
)

// handleVerifyEmail is the link's page: a button that confirms (a GET
// changes nothing), or the invalid-link page.
func (p *Signin) handleVerifyEmail(w http.ResponseWriter, r *http.Request) {
	s := p.selfPage(w, r)
	hash := tokenHash(r.PathValue("token"))
	l, ok := s.link(hash, fsm.LinkVerifyEmail)
	if !ok {
		return
	}
	u, ok := s.linkPerson(l)
	if !ok {
		return
	}
	s.showVerify(hash, l, u)
}

// showVerify is the link's page for link l of person u, with the language
// picker: choosing a language shows it again and confirms nothing.
func (s *selfPage) showVerify(hash string, l fsm.Link, u fsm.User) {
	c, ok := s.common(selfStep{Stage: stageVerifyEmail, Hash: hash, Ctx: s.step.Ctx}, PathVerify, s.text(keyVerifyEmailTitle))
	if !ok {
		return
	}
	lead := s.text(keyVerifyLead, l.Email)
	if !strings.EqualFold(u.Email, l.Email) {
		// Whoever follows the link sees whose account would take the
		// address: a person sent a link they did not ask for can tell it
		// is not theirs.
		lead = s.text(keyVerifyLeadOther, l.Email, u.Email)
	}
	s.p.cfg.UI.Confirm(s.w, http.StatusOK, webui.ConfirmPage{Common: c, Lead: lead, Button: s.text(keyConfirmSubmit), LanguagePicker: true})
}

// linkPerson is the person of a link; ok is false when it has answered.
func (s *selfPage) linkPerson(l fsm.Link) (fsm.User, bool) {
	u, err := s.p.cfg.State.User(l.UserID)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		s.invalidLink()
		return u, false
	case err != nil:
		s.unavailable("user: " + err.Error())
		return u, false
	}
	return u, true
}

// handleVerifyEmailPost follows the link: fsm.UseLink makes the address
// the person's, verified; when it replaces another, the same apply
// commits an email_changed message to the old one, counted against the
// old mailbox just before (countNotice: a 429 page while it is full, the
// address unchanged).
func (p *Signin) handleVerifyEmailPost(w http.ResponseWriter, r *http.Request) {
	s := p.selfPage(w, r)
	form, ok := s.form(stageVerifyEmail)
	if !ok {
		return
	}
	l, ok := s.link(s.step.Hash, fsm.LinkVerifyEmail)
	if !ok {
		return
	}
	u, ok := s.linkPerson(l)
	if !ok {
		return
	}
	if pickedLanguage(form) {
		s.pickLanguage(form)
		s.showVerify(s.step.Hash, l, u)
		return
	}
	cmd := fsm.UseLink{Hash: l.Hash, Purpose: fsm.LinkVerifyEmail, At: s.now}
	ctx := r.Context()
	if !strings.EqualFold(u.Email, l.Email) {
		m, err := p.outgoing(s.frame(nil), email.EmailChanged, u.Email, u.ID, email.Data{Email: l.Email})
		if err != nil {
			s.unavailable("compose email_changed: " + err.Error())
			return
		}
		// The notice counts against the old address's mailbox first; it
		// is never dropped, so the change waits while that mailbox has
		// had its messages (countNotice).
		switch err := p.countNotice(ctx, u.Email, s.now); {
		case errors.Is(err, errNoticeLimit):
			p.log.Info("address change: the old address has had its messages; the change waits", "user_id", u.ID)
			s.page(http.StatusTooManyRequests, s.text(keyNoticeLimitTitle), s.text(keyNoticeLimit))
			return
		case err != nil:
			s.unavailable("count email_changed: " + err.Error())
			return
		}
		cmd.Email = []fsm.OutgoingEmail{m}
	}
	res, err := p.cfg.Applier.Apply(ctx, p.stamp(ctx, fsm.MustCommand(fsm.TypeUseLink, cmd),
		fsm.Audit{Type: fsm.EventVerifyEmail, Actor: fsm.ActorPerson, Subject: u.ID, Detail: map[string]string{"action": "completed"}}))
	if err == nil {
		err = res.Err
	}
	var conflict *fsm.ConflictError
	if errors.As(err, &conflict) {
		s.page(http.StatusConflict, s.text(keyEmailTakenTitle), s.text(keyEmailTaken))
		return
	}
	if !s.useLinkFailed(err) {
		return
	}
	p.log.Info("address verified", "user_id", u.ID, "changed", len(cmd.Email) > 0)
	s.message(http.StatusOK, s.text(keyEmailVerifiedTitle), s.text(keyEmailVerified, l.Email), PathAccount, s.text(keyToAccount))
}

// changeEmail is /account's new address (or, typed again, the unverified
// address the person has): one fsm.IssueLink of a verify_email link, 24
// hours, and its message to that address, counted in the apply before
// anything is stored or sent: at most 5 an hour per person (a 429 and a
// message: the person's own requests), and the limits of every message
// to a mailbox and from a client address (mailRules), which are refused
// silently: the page says the link was sent, so it tells nothing of the
// mail others caused. The address stays the old one until the link is
// followed. An address another account has gets no link and no message,
// is counted the same, and the page says the same: /account does not
// tell whose addresses exist, in its page or in its time (answerFloor).
func (a *account) changeEmail(form url.Values) {
	start := time.Now()
	if a.user.DirectoryID != "" {
		a.showHome(http.StatusBadRequest, "", a.text(keyEmailDirectory))
		return
	}
	typed, ok := authn.FormValue(form, "new_email")
	if !ok {
		a.showHome(http.StatusBadRequest, "", a.text(keyBadAddress))
		return
	}
	addr, problem := normalizeAddress(typed)
	if problem != "" {
		a.showHome(http.StatusBadRequest, "", a.text(problem))
		return
	}
	same := strings.EqualFold(addr, a.user.Email)
	if same && a.user.EmailVerified {
		a.showHome(http.StatusBadRequest, "", a.text(keyEmailSame))
		return
	}
	if same {
		addr = a.user.Email
	}
	person := []fsm.ThrottleRule{throttleEmailChange.rule(a.user.ID)}
	if !a.p.localLock(person, a.now).IsZero() {
		a.showHome(http.StatusTooManyRequests, "", a.text(keyEmailLimit))
		return
	}
	rules := append(person, mailRules(addr, remoteIP(a.r))...)
	if ok := a.requestVerifyLink(addr, same, rules); !ok {
		return
	}
	a.p.waitFloor(a.r.Context(), start) // a taken address, or one refused, must not answer sooner
	if same {
		a.showHome(http.StatusOK, a.text(keyEmailConfirm, addr), "")
		return
	}
	a.showHome(http.StatusOK, a.text(keyEmailPending, addr, a.user.Email), "")
}

// requestVerifyLink makes changeEmail's write for addr under rules (the
// person's key first); false when it has answered (an error, or the
// person's own limit). A mailbox's or client address's limit is only
// logged: the caller answers as if the link was sent.
func (a *account) requestVerifyLink(addr string, same bool, rules []fsm.ThrottleRule) bool {
	if !a.p.localLock(rules[1:], a.now).IsZero() {
		a.p.log.Info("address change: mail limit reached", "user_id", a.user.ID)
		return true
	}
	taken := false
	if !same {
		other, err := a.p.cfg.State.UserByEmail(addr)
		switch {
		case err == nil:
			taken = other.ID != a.user.ID
		case !errors.Is(err, fsm.ErrNotFound):
			a.unavailable("user by email: " + err.Error())
			return false
		}
	}
	cmd := fsm.IssueLink{Rules: rules, At: a.now}
	if !taken {
		token, hash, err := email.NewToken()
		var m fsm.OutgoingEmail
		if err == nil {
			m, err = a.p.outgoing(a.frame(), email.VerifyEmail, addr, a.user.ID, email.Data{Link: a.p.linkURL(PathVerify, token), Email: addr, Expires: verifyTTL})
		}
		if err != nil {
			a.unavailable("verify link: " + err.Error())
			return false
		}
		cmd.Link = &fsm.Link{Hash: hash, Purpose: fsm.LinkVerifyEmail, UserID: a.user.ID, Email: addr, CreatedAt: a.now, ExpiresAt: a.now.Add(verifyTTL)}
		cmd.Email = []fsm.OutgoingEmail{m}
	}
	res, locked, err := a.p.issue(a.r.Context(), cmd, fsm.Audit{Type: fsm.EventVerifyEmail, Actor: fsm.ActorPerson, Subject: a.user.ID,
		Detail: map[string]string{"action": "requested"}})
	switch {
	case err != nil:
		a.unavailable("issue verify link: " + err.Error())
		return false
	case locked && !a.p.localLock(rules[:1], a.now).IsZero():
		// The person's own key: the apply refused it, and this node's
		// state, which has applied the refusal, holds its lock.
		a.showHome(http.StatusTooManyRequests, "", a.text(keyEmailLimit))
		return false
	case locked:
		a.p.log.Info("address change: mail limit reached", "user_id", a.user.ID)
	case res.Err != nil:
		a.unavailable("issue verify link: " + res.Err.Error())
		return false
	}
	return true
}
