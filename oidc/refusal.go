package oidc

import "net/http"

// Refusals is what the flow's Steps may implement (package signin does)
// to record a sign-in the flow refuses after its steps succeeded: the
// sign-in's events, failures included, are the sign-in's (audit.go).
// reason is one of authn.Reason*.
type Refusals interface {
	Refused(r *http.Request, userID, clientID, reason string)
}

// refuse redirects e to the client, a refusal of the person's sign-in for
// reason, and has it recorded (Refusals) first.
func (f *flow) refuse(e *Error, reason string) {
	if rf, ok := f.p.cfg.Steps.(Refusals); ok {
		rf.Refused(f.r, f.user.ID, f.client.ID, reason)
	}
	f.fail(e)
}
