package signin

// Registration: when the organization of a sign-in lets people register,
// the sign-in page links to /register, which takes an address inside the
// organization's email_domains and sends a registration link (or, to an
// address that has an account, a message pointing to the reset instead;
// the page says the same). The link's page asks for a password, creates
// the person with a verified address and an active membership, signs
// them in and goes on with the authorization request they started from.

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/webui"
)

// handleRegister is the registration page of a sign-in's context (the r
// parameter of the sign-in page's link).
func (p *Signin) handleRegister(w http.ResponseWriter, r *http.Request) {
	s := p.selfPage(w, r)
	ctx := s.openContext()
	org, ok := s.registrationOf(ctx)
	if !ok {
		return
	}
	s.showRegister(http.StatusOK, "", "", ctx, org)
}

// registrationOf is the organization ctx registers into; ok is false when
// it has answered (no context: 400; registration closed: 403).
func (s *selfPage) registrationOf(ctx *signinContext) (fsm.Org, bool) {
	if ctx == nil || ctx.OrgID == "" {
		s.page(http.StatusBadRequest, "", s.text(keyRegisterStart))
		return fsm.Org{}, false
	}
	org, ok := s.p.registrationOpen(ctx.OrgID)
	if !ok {
		s.page(http.StatusForbidden, s.text(keyRegisterOffTitle), s.text(keyRegisterOff))
		return fsm.Org{}, false
	}
	return org, true
}

func (s *selfPage) showRegister(status int, typed, errMsg string, ctx *signinContext, org fsm.Org) {
	c, ok := s.common(selfStep{Stage: stageRegister, Ctx: ctx}, PathRegister, s.text(keyRegisterTitle))
	if !ok {
		return
	}
	s.p.cfg.UI.Address(s.w, status, webui.AddressPage{Common: c, Lead: s.text(keyRegisterLead, org.Name), Email: typed, Error: errMsg,
		Button: s.text(keySendLink), BackURL: backURL(ctx), BackText: s.text(keyBackToSignIn), LanguagePicker: true})
}

func (p *Signin) handleRegisterPost(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s := p.selfPage(w, r)
	form, ok := s.form(stageRegister, stageRegisterPassword)
	if !ok {
		return
	}
	if pickedLanguage(form) {
		s.pickLanguage(form)
		s.showRegisterAgain()
		return
	}
	if s.step.Stage == stageRegisterPassword {
		s.finishRegistration(form)
		return
	}
	ctx := s.step.Ctx
	org, ok := s.registrationOf(ctx)
	if !ok {
		return
	}
	typed, _ := authn.FormValue(form, "email")
	addr, problem := normalizeAddress(typed)
	if problem != "" {
		problem = s.text(problem)
	} else if !org.Registration.Allows(addr) {
		problem = domainsMessage(s.text, org.Registration.EmailDomains)
	}
	if problem != "" {
		s.showRegister(http.StatusBadRequest, strings.TrimSpace(typed), problem, ctx, org)
		return
	}
	err := p.requestRegistration(r, s.frame(ctx), addr, ctx, org)
	p.waitFloor(r.Context(), start)
	if err != nil {
		s.unavailable("registration: " + err.Error())
		return
	}
	s.message(http.StatusOK, s.text(keyCheckEmail), s.text(keyRegisterSent, addr), backURL(ctx), s.text(keyBackToSignIn))
}

// domainsMessage tells which domains may register, through text (a
// page's): a short list by name.
func domainsMessage(text func(string, ...any) string, domains []string) string {
	if len(domains) == 0 || len(domains) > 5 {
		return text(keyRegisterDomainAny)
	}
	return text(keyRegisterDomain, strings.Join(domains, ", "))
}

// requestRegistration is one registration request of the registration
// page (its frame f: the mail is in its language and names its site) for
// the normalized address addr inside org's domains: exactly one fsm.IssueLink, with the
// limits of every message (mailRules: per mailbox, subaddresses folded,
// and per client address), counted before anything is stored or sent, and either
// a registration link (24 hours, going on with ctx's request) and its
// message, or, when an account has the address, no link and a message
// pointing to /password/forgot. A locked key is answered like the rest.
// The audit event (registration, action requested) is the same either
// way and names no one (registrationEvent).
func (p *Signin) requestRegistration(r *http.Request, f webui.Frame, addr string, ctx *signinContext, org fsm.Org) error {
	now := p.now()
	rules := mailRules(addr, remoteIP(r))
	if !p.localLock(rules, now).IsZero() {
		p.log.Info("registration: limit reached")
		return nil
	}
	existing, err := p.cfg.State.UserByEmail(addr)
	found := err == nil
	if err != nil && !errors.Is(err, fsm.ErrNotFound) {
		return err
	}
	token, hash, err := email.NewToken()
	if err != nil {
		return err
	}
	cmd := fsm.IssueLink{Rules: rules, At: now}
	var m fsm.OutgoingEmail
	if found {
		m, err = p.outgoing(f, email.RegistrationExists, existing.Email, existing.ID, email.Data{ForgotURL: p.cfg.Issuer + PathForgot})
		// Whose address it was is for the site's operators, never for
		// the organization (registrationEvent).
		p.log.Info("registration: the address has an account; sent the existing-account message",
			"user_id", existing.ID, "organization_id", org.ID)
	} else {
		m, err = p.outgoing(f, email.Registration, addr, "", email.Data{Link: p.linkURL(PathRegister, token), OrgName: org.Name, Expires: registerTTL})
		cmd.Link = &fsm.Link{Hash: hash, Purpose: fsm.LinkRegistration, Email: addr, OrgID: org.ID, Continue: resumeIn(ctx),
			CreatedAt: now, ExpiresAt: now.Add(registerTTL)}
	}
	if err != nil {
		return err
	}
	cmd.Email = []fsm.OutgoingEmail{m}
	return p.issueQuietly(r.Context(), "registration", cmd, registrationEvent(ctx, org))
}

// registrationEvent is the audit event of a registration request of org,
// the same whether the address has an account or not: no subject, no
// word of which message went out. It names org, whose org_admins read
// it, and an org_admin sets org's registration domains to any it likes:
// an event naming the account holder would hand it the id of anyone
// with an address (the person is no member of org, and their id is the
// key to every admin route on them), and one saying "exists" would tell
// it who has an account. The log line of requestRegistration says whose
// address it was, for the site's operators.
func registrationEvent(ctx *signinContext, org fsm.Org) fsm.Audit {
	return fsm.Audit{Type: fsm.EventRegistration, Actor: fsm.ActorPerson, ClientID: ctx.ClientID, OrgID: org.ID,
		Detail: map[string]string{"action": "requested"}}
}

// handleRegisterLink is the registration link's page: a new-password
// form for the address, or the invalid-link page.
func (p *Signin) handleRegisterLink(w http.ResponseWriter, r *http.Request) {
	s := p.selfPage(w, r)
	hash := tokenHash(r.PathValue("token"))
	l, ok := s.link(hash, fsm.LinkRegistration)
	if !ok {
		return
	}
	s.step.Ctx = registrationContext(l)
	if _, err := p.cfg.State.UserByEmail(l.Email); err == nil {
		s.accountExists()
		return
	}
	s.showRegisterPassword(http.StatusOK, l, "")
}

// resumeIn is the request ctx resumes, asking (ui_locales) for the
// language of its sign-in: the registration link's pages and the request
// it goes on with keep to it. "" without a request.
func resumeIn(ctx *signinContext) string {
	if ctx.Resume == "" || ctx.UILocale == "" {
		return ctx.Resume
	}
	q, err := url.ParseQuery(ctx.Resume)
	if err != nil {
		return ctx.Resume
	}
	q.Set("ui_locales", ctx.UILocale)
	return q.Encode()
}

// registrationContext is the sign-in a registration link goes on with:
// its application, the organization joined, and its language (the
// ui_locales of the request it resumes, resumeIn), so that the link's
// pages wear the organization's branding and speak the language the
// registration was started in, whichever browser opens the link.
func registrationContext(l fsm.Link) *signinContext {
	q, _ := url.ParseQuery(l.Continue)
	return &signinContext{ClientID: q.Get("client_id"), OrgID: l.OrgID, UILocale: i18n.UILocale(q.Get("ui_locales"))}
}

func (s *selfPage) showRegisterPassword(status int, l fsm.Link, errMsg string) {
	c, ok := s.common(selfStep{Stage: stageRegisterPassword, Hash: l.Hash, Ctx: s.step.Ctx}, PathRegister, s.text(keyRegisterPwTitle))
	if !ok {
		return
	}
	lead := s.text(keyRegisterPwLead)
	if o, err := s.p.cfg.State.Org(l.OrgID); err == nil {
		lead = s.text(keyRegisterPwLeadOrg, o.Name)
	}
	s.p.cfg.UI.NewPassword(s.w, status, webui.NewPasswordPage{Common: c, Lead: lead, Email: l.Email, Error: errMsg, Button: s.text(keyCreateAccount),
		LanguagePicker: true})
}

// showRegisterAgain shows the registration page the step is at again,
// after a language was picked on it: the address, or the link's password.
func (s *selfPage) showRegisterAgain() {
	if s.step.Stage == stageRegisterPassword {
		if l, ok := s.link(s.step.Hash, fsm.LinkRegistration); ok {
			s.showRegisterPassword(http.StatusOK, l, "")
		}
		return
	}
	if org, ok := s.registrationOf(s.step.Ctx); ok {
		s.showRegister(http.StatusOK, "", "", s.step.Ctx, org)
	}
}

// accountExists is the page of a registration whose address has an
// account by now.
func (s *selfPage) accountExists() {
	s.message(http.StatusConflict, s.text(keyAccountExistsTitle), s.text(keyAccountExists), PathForgot, s.text(keyResetTitle))
}

// finishRegistration creates the person of a registration link: the
// password policy of /account, the node's hasher, then fsm.UseLink with
// the new person (a fresh id, the link's address, verified) and an
// active membership of the link's organization, which the apply grants
// only while the organization still allows the address. Then it signs
// the person in, as a password sign-in does (amr pwd), and goes on with
// the authorization request the registration started from (303 to
// /authorize with its query), so the application receives its code.
func (s *selfPage) finishRegistration(form url.Values) {
	p := s.p
	l, ok := s.link(s.step.Hash, fsm.LinkRegistration)
	if !ok {
		return
	}
	next, _ := authn.FormValue(form, "new_password")
	if msg := newPasswordProblem(next); msg != "" {
		s.showRegisterPassword(http.StatusBadRequest, l, s.text(msg))
		return
	}
	ctx := s.r.Context()
	h, err := p.cfg.Hasher.Hash(ctx, next)
	if err != nil {
		s.unavailable("hash: " + err.Error())
		return
	}
	u := fsm.User{ID: uuid.NewString(), Email: l.Email, EmailVerified: true, PasswordHash: h, CreatedAt: s.now, UpdatedAt: s.now}
	cmd := fsm.UseLink{Hash: l.Hash, Purpose: fsm.LinkRegistration, At: s.now, NewUser: &u, Membership: uuid.NewString()}
	resume, _ := url.ParseQuery(l.Continue)
	clientID := resume.Get("client_id")
	res, err := p.cfg.Applier.Apply(ctx, p.stamp(ctx, fsm.MustCommand(fsm.TypeUseLink, cmd), fsm.Audit{
		Type: fsm.EventRegistration, Actor: fsm.ActorPerson, Subject: u.ID, ClientID: clientID, OrgID: l.OrgID,
		Detail: map[string]string{"action": "completed"}}))
	if err == nil {
		err = res.Err
	}
	var conflict *fsm.ConflictError
	switch {
	case errors.As(err, &conflict) && conflict.Field == "email":
		s.accountExists()
		return
	case errors.Is(err, fsm.ErrMismatch):
		s.page(http.StatusForbidden, s.text(keyRegisterOffTitle), s.text(keyRegisterOff))
		return
	case !s.useLinkFailed(err):
		return
	}
	u = res.Value.(fsm.LinkUsed).User
	p.log.Info("registered", "user_id", u.ID, "organization_id", l.OrgID)
	supersedes := ""
	if sess, _, found, err := p.browserSession(s.r, s.now); err == nil && found {
		supersedes = sess.ID
	}
	if _, err := p.openSession(s.w, s.r, u, authn.AMRPassword, supersedes, s.now, nil, clientID); err != nil {
		// The account exists: the person signs in with it.
		p.log.Warn("registration: open a session", "user_id", u.ID, "err", err)
		s.message(http.StatusOK, s.text(keyAccountMadeTitle), s.text(keyRegisteredSignIn), PathAccount, s.text(keySignIn))
		return
	}
	p.sessions.RotateCSRF(s.w)
	if l.Continue == "" || clientID == "" {
		s.message(http.StatusOK, s.text(keyAccountMadeTitle), s.text(keyRegisteredSignedIn), PathAccount, s.text(keyToAccount))
		return
	}
	s.w.Header().Set("Cache-Control", "no-store")
	s.w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(s.w, s.r, authn.PathAuthorize+"?"+resume.Encode(), http.StatusSeeOther)
}
