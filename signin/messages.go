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

// Texts of the people's own way in: a forgotten password, an emailed
// link's pages, registration, invitations and a new address on /account.
const (
	msgBadAddress         = "Enter an email address such as name@example.com."
	msgAddressLocal       = "Use an address whose part before the @ has only plain letters, digits and . _ + - characters."
	msgPasswordLength     = "The new password must be 8 to 1024 characters long." // #nosec G101 -- a message shown to people, not a credential
	msgFormExpired        = "This form has expired or could not be verified. Open the page again and try once more."
	titleLinkInvalid      = "This link does not work"
	msgLinkInvalid        = "It was already used, has expired, or was replaced by a newer one or withdrawn. If you still need it, ask for a new one."
	msgForgotLead         = "Enter the email address of your account. We will send you a link to choose a new password."
	titleCheckEmail       = "Check your email"
	msgForgotSent         = "If an account exists for that address, we sent a link to it. The link works once and for 30 minutes. If nothing arrives, check your spam folder or try again later."
	msgResetLead          = "Setting it signs you out on every device where you are signed in."
	titlePasswordSet      = "Your password was changed"
	msgPasswordSet        = "Every session of your account was signed out. Sign in with your new password."
	msgRegisterLead       = "Enter your email address. We will send you a link to choose a password and join %s."
	titleRegisterOff      = "Registration is not open"
	msgRegisterOff        = "This organization does not let people create their own accounts. Ask its administrators for an invitation."
	msgRegisterStart      = "Registration starts from an application's sign-in page. Open the application again and choose Create an account."
	msgRegisterSent       = "We sent a message to %s. Open the link in it within 24 hours to finish. If nothing arrives, check your spam folder."
	msgRegisterDomain     = "This address cannot be used to register here. Use your address at %s."
	msgRegisterDomainX    = "This address cannot be used to register here. Use your organization's address."
	titleAccountExists    = "You already have an account"
	msgAccountExists      = "An account with this address exists already. Sign in, or choose a new password if you forgot it."
	titleEmailVerified    = "Your email address is confirmed"
	msgEmailVerified      = "The address of your account is now %s."
	titleEmailTaken       = "This address is taken"
	msgEmailTaken         = "Another account uses this address now, so it cannot become yours."
	msgEmailDirectory     = "Your email address is kept by your organization's directory: change it there."
	msgEmailSame          = "That is your address already."
	msgEmailPending       = "Pending: we sent a link to %s. Open it within 24 hours to make it your address; until then it stays %s."
	msgEmailConfirm       = "Pending: we sent a link to %s. Open it within 24 hours to confirm the address."
	msgEmailLimit         = "Too many address changes were asked for in the last hour. Wait a while, then try again."
	msgInviteSignIn       = "This invitation is for %s. Sign in with that address to accept it."
	msgInviteWrongAccount = "You signed in with another account. Sign in with the address the invitation was sent to."
	titleInviteJoined     = "You joined %s"
	msgInviteJoined       = "You can now sign in to its applications."
	titleAccountMade      = "Your account was created"
	msgAccountMade        = "You are a member of %s. You can now sign in to its applications with your email address and the password you chose."
	titleInviteOther      = "This invitation is for another address"
	msgInviteOther        = "Sign in with the address the invitation was sent to, or ask for an invitation to your own."
	titleSuspended        = "Your membership is suspended"
	msgSuspended          = "Your membership of %s is suspended, so the invitation cannot renew it. Ask its administrators."
	msgInviteFresh        = "Sign in again, then open the invitation's link once more."
)
