package signin

import (
	"net/http"
	"net/url"
	"time"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/webui"
)

// Catalog keys (webui/locales) of the messages the sign-in pages show:
// they are translated into the page's language when shown (flow.text,
// account.text), or into English on a page not translated yet
// (Signin.english).
const (
	msgBadPassword        = "signin.error.bad_password" // #nosec G101 -- a message key, not a credential
	msgSMSDisabled        = "signin.error.sms_disabled"
	msgLocked             = "signin.error.locked"
	msgLockedMinutes      = "signin.error.locked_minutes" // a plural: its argument is the count
	msgBadPhone           = "signin.error.bad_phone"
	msgSMSLimit           = "signin.error.sms_limit"
	msgSMSFailed          = "signin.error.sms_failed"
	msgSMSExpired         = "signin.error.sms_expired"
	msgDirectoryDown      = "signin.error.directory_down"
	msgInviteWrongAccount = "signin.error.wrong_account"
	msgConfirmPassword    = "signin.error.confirm_password" // #nosec G101 -- a message key, not a credential
	msgInviteSignIn       = "signin.invitation.lead"
	titleSignInAccount    = "signin.title.account"
	titleSignInInvitation = "signin.title.invitation"
	msgBadCode            = "code.error.wrong"
	msgNoCode             = "code.error.missing"
	msgPasskeyFailed      = "passkey.error.failed" // #nosec G101 -- a message key, not a credential
	msgSMSText            = "smscode.text"         // the text message: code, host, minutes
)

// methodLanguage is the language picker's method button: its lang field
// is the language picked.
const methodLanguage = "language"

// langCookieLife is how long a picked language is remembered.
const langCookieLife = 365 * 24 * time.Hour

// language is the language of this browser's pages: the request's
// ui_locales (kept in the pending request, "" outside one), else the
// language picked earlier (webui.LangCookie), else Accept-Language.
func (p *Signin) language(r *http.Request, uiLocales string) language.Tag {
	return webui.Negotiate(uiLocales, p.cookieValue(r, webui.LangCookie, "/"), r.Header.Get("Accept-Language"))
}

// pickLanguage reads the picker's lang field and, for one of the pages'
// languages, remembers it in webui.LangCookie (HttpOnly, SameSite=Lax,
// Secure on an https issuer) and returns it; "" for anything else.
func (p *Signin) pickLanguage(w http.ResponseWriter, form url.Values, now time.Time) string {
	v, _ := authn.FormValue(form, "lang")
	tag := webui.UILocale(v)
	if tag != "" {
		p.jar.Set(w, webui.LangCookie, tag, "/", now.Add(langCookieLife))
	}
	return tag
}

// english is a catalog message in English, for a page not translated
// yet.
func (p *Signin) english(key string, args ...any) string {
	return p.cfg.UI.Text(language.English, key, args...)
}

// language is the language of this flow's pages, chosen once per turn
// (and again after a pick).
func (f *flow) language() language.Tag {
	if f.lang == language.Und {
		f.lang = f.p.language(f.r, f.pend.UILocales)
	}
	return f.lang
}

// text is a catalog message in the language of this flow's pages.
func (f *flow) text(key string, args ...any) string {
	return f.p.cfg.UI.Text(f.language(), key, args...)
}

// text is a catalog message in the language of the account pages.
func (a *account) text(key string, args ...any) string {
	return a.p.cfg.UI.Text(a.lang(), key, args...)
}

func (a *account) lang() language.Tag { return a.p.language(a.r, "") }

// Texts of the people's own way in: a forgotten password, an emailed
// link's pages, registration, invitations and a new address on /account.
const (
	msgBadAddress      = "Enter an email address such as name@example.com."
	msgAddressLocal    = "Use an address whose part before the @ has only plain letters, digits and . _ + - characters."
	msgPasswordLength  = "The new password must be 8 to 1024 characters long." // #nosec G101 -- a message shown to people, not a credential
	msgFormExpired     = "This form has expired or could not be verified. Open the page again and try once more."
	titleLinkInvalid   = "This link does not work"
	msgLinkInvalid     = "It was already used, has expired, or was replaced by a newer one or withdrawn. If you still need it, ask for a new one."
	msgForgotLead      = "Enter the email address of your account. We will send you a link to choose a new password."
	titleCheckEmail    = "Check your email"
	msgForgotSent      = "If an account exists for that address, we sent a link to it. The link works once and for 30 minutes. If nothing arrives, check your spam folder or try again later."
	msgResetLead       = "Setting it signs you out on every device where you are signed in."
	titlePasswordSet   = "Your password was changed"
	msgPasswordSet     = "Every session of your account was signed out. Sign in with your new password."
	msgRegisterLead    = "Enter your email address. We will send you a link to choose a password and join %s."
	titleRegisterOff   = "Registration is not open"
	msgRegisterOff     = "This organization does not let people create their own accounts. Ask its administrators for an invitation."
	msgRegisterStart   = "Registration starts from an application's sign-in page. Open the application again and choose Create an account."
	msgRegisterSent    = "We sent a message to %s. Open the link in it within 24 hours to finish. If nothing arrives, check your spam folder."
	msgRegisterDomain  = "This address cannot be used to register here. Use your address at %s."
	msgRegisterDomainX = "This address cannot be used to register here. Use your organization's address."
	titleAccountExists = "You already have an account"
	msgAccountExists   = "An account with this address exists already. Sign in, or choose a new password if you forgot it."
	titleEmailVerified = "Your email address is confirmed"
	msgEmailVerified   = "The address of your account is now %s."
	titleEmailTaken    = "This address is taken"
	msgEmailTaken      = "Another account uses this address now, so it cannot become yours."
	msgEmailDirectory  = "Your email address is kept by your organization's directory: change it there."
	msgEmailSame       = "That is your address already."
	msgEmailPending    = "Pending: we sent a link to %s. Open it within 24 hours to make it your address; until then it stays %s."
	msgEmailConfirm    = "Pending: we sent a link to %s. Open it within 24 hours to confirm the address."
	msgEmailLimit      = "Too many address changes were asked for in the last hour. Wait a while, then try again."
	titleInviteJoined  = "You joined %s"
	msgInviteJoined    = "You can now sign in to its applications."
	titleAccountMade   = "Your account was created"
	msgAccountMade     = "You are a member of %s. You can now sign in to its applications with your email address and the password you chose."
	titleInviteOther   = "This invitation is for another address"
	msgInviteOther     = "Sign in with the address the invitation was sent to, or ask for an invitation to your own."
	titleSuspended     = "Your membership is suspended"
	msgSuspended       = "Your membership of %s is suspended, so the invitation cannot renew it. Ask its administrators."
	msgInviteFresh     = "Sign in again, then open the invitation's link once more."
)
