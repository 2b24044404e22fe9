package oidc

import (
	"errors"
	"net/http"
	"net/url"
	"slices"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/webui"
)

// Consent decisions, the values of the consent page's decision button.
const (
	decisionAllow = "allow"
	decisionDeny  = "deny"
)

// consentCovers reports whether the person's stored consent for the client
// includes every scope.
func (p *Provider) consentCovers(userID, clientID string, scopes []string) (bool, error) {
	c, err := p.cfg.State.Consent(userID, clientID)
	if errors.Is(err, fsm.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, s := range scopes {
		if !slices.Contains(c.Scopes, s) {
			return false, nil
		}
	}
	return true, nil
}

// grantedScopes is what to record after "allow": the earlier consent plus
// the scopes just granted, sorted.
func (p *Provider) grantedScopes(userID, clientID string, scopes []string) ([]string, error) {
	c, err := p.cfg.State.Consent(userID, clientID)
	if err != nil && !errors.Is(err, fsm.ErrNotFound) {
		return nil, err
	}
	out := slices.Concat(c.Scopes, scopes)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// showConsent answers with the consent page for org (stage consent).
func (f *flow) showConsent(org fsm.Org) {
	f.pend.OrgID = org.ID
	c, ok := f.common(stageConsent, PathAuthorize)
	if !ok {
		return
	}
	lines := make([]webui.ScopeLine, 0, len(f.pend.Req.Scopes))
	for _, s := range f.pend.Req.Scopes {
		// Every scope a request may name (checkScope) has its line,
		// consent.scope.<scope>.
		lines = append(lines, webui.ScopeLine{Name: s, Description: f.p.cfg.UI.Text(c.Lang, "consent.scope."+s)})
	}
	f.p.cfg.UI.Consent(f.w, http.StatusOK, webui.ConsentPage{Common: c, Scopes: lines, OrgName: org.Name, Email: f.user.Email})
}

// consentDecision handles the posted consent form. A refusal ends on a
// page, never a redirect to the client.
func (f *flow) consentDecision(form url.Values) {
	switch d, _ := authn.FormValue(form, "decision"); d {
	case decisionAllow:
		// The grant counts only for the session that saw the page; if the
		// browser's session changed, the pipeline asks afresh.
		f.proceed(f.sameSession())
	case decisionDeny:
		if _, err := f.r.Cookie(cookieAuthz); err == nil {
			f.p.clearCookie(f.w, cookieAuthz, authzCookiePath)
		}
		f.p.log.Info("authorize: consent declined", "client_id", f.client.ID, "reference", f.reference())
		fr := f.frame()
		f.p.cfg.UI.Message(f.w, http.StatusOK, webui.MessagePage{Frame: fr, Title: f.p.cfg.UI.Text(fr.Lang, "consent.declined.title"),
			Message: f.p.cfg.UI.Text(fr.Lang, "consent.declined", f.client.Name)})
	default:
		f.page(http.StatusBadRequest, msgBadRequest, "consent decision missing or unknown")
	}
}
