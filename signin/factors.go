package signin

// Second factors: authentication strength (acr), authenticator-app
// codes, recovery codes, passkeys, and the replicated brute-force throttle
// shared by the sign-in pages, the second-factor page and /account.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/webui"
)

// acrOf is the authentication strength (acr) of a session whose methods are
// amr (docs/operators/second-factors.md tables them): mfa needs a passkey or
// authenticator-app code plus the method that opened the session (password
// or text message); a recovery code never counts.
func acrOf(amr []string) string {
	strong := slices.Contains(amr, authn.AMRPasskey) || slices.Contains(amr, authn.AMROTP)
	opened := slices.Contains(amr, authn.AMRPassword) || slices.Contains(amr, authn.AMRSMS)
	switch {
	case strong && opened:
		return authn.ACRMFA
	case slices.Contains(amr, authn.AMRPassword):
		return authn.ACRPwd
	default:
		return authn.ACRPhone
	}
}

// stepUpACR is the acr of session s once method is verified in it. A
// session opened through an upstream provider counts as opened with a
// password, whatever the upstream's amr says: its otp or hwk were
// verified there, and count only when the provider is trusted for them
// (trust_mfa, which made the session mfa already). So a recovery code
// after an upstream's otp stays pwd, as it would after a password here.
func stepUpACR(s fsm.SSOSession, method string) string {
	if s.ProviderID != "" && s.ACR != authn.ACRMFA {
		return acrOf([]string{authn.AMRPassword, method})
	}
	return acrOf(withMethod(s.AMR, method))
}

// withMethod is amr with m added once.
func withMethod(amr []string, m string) []string {
	if slices.Contains(amr, m) {
		return amr
	}
	return append(slices.Clip(amr), m)
}

// stepUp records second factor method on the SSO session s, settling the
// throttle reservation of its verification in the same write. The error
// wraps fsm.ErrSessionEnded when the session ended meanwhile. clientID
// names the application signed in to for the audit event ("" on the
// account page).
func (p *Signin) stepUp(ctx context.Context, s fsm.SSOSession, method string, settled *fsm.ThrottleClear, clientID string) (fsm.SSOSession, error) {
	acr := stepUpACR(s, method)
	res, err := p.cfg.Applier.Apply(ctx, p.stamp(ctx, fsm.MustCommand(fsm.TypeStepUpSSOSession, fsm.StepUpSSOSession{
		ID: s.ID, Method: method, ACR: acr, At: p.now(), Settle: settled,
	}), p.signinEvent(s.UserID, clientID, map[string]string{"method": method, "acr": acr})))
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return s, err
	}
	return res.Value.(fsm.SSOSession), nil
}

// ---- throttle ----

// throttlePolicy is one kind of counted event.
type throttlePolicy struct {
	prefix  string
	limit   int
	window  time.Duration
	lockout time.Duration
}

// The brute-force limits. Counted in the replicated state, so spreading
// guesses over nodes does not help and a lock outlives restarts.
var (
	// Password attempts per account and source address (by email, so
	// unknown addresses lock the same way and the lock reveals nothing):
	// an attacker's guesses lock the attacker's address out of the
	// account, not its owner, who signs in from elsewhere.
	throttlePassword = throttlePolicy{factor.KeyPassword, 10, 15 * time.Minute, 15 * time.Minute}
	// Password attempts per account from every address together: a much
	// higher hard limit, and before it a delay that grows with the
	// attempts (passwordDelay), against guessing spread over many
	// addresses.
	throttleAccount = throttlePolicy{factor.KeyPassword, 100, 15 * time.Minute, 15 * time.Minute}
	// Wrong second-factor and text-message codes per person.
	throttleCode = throttlePolicy{factor.KeyCode, 5, 15 * time.Minute, 15 * time.Minute}
	// Every failure from one IP address.
	throttleIP = throttlePolicy{factor.KeyIP, 50, 15 * time.Minute, 15 * time.Minute}
	// Text messages sent per number and per IP address.
	throttleSMSTo = throttlePolicy{factor.KeySMSTo, 5, time.Hour, time.Hour}
	throttleSMSIP = throttlePolicy{factor.KeySMSIP, 20, time.Hour, time.Hour}
)

func (tp throttlePolicy) rule(subject string) fsm.ThrottleRule {
	return fsm.ThrottleRule{Key: tp.prefix + subject, Limit: tp.limit, Window: tp.window, Lockout: tp.lockout}
}

func emailSubject(email string) string { return factor.EmailSubject(email) }

// passwordRules are the rules of one password attempt, the subject's first
// (settle clears those on success): per account and address, per
// account, per address.
func passwordRules(email, ip string) []fsm.ThrottleRule {
	subject := emailSubject(email)
	return []fsm.ThrottleRule{throttlePassword.rule(subject + "@" + ip), throttleAccount.rule(subject), throttleIP.rule(ip)}
}

// Soft delay of password attempts per account (passwordDelay).
const (
	delayFree = 5                      // attempts in the window before any delay
	delayStep = 250 * time.Millisecond // added per attempt beyond delayFree
	delayMax  = 3 * time.Second
)

// passwordDelay is how long an attempt waits before its password is
// checked, given the account's attempts in the window (this one
// included): none for the first few, then growing to delayMax.
func passwordDelay(attempts int) time.Duration {
	if attempts <= delayFree {
		return 0
	}
	return min(time.Duration(attempts-delayFree)*delayStep, delayMax)
}

// remoteIP is the source address per-address rules count: the client's
// address (httpx.ClientAddr: the connection's peer, or what a trusted
// proxy says), an IPv6 address by its /64 (httpx.SourceKey).
func remoteIP(r *http.Request) string { return httpx.SourceKey(httpx.ClientAddr(r)) }

// errLocked: too many failures; the person must wait. reserve returns it
// as a *lockedError, which says until when.
var errLocked = errors.New("signin: locked out")

// lockedError is errLocked with the moment the lock ends (zero: unknown).
type lockedError struct{ until time.Time }

func (e *lockedError) Error() string        { return errLocked.Error() }
func (e *lockedError) Is(target error) bool { return target == errLocked }

// lockout answers a lockout (an error that Is errLocked): it sets
// Retry-After to the seconds until the lock ends, rounded up, and returns
// the message that tells the person about how many minutes to wait.
func lockout(w http.ResponseWriter, err error, now time.Time, text func(key string, args ...any) string) string {
	var le *lockedError
	if !errors.As(err, &le) || !le.until.After(now) {
		return text(msgLocked)
	}
	wait := le.until.Sub(now)
	w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
	minutes := max(int((wait+time.Minute-1)/time.Minute), 1)
	return text(msgLockedMinutes, minutes)
}

// reserve counts one attempt against rules before the attempt is
// evaluated (fsm.ThrottleReserve): one replicated apply checks every key's
// lock and counts the attempt, so concurrent guesses cannot all pass a
// check made before any of them was counted, and at most a rule's limit
// is ever evaluated per window. It returns errLocked, with nothing
// counted, when a key is locked, and the counters after counting
// otherwise. A failed attempt needs nothing more: it stays counted. A
// success settles it (settle) in the write the success makes anyway.
//
// lock, when set, is the sign-in failure the reservation records if it
// locks a key (the lockout's audit event).
//
// A key already locked is refused here, before any write: a flood of
// attempts from a locked address or at a locked account costs the
// cluster nothing replicated. The lock is read in this node's state
// (localLock), which may lag a lift of it made a moment ago elsewhere
// (an operator's clear, a success's release); so a lock found is
// confirmed after a read index (catchUp: no write, and concurrent
// requests share its round), and the refusal is as current as the
// reservation would have been. When the cluster cannot vouch (no leader),
// the lock as read stands.
func (p *Signin) reserve(ctx context.Context, lock *fsm.Audit, rules ...fsm.ThrottleRule) ([]fsm.Throttle, error) {
	now := p.now()
	if until := p.localLock(rules, now); !until.IsZero() {
		if !p.catchUp(ctx) {
			return nil, &lockedError{until: until}
		}
		if until = p.localLock(rules, now); !until.IsZero() {
			return nil, &lockedError{until: until}
		}
	}
	cmd := fsm.MustCommand(fsm.TypeThrottleReserve, fsm.ThrottleReserve{Rules: rules, At: now})
	if lock != nil {
		cmd = p.stamp(ctx, cmd, *lock)
	}
	// An older node in a rolling upgrade skips it rather than stop: only
	// its counters lag, and they end with their windows.
	cmd.Flags |= fsm.FlagIgnorable
	res, err := p.cfg.Applier.Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if errors.Is(res.Err, fsm.ErrLocked) {
		var found time.Time
		if ts, ok := res.Value.([]fsm.Throttle); ok && len(ts) > 0 {
			found = ts[0].LockedUntil
		}
		if until := p.localLock(rules, now); until.After(found) {
			found = until
		}
		return nil, &lockedError{until: found}
	}
	if res.Err != nil {
		return nil, res.Err
	}
	ts := res.Value.([]fsm.Throttle)
	for _, t := range ts {
		if t.Locked(p.now()) && t.Count == ruleLimit(rules, t.Key) {
			p.metrics.lockouts.Inc()
			p.log.Warn("locked out after too many attempts", "key", t.Key, "until", t.LockedUntil)
		}
	}
	return ts, nil
}

// localLock is when the last lock among rules' keys that are locked at
// now in this node's state (fsm.State.Throttle) ends; zero when none is.
// A key not locked here still goes through the replicated reservation,
// which decides. A read error decides nothing.
func (p *Signin) localLock(rules []fsm.ThrottleRule, now time.Time) time.Time {
	var until time.Time
	for _, r := range rules {
		if t, err := p.cfg.State.Throttle(r.Key); err == nil && t.Locked(now) && t.LockedUntil.After(until) {
			until = t.LockedUntil
		}
	}
	return until
}

// settle is what a successful attempt gives back: the counters of the
// subject it proved (the first subjects rules) are forgotten, and the
// attempt is returned to the others (per-address keys), so that
// successes never use up an address's allowance.
func settle(rules []fsm.ThrottleRule, subjects int) *fsm.ThrottleClear {
	c := &fsm.ThrottleClear{}
	for i, r := range rules {
		if i < subjects {
			c.Keys = append(c.Keys, r.Key)
		} else {
			c.Release = append(c.Release, r.Key)
		}
	}
	return c
}

func ruleLimit(rules []fsm.ThrottleRule, key string) int {
	for _, r := range rules {
		if r.Key == key {
			return r.Limit
		}
	}
	return 0
}

// posted is a second factor posted on a form: the method button, and the
// code or the passkey credential.
type posted struct{ method, code, credential string }

func postedFactor(form url.Values) posted {
	var pf posted
	pf.method, _ = authn.FormValue(form, "method")
	pf.code, _ = authn.FormValue(form, "code")
	pf.credential, _ = authn.FormValue(form, "credential")
	return pf
}

// beginsCeremony reports whether pf only asks to begin a passkey ceremony
// (not a guess: nothing is reserved).
func (pf posted) beginsCeremony() bool {
	return pf.method == webui.MethodPasskey && pf.credential == ""
}

// known reports whether pf names a method there is.
func (pf posted) known() bool {
	return pf.method == webui.MethodOTP || pf.method == webui.MethodRecovery || pf.method == webui.MethodPasskey
}

// checkFactor verifies pf for u under the code throttle (per person and
// per address), reserving the attempt first: the amr value and the
// settlement the step-up must carry on success; errLocked (nothing
// evaluated), errCodeWrong (the attempt stays counted), or the cluster's
// error. challenge is the passkey ceremony's handle; clientID names the
// application signed in to for the audit events ("" on the account page).
func (p *Signin) checkFactor(ctx context.Context, r *http.Request, u fsm.User, fac fsm.Factors, pf posted, challenge, clientID string) (string, *fsm.ThrottleClear, error) {
	rules := []fsm.ThrottleRule{throttleCode.rule(u.ID), throttleIP.rule(remoteIP(r))}
	if _, err := p.reserve(ctx, p.lockoutEvent(u.ID, clientID), rules...); err != nil {
		return "", nil, err
	}
	p.metrics.guesses.WithLabelValues("code").Inc()
	var amr string
	var err error
	switch pf.method {
	case webui.MethodOTP:
		amr, err = authn.AMROTP, p.useTOTP(ctx, u, fac, pf.code)
	case webui.MethodRecovery:
		amr, err = authn.AMRRecovery, p.useRecovery(ctx, u, pf.code)
	default:
		amr, err = authn.AMRPasskey, p.finishPasskeyAssertion(ctx, u, fac, challenge, pf.credential)
	}
	if errors.Is(err, errCodeWrong) {
		p.recordFailure(ctx, u.ID, clientID, "wrong_code")
	}
	if err != nil {
		return "", nil, err
	}
	return amr, settle(rules, 1), nil
}

// ---- authenticator-app codes and recovery codes (internal/factor) ----

// totpSecret opens the person's sealed secret.
func (p *Signin) totpSecret(userID string, t *fsm.TOTP) (string, error) {
	b, err := p.cfg.KEK.Open(t.Secret, factor.TOTPAAD(userID))
	return string(b), err
}

// errCodeWrong: a code that does not verify (or was used before).
var errCodeWrong = errors.New("signin: wrong code")

// useTOTP verifies code for u and spends its time step.
func (p *Signin) useTOTP(ctx context.Context, u fsm.User, f fsm.Factors, code string) error {
	if f.TOTP == nil {
		return errCodeWrong
	}
	secret, err := p.totpSecret(u.ID, f.TOTP)
	if err != nil {
		return err
	}
	step, ok := factor.TOTPStep(secret, code, p.now())
	if !ok {
		return errCodeWrong
	}
	res, err := p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypeUseTOTP, fsm.UseTOTP{UserID: u.ID, Step: step, At: p.now()}))
	if err != nil {
		return err
	}
	if res.Err != nil {
		return errCodeWrong // replayed, or removed meanwhile
	}
	return nil
}

// useRecovery spends one recovery code of u.
func (p *Signin) useRecovery(ctx context.Context, u fsm.User, code string) error {
	n := factor.NormalizeCode(code)
	if n == "" || len(n) > 64 {
		return errCodeWrong
	}
	res, err := p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypeUseRecoveryCode, fsm.UseRecoveryCode{UserID: u.ID, Hash: factor.RecoveryHash(n), At: p.now()}))
	if err != nil {
		return err
	}
	if res.Err != nil {
		return errCodeWrong
	}
	return nil
}

// ---- passkeys (WebAuthn) ----

// Ceremony purposes and lifetime.
const (
	purposeRegister = "register"
	purposeAssert   = "assert"
	ceremonyTTL     = 5 * time.Minute
)

// newWebAuthn configures the relying party: its id is the issuer's host, so
// a passkey works on every node behind the issuer, and the only origin is
// the issuer's.
func newWebAuthn(issuer *url.URL) (*webauthn.WebAuthn, error) {
	return webauthn.New(&webauthn.Config{
		RPID:          issuer.Hostname(),
		RPDisplayName: issuer.Hostname(),
		RPOrigins:     []string{issuer.Scheme + "://" + issuer.Host},
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:      protocol.ResidentKeyRequirementPreferred,
			UserVerification: protocol.VerificationPreferred,
		},
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: ceremonyTTL},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: ceremonyTTL},
		},
	})
}

// waUser is a person as the WebAuthn library sees them.
type waUser struct {
	u     fsm.User
	creds []webauthn.Credential
}

func (w waUser) WebAuthnID() []byte                         { return []byte(w.u.ID) }
func (w waUser) WebAuthnName() string                       { return w.u.Email }
func (w waUser) WebAuthnDisplayName() string                { return w.u.Email }
func (w waUser) WebAuthnCredentials() []webauthn.Credential { return w.creds }

// newWAUser decodes f's passkeys; the counter kept by the state machine
// replaces the one inside the stored blob.
func newWAUser(u fsm.User, f fsm.Factors) (waUser, error) {
	w := waUser{u: u}
	for _, pk := range f.Passkeys {
		var c webauthn.Credential
		if err := json.Unmarshal(pk.Credential, &c); err != nil {
			return w, fmt.Errorf("passkey %x: %w", pk.ID, err)
		}
		c.Authenticator.SignCount = pk.SignCount
		w.creds = append(w.creds, c)
	}
	return w, nil
}

// beginCeremony stores the library's session data as a replicated
// challenge and returns its id.
func (p *Signin) beginCeremony(ctx context.Context, userID, purpose string, sd *webauthn.SessionData) (string, error) {
	data, err := json.Marshal(sd)
	if err != nil {
		return "", err
	}
	id := authn.NewID()
	res, err := p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypePutChallenge, fsm.PutChallenge{Challenge: fsm.Challenge{
		ID: id, UserID: userID, Purpose: purpose, Data: data, ExpiresAt: p.now().Add(ceremonyTTL),
	}}))
	if err == nil {
		err = res.Err
	}
	return id, err
}

// errPasskeysOff: the issuer's host is an IP address (see New).
var errPasskeysOff = errors.New("signin: passkeys need an issuer with a domain name")

// errCeremony: the challenge is unknown, used, expired or someone else's.
var errCeremony = errors.New("signin: passkey ceremony expired or invalid")

// takeCeremony takes the challenge id (once) and returns its session data.
func (p *Signin) takeCeremony(ctx context.Context, id, userID, purpose string) (webauthn.SessionData, error) {
	var sd webauthn.SessionData
	if id == "" || len(id) > 64 {
		return sd, errCeremony
	}
	res, err := p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypeTakeChallenge, fsm.TakeChallenge{ID: id, UserID: userID, Purpose: purpose, At: p.now()}))
	if err != nil {
		return sd, err
	}
	if res.Err != nil {
		return sd, errCeremony
	}
	if err := json.Unmarshal(res.Value.(fsm.Challenge).Data, &sd); err != nil {
		return sd, err
	}
	return sd, nil
}

// beginPasskeyAssertion starts an assertion for u: the options for the
// browser (JSON) and the challenge id.
func (p *Signin) beginPasskeyAssertion(ctx context.Context, u fsm.User, f fsm.Factors) (string, string, error) {
	if p.wa == nil {
		return "", "", errPasskeysOff
	}
	wu, err := newWAUser(u, f)
	if err != nil {
		return "", "", err
	}
	opts, sd, err := p.wa.BeginLogin(wu)
	if err != nil {
		return "", "", err
	}
	id, err := p.beginCeremony(ctx, u.ID, purposeAssert, sd)
	if err != nil {
		return "", "", err
	}
	b, err := json.Marshal(opts)
	return string(b), id, err
}

// maxCredentialJSON bounds a posted credential.
const maxCredentialJSON = 12 << 10

// finishPasskeyAssertion verifies the browser's assertion for challenge id
// and records the new counter. errCodeWrong for anything the person or
// authenticator got wrong.
func (p *Signin) finishPasskeyAssertion(ctx context.Context, u fsm.User, f fsm.Factors, id, credential string) error {
	if p.wa == nil || credential == "" || len(credential) > maxCredentialJSON {
		return errCodeWrong
	}
	sd, err := p.takeCeremony(ctx, id, u.ID, purposeAssert)
	if errors.Is(err, errCeremony) {
		return errCodeWrong
	}
	if err != nil {
		return err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes([]byte(credential))
	if err != nil {
		p.log.Info("passkey: unparsable assertion", "err", err)
		return errCodeWrong
	}
	wu, err := newWAUser(u, f)
	if err != nil {
		return err
	}
	cred, err := p.wa.ValidateLogin(wu, sd, parsed)
	if err != nil {
		p.log.Info("passkey: assertion refused", "user_id", u.ID, "err", err)
		return errCodeWrong
	}
	res, err := p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypeUsePasskey, fsm.UsePasskey{
		UserID: u.ID, ID: cred.ID, SignCount: cred.Authenticator.SignCount, At: p.now(),
	}))
	if err != nil {
		return err
	}
	if res.Err != nil {
		p.log.Warn("passkey: counter did not grow (cloned authenticator?)", "user_id", u.ID, "err", res.Err)
		return errCodeWrong
	}
	return nil
}

// beginPasskeyRegistration starts registering a new passkey for u.
func (p *Signin) beginPasskeyRegistration(ctx context.Context, u fsm.User, f fsm.Factors) (string, string, error) {
	if p.wa == nil {
		return "", "", errPasskeysOff
	}
	wu, err := newWAUser(u, f)
	if err != nil {
		return "", "", err
	}
	var exclude []protocol.CredentialDescriptor
	for _, c := range wu.creds {
		exclude = append(exclude, c.Descriptor())
	}
	opts, sd, err := p.wa.BeginRegistration(wu, webauthn.WithExclusions(exclude))
	if err != nil {
		return "", "", err
	}
	id, err := p.beginCeremony(ctx, u.ID, purposeRegister, sd)
	if err != nil {
		return "", "", err
	}
	b, err := json.Marshal(opts)
	return string(b), id, err
}

// finishPasskeyRegistration verifies the browser's attestation and stores
// the credential.
func (p *Signin) finishPasskeyRegistration(ctx context.Context, u fsm.User, f fsm.Factors, id, credential, name string, end *fsm.EndSessions) error {
	if p.wa == nil || credential == "" || len(credential) > maxCredentialJSON {
		return errCodeWrong
	}
	sd, err := p.takeCeremony(ctx, id, u.ID, purposeRegister)
	if errors.Is(err, errCeremony) {
		return errCodeWrong
	}
	if err != nil {
		return err
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes([]byte(credential))
	if err != nil {
		p.log.Info("passkey: unparsable attestation", "err", err)
		return errCodeWrong
	}
	wu, err := newWAUser(u, f)
	if err != nil {
		return err
	}
	cred, err := p.wa.CreateCredential(wu, sd, parsed)
	if err != nil {
		p.log.Info("passkey: registration refused", "user_id", u.ID, "err", err)
		return errCodeWrong
	}
	blob, err := json.Marshal(cred)
	if err != nil {
		return err
	}
	res, err := p.cfg.Applier.Apply(ctx, p.stamp(ctx, fsm.MustCommand(fsm.TypeAddPasskey, fsm.AddPasskey{UserID: u.ID, Passkey: fsm.Passkey{
		ID: cred.ID, Name: name, Credential: blob, SignCount: cred.Authenticator.SignCount, CreatedAt: p.now(),
	}, EndSessions: end}), fsm.Audit{Type: fsm.EventAccount, Actor: fsm.ActorPerson, Subject: u.ID, Detail: map[string]string{"action": "passkey-add"}}))
	if err != nil {
		return err
	}
	if res.Err != nil {
		return fmt.Errorf("store passkey: %w", res.Err)
	}
	return nil
}
