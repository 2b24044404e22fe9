package signin

// Constant texts of the sign-in pages (the ones the authorization flow
// shows as well are in internal/authn).
const (
	msgSMSDisabled   = "Text-message sign-in is not available."
	msgLocked        = "Too many failed attempts. Wait a few minutes, then try again."
	msgLockedMinute  = "Too many failed attempts. Wait about a minute, then try again."
	msgLockedMinutes = "Too many failed attempts. Wait about %d minutes, then try again."
	msgBadCode       = "That code is not correct. Check it and try again."
	msgNoCode        = "Enter the code."
	msgPasskeyFailed = "The passkey could not be verified. Try again or use another method." // #nosec G101 -- a message shown to people, not a credential
	msgBadPhone      = "Enter your phone number in international format, for example +15551234567."
	msgSMSLimit      = "Too many codes were sent to this number. Wait a while, then try again."
	msgSMSExpired    = "That code has expired or was used up. Request a new one."
	msgSMSFailed     = "The text message could not be sent. Try again in a moment."
	msgDirectoryDown = "Your organization's directory cannot be reached right now, so your password cannot be checked. Try again in a few minutes."
)
