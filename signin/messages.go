package signin

import (
	"net/http"
	"net/url"
	"time"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/webui"
)

// Catalog keys (webui/locales) of the messages the sign-in pages show:
// they are translated into the page's language when shown (flow.text,
// account.text).
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
	return i18n.Negotiate(uiLocales, p.cookieValue(r, webui.LangCookie, "/"), r.Header.Get("Accept-Language"))
}

// pickLanguage reads the picker's lang field and, for one of the pages'
// languages, remembers it in webui.LangCookie (HttpOnly, SameSite=Lax,
// Secure on an https issuer) and returns it; "" for anything else.
func (p *Signin) pickLanguage(w http.ResponseWriter, form url.Values, now time.Time) string {
	v, _ := authn.FormValue(form, "lang")
	tag := i18n.UILocale(v)
	if tag != "" {
		p.sessions.SetCookie(w, webui.LangCookie, tag, "/", now.Add(langCookieLife))
	}
	return tag
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

// lang is the language of the account pages (the browser's), chosen once
// a request.
func (a *account) lang() language.Tag {
	if a.language == language.Und {
		a.language = a.p.language(a.r, "")
	}
	return a.language
}
