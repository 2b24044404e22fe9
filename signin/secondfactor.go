package signin

// The second-factor step of /authorize (asked for when acr_values wants more
// than the session has) and text-message sign-in (acr phone; the message
// goes to --sms-outbox or --sms-webhook).

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/factor"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/sms"
	"github.com/oidcd/oidcd/webui"
)

// showSecondFactor answers with the second-factor page listing what the
// person has enrolled.
func (f *flow) showSecondFactor(status int, fac fsm.Factors, errMsg string) {
	var methods []string
	if fac.TOTP != nil {
		methods = append(methods, webui.MethodOTP)
	}
	if fac.RecoveryLeft() > 0 {
		methods = append(methods, webui.MethodRecovery)
	}
	if len(fac.Passkeys) > 0 && f.p.wa != nil {
		methods = append(methods, webui.MethodPasskey)
	}
	f.pend.Challenge = ""
	c, ok := f.common(authn.StageMFA, authn.PathAuthorize)
	if !ok {
		return
	}
	f.p.cfg.UI.SecondFactor(f.w, status, webui.SecondFactorPage{Common: c, Methods: methods, Error: errMsg})
}

// secondFactor handles the posted second-factor form: a code (method otp
// or recovery), or a passkey (method passkey: without a credential it
// begins the ceremony, with one it finishes it).
func (f *flow) secondFactor(form url.Values) {
	if !f.sameSession() {
		f.proceed() // signed out or replaced meanwhile: start over
		return
	}
	ctx, u := f.r.Context(), f.user
	fac, err := f.p.cfg.State.Factors(u.ID)
	if err != nil {
		f.unavailable("factors: " + err.Error())
		return
	}
	pf := postedFactor(form)
	switch {
	case pf.beginsCeremony():
		f.beginPasskey(fac) // a ceremony begun is not a guess
		return
	case !pf.known():
		f.page(http.StatusBadRequest, authn.MsgBadRequest, fmt.Sprintf("second-factor method %q", httpx.LogValue(pf.method)))
		return
	}
	amr, settled, err := f.p.checkFactor(ctx, f.r, u, fac, pf, f.pend.Challenge, f.st.ClientID)
	switch {
	case errors.Is(err, errLocked):
		f.lockedOrUnavailable(err, f.text, func(status int, msg string) { f.showSecondFactor(status, fac, msg) })
		return
	case errors.Is(err, errCodeWrong):
		f.p.log.Info("authorize: second factor failed", "method", pf.method, "user_id", u.ID, "reference", f.reference())
		msg := msgBadCode
		if pf.method == webui.MethodPasskey {
			msg = msgPasskeyFailed
		} else if strings.TrimSpace(pf.code) == "" {
			msg = msgNoCode
		}
		f.showSecondFactor(http.StatusBadRequest, fac, f.text(msg))
		return
	case err != nil:
		f.unavailable("second factor: " + err.Error())
		return
	}
	s, err := f.p.stepUp(ctx, f.sess, amr, settled, f.st.ClientID)
	if err != nil {
		if errors.Is(err, fsm.ErrSessionEnded) || errors.Is(err, fsm.ErrNotFound) {
			f.hasSession, f.pend.SSOID = false, ""
			f.proceed()
			return
		}
		f.unavailable("step-up: " + err.Error())
		return
	}
	f.p.metrics.signIns.WithLabelValues(amr).Inc()
	f.p.log.Info("authorize: second factor", "method", amr, "user_id", u.ID, "acr", s.ACR, "reference", f.reference())
	f.sess, f.pend.StepUp = s, true
	f.proceed()
}

// beginPasskey starts an assertion ceremony and shows the page whose
// script runs it and posts the result back (method=passkey, credential).
func (f *flow) beginPasskey(fac fsm.Factors) {
	if len(fac.Passkeys) == 0 {
		f.showSecondFactor(http.StatusBadRequest, fac, f.text(msgPasskeyFailed))
		return
	}
	opts, id, err := f.p.beginPasskeyAssertion(f.r.Context(), f.user, fac)
	if err != nil {
		f.unavailable("passkey begin: " + err.Error())
		return
	}
	f.pend.Challenge = id
	c, ok := f.common(authn.StageMFA, authn.PathAuthorize)
	if !ok {
		return
	}
	f.p.cfg.UI.Passkey(f.w, http.StatusOK, webui.PasskeyPage{
		Common: c, Ceremony: webui.CeremonyGet, Options: opts, Method: webui.MethodPasskey,
	})
}

// ---- text-message sign-in ----

const (
	smsCodeTTL      = 5 * time.Minute
	smsMaxAttempts  = 5
	smsSendDeadline = 10 * time.Second
)

// phonePattern is E.164 after normalizePhone.
var phonePattern = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// normalizePhone drops the spaces, dashes, dots and brackets people type
// and accepts a leading 00 for +.
func normalizePhone(s string) (string, bool) {
	s = strings.NewReplacer(" ", "", "-", "", ".", "", "(", "", ")", "").Replace(strings.TrimSpace(s))
	if strings.HasPrefix(s, "00") {
		s = "+" + s[2:]
	}
	return s, phonePattern.MatchString(s)
}

// smsHash binds a code to its handle.
func smsHash(handle, code string) string { return authn.HashToken("sms:" + handle + ":" + code) }

// sixDigits is a uniformly random 6-digit code.
func sixDigits() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

// startSMS sends a sign-in code to phone and shows the code page. An
// unknown number gets the same page and no message, so the page does not
// tell who has an account.
func (f *flow) startSMS(email, rawPhone string) {
	if !f.p.smsEnabled {
		f.showSignIn(http.StatusBadRequest, email, f.text(msgSMSDisabled))
		return
	}
	showErr := func(status int, msg string) {
		f.pend.SSOID, f.pend.OrgID = "", ""
		c, ok := f.common(authn.StageSignIn, authn.PathAuthorize)
		if ok {
			f.p.cfg.UI.SignIn(f.w, status, webui.SignInPage{Common: c, Email: email, Phone: rawPhone, Error: f.text(msg), SMSEnabled: true, LanguagePicker: true})
		}
	}
	phone, ok := normalizePhone(rawPhone)
	if !ok {
		showErr(http.StatusBadRequest, msgBadPhone)
		return
	}
	ctx := f.r.Context()
	// Every send counts, reserved before it is made.
	rules := []fsm.ThrottleRule{throttleSMSTo.rule(phone), throttleSMSIP.rule(remoteIP(f.r))}
	if _, err := f.p.reserve(ctx, nil, rules...); err != nil {
		if errors.Is(err, errLocked) {
			showErr(http.StatusTooManyRequests, msgSMSLimit)
		} else {
			f.unavailable("throttle: " + err.Error())
		}
		return
	}
	u, err := f.p.cfg.State.UserByPhone(phone)
	if err != nil && !errors.Is(err, fsm.ErrNotFound) {
		f.unavailable("user by phone: " + err.Error())
		return
	}
	code, err := sixDigits()
	if err != nil {
		f.unavailable("code: " + err.Error())
		return
	}
	handle := authn.NewID()
	res, err := f.p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypeIssueSMSCode, fsm.IssueSMSCode{Code: fsm.SMSCode{
		ID: handle, UserID: u.ID, Phone: phone, Hash: smsHash(handle, code), ExpiresAt: f.now.Add(smsCodeTTL),
	}}))
	if err == nil {
		err = res.Err
	}
	if err != nil {
		f.unavailable("issue sms code: " + err.Error())
		return
	}
	if u.ID != "" {
		sctx, cancel := context.WithTimeout(ctx, smsSendDeadline)
		err = f.p.cfg.SMS.Send(sctx, sms.Message{
			To: phone, Code: code, SentAt: f.now,
			Text: f.text(msgSMSText, code, f.p.issuer.Host, int(smsCodeTTL.Minutes())),
		})
		cancel()
		if err != nil {
			f.p.log.Error("authorize: text message not sent", "err", err, "reference", f.reference())
			showErr(http.StatusServiceUnavailable, msgSMSFailed)
			return
		}
	}
	f.p.log.Info("authorize: sign-in code sent", "known", u.ID != "", "reference", f.reference())
	f.pend.SMS, f.pend.Phone = handle, phone
	f.showSMSCode(http.StatusOK, "")
}

// showSMSCode answers with the code page.
func (f *flow) showSMSCode(status int, errMsg string) {
	c, ok := f.common(authn.StageSMSCode, authn.PathAuthorize)
	if !ok {
		return
	}
	f.p.cfg.UI.SMSCode(f.w, status, webui.SMSCodePage{Common: c, Phone: maskPhone(f.pend.Phone), Error: errMsg})
}

// maskPhone shows the last digits only.
func maskPhone(p string) string {
	if len(p) <= 4 {
		return p
	}
	return strings.Repeat("•", len(p)-4) + p[len(p)-4:]
}

// smsCode handles the posted code page.
func (f *flow) smsCode(form url.Values) {
	ctx := f.r.Context()
	code, _ := authn.FormValue(form, "code")
	code = factor.NormalizeCode(code)
	if code == "" || len(code) > 16 {
		f.showSMSCode(http.StatusBadRequest, f.text(msgNoCode))
		return
	}
	rules := []fsm.ThrottleRule{throttleCode.rule("tel" + f.pend.Phone), throttleIP.rule(remoteIP(f.r))}
	if _, err := f.p.reserve(ctx, f.p.lockoutEvent("", f.st.ClientID), rules...); err != nil {
		f.lockedOrUnavailable(err, f.text, f.showSMSCode)
		return
	}
	f.p.metrics.guesses.WithLabelValues("code").Inc()
	// A failed check commits (it counts the code's attempts) and records
	// its failure; a success records nothing here: the session it opens
	// does.
	failure := f.p.signinEvent("", f.st.ClientID, map[string]string{"method": authn.AMRSMS})
	failure.FailOnError = true
	res, err := f.p.cfg.Applier.Apply(ctx, f.p.stamp(ctx, fsm.MustCommand(fsm.TypeCheckSMSCode, fsm.CheckSMSCode{
		ID: f.pend.SMS, Hash: smsHash(f.pend.SMS, code), MaxAttempts: smsMaxAttempts, At: f.now,
	}), failure))
	if err != nil {
		f.unavailable("check sms code: " + err.Error())
		return
	}
	switch {
	case errors.Is(res.Err, fsm.ErrWrongCode):
		f.showSMSCode(http.StatusBadRequest, f.text(msgBadCode))
		return
	case errors.Is(res.Err, fsm.ErrNotFound), errors.Is(res.Err, fsm.ErrExpired):
		f.showSignIn(http.StatusBadRequest, "", f.text(msgSMSExpired))
		return
	case res.Err != nil:
		f.unavailable("check sms code: " + res.Err.Error())
		return
	}
	sent := res.Value.(fsm.SMSCode)
	u, err := f.p.cfg.State.User(sent.UserID)
	if err != nil {
		f.showSignIn(http.StatusBadRequest, "", f.text(msgSMSExpired))
		return
	}
	f.pend.SMS, f.pend.Phone = "", ""
	if !f.startSession(u, authn.AMRSMS, settle(rules, 1)) {
		return
	}
	f.proceed()
}
