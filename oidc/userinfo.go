package oidc

import "net/http"

// userinfo is the userinfo response (the Userinfo schema of
// docs/openapi/oidc.json).
type userinfo struct {
	Sub           string `json:"sub"`
	OrgID         string `json:"organization_id"`
	Email         string `json:"email,omitempty"`
	EmailVerified *bool  `json:"email_verified,omitempty"`
}

// handleUserinfo is GET and POST /userinfo. The email
// fields come only with the email scope and are read live from the
// account. POST errors carry no body.
func (p *Provider) handleUserinfo(w http.ResponseWriter, r *http.Request) {
	style := bearerJSON
	if r.Method == http.MethodPost {
		style = bearerNoBody
	}
	tok, acc, ok := p.bearer(w, r, style, true)
	if !ok {
		return
	}
	out := userinfo{Sub: tok.sub, OrgID: tok.org}
	if tok.hasScope(ScopeEmail) {
		verified := acc.EmailVerified
		out.Email, out.EmailVerified = acc.Email, &verified
	}
	writeNoStoreJSON(w, out)
}
