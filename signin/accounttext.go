package signin

// Catalog keys (webui/locales/<tag>/account.json) of the texts that
// /account, the self-service pages and the invitation's page pass to
// their pages, translated into the page's language when shown
// (account.text, selfPage.text).
const (
	// /account
	keyTOTPRemoved       = "account.notice.totp_removed"
	keyTOTPSet           = "account.notice.totp_set"
	keyPasskeyAdded      = "account.notice.passkey_added"
	keyPasskeyRemoved    = "account.notice.passkey_removed"
	keyConfirmed         = "account.notice.confirmed"
	keySessionEnded      = "account.notice.session_ended"
	keyOthersEnded       = "account.notice.others_ended" // a plural: its argument is the count
	keyConsentRevoked    = "account.notice.consent_revoked"
	keyPasswordChanged   = "account.notice.password_changed" // #nosec G101 -- a message key, not a credential
	keyEmailPending      = "account.notice.email_pending"
	keyEmailConfirm      = "account.notice.email_confirm"
	keyNoPasskey         = "account.error.no_passkey"
	keyChangeFailed      = "account.error.change_failed"
	keyBadCode           = "account.error.bad_code"
	keyPasskeysOff       = "account.error.passkeys_off"
	keyPasskeyRegister   = "account.error.passkey_register"
	keyPasskeyFailed     = "account.error.passkey_failed"
	keyAskAdmin          = "account.error.ask_admin"
	keyNoSession         = "account.error.no_session"
	keyNoConsent         = "account.error.no_consent"
	keyPasswordDirectory = "account.error.password_directory" // #nosec G101 -- a message key, not a credential
	keyNoPassword        = "account.error.no_password"        // #nosec G101 -- a message key, not a credential
	keyWrongPassword     = "account.error.wrong_password"     // #nosec G101 -- a message key, not a credential
	keyEmailDirectory    = "account.error.email_directory"
	keyEmailSame         = "account.error.email_same"
	keyEmailLimit        = "account.error.email_limit"
	keyVerifyTitle       = "account.verify.title"
	keyAddPasskey        = "account.passkeys.add"
	keyPasskeyName       = "account.passkeys.default_name"
	keyThisPage          = "account.activity.this_page"
	keyAdminApp          = "account.activity.admin_app"
	keyScopeSeparator    = "account.apps.scope_separator"
	keyPasskeysOffHere   = "account.passkeys.off" // its argument is the issuer's host
	keyRefusedWith       = "account.activity.refused_with"
	keyResetPage         = "account.activity.reset_page"
	keyResetRequested    = "account.activity.reset_requested"
	keyResetCompleted    = "account.activity.reset_completed"
	// the signed-out page, as logout shows it (flow.json)
	keySignedOutTitle = "logout.title"
	keySignedOut      = "logout.done"

	// shared by the self-service pages
	keyBadAddress         = "self.error.bad_address"
	keyAddressLocal       = "self.error.address_local"
	keyPasswordLength     = "self.error.password_length" // #nosec G101 -- a message key, not a credential
	keyFormExpired        = "self.error.form_expired"
	keyLinkInvalidTitle   = "self.link_invalid.title"
	keyLinkInvalid        = "self.link_invalid.message"
	keySendLink           = "self.send_link"
	keyBackToSignIn       = "self.back_to_signin"
	keySignIn             = "self.sign_in"
	keyToAccount          = "self.to_account"
	keyCreateAccount      = "self.create_account"
	keyCheckEmail         = "self.check_email"
	keyAccountExistsTitle = "self.account_exists.title"
	keyAccountExists      = "self.account_exists.message"
	keyAccountMadeTitle   = "self.account_made.title"
	keyMailDirectory      = "self.mail.directory"

	// a forgotten password, its reset link
	keyForgotTitle      = "forgot.title"
	keyForgotLead       = "forgot.lead"
	keyForgotSent       = "forgot.sent"
	keyResetTitle       = "reset.title"
	keyResetLead        = "reset.lead"
	keyResetSubmit      = "reset.submit"
	keyPasswordSetTitle = "reset.done.title"
	keyPasswordSet      = "reset.done.message" // #nosec G101 -- a message key, not a credential

	// registration
	keyRegisterTitle      = "register.title"
	keyRegisterLead       = "register.lead"
	keyRegisterOffTitle   = "register.off.title"
	keyRegisterOff        = "register.off.message"
	keyRegisterStart      = "register.start"
	keyRegisterSent       = "register.sent"
	keyRegisterDomain     = "register.domain"
	keyRegisterDomainAny  = "register.domain_any"
	keyRegisterPwTitle    = "register.password.title"
	keyRegisterPwLead     = "register.password.lead"
	keyRegisterPwLeadOrg  = "register.password.lead_org"
	keyRegisteredSignIn   = "register.made.sign_in"
	keyRegisteredSignedIn = "register.made.signed_in"

	// a new address's link
	keyVerifyEmailTitle   = "verify.title"
	keyVerifyLead         = "verify.lead"
	keyVerifyLeadOther    = "verify.lead_other"
	keyEmailTakenTitle    = "verify.taken.title"
	keyEmailTaken         = "verify.taken.message"
	keyNoticeLimitTitle   = "verify.notice_limit.title"
	keyNoticeLimit        = "verify.notice_limit.message"
	keyEmailVerifiedTitle = "verify.done.title"
	keyEmailVerified      = "verify.done.message"
	keyConfirmSubmit      = "confirm.submit"

	// invitations
	keyInviteTitle          = "invite.title"
	keyInviteAccept         = "invite.accept"
	keyInviteLeadMember     = "invite.lead_member"
	keyInviteLeadNew        = "invite.lead_new"
	keyInviteFresh          = "invite.fresh"
	keyInviteJoinedTitle    = "invite.joined.title"
	keyInviteJoined         = "invite.joined.message"
	keyInviteMade           = "invite.made.message"
	keyInviteOtherTitle     = "invite.other.title"
	keyInviteOther          = "invite.other.message"
	keyInviteSuspendedTitle = "invite.suspended.title"
	keyInviteSuspended      = "invite.suspended.message"
)
