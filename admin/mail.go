package admin

import (
	"net/http"
	"strings"
	"time"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/i18n"
)

// Mail to people from the admin API: invitations (invitations.go) and
// address checks (POST /users/{id}/verify-email). A route that sends mail
// builds its link's token here (email.NewToken: 256 random bits, only the
// hash replicated), composes and seals the message under Config.KEK, and
// commits link and message in one command, so an acknowledged request
// always has its message in the replicated outbox. The token is in the
// sealed message alone: never in an answer, a log line or the audit
// trail.
//
// Without mail (Config.Mail false: neither --smtp-url nor --email-outbox)
// nothing could be delivered, so those routes answer 409 CONFLICT
// (noMail) before reading their body; reads, withdrawals and an
// organization's registration settings still work.

// Lifetimes of the links the admin API sends.
const (
	// DefaultInvitationLifetime is an invitation's when the request names
	// none; MinInvitationLifetime and MaxInvitationLifetime bound
	// expires_in.
	DefaultInvitationLifetime = 7 * 24 * time.Hour
	MinInvitationLifetime     = time.Hour
	MaxInvitationLifetime     = 30 * 24 * time.Hour
	// VerifyEmailLifetime is an address check's link's.
	VerifyEmailLifetime = 24 * time.Hour
)

// defaultMailLocale is the language of the messages the admin API sends
// when the request names none (its field locale).
const defaultMailLocale = "en"

// mailLocale checks a request's locale, the language of the message it
// sends: one of i18n.Tags, or "" for defaultMailLocale.
func (p *problems) mailLocale(field, locale string) string {
	if locale == "" {
		return defaultMailLocale
	}
	p.oneOf(field, locale, i18n.Tags()...)
	return locale
}

// noMailMessage is the answer of a route that sends mail on a provider
// without any.
const noMailMessage = "this provider sends no mail: start its nodes with --smtp-url or --email-outbox to send invitations and address checks"

// mailReady answers 409 CONFLICT itself when the provider sends no mail.
func (a *api) mailReady(w http.ResponseWriter, r *http.Request) bool {
	if a.Mail {
		return true
	}
	httpx.WriteError(w, r, http.StatusConflict, httpx.CodeConflict, noMailMessage)
	return false
}

// linkURL is the address of an emailed link: the issuer, the page's path,
// the token.
func (a *api) linkURL(page, token string) string {
	return strings.TrimSuffix(a.Issuer, "/") + "/" + page + "/" + token
}

// sealed composes template for d in locale (checked by mailLocale) and
// seals it for the outbox, to address to about the person userID (""
// for none). A failure is the node's (a template or the KEK), answered
// 500 here and logged without the message.
func (a *api) sealed(w http.ResponseWriter, r *http.Request, template, locale, to, userID string, d email.Data) (fsm.OutgoingEmail, bool) {
	d.Site = email.Site(a.Issuer)
	msg, err := email.Compose(template, locale, d)
	if err == nil {
		var out fsm.OutgoingEmail
		if out, err = email.Outgoing(a.KEK, to, email.Kind(template), locale, userID, msg); err == nil {
			return out, true
		}
	}
	a.Logger.Error("admin: compose a message", "template", template, "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
	httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "internal error")
	return fsm.OutgoingEmail{}, false
}

// newToken is a link's token and its hash; a failure (no randomness) is
// answered 500 here.
func (a *api) newToken(w http.ResponseWriter, r *http.Request) (token, hash string, ok bool) {
	token, hash, err := email.NewToken()
	if err != nil {
		a.Logger.Error("admin: link token", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
		httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "internal error")
		return "", "", false
	}
	return token, hash, true
}

// mailEvent is the audit event of an admin write of the people's own way
// in: r's admin event (actor, credential, target, organization) as an
// event of type typ (fsm.EventInvitation, fsm.EventVerifyEmail), whose
// detail.action is the step (sent, withdrawn) and detail.route the admin
// route. extra adds detail; never a token.
func mailEvent(r *http.Request, typ, action string, extra map[string]string) fsm.Audit {
	ev := adminEvent(r)
	ev.Type = typ
	ev.Detail["route"] = ev.Detail["action"]
	ev.Detail["action"] = action
	for k, v := range extra {
		ev.Detail[k] = v
	}
	return ev
}
