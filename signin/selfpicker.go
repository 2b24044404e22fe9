package signin

import (
	"net/url"

	"github.com/oidcd/oidcd/internal/authn"
)

// The language picker of the self-service pages (a forgotten password,
// its reset, registration) and of an invitation's: the sign-in page's
// (webui's "language" form, method=language with lang), posted to the
// page's own action with its step. The handler remembers the language
// (Signin.pickLanguage) and shows the same page again in it.

// pickedLanguage reports whether form is the language picker's.
func pickedLanguage(form url.Values) bool {
	m, _ := authn.FormValue(form, "method")
	return m == methodLanguage
}

// pickLanguage remembers the language the picker posted and keeps it as
// the language of the page's sign-in context (signinContext.UILocale),
// sealed in the step of the page shown again: that page, the ones after
// it and the mail they send are in it, as they are in a sign-in's
// ui_locales. A context without a sign-in (nothing but the language)
// leads nowhere and names no application, as no context does.
func (s *selfPage) pickLanguage(form url.Values) {
	tag := s.p.pickLanguage(s.w, form, s.now)
	if tag == "" {
		return
	}
	var ctx signinContext
	if s.step.Ctx != nil {
		ctx = *s.step.Ctx
	}
	ctx.UILocale = tag
	s.step.Ctx = &ctx
}
