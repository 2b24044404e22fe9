package webui

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/text/language"
)

// Frame is what every page shows around its own content: the language
// it is in and the branding it wears.
type Frame struct {
	// Lang is the language of a translated page (Negotiate); the zero
	// value is English. Pages not translated yet ignore it.
	Lang  language.Tag
	Brand Brand
}

// Brand is what a page shows of a branding: the site's, or the
// organization's of the client being signed in to. Every field may be
// "": the page then goes without (no logo, the stylesheet's own colours,
// no support line).
type Brand struct {
	// DisplayName names the site (or organization) in the page's header.
	DisplayName string
	// LogoURL is a path on the provider's own origin (img-src 'self'),
	// shown with <img> beside the name, never inlined, so an SVG logo's
	// content never runs in a page.
	LogoURL string
	// StyleURL is a stylesheet on the provider's own origin that sets
	// the custom properties --brand-primary, --brand-on-primary and
	// --brand-primary-hover, linked after the page's own: no inline
	// style, so the pages' CSP stays as it is.
	StyleURL     string
	SupportURL   string // a help page, linked in the page's footer
	SupportEmail string // a help address, linked (mailto:) in the footer
}

// Common is the data every sign-in step carries.
type Common struct {
	Frame
	Title     string // page title and heading; each page has a default
	AppName   string // the relying party's display name; may be empty
	CSRFToken string // posted back unchanged as hidden input csrf_token
	Action    string // form action URL, path and query, e.g. /authorize?...
	Step      string // opaque step handle, posted back as hidden input step
}

// SignInPage is the first sign-in step: email and password, and
// optionally a text-message code sent to a phone number.
type SignInPage struct {
	Common
	Lead       string // what the sign-in is for, under the heading; may be empty
	Email      string // re-filled after a failed attempt
	Error      string // a message the person can act on; empty for none
	SMSEnabled bool   // offer the phone input and the method=sms button
	Phone      string // re-filled after a failed attempt
	// ForgotURL and RegisterURL, when set, are the links under the form
	// to the forgotten-password page and to the registration page.
	ForgotURL, RegisterURL string
	// LanguagePicker shows a form under the sign-in form that posts
	// method=language with the chosen lang (and the hidden inputs), to
	// the same Action.
	LanguagePicker bool
	// Providers are the upstream providers of this sign-in: a submit
	// button idp=<Slug> each, "Continue with <DisplayName>".
	Providers []ProviderButton
}

// ProviderButton is one upstream provider on the sign-in page.
type ProviderButton struct{ Slug, DisplayName string }

// Second-factor methods, the values of the method button on the
// second-factor page.
const (
	MethodPasskey  = "passkey"
	MethodOTP      = "otp"
	MethodRecovery = "recovery"
)

// SecondFactorPage asks for a second factor. Methods is a subset of
// MethodPasskey, MethodOTP and MethodRecovery; the buttons are always in
// the order otp, recovery, passkey so that Enter in the code input submits
// a code method.
type SecondFactorPage struct {
	Common
	Methods []string
	Error   string
}

// SMSCodePage asks for the code of a text-message sign-in.
type SMSCodePage struct {
	Common
	Phone string // masked, e.g. ••••••••4567
	Error string
}

// Passkey ceremonies.
const (
	CeremonyGet    = "get"    // an assertion (second factor)
	CeremonyCreate = "create" // a registration (/account)
)

// PasskeyPage runs a WebAuthn ceremony in the browser (static/passkey.js)
// and posts the result back as the hidden input credential, with the
// hidden input Field (default "method") set to Method.
type PasskeyPage struct {
	Common
	Ceremony  string // CeremonyGet or CeremonyCreate
	Options   string // the relying-party library's options, JSON
	Field     string
	Method    string
	CancelURL string // optional "use another method" link
	Error     string
}

// AccountPage is the self-service /account page.
type AccountPage struct {
	Common
	Email           string
	HasTOTP         bool
	Passkeys        []PasskeyLine
	RecoveryLeft    int
	PasskeysEnabled bool // the issuer has a domain name (WebAuthn needs one)
	// PasskeysOff, when PasskeysEnabled is false, says why passkeys cannot
	// be added here (the issuer's host is an IP address), in place of an
	// empty section without a button.
	PasskeysOff   string
	Notice, Error string
	HasPassword   bool           // the person has a password to change
	Activity      []ActivityLine // recent sign-ins, newest first
	Sessions      []SessionLine  // live sessions
	Apps          []ConsentLine  // applications consented to
	// EmailChange offers a new address (the email-change action, a new_email
	// input): mail can go out and the person's address is their own, not
	// their directory's. EmailVerified says whether the current one is
	// proven.
	EmailChange, EmailVerified bool
	// Section is the form the Notice or Error is about: "password-change"
	// and "email-change" show them in that section, tied to its fields
	// (the page lands there: the form's action ends with the section's
	// fragment); anything else at the top. NewEmail re-fills the new
	// address after an error.
	Section, NewEmail string
	// Identities are the person's links to upstream providers, an
	// identity-unlink button each (identity_id=<ID>); LinkProviders the
	// providers they may link one more of, a button each in one form
	// (action=identity-link, provider=<Slug>): "Link <DisplayName>". The
	// section is shown when either holds one.
	Identities    []IdentityLine
	LinkProviders []ProviderButton
	// LanguagePicker shows the language picker (as on the sign-in page)
	// at the foot of the page: it posts method=language with the chosen
	// lang and the hidden inputs to Action.
	LanguagePicker bool
}

// ActionSignOut is the account page's button that ends this browser's
// session, as a logout does.
const ActionSignOut = "sign-out"

// IdentityLine is one link to an upstream provider: the provider's
// name, the address the upstream gave ("" for none), when it was linked
// and when it was last signed in through.
type IdentityLine struct {
	ID, Provider, Email, Linked, Used string
}

// ActivityLine is one recent sign-in step: when, to what, from where, and
// its strength (acr) or, for a failure, its reason. Result, when set, is
// the line's whole result as the person reads it (a sign-in the
// application refused, a password reset), shown in place of the one
// made of OK and Strength.
type ActivityLine struct {
	Time, App, Address, Strength string
	OK                           bool
	Result                       string
}

// SessionLine is one live session of the person, with the applications
// signed in through it.
type SessionLine struct {
	ID, Started, Strength string
	Apps                  []string
	Current               bool // this browser's
}

// ConsentLine is one application the person consented to.
type ConsentLine struct {
	ClientID, Name, Scopes, Granted string
}

// PasskeyLine is one registered passkey on the account page.
type PasskeyLine struct {
	ID, Name, Created string
}

// TOTPSetupPage shows a new authenticator-app secret and asks for a code.
// URI is the secret's otpauth: URI, built by the provider (never from
// input): the page links it (Link) and, when QRURL is set, shows the
// image at QRURL, a path on the provider's own origin (img-src 'self'),
// QRSize CSS pixels square, that draws it as a QR code. The key is shown
// beside it in groups of four (KeyGroups) for those who type it.
type TOTPSetupPage struct {
	Common
	Secret, URI string
	QRURL       string
	QRSize      int
	Error       string
}

// Link is URI as a link target. html/template filters a URL of an
// unknown scheme to #ZgotmplZ, so an otpauth: URI passes as a
// template.URL, but only one that parses as otpauth://totp/ (what
// internal/factor and signin build); anything else gives "" and no link.
func (p TOTPSetupPage) Link() template.URL {
	u, err := url.Parse(p.URI)
	if err != nil || u.Scheme != "otpauth" || u.Host != "totp" || u.Opaque != "" || u.User != nil || strings.ContainsAny(p.URI, "\"<>` \t\r\n") {
		return ""
	}
	return template.URL(p.URI) // #nosec G203 -- an otpauth://totp/ URI the provider built (see above)
}

// KeyGroups is the secret in groups of four characters, separated by
// spaces, as a person types it (authenticator apps ignore the spaces).
func (p TOTPSetupPage) KeyGroups() string {
	var b strings.Builder
	for i, r := range p.Secret {
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// RecoveryCodesPage shows fresh recovery codes once.
type RecoveryCodesPage struct {
	Frame
	Title   string
	Codes   []string
	BackURL string
}

// PickerPage lets the person choose the organization to sign in to.
type PickerPage struct {
	Common
	Query            string // the current search, max 64 characters
	Orgs             []PickerOrg
	PrevURL, NextURL string // empty when there is no such page
	Error            string
}

// PickerOrg is one organization on the picker page.
type PickerOrg struct {
	ID, Name, Slug string
}

// ConsentPage asks the person to share the listed scopes with the app.
type ConsentPage struct {
	Common
	Scopes  []ScopeLine
	OrgName string // the organization being signed in to; may be empty
	// Email is the address of the person signed in, whose details the
	// app would get: "Signed in as <Email>". The sign-in has no way to
	// switch accounts mid-request, so the page offers none.
	Email string
}

// ScopeLine is one requested scope and what it gives the app.
type ScopeLine struct {
	Name, Description string
}

// ErrorPage is the error page of a request that cannot go back to the
// client. It shows a reference code and never a link back to the client.
type ErrorPage struct {
	Frame
	Title, Message, Reference string
	// Detail is a fixed sentence for the application's developer naming
	// what was wrong with the request; never raw input.
	Detail string
	// LinkURL and LinkText, when set, offer a way on: "Try again" after
	// a sign-in at an upstream provider failed.
	LinkURL, LinkText string
}

// MessagePage is a plain notice, such as "You declined" or "You are
// signed out", with an optional link.
type MessagePage struct {
	Frame
	Title, Message    string
	LinkURL, LinkText string // optional; the link is shown when LinkURL is set
}

// AddressPage asks for an email address, with one submit button: the
// forgotten-password page and the registration page.
type AddressPage struct {
	Common
	Lead   string // what happens next, under the heading
	Email  string // re-filled after an error
	Error  string
	Button string // the submit button's text
	// BackURL and BackText: an optional link back, such as to the
	// sign-in the person came from.
	BackURL, BackText string
	// LanguagePicker shows the language picker under the form
	// (SignInPage.LanguagePicker).
	LanguagePicker bool
}

// NewPasswordPage asks for a new password (autocomplete new-password),
// with one submit button: an emailed link's page (a reset, a
// registration, an invitation).
type NewPasswordPage struct {
	Common
	Lead string
	// Email is the account's address: shown, and carried in a hidden
	// username input so that a password manager files the new password
	// under it.
	Email  string
	Error  string
	Button string
	// LanguagePicker shows the language picker under the form
	// (SignInPage.LanguagePicker).
	LanguagePicker bool
}

// ConfirmPage asks the person to confirm one thing with one submit button
// (an address to prove, an invitation to accept). An emailed link's GET
// shows it and changes nothing, so a mail scanner that follows the link
// does not use it up.
type ConfirmPage struct {
	Common
	Lead   string
	Error  string
	Button string
	// LanguagePicker shows the language picker under the form
	// (SignInPage.LanguagePicker).
	LanguagePicker bool
}

// SignIn renders the first sign-in step.
func (u *UI) SignIn(w http.ResponseWriter, status int, p SignInPage) {
	u.renderIn(w, status, u.signIn, p.Lang, p)
}

// SecondFactor renders the second-factor step.
func (u *UI) SecondFactor(w http.ResponseWriter, status int, p SecondFactorPage) {
	u.renderIn(w, status, u.secondFactor, p.Lang, p)
}

// SMSCode renders the text-message code step.
func (u *UI) SMSCode(w http.ResponseWriter, status int, p SMSCodePage) {
	u.renderIn(w, status, u.smsCode, p.Lang, p)
}

// Passkey renders a passkey ceremony page. It is the one page with script,
// and its CSP allows only our own script file.
func (u *UI) Passkey(w http.ResponseWriter, status int, p PasskeyPage) {
	u.renderCSP(w, status, u.passkey, p.Lang, p, scriptPolicy)
}

// Account renders the /account page.
func (u *UI) Account(w http.ResponseWriter, status int, p AccountPage) {
	u.renderIn(w, status, u.account, p.Lang, p)
}

// TOTPSetup renders the authenticator-app setup page.
func (u *UI) TOTPSetup(w http.ResponseWriter, status int, p TOTPSetupPage) {
	u.renderIn(w, status, u.totpSetup, p.Lang, p)
}

// RecoveryCodes renders fresh recovery codes.
func (u *UI) RecoveryCodes(w http.ResponseWriter, status int, p RecoveryCodesPage) {
	u.renderIn(w, status, u.recoveryCodes, p.Lang, p)
}

// OrganizationPicker renders the organization picker.
func (u *UI) OrganizationPicker(w http.ResponseWriter, status int, p PickerPage) {
	u.renderIn(w, status, u.picker, p.Lang, p)
}

// Consent renders the consent step.
func (u *UI) Consent(w http.ResponseWriter, status int, p ConsentPage) {
	u.renderIn(w, status, u.consent, p.Lang, p)
}

// Error renders the error page.
func (u *UI) Error(w http.ResponseWriter, status int, p ErrorPage) {
	u.renderIn(w, status, u.errorPage, p.Lang, p)
}

// Message renders a message page.
func (u *UI) Message(w http.ResponseWriter, status int, p MessagePage) {
	u.renderIn(w, status, u.message, p.Lang, p)
}

// Address renders a page that asks for an email address.
func (u *UI) Address(w http.ResponseWriter, status int, p AddressPage) {
	u.renderIn(w, status, u.address, p.Lang, p)
}

// NewPassword renders a page that asks for a new password.
func (u *UI) NewPassword(w http.ResponseWriter, status int, p NewPasswordPage) {
	u.renderIn(w, status, u.newPassword, p.Lang, p)
}

// Confirm renders a page with one thing to confirm.
func (u *UI) Confirm(w http.ResponseWriter, status int, p ConfirmPage) {
	u.renderIn(w, status, u.confirm, p.Lang, p)
}
