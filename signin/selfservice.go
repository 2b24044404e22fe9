package signin

// The people's own way in: the pages a person reaches from the sign-in
// page (a forgotten password, registration) or from an emailed link (a
// reset, an address to prove, a registration to finish, an invitation),
// and the new address on /account. They exist only when mail can go out
// (Config.Mail); otherwise their paths answer 404 and no page links to
// them.
//
// Each request that sends mail is one fsm.IssueLink: its throttle Rules
// are counted in the apply before anything is stored or sent (a locked
// key: ErrLocked, nothing written but the refusal), then the link's hash
// is stored and the message, sealed under the KEK, is committed to the
// outbox in the same apply. A request that must not reveal whether an
// address has an account (a forgotten password, a registration) makes
// the same write, composes and seals a message either way, and answers
// the same page with the same status.
//
// A token travels only in the path of the link's GET. The page it shows
// carries the token's hash, sealed in the form's step, so the POST, a
// reload of it and the Referer of anything it loads carry no token
// (every page is Referrer-Policy: no-referrer as well). The GET never
// uses the link: a mail scanner that follows it changes nothing.

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/webui"
)

// Paths of the self-service pages. A link's page is its path, "/" and the
// token; its form posts to the path alone.
const (
	PathForgot   = "/password/forgot"
	PathReset    = "/password/reset"
	PathVerify   = "/verify-email"
	PathRegister = "/register"
	PathInvite   = "/invite"
)

// How long emailed links work.
const (
	resetTTL    = 30 * time.Minute
	verifyTTL   = 24 * time.Hour
	registerTTL = 24 * time.Hour
)

const (
	// selfPurpose seals the step of a self-service form, which must be
	// posted within selfTTL.
	selfPurpose = "self-service"
	selfTTL     = time.Hour
	// contextPurpose seals the sign-in's context into the links of the
	// sign-in page (signinContext).
	contextPurpose = "signin-context"
	contextTTL     = 2 * time.Hour
	// maxResume bounds the request a context carries: a form's step that
	// holds the context sealed stays under seal.MaxSealed. Only a request
	// with a state and nonce of nearly their largest, in escapes, is
	// longer.
	maxResume = 4 << 10
)

// Stages of the self-service forms.
const (
	stageForgot           = "forgot"
	stageReset            = "reset"
	stageVerifyEmail      = "verify-email"
	stageRegister         = "register"
	stageRegisterPassword = "register-password"
)

// answerFloor is the least time a request takes to answer when its answer
// must not tell whether an address has an account: the forgotten-password
// page, the registration page and a new address on /account. Their one
// write is larger for an account (a link and a sealed message) than for
// an address nobody has (the limits' counters alone), and the time of a
// write shows through the answer's; so the answer waits until this long
// after the request arrived. A healthy cluster applies a write well
// within it.
const answerFloor = 250 * time.Millisecond

// waitFloor waits until the floor (Signin.floor, answerFloor) has passed
// since start, or ctx ends.
func (p *Signin) waitFloor(ctx context.Context, start time.Time) {
	d := p.floor - time.Since(start)
	if d <= 0 {
		if p.floor > 0 {
			p.log.Warn("self-service: answered later than the floor", "over", -d)
		}
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// The limits on mail a person (or anyone) can cause to be sent are in
// mailthrottle.go.

func (p *Signin) registerSelfService(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathForgot, p.handleForgot)
	mux.HandleFunc("POST "+PathForgot, p.handleForgotPost)
	mux.HandleFunc("GET "+PathReset+"/{token}", p.handleReset)
	mux.HandleFunc("POST "+PathReset, p.handleResetPost)
	mux.HandleFunc("GET "+PathVerify+"/{token}", p.handleVerifyEmail)
	mux.HandleFunc("POST "+PathVerify, p.handleVerifyEmailPost)
	mux.HandleFunc("GET "+PathRegister, p.handleRegister)
	mux.HandleFunc("GET "+PathRegister+"/{token}", p.handleRegisterLink)
	mux.HandleFunc("POST "+PathRegister, p.handleRegisterPost)
	mux.HandleFunc("GET "+PathInvite+"/{token}", p.handleInvite)
	mux.HandleFunc("POST "+PathInvite, p.handleInvitePost)
}

// signinContext is where a person left a sign-in for a self-service page:
// the application, the organization that lets people register ("" for
// none) and the authorization request to go back to (authn.Step.Resume).
// It travels sealed in the r parameter of the sign-in page's links.
type signinContext struct {
	ClientID string `json:"client,omitempty"`
	OrgID    string `json:"org,omitempty"`
	Resume   string `json:"resume,omitempty"`
	// UILocale is the sign-in's language (authn.Pending.UILocales: its
	// ui_locales, or the one picked on its page), a short tag or "": the
	// pages it leads to, and the mail they send, keep to it.
	UILocale string `json:"ui,omitempty"`
}

// selfStep is the sealed state of a self-service form.
type selfStep struct {
	Stage string         `json:"stage"`
	CSRF  string         `json:"csrf"`
	Hash  string         `json:"hash,omitempty"` // the emailed link's token hash
	Ctx   *signinContext `json:"ctx,omitempty"`
}

// selfPage is one request to a self-service page.
type selfPage struct {
	p    *Signin
	w    http.ResponseWriter
	r    *http.Request
	now  time.Time
	csrf string
	step selfStep
}

func (p *Signin) selfPage(w http.ResponseWriter, r *http.Request) *selfPage {
	return &selfPage{p: p, w: w, r: r, now: p.now()}
}

// common seals step for a form posting to action, titled title.
func (s *selfPage) common(step selfStep, action, title string) (webui.Common, bool) {
	if s.csrf == "" {
		s.csrf = s.p.sessions.CSRFToken(s.w, s.r)
	}
	step.CSRF = s.csrf
	box, err := s.p.sessions.Box()
	var sealed string
	if err == nil {
		sealed, err = box.Seal(selfPurpose, step, s.now.Add(selfTTL))
	}
	if err != nil {
		s.unavailable("seal: " + err.Error())
		return webui.Common{}, false
	}
	return webui.Common{Frame: s.frame(step.Ctx), Title: title, AppName: s.p.appName(step.Ctx), CSRFToken: s.csrf, Action: action, Step: sealed}, true
}

// form parses a posted self-service form, opens its step (one of stages)
// and checks the CSRF binding; false when it has answered.
func (s *selfPage) form(stages ...string) (url.Values, bool) {
	s.r.Body = http.MaxBytesReader(s.w, s.r.Body, authn.MaxPageForm)
	if err := s.r.ParseForm(); err != nil {
		s.page(http.StatusBadRequest, "", s.p.cfg.UI.Text(s.p.language(s.r, ""), authn.MsgBadRequest))
		return nil, false
	}
	form := s.r.PostForm
	sealed, _ := authn.FormValue(form, "step")
	box, err := s.p.sessions.Box()
	if err != nil {
		s.unavailable("sealer: " + err.Error())
		return nil, false
	}
	if sealed == "" || box.Open(selfPurpose, sealed, s.now, &s.step) != nil || !slices.Contains(stages, s.step.Stage) {
		s.page(http.StatusBadRequest, "", s.text(keyFormExpired))
		return nil, false
	}
	token, _ := authn.FormValue(form, "csrf_token")
	if !s.p.sessions.CSRFOK(s.r, token, s.step.CSRF) {
		s.page(http.StatusForbidden, "", s.text(keyFormExpired))
		return nil, false
	}
	s.csrf = s.step.CSRF
	return form, true
}

// page is an error page with a constant message.
func (s *selfPage) page(status int, title, msg string) {
	s.p.cfg.UI.Error(s.w, status, webui.ErrorPage{Frame: s.frame(s.step.Ctx), Title: title, Message: msg})
}

// message is a plain notice, with an optional link.
func (s *selfPage) message(status int, title, msg, linkURL, linkText string) {
	s.p.cfg.UI.Message(s.w, status, webui.MessagePage{Frame: s.frame(s.step.Ctx), Title: title, Message: msg, LinkURL: linkURL, LinkText: linkText})
}

func (s *selfPage) unavailable(reason string) {
	s.p.log.Error("self-service: unavailable", "reason", reason)
	s.p.cfg.UI.Error(s.w, http.StatusServiceUnavailable, webui.ErrorPage{Frame: webui.Frame{Lang: s.p.language(s.r, "")}, Title: s.p.cfg.UI.Text(s.p.language(s.r, ""), authn.TitleUnavailable), Message: s.p.cfg.UI.Text(s.p.language(s.r, ""), authn.MsgUnavailable)})
}

// invalidLink is the one page of a link that is unknown, used, voided,
// withdrawn, expired or of another purpose: 410, and nothing changed.
func (s *selfPage) invalidLink() {
	f := s.frame(nil)
	f.Lang = s.lang()
	s.p.cfg.UI.Error(s.w, http.StatusGone, webui.ErrorPage{Frame: f, Title: s.text(keyLinkInvalidTitle), Message: s.text(keyLinkInvalid)})
}

// tokenHash is the hash a link's token is stored under, "" for what
// cannot be a token (email.NewToken: 43 characters of base64url).
func tokenHash(token string) string {
	if len(token) != 43 {
		return ""
	}
	if b, err := base64.RawURLEncoding.Strict().DecodeString(token); err != nil || len(b) != email.TokenBytes {
		return ""
	}
	return email.HashToken(token)
}

// link reads the live link of purpose whose token hashes to hash, after
// a read index: it may have been issued, used, voided or withdrawn a
// moment ago through another node. ok is false when it has answered: the
// invalid-link page, or 503.
func (s *selfPage) link(hash, purpose string) (fsm.Link, bool) {
	if hash == "" {
		s.invalidLink()
		return fsm.Link{}, false
	}
	s.p.catchUp(s.r.Context())
	l, err := s.p.cfg.State.Link(hash)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		s.invalidLink()
		return fsm.Link{}, false
	case err != nil:
		s.unavailable("link: " + err.Error())
		return fsm.Link{}, false
	case l.Purpose != purpose || !s.now.Before(l.ExpiresAt):
		s.invalidLink()
		return fsm.Link{}, false
	}
	return l, true
}

// useLinkFailed answers a UseLink refusal shared by every purpose: the
// invalid-link page for a link gone meanwhile, else 503. ok is false
// when err was one of those.
func (s *selfPage) useLinkFailed(err error) bool {
	switch {
	case errors.Is(err, fsm.ErrNotFound), errors.Is(err, fsm.ErrExpired):
		s.invalidLink()
		return false
	case err != nil:
		s.unavailable("use link: " + err.Error())
		return false
	}
	return true
}

// outgoing composes template for the address to and seals it for the
// outbox, about the person userID ("" for none), as the page f that
// causes it: in its language, naming the site as its branding does (its
// display name, else the issuer's host).
func (p *Signin) outgoing(f webui.Frame, template, to, userID string, d email.Data) (fsm.OutgoingEmail, error) {
	d.Site = f.Brand.DisplayName
	if d.Site == "" {
		d.Site = email.Site(p.cfg.Issuer)
	}
	// The page's language matched to the mail's (de-AT is German);
	// Compose writes any other in English, and the message records the
	// language it is in.
	msg, err := email.Compose(template, i18n.UILocale(f.Lang.String()), d)
	if err != nil {
		return fsm.OutgoingEmail{}, err
	}
	return email.Outgoing(p.cfg.KEK, to, email.Kind(template), msg.Locale, userID, msg)
}

// linkURL is the address of a link's page.
func (p *Signin) linkURL(path, token string) string { return p.cfg.Issuer + path + "/" + token }

// issue applies cmd stamped with the event ev. locked: a rule's key was
// locked, and nothing was stored or sent. err is for the cluster; a
// refusal of the apply's own is res.Err.
func (p *Signin) issue(ctx context.Context, cmd fsm.IssueLink, ev fsm.Audit) (res fsm.Result, locked bool, err error) {
	res, err = p.cfg.Applier.Apply(ctx, p.stamp(ctx, fsm.MustCommand(fsm.TypeIssueLink, cmd), ev))
	if err != nil {
		return res, false, err
	}
	return res, errors.Is(res.Err, fsm.ErrLocked), nil
}

// issueQuietly is issue for the pages that answer the same whatever
// happened (forgotten password, registration): a limit reached or a
// refusal (the person or organization gone meanwhile: nothing was sent)
// is only logged, under what; only an error of the write is returned.
func (p *Signin) issueQuietly(ctx context.Context, what string, cmd fsm.IssueLink, ev fsm.Audit) error {
	res, locked, err := p.issue(ctx, cmd, ev)
	switch {
	case err != nil:
		return err
	case locked:
		p.log.Info(what + ": limit reached")
	case res.Err != nil:
		p.log.Info(what+": not issued", "err", res.Err)
	}
	return nil
}

// newPasswordProblem is what is wrong with a new password (a catalog
// key), "" for nothing: the policy /account's password change applies.
func newPasswordProblem(pw string) string {
	if len(pw) < password.MinLength || len(pw) > password.MaxLength {
		return keyPasswordLength
	}
	return ""
}

// ---- the sign-in page's links ----

// selfServiceLinks fills the sign-in page's links: to the
// forgotten-password page, and to the registration page when the
// organization of the sign-in lets people register (registrationOrg).
// Both carry the sign-in's context sealed, so that those pages lead back
// to the request.
func (p *Signin) selfServiceLinks(page *webui.SignInPage, st *authn.Step, now time.Time) {
	if !p.cfg.Mail {
		return
	}
	page.ForgotURL = PathForgot
	ctx := signinContext{ClientID: st.ClientID, Resume: st.Resume, OrgID: p.registrationOrg(st.ClientID, st.OrgHint)}
	if st.Pending != nil {
		ctx.UILocale = i18n.UILocale(st.Pending.UILocales)
	}
	if len(ctx.Resume) > maxResume {
		// Sealed again inside a form's step it would not open: the pages
		// work without the way back (a registration ends on a page of
		// its own instead of the application's).
		ctx.Resume = ""
	}
	if ctx == (signinContext{}) {
		return
	}
	box, err := p.sessions.Box()
	var sealed string
	if err == nil {
		sealed, err = box.Seal(contextPurpose, ctx, now.Add(contextTTL))
	}
	if err != nil {
		p.log.Warn("sign-in page: seal the context of its links", "err", err)
		return
	}
	page.ForgotURL += "?" + url.Values{"r": {sealed}}.Encode()
	if ctx.OrgID != "" {
		page.RegisterURL = PathRegister + "?" + url.Values{"r": {sealed}}.Encode()
	}
}

// openContext opens the r parameter of a self-service page, and keeps it
// as the context of the page's step; nil when it is absent, expired or
// not ours.
func (s *selfPage) openContext() *signinContext {
	v := s.r.URL.Query().Get("r")
	if v == "" {
		return nil
	}
	box, err := s.p.sessions.Box()
	if err != nil {
		return nil
	}
	var ctx signinContext
	if box.Open(contextPurpose, v, s.now, &ctx) != nil {
		return nil
	}
	s.step.Ctx = &ctx // the page's language is the sign-in's (s.lang)
	return &ctx
}

// backURL leads back to the sign-in of ctx, in its language ("" without
// one).
func backURL(ctx *signinContext) string {
	if ctx == nil || ctx.Resume == "" {
		return ""
	}
	return authn.PathAuthorize + "?" + resumeIn(ctx)
}

// appName names the application of ctx ("" without one).
func (p *Signin) appName(ctx *signinContext) string {
	if ctx == nil || ctx.ClientID == "" {
		return ""
	}
	if c, err := p.cfg.State.Client(ctx.ClientID); err == nil {
		return c.Name
	}
	return ""
}

// registrationOrg is the organization a sign-in of clientID (with
// organization_hint hint) may register people into: the client's own, or
// for a multi-organization client the hinted one when the client serves
// it; "" when that organization is not active or does not let people
// register.
func (p *Signin) registrationOrg(clientID, hint string) string {
	if clientID == "" {
		return ""
	}
	c, err := p.cfg.State.Client(clientID)
	if err != nil {
		return ""
	}
	orgID := c.OrganizationID
	if c.MultiOrganization {
		if orgID = hint; hint == "" || (len(c.Organizations) > 0 && !slices.Contains(c.Organizations, hint)) {
			return ""
		}
	}
	if _, ok := p.registrationOpen(orgID); !ok {
		return ""
	}
	return orgID
}

// registrationOpen returns organization orgID when it is active and lets
// people register.
func (p *Signin) registrationOpen(orgID string) (fsm.Org, bool) {
	if orgID == "" {
		return fsm.Org{}, false
	}
	o, err := p.cfg.State.Org(orgID)
	if err != nil || o.Status != fsm.OrgActive || o.Registration == nil || !o.Registration.Enabled {
		return fsm.Org{}, false
	}
	return o, true
}
