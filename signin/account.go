package signin

// The self-service /account page: after signing in, a person sets up an
// authenticator app, adds and removes passkeys, and replaces their
// recovery codes. The page needs a recent authentication (accountFresh);
// an older session is asked for the password again, which refreshes
// auth_time without ending the session.
//
// A change to a sign-in method needs the strongest credential the person
// has, verified afresh in this session (the session's Verified times):
// the password when they have one, and one of their second factors when
// any is enrolled. So a password alone, or a text-message sign-in alone,
// can never replace or add a second factor (a first enrolment needs the
// password). Every change ends the person's other sessions, but for the
// links to upstream providers (account_identities.go): making one
// replaces nothing here, and removing one ends the sessions opened
// through it.

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/webui"
)

// PathAccount is the self-service page.
const PathAccount = "/account"

const (
	accountPurpose = "account"
	accountTTL     = 15 * time.Minute
	// accountFresh: changes need an authentication at most this old.
	accountFresh = 15 * time.Minute
)

// Account steps.
const (
	accountSignIn  = "signin"
	accountHome    = "home"
	accountTOTP    = "totp"
	accountPasskey = "passkey"
	accountVerify  = "verify" // a second factor, verified before a change
)

// What a person must verify afresh before a change (account.proofNeeded).
const (
	proofNone     = ""
	proofPassword = "password"
	proofFactor   = "factor"
	proofAdmin    = "admin" // nothing they hold is enough: only the admin can help
)

// accountStep is the sealed state of an /account form.
type accountStep struct {
	Stage     string `json:"stage"`
	CSRF      string `json:"csrf"`
	SSOID     string `json:"sso,omitempty"`
	Secret    string `json:"secret,omitempty"` // a TOTP secret awaiting its first code
	Challenge string `json:"chal,omitempty"`
	// Link is the token hash of the invitation whose page (invite.go)
	// signs the person in and verifies their factors with these steps.
	Link string `json:"link,omitempty"`
	// Then, on the verification page, is the change that asked for it
	// (one of resumable): once the factor is verified, the change goes on
	// without a second click.
	Then string `json:"then,omitempty"`
}

// resumable are the changes that take no field of their form, so a
// verification they asked for goes on to them (accountStep.Then). The
// others (a password, an address, a removal) show the home page again
// to be posted once more, with what they need.
var resumable = map[string]bool{"totp-setup": true, "recovery-new": true, "passkey-add": true}

// then is the change a verification shown now goes on to: the one being
// made, or the one the verification page already carries.
func (a *account) then() string {
	if resumable[a.action] {
		return a.action
	}
	if a.step.Stage == accountVerify {
		return a.step.Then
	}
	return ""
}

// account is one request to /account.
type account struct {
	p    *Signin
	w    http.ResponseWriter
	r    *http.Request
	now  time.Time
	csrf string
	sess fsm.SSOSession
	user fsm.User
	step accountStep
	// action is the change being made (the audit event's detail.action).
	action string
	// inv, on an invitation's page (PathInvite), is the invitation its
	// steps end with: the page's forms post there, and a sign-in or a
	// verification goes on to it rather than to the account's home.
	inv *invitation
	// lead, when set, is said under the sign-in form's heading: why this
	// browser must sign in again (its session ended with a change).
	lead string

	language language.Tag // of the pages, once lang chose it
}

func (p *Signin) registerAccount(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathAccount, p.handleAccount)
	mux.HandleFunc("POST "+PathAccount, p.handleAccountPost)
	mux.HandleFunc("GET "+PathTOTPQR, p.handleTOTPQR)
}

func (p *Signin) handleAccount(w http.ResponseWriter, r *http.Request) {
	a := &account{p: p, w: w, r: r, now: p.now()}
	ok, found := a.load()
	switch {
	case !ok:
	case !found || !a.fresh():
		a.showSignIn(http.StatusOK, "")
	default:
		a.showHome(http.StatusOK, "", "")
	}
}

// load finds the browser's session; ok is false when it has answered.
func (a *account) load() (ok, found bool) {
	s, u, found, err := a.p.browserSession(a.r, a.now)
	if err != nil {
		a.unavailable(err.Error())
		return false, false
	}
	a.sess, a.user = s, u
	return true, found
}

// fresh reports whether the session authenticated recently enough for
// changes.
func (a *account) fresh() bool { return a.now.Sub(a.sess.AuthTime) <= accountFresh }

func (a *account) handleForm() (url.Values, bool) {
	a.r.Body = http.MaxBytesReader(a.w, a.r.Body, authn.MaxPageForm)
	if err := a.r.ParseForm(); err != nil {
		a.page(http.StatusBadRequest, a.text(authn.MsgBadRequest))
		return nil, false
	}
	form := a.r.PostForm
	sealed, _ := authn.FormValue(form, "step")
	box, err := a.p.sessions.Box()
	if err != nil {
		a.unavailable("sealer: " + err.Error())
		return nil, false
	}
	token, _ := authn.FormValue(form, "csrf_token")
	if sealed == "" || box.Open(accountPurpose, sealed, a.now, &a.step) != nil {
		if action, _ := authn.FormValue(form, "action"); action == webui.ActionSignOut && a.r.URL.Path == PathAccount &&
			a.p.sessions.CSRFOK(a.r, token, token) {
			// A home page left open past its form's life still signs
			// out: the form is this browser's (its CSRF token is the
			// cookie's), and ending a session gives no one anything.
			a.step, a.csrf = accountStep{Stage: accountHome, CSRF: token}, token
			return form, true
		}
		a.page(http.StatusBadRequest, a.text(authn.MsgExpired))
		return nil, false
	}
	if !a.p.sessions.CSRFOK(a.r, token, a.step.CSRF) {
		a.page(http.StatusForbidden, a.text(authn.MsgForbidden))
		return nil, false
	}
	a.csrf = a.step.CSRF
	return form, true
}

func (p *Signin) handleAccountPost(w http.ResponseWriter, r *http.Request) {
	a := &account{p: p, w: w, r: r, now: p.now()}
	form, ok := a.handleForm()
	if !ok {
		return
	}
	ok, found := a.load()
	if !ok {
		return
	}
	if m, _ := authn.FormValue(form, "method"); m == methodLanguage && (a.step.Stage == accountSignIn || a.step.Stage == accountHome) {
		// The picker of the sign-in form or the home page: the same page
		// again, in the language picked.
		a.pickLanguage(form)
		if a.step.Stage == accountHome && found && a.sess.ID == a.step.SSOID && a.fresh() {
			a.showHome(http.StatusOK, "", "")
		} else {
			a.showSignIn(http.StatusOK, "")
		}
		return
	}
	if a.step.Stage == accountSignIn {
		a.signIn(form)
		return
	}
	if a.step.Stage == accountHome {
		if action, _ := authn.FormValue(form, "action"); action == webui.ActionSignOut {
			// Signing out needs no fresh authentication, and ends the
			// session this browser has now, whichever page it posted from.
			a.signOut(found)
			return
		}
	}
	if !found || a.sess.ID != a.step.SSOID || !a.fresh() {
		a.showSignIn(http.StatusOK, "")
		return
	}
	action, _ := authn.FormValue(form, "action")
	if a.step.Stage == accountVerify {
		a.verify(form)
		return
	}
	if a.step.Stage == accountHome && (action == "session-end" || action == "sessions-end-others" || action == "consent-revoke") {
		a.endAction(action, form)
		return
	}
	a.action = action
	if !a.mayChange() {
		return
	}
	a.p.log.Info("account: credential change", "user_id", a.user.ID, "sso_session", a.sess.ID, "action", httpx.LogValue(action))
	switch {
	case a.step.Stage == accountHome && action == "password-change":
		a.changePassword(form)
	case a.step.Stage == accountHome && action == "email-change" && a.p.cfg.Mail:
		a.changeEmail(form)
	case a.step.Stage == accountHome && action == "totp-setup":
		a.totpSetup()
	case a.step.Stage == accountTOTP && action == "totp-confirm":
		code, _ := authn.FormValue(form, "code")
		a.totpConfirm(code)
	case a.step.Stage == accountHome && action == "totp-remove":
		a.apply(fsm.MustCommand(fsm.TypeSetTOTP, fsm.SetTOTP{UserID: a.user.ID, At: a.now, EndSessions: a.endOthers()}), a.text(keyTOTPRemoved))
	case a.step.Stage == accountHome && action == "recovery-new":
		a.recoveryNew()
	case a.step.Stage == accountHome && action == "passkey-add":
		a.passkeyBegin()
	case a.step.Stage == accountPasskey && action == "passkey-finish":
		cred, _ := authn.FormValue(form, "credential")
		name, _ := authn.FormValue(form, "name")
		a.passkeyFinish(cred, name)
	case a.step.Stage == accountHome && action == actionIdentityLink:
		a.identityLink(form)
	case a.step.Stage == accountHome && action == actionIdentityUnlink:
		a.identityUnlink(form)
	case a.step.Stage == accountHome && action == "passkey-remove":
		raw, _ := authn.FormValue(form, "credential_id")
		id, err := base64.RawURLEncoding.DecodeString(raw)
		if err != nil || len(id) == 0 {
			a.showHome(http.StatusBadRequest, "", a.text(keyNoPasskey))
			return
		}
		a.apply(fsm.MustCommand(fsm.TypeRemovePasskey, fsm.RemovePasskey{UserID: a.user.ID, ID: id, EndSessions: a.endOthers()}), a.text(keyPasskeyRemoved))
	default:
		a.page(http.StatusBadRequest, a.text(authn.MsgBadRequest))
	}
}

// signIn checks the password of the account form: for the browser's own
// person it refreshes the session's auth_time (a step-up with pwd), for
// anyone else it opens a new session.
func (a *account) signIn(form url.Values) {
	ctx := a.r.Context()
	email, _ := authn.FormValue(form, "email")
	secret, _ := authn.FormValue(form, "password")
	u, settled, err := a.p.passwordSignIn(a.r, strings.TrimSpace(email), secret, "")
	switch {
	case errors.Is(err, errLocked):
		a.showSignIn(http.StatusTooManyRequests, lockout(a.w, err, a.p.now(), a.text))
		return
	case errors.Is(err, errBadPassword):
		a.showSignIn(http.StatusBadRequest, a.text(msgBadPassword))
		return
	case errors.Is(err, errDirectoryDown):
		a.showSignIn(http.StatusServiceUnavailable, a.text(msgDirectoryDown))
		return
	case err != nil:
		a.unavailable(err.Error())
		return
	}
	if a.inv != nil && !strings.EqualFold(u.Email, a.inv.link.Email) {
		// Signed in as someone else: a session of theirs would not
		// accept this invitation.
		a.sess, a.user = fsm.SSOSession{}, fsm.User{}
		a.showSignIn(http.StatusBadRequest, a.text(msgInviteWrongAccount))
		return
	}
	if a.sess.ID != "" && a.sess.UserID == u.ID {
		a.sess, err = a.p.stepUp(ctx, a.sess, authn.AMRPassword, settled, "")
	} else {
		a.sess, err = a.p.openSession(a.w, a.r, u, authn.AMRPassword, a.sess.ID, a.now, settled, "")
		a.csrf = a.p.sessions.RotateCSRF(a.w)
	}
	if err != nil {
		a.unavailable("account sign-in: " + err.Error())
		return
	}
	a.user = u
	a.next(http.StatusOK, "")
}

// next shows what follows a sign-in or a verification: the account's
// home, or on an invitation's page the invitation.
func (a *account) next(status int, notice string) {
	if a.inv != nil {
		a.inviteReady(status)
		return
	}
	a.showHome(status, notice, "")
}

// common seals the next step.
func (a *account) common(step accountStep) (webui.Common, bool) {
	if a.csrf == "" {
		a.csrf = a.p.sessions.CSRFToken(a.w, a.r)
	}
	step.CSRF = a.csrf
	path := PathAccount
	if a.inv != nil {
		step.Link, path = a.inv.link.Hash, PathInvite
	}
	box, err := a.p.sessions.Box()
	var sealed string
	if err == nil {
		sealed, err = box.Seal(accountPurpose, step, a.now.Add(accountTTL))
	}
	if err != nil {
		a.unavailable("seal: " + err.Error())
		return webui.Common{}, false
	}
	return webui.Common{Frame: a.frame(), CSRFToken: a.csrf, Action: path, Step: sealed}, true
}

func (a *account) showSignIn(status int, msg string) {
	c, ok := a.common(accountStep{Stage: accountSignIn})
	if !ok {
		return
	}
	c.Title, c.Lang = a.text(titleSignInAccount), a.lang()
	page := webui.SignInPage{Common: c, Email: a.user.Email, Error: msg, Lead: a.lead}
	if a.inv != nil {
		c.Title, page.Email = a.text(titleSignInInvitation), a.inv.link.Email
		page.Common, page.Lead = c, a.text(msgInviteSignIn, a.inv.link.Email)
	}
	if a.p.cfg.Mail {
		page.ForgotURL = PathForgot
	}
	page.LanguagePicker = true
	a.p.cfg.UI.SignIn(a.w, status, page)
}

func (a *account) showHome(status int, notice, errMsg string) {
	f, err := a.p.cfg.State.Factors(a.user.ID)
	if err != nil {
		a.unavailable("factors: " + err.Error())
		return
	}
	c, ok := a.common(accountStep{Stage: accountHome, SSOID: a.sess.ID})
	if !ok {
		return
	}
	page := webui.AccountPage{Common: c, Email: a.user.Email, HasTOTP: f.TOTP != nil, RecoveryLeft: f.RecoveryLeft(),
		Notice: notice, Error: errMsg, PasskeysEnabled: a.p.wa != nil,
		EmailChange: a.p.cfg.Mail && a.user.DirectoryID == "", EmailVerified: a.user.EmailVerified, Section: a.action,
		LanguagePicker: true}
	if a.p.wa == nil {
		// Why there is no button (signin.New logs it at start-up too).
		page.PasskeysOff = a.text(keyPasskeysOffHere, a.p.issuer.Hostname())
	}
	if a.action == "email-change" && errMsg != "" {
		page.NewEmail, _ = authn.FormValue(a.r.PostForm, "new_email")
	}
	if err := a.overview(&page); err != nil {
		a.unavailable("account overview: " + err.Error())
		return
	}
	if err := a.identityLines(&page); err != nil {
		a.unavailable("account identities: " + err.Error())
		return
	}
	for _, pk := range f.Passkeys {
		page.Passkeys = append(page.Passkeys, webui.PasskeyLine{
			ID: base64.RawURLEncoding.EncodeToString(pk.ID), Name: pk.Name, Created: a.dateTime(pk.CreatedAt),
		})
	}
	a.p.cfg.UI.Account(a.w, status, page)
}

func (a *account) apply(cmd fsm.Command, notice string) {
	ctx := a.r.Context()
	res, err := a.p.cfg.Applier.Apply(ctx, a.p.stamp(ctx, cmd, a.accountEvent(a.action, nil)))
	if err != nil {
		a.unavailable(cmd.Type.String() + ": " + err.Error())
		return
	}
	if res.Err != nil {
		a.showHome(http.StatusBadRequest, "", a.text(keyChangeFailed))
		return
	}
	a.showHome(http.StatusOK, notice, "")
}

func (a *account) totpSetup() {
	secret, _, err := factor.NewTOTPSecret(a.p.issuer.Hostname(), a.user.Email)
	if err != nil {
		a.unavailable("totp secret: " + err.Error())
		return
	}
	a.showTOTP(http.StatusOK, secret, "")
}

// showTOTP is the setup page of secret: its otpauth: URI as a link and,
// drawn by PathTOTPQR from the cookie set here, as a QR code, and the key
// for typing.
func (a *account) showTOTP(status int, secret, errMsg string) {
	c, ok := a.common(accountStep{Stage: accountTOTP, SSOID: a.sess.ID, Secret: secret})
	if !ok || !a.setQRCookie(secret) {
		return
	}
	uri := a.totpURI(secret)
	page := webui.TOTPSetupPage{Common: c, Secret: secret, URI: uri, Error: errMsg}
	if side := qrSide(uri); side > 0 {
		page.QRURL, page.QRSize = PathTOTPQR, side
	}
	a.p.cfg.UI.TOTPSetup(a.w, status, page)
}

// totpConfirm enrolls the pending secret once the person's app shows a
// matching code; the confirming code's step is spent at once.
func (a *account) totpConfirm(code string) {
	secret := a.step.Secret
	step, ok := factor.TOTPStep(secret, code, a.now)
	if secret == "" || !ok {
		a.showTOTP(http.StatusBadRequest, secret, a.text(keyBadCode))
		return
	}
	sealed, err := a.p.cfg.KEK.Seal([]byte(secret), factor.TOTPAAD(a.user.ID))
	if err != nil {
		a.unavailable("seal totp: " + err.Error())
		return
	}
	ctx := a.r.Context()
	for _, cmd := range []fsm.Command{
		a.p.stamp(ctx, fsm.MustCommand(fsm.TypeSetTOTP, fsm.SetTOTP{UserID: a.user.ID, Secret: sealed, At: a.now, EndSessions: a.endOthers()}),
			a.accountEvent("totp-set", nil)),
		fsm.MustCommand(fsm.TypeUseTOTP, fsm.UseTOTP{UserID: a.user.ID, Step: step, At: a.now}),
	} {
		res, err := a.p.cfg.Applier.Apply(ctx, cmd)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			a.unavailable("enroll totp: " + err.Error())
			return
		}
	}
	a.clearQRCookie()
	a.showHome(http.StatusOK, a.text(keyTOTPSet), "")
}

func (a *account) recoveryNew() {
	codes, hashes := factor.NewRecoveryCodes()
	res, err := a.p.cfg.Applier.Apply(a.r.Context(), a.p.stamp(a.r.Context(), fsm.MustCommand(fsm.TypeSetRecoveryCodes,
		fsm.SetRecoveryCodes{UserID: a.user.ID, Hashes: hashes, At: a.now, EndSessions: a.endOthers()}), a.accountEvent("recovery-new", nil)))
	if err == nil {
		err = res.Err
	}
	if err != nil {
		a.unavailable("recovery codes: " + err.Error())
		return
	}
	a.p.cfg.UI.RecoveryCodes(a.w, http.StatusOK, webui.RecoveryCodesPage{Frame: a.frame(), Codes: codes, BackURL: PathAccount})
}

func (a *account) passkeyBegin() {
	f, err := a.p.cfg.State.Factors(a.user.ID)
	if err != nil {
		a.unavailable("factors: " + err.Error())
		return
	}
	opts, id, err := a.p.beginPasskeyRegistration(a.r.Context(), a.user, f)
	if errors.Is(err, errPasskeysOff) {
		a.showHome(http.StatusBadRequest, "", a.text(keyPasskeysOff))
		return
	}
	if err != nil {
		a.unavailable("passkey begin: " + err.Error())
		return
	}
	a.ceremony(accountPasskey, id, a.text(keyAddPasskey), webui.PasskeyPage{Ceremony: webui.CeremonyCreate, Options: opts, Field: "action", Method: "passkey-finish"})
}

func (a *account) passkeyFinish(cred, name string) {
	f, err := a.p.cfg.State.Factors(a.user.ID)
	if err != nil {
		a.unavailable("factors: " + err.Error())
		return
	}
	if name == "" || len(name) > 64 {
		name = a.text(keyPasskeyName)
	}
	err = a.p.finishPasskeyRegistration(a.r.Context(), a.user, f, a.step.Challenge, cred, name, a.endOthers())
	switch {
	case errors.Is(err, errCodeWrong):
		a.showHome(http.StatusBadRequest, "", a.text(keyPasskeyRegister))
	case err != nil:
		a.unavailable("passkey finish: " + err.Error())
	default:
		a.showHome(http.StatusOK, a.text(keyPasskeyAdded), "")
	}
}

func (a *account) page(status int, msg string) {
	a.p.cfg.UI.Error(a.w, status, webui.ErrorPage{Frame: a.frame(), Message: msg})
}

func (a *account) unavailable(reason string) {
	a.p.log.Error("account: unavailable", "reason", reason)
	a.p.cfg.UI.Error(a.w, http.StatusServiceUnavailable, webui.ErrorPage{Frame: webui.Frame{Lang: a.p.language(a.r, "")}, Title: a.text(authn.TitleUnavailable), Message: a.text(authn.MsgUnavailable)})
}

// endOthers ends every other session of the person with the change this
// session makes: whoever else held one must sign in again, with the new
// credential.
func (a *account) endOthers() *fsm.EndSessions {
	return &fsm.EndSessions{Except: a.sess.ID, At: a.now}
}

// verified reports whether this session verified method within
// accountFresh.
func (a *account) verified(method string) bool {
	at, ok := a.sess.Verified[method]
	return ok && a.now.Sub(at) <= accountFresh && !at.After(a.now.Add(time.Minute))
}

// proofNeeded says what the person must verify afresh before a credential
// changes: their password when they have one, then one of their enrolled
// second factors (a recovery code counts: it is what recovery codes are
// for). A person with neither a password nor a factor signed in by text
// message alone, which can enrol nothing: the admin must.
func (a *account) proofNeeded(f fsm.Factors) string {
	hasPassword := a.user.PasswordHash != ""
	if hasPassword && !a.verified(authn.AMRPassword) {
		return proofPassword
	}
	enrolled := f.TOTP != nil || len(f.Passkeys) > 0 || f.RecoveryLeft() > 0
	factorOK := (f.TOTP != nil && a.verified(authn.AMROTP)) || (len(f.Passkeys) > 0 && a.verified(authn.AMRPasskey)) || a.verified(authn.AMRRecovery)
	switch {
	case enrolled && !factorOK:
		return proofFactor
	case !enrolled && !hasPassword:
		return proofAdmin
	}
	return proofNone
}

// mayChange passes when this session may change a credential now; it asks
// for what is missing otherwise.
func (a *account) mayChange() bool {
	f, err := a.p.cfg.State.Factors(a.user.ID)
	if err != nil {
		a.unavailable("factors: " + err.Error())
		return false
	}
	switch a.proofNeeded(f) {
	case proofPassword:
		a.showSignIn(http.StatusOK, a.text(msgConfirmPassword))
	case proofFactor:
		a.showVerify(http.StatusOK, f, "")
	case proofAdmin:
		msg := keyAskAdmin
		if a.sess.ProviderID != "" {
			// Signed in through an upstream, with nothing of their own
			// here to verify.
			msg = keyAskAdminFederated
		}
		a.showHome(http.StatusForbidden, "", a.text(msg))
	default:
		return true
	}
	return false
}

// verifyMethods are the second factors the person can verify here.
func (a *account) verifyMethods(f fsm.Factors) []string {
	var m []string
	if f.TOTP != nil {
		m = append(m, webui.MethodOTP)
	}
	if f.RecoveryLeft() > 0 {
		m = append(m, webui.MethodRecovery)
	}
	if len(f.Passkeys) > 0 && a.p.wa != nil {
		m = append(m, webui.MethodPasskey)
	}
	return m
}

func (a *account) showVerify(status int, f fsm.Factors, errMsg string) {
	c, ok := a.common(accountStep{Stage: accountVerify, SSOID: a.sess.ID, Then: a.then()})
	if !ok {
		return
	}
	c.Title = a.text(keyVerifyTitle)
	a.p.cfg.UI.SecondFactor(a.w, status, webui.SecondFactorPage{Common: c, Methods: a.verifyMethods(f), Error: errMsg})
}

// verify checks a second factor posted on the verification page, under the
// same throttle as the sign-in's second step, and records it on the
// session (a step-up), which opens the gate for accountFresh.
func (a *account) verify(form url.Values) {
	ctx := a.r.Context()
	f, err := a.p.cfg.State.Factors(a.user.ID)
	if err != nil {
		a.unavailable("factors: " + err.Error())
		return
	}
	pf := postedFactor(form)
	switch {
	case pf.beginsCeremony():
		a.beginVerifyPasskey(f)
		return
	case !pf.known():
		a.page(http.StatusBadRequest, a.text(authn.MsgBadRequest))
		return
	}
	amr, settled, err := a.p.checkFactor(ctx, a.r, a.user, f, pf, a.step.Challenge, "")
	switch {
	case errors.Is(err, errLocked):
		a.showVerify(http.StatusTooManyRequests, f, lockout(a.w, err, a.p.now(), a.text))
		return
	case errors.Is(err, errCodeWrong):
		a.p.log.Info("account: second factor failed", "method", pf.method, "user_id", a.user.ID)
		msg := keyBadCode
		if pf.method == webui.MethodPasskey {
			msg = keyPasskeyFailed
		}
		a.showVerify(http.StatusBadRequest, f, a.text(msg))
		return
	case err != nil:
		a.unavailable("account verify: " + err.Error())
		return
	}
	if a.sess, err = a.p.stepUp(ctx, a.sess, amr, settled, ""); err != nil {
		a.unavailable("account step-up: " + err.Error())
		return
	}
	if a.inv == nil && resumable[a.step.Then] {
		// The change that asked for the verification goes on.
		a.action = a.step.Then
		a.p.log.Info("account: credential change", "user_id", a.user.ID, "sso_session", a.sess.ID, "action", a.action)
		switch a.action {
		case "totp-setup":
			a.totpSetup()
		case "recovery-new":
			a.recoveryNew()
		case "passkey-add":
			a.passkeyBegin()
		}
		return
	}
	a.next(http.StatusOK, a.text(keyConfirmed))
}

// beginVerifyPasskey starts a passkey assertion for the verification page.
func (a *account) beginVerifyPasskey(f fsm.Factors) {
	if len(f.Passkeys) == 0 || a.p.wa == nil {
		a.showVerify(http.StatusBadRequest, f, a.text(keyPasskeyFailed))
		return
	}
	opts, id, err := a.p.beginPasskeyAssertion(a.r.Context(), a.user, f)
	if err != nil {
		a.unavailable("passkey begin: " + err.Error())
		return
	}
	a.ceremony(accountVerify, id, a.text(keyVerifyTitle), webui.PasskeyPage{Ceremony: webui.CeremonyGet, Options: opts, Method: webui.MethodPasskey})
}

// ceremony shows page, a passkey ceremony of stage with the challenge id.
func (a *account) ceremony(stage, id, title string, page webui.PasskeyPage) {
	step := accountStep{Stage: stage, SSOID: a.sess.ID, Challenge: id}
	if stage == accountVerify {
		step.Then = a.then()
	}
	c, ok := a.common(step)
	if !ok {
		return
	}
	c.Title = title
	page.Common, page.CancelURL = c, PathAccount
	if a.inv != nil {
		page.CancelURL = ""
	}
	a.p.cfg.UI.Passkey(a.w, http.StatusOK, page)
}
