package signin

// A forgotten password: /password/forgot takes an address and answers
// the same page, with the same status, whether or not an account has it;
// the link's page, /password/reset/{token}, sets a new password.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/webui"
)

func (p *Signin) handleForgot(w http.ResponseWriter, r *http.Request) {
	s := p.selfPage(w, r)
	s.showForgot(http.StatusOK, "", "", s.openContext())
}

func (s *selfPage) showForgot(status int, typed, errMsg string, ctx *signinContext) {
	c, ok := s.common(selfStep{Stage: stageForgot, Ctx: ctx}, PathForgot, s.text(keyForgotTitle))
	if !ok {
		return
	}
	s.p.cfg.UI.Address(s.w, status, webui.AddressPage{Common: c, Lead: s.text(keyForgotLead), Email: typed, Error: errMsg,
		Button: s.text(keySendLink), BackURL: backURL(ctx), BackText: s.text(keyBackToSignIn), LanguagePicker: true})
}

func (p *Signin) handleForgotPost(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s := p.selfPage(w, r)
	form, ok := s.form(stageForgot)
	if !ok {
		return
	}
	if pickedLanguage(form) {
		s.pickLanguage(form)
		s.showForgot(http.StatusOK, "", "", s.step.Ctx)
		return
	}
	typed, _ := authn.FormValue(form, "email")
	typed = strings.TrimSpace(typed)
	if !plausibleAddress(typed) {
		// What was typed cannot be anyone's address: that says nothing of
		// any account.
		s.showForgot(http.StatusBadRequest, typed, s.text(keyBadAddress), s.step.Ctx)
		return
	}
	clientID := ""
	if s.step.Ctx != nil {
		clientID = s.step.Ctx.ClientID
	}
	err := p.requestReset(r.Context(), s.frame(s.step.Ctx), typed, remoteIP(r), clientID)
	p.waitFloor(r.Context(), start)
	if err != nil {
		s.unavailable("password reset: " + err.Error())
		return
	}
	s.message(http.StatusOK, s.text(keyCheckEmail), s.text(keyForgotSent), backURL(s.step.Ctx), s.text(keyBackToSignIn))
}

// plausibleAddress reports whether typed may be an address at all: one
// '@' with something on each side, at most MaxEmailLen bytes, no space or
// control character (so no CR or LF).
func plausibleAddress(typed string) bool {
	at := strings.IndexByte(typed, '@')
	if at < 1 || at == len(typed)-1 || len(typed) > authn.MaxEmailLen {
		return false
	}
	for _, r := range typed {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// requestReset is one request of the forgotten-password page (its frame
// f: the mail is in its language and names its site) for the address
// typed, from the client address ip: exactly one fsm.IssueLink,
// whose Rules (mailRules: per mailbox and per client address, every kind
// of message together) are counted before anything is stored or sent. A local person with a password gets
// a password_reset link (30 minutes) and its message; a person of a
// directory a message that tells them to use it; an unknown address or a
// person without a password neither, but the message is composed and
// sealed all the same and dropped, so that the work and the write are
// the same. A locked key (in this node's state, or in the apply) is
// answered like the rest. The error is only for the store or the cluster.
//
// The audit event (password_reset, action requested) names the person
// when an account has the address, and otherwise nothing but the client
// address it came from; detail.message says what was sent (link,
// directory, none). The token is in no event and no log line.
func (p *Signin) requestReset(ctx context.Context, f webui.Frame, typed, ip, clientID string) error {
	now := p.now()
	// The address typed is counted: a person found has it, in another
	// case at most, which folds alike (email.Mailbox).
	rules := mailRules(typed, ip)
	if !p.localLock(rules, now).IsZero() {
		// Refused before any write, as a locked sign-in is: the lock
		// counts the address typed, known or not, so it tells nothing.
		p.log.Info("password reset: limit reached")
		return nil
	}
	// The address may have become someone's through another node a
	// moment ago: read past every acknowledged write first (on every
	// request alike, so that it tells nothing).
	p.catchUp(ctx)
	u, err := p.cfg.State.UserByEmail(typed)
	found := err == nil
	if err != nil && !errors.Is(err, fsm.ErrNotFound) {
		return err
	}
	token, hash, err := email.NewToken()
	if err != nil {
		return err
	}
	d := email.Data{Link: p.linkURL(PathReset, token), Expires: resetTTL}
	template, to, sent := email.PasswordReset, typed, "none"
	var link *fsm.Link
	switch {
	case found && u.DirectoryID != "":
		template, to, sent = email.PasswordResetDirectory, u.Email, "directory"
		d.Link, d.Directory = "", p.directoryName(f.Lang, u.DirectoryID)
	case found && u.PasswordHash != "":
		to, sent = u.Email, "link"
		link = &fsm.Link{Hash: hash, Purpose: fsm.LinkPasswordReset, UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(resetTTL)}
	}
	msg, err := p.outgoing(f, template, to, u.ID, d)
	if err != nil && sent != "none" {
		p.log.Error("password reset: compose the message", "user_id", u.ID, "err", err)
		sent, link = "none", nil
	}
	cmd := fsm.IssueLink{Rules: rules, At: now}
	if sent != "none" {
		cmd.Link, cmd.Email = link, []fsm.OutgoingEmail{msg}
	}
	ev := fsm.Audit{Type: fsm.EventPasswordReset, Actor: fsm.ActorPerson, ClientID: clientID,
		Detail: map[string]string{"action": "requested", "message": sent}}
	if found {
		ev.Subject = u.ID
	}
	return p.issueQuietly(ctx, "password reset", cmd, ev)
}

// directoryName names the directory directoryID for a message in the
// language lang.
func (p *Signin) directoryName(lang language.Tag, directoryID string) string {
	if d, err := p.cfg.State.Directory(directoryID); err == nil && d.Name != "" {
		return d.Name
	}
	return p.cfg.UI.Text(lang, keyMailDirectory)
}

// handleReset is the reset link's page: a new-password form, or the
// invalid-link page.
func (p *Signin) handleReset(w http.ResponseWriter, r *http.Request) {
	s := p.selfPage(w, r)
	hash := tokenHash(r.PathValue("token"))
	l, ok := s.link(hash, fsm.LinkPasswordReset)
	if !ok {
		return
	}
	u, ok := s.resetPerson(l)
	if !ok {
		return
	}
	s.showReset(http.StatusOK, hash, u.Email, "")
}

// resetPerson is the local person of a reset link; ok is false when it
// has answered.
func (s *selfPage) resetPerson(l fsm.Link) (fsm.User, bool) {
	u, err := s.p.cfg.State.User(l.UserID)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		s.invalidLink()
		return u, false
	case err != nil:
		s.unavailable("user: " + err.Error())
		return u, false
	case u.DirectoryID != "":
		s.invalidLink()
		return u, false
	}
	return u, true
}

func (s *selfPage) showReset(status int, hash, address, errMsg string) {
	c, ok := s.common(selfStep{Stage: stageReset, Hash: hash, Ctx: s.step.Ctx}, PathReset, s.text(keyResetTitle))
	if !ok {
		return
	}
	s.p.cfg.UI.NewPassword(s.w, status, webui.NewPasswordPage{Common: c, Lead: s.text(keyResetLead), Email: address, Error: errMsg, Button: s.text(keyResetSubmit),
		LanguagePicker: true})
}

// handleResetPost sets the new password: the policy of /account's
// password change, the node's hasher, then fsm.UseLink, which in one
// apply replaces the hash, voids the person's other reset links and ends
// every session of theirs (each app session with its back-channel
// logout). The person is not signed in: the next sign-in asks for the
// second factor they have, as any other does.
func (p *Signin) handleResetPost(w http.ResponseWriter, r *http.Request) {
	s := p.selfPage(w, r)
	form, ok := s.form(stageReset)
	if !ok {
		return
	}
	l, ok := s.link(s.step.Hash, fsm.LinkPasswordReset)
	if !ok {
		return
	}
	u, ok := s.resetPerson(l)
	if !ok {
		return
	}
	if pickedLanguage(form) {
		s.pickLanguage(form)
		s.showReset(http.StatusOK, s.step.Hash, u.Email, "")
		return
	}
	next, _ := authn.FormValue(form, "new_password")
	if msg := newPasswordProblem(next); msg != "" {
		s.showReset(http.StatusBadRequest, s.step.Hash, u.Email, s.text(msg))
		return
	}
	ctx := r.Context()
	h, err := p.cfg.Hasher.Hash(ctx, next)
	if err != nil {
		s.unavailable("hash: " + err.Error())
		return
	}
	cmd := fsm.UseLink{Hash: l.Hash, Purpose: fsm.LinkPasswordReset, At: s.now, PasswordHash: h}
	res, err := p.cfg.Applier.Apply(ctx, p.stamp(ctx, fsm.MustCommand(fsm.TypeUseLink, cmd),
		fsm.Audit{Type: fsm.EventPasswordReset, Actor: fsm.ActorPerson, Subject: u.ID, Detail: map[string]string{"action": "completed"}}))
	if err == nil {
		err = res.Err
	}
	if errors.Is(err, fsm.ErrMismatch) {
		// The person's password is their directory's by now.
		s.invalidLink()
		return
	}
	if !s.useLinkFailed(err) {
		return
	}
	used := res.Value.(fsm.LinkUsed)
	p.log.Info("password reset", "user_id", u.ID, "app_sessions_ended", len(used.Ended.Apps))
	s.message(http.StatusOK, s.text(keyPasswordSetTitle), s.text(keyPasswordSet), PathAccount, s.text(keySignIn))
}
