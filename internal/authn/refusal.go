package authn

// Reasons the authorization flow (package oidc) refuses a sign-in whose
// steps succeeded: the application asks for more than the session has
// and the person cannot give it. Package signin records each as a failed
// sign-in event (its detail.reason), so the person's account page says
// "refused" rather than "signed in".
const (
	// ReasonNoSecondFactor: the application needs a second factor and
	// the person has none enrolled.
	ReasonNoSecondFactor = "no_second_factor"
	// ReasonRecoveryTooWeak: the second step was a recovery code, which
	// proves the person but gives no strength.
	ReasonRecoveryTooWeak = "recovery_code_too_weak"
)
