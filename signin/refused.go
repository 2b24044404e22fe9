package signin

import (
	"net/http"
)

// Refused records that the authorization flow refused a sign-in of the
// person userID to clientID after its steps succeeded, for reason (an
// authn.Reason*): a failed sign-in event, which /account's activity shows
// as refused in place of the step it follows (folded). Best effort, as
// recordFailure is: the refusal is answered whether or not it is
// recorded. It implements oidc.Refusals.
func (p *Signin) Refused(r *http.Request, userID, clientID, reason string) {
	p.recordFailure(r.Context(), userID, clientID, reason)
}
