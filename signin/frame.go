package signin

import (
	"net/http"

	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/webui"
)

// Frame is the frame of a page of a sign-in for client clientID: its
// organization's branding, else the site's, in the language chosen for
// this browser (uiLocales is the pending request's ui_locales language,
// "" outside one). It is what the protocol's own pages of a sign-in (the
// organization picker, consent, the error page) wear.
func (p *Signin) Frame(r *http.Request, clientID, uiLocales string) webui.Frame {
	return webui.Frame{Lang: p.language(r, uiLocales), Brand: p.BrandFor(clientID)}
}

// frame is the frame of this flow's pages.
func (f *flow) frame() webui.Frame {
	return webui.Frame{Lang: f.language(), Brand: f.p.BrandFor(f.st.ClientID)}
}

// frame is the frame of a self-service page: the branding of the
// organization it is about (an invitation's, a registration's), else of
// the client of the sign-in it came from, else the site's; in the
// language of that sign-in (its ui_locales, or the one picked on its
// page), else the browser's.
func (s *selfPage) frame(ctx *signinContext) webui.Frame {
	f := webui.Frame{Lang: s.p.language(s.r, ctx.uiLocale())}
	switch {
	case ctx != nil && ctx.OrgID != "":
		f.Brand = s.p.BrandForOrg(ctx.OrgID)
	case ctx != nil:
		f.Brand = s.p.BrandFor(ctx.ClientID)
	default:
		f.Brand = s.p.BrandForOrg("")
	}
	return f
}

// frame is the frame of /account's pages: the site's branding (a person
// may belong to several organizations, and /account is none of theirs),
// or on an invitation's page its organization's.
func (a *account) frame() webui.Frame {
	org := ""
	if a.inv != nil {
		org = a.inv.org.ID
	}
	return webui.Frame{Lang: a.lang(), Brand: a.p.BrandForOrg(org)}
}

// uiLocale is the language of the sign-in ctx came from ("" without one).
func (ctx *signinContext) uiLocale() string {
	if ctx == nil {
		return ""
	}
	return ctx.UILocale
}

// lang is the language of this self-service page: that of the sign-in it
// continues (s.step.Ctx), else the browser's.
func (s *selfPage) lang() language.Tag { return s.p.language(s.r, s.step.Ctx.uiLocale()) }

// text is a catalog message in the language of this self-service page.
func (s *selfPage) text(key string, args ...any) string {
	return s.p.cfg.UI.Text(s.lang(), key, args...)
}
