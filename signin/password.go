package signin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/text/language"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/password"
	"github.com/oidcd/oidcd/webui"
)

// Sign-in methods, the values of the first sign-in page's method button.
const (
	methodPassword = "password"
	methodSMS      = "sms"
)

// showSignIn answers with the sign-in form (stage signin), keeping email
// and showing errMsg after a failed attempt.
func (f *flow) showSignIn(status int, email, errMsg string) {
	f.pend.SSOID, f.pend.OrgID = "", ""
	c, ok := f.common(authn.StageSignIn, authn.PathAuthorize)
	if !ok {
		return
	}
	page := webui.SignInPage{Common: c, Email: email, Error: errMsg, SMSEnabled: f.p.smsEnabled, LanguagePicker: true}
	if ips, err := f.p.signinProviders(f.st.ClientID, f.st.OrgHint); err != nil {
		f.p.log.Warn("authorize: identity providers unreadable", "err", err, "reference", f.reference())
	} else {
		page.Providers = providerButtons(ips)
	}
	f.p.selfServiceLinks(&page, f.st, f.now)
	f.p.cfg.UI.SignIn(f.w, status, page)
}

// firstSignIn is the sign-in page of a request, or straight the upstream
// provider its idp_hint or login_hint names; the address field starts
// with the login_hint.
func (f *flow) firstSignIn() {
	ips, err := f.p.signinProviders(f.st.ClientID, f.st.OrgHint)
	if err != nil {
		f.unavailable("identity providers: " + err.Error())
		return
	}
	if f.routeToProvider(ips) {
		return
	}
	hint := f.st.LoginHint
	if !strings.Contains(hint, "@") {
		hint = ""
	}
	f.showSignIn(http.StatusOK, hint, "")
}

// signIn handles the posted sign-in form. A failure the person can fix
// re-shows the form with status 400 (never a redirect to the client); a
// lockout answers 429.
func (f *flow) signIn(form url.Values) {
	email, _ := authn.FormValue(form, "email")
	email = strings.TrimSpace(email)
	switch method, _ := authn.FormValue(form, "method"); method {
	case "", methodPassword:
	case methodSMS:
		phone, _ := authn.FormValue(form, "phone")
		f.startSMS(email, phone)
		return
	case methodLanguage:
		// The picked language is remembered, and this request's pages
		// follow it even where its ui_locales asked for another.
		if tag := f.p.pickLanguage(f.w, form, f.now); tag != "" {
			f.pend.UILocales, f.lang = tag, language.Und
		}
		f.showSignIn(http.StatusOK, email, "")
		return
	default:
		f.page(http.StatusBadRequest, authn.MsgBadRequest, fmt.Sprintf("sign-in method %q", method))
		return
	}
	if slug, has := form["idp"]; has || email != "" {
		ips, err := f.p.signinProviders(f.st.ClientID, f.st.OrgHint)
		if err != nil {
			f.unavailable("identity providers: " + err.Error())
			return
		}
		if has {
			ip, ok := providerBySlug(ips, strings.Join(slug, ""))
			if !ok || len(slug) != 1 {
				f.page(http.StatusBadRequest, authn.MsgBadRequest, "no such identity provider of this sign-in")
				return
			}
			f.toUpstream(ip, email)
			return
		}
		// An address of a provider's domains signs in there, not with
		// a password here.
		if ip, ok := providerForAddress(ips, email); ok {
			f.toUpstream(ip, email)
			return
		}
	}
	secret, _ := authn.FormValue(form, "password")
	u, settled, err := f.p.passwordSignIn(f.r, email, secret, f.st.ClientID)
	switch {
	case errors.Is(err, errBadPassword):
		f.p.log.Info("authorize: sign-in failed", "reference", f.reference())
		f.showSignIn(http.StatusBadRequest, email, f.text(msgBadPassword))
		return
	case errors.Is(err, errDirectoryDown):
		f.p.log.Warn("authorize: directory unavailable", "reference", f.reference())
		f.w.Header().Set("Retry-After", "30")
		f.showSignIn(http.StatusServiceUnavailable, email, f.text(msgDirectoryDown))
		return
	case err != nil:
		f.lockedOrUnavailable(err, f.text, func(status int, msg string) { f.showSignIn(status, email, msg) })
		return
	}
	if !f.startSession(u, authn.AMRPassword, settled) {
		return
	}
	f.proceed()
}

// lockedOrUnavailable answers a reserve error: errLocked re-shows the
// form through show with 429, Retry-After and the wait in minutes
// (lockout); anything else is a 503.
func (f *flow) lockedOrUnavailable(err error, text func(string, ...any) string, show func(status int, msg string)) {
	if errors.Is(err, errLocked) {
		f.p.log.Info("authorize: locked out", "reference", f.reference())
		show(http.StatusTooManyRequests, lockout(f.w, err, f.p.now(), text))
		return
	}
	f.unavailable(err.Error())
}

// errBadPassword: the email and password do not match (the failure is
// counted).
var errBadPassword = errors.New("signin: wrong email or password")

// passwordSignIn checks email and password under the brute-force throttle
// (passwordRules). The attempt is reserved first (reserve): errLocked,
// without running argon2id, when a key is locked; then it waits the
// account's soft delay, then the password is checked: errBadPassword (the
// attempt stays counted), or the person and the settlement the session
// write must carry (the account's counters cleared, the address's
// attempt given back). Any other error is the cluster's or the store's.
//
// clientID names the application signed in to, for the audit events
// ("" on the account page).
func (p *Signin) passwordSignIn(r *http.Request, email, secret, clientID string) (fsm.User, *fsm.ThrottleClear, error) {
	ctx := r.Context()
	rules := passwordRules(email, remoteIP(r))
	subject := ""
	if email != "" && len(email) <= authn.MaxEmailLen {
		if known, err := p.cfg.State.UserByEmail(email); err == nil {
			subject = known.ID
		}
	}
	ts, err := p.reserve(ctx, p.lockoutEvent(subject, clientID), rules...)
	if err != nil {
		return fsm.User{}, nil, err
	}
	if d := passwordDelay(ts[1].Count); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return fsm.User{}, nil, ctx.Err()
		}
	}
	u, ok, reason, err := p.checkPassword(ctx, email, secret)
	if errors.Is(err, errDirectoryDown) {
		p.recordFailure(ctx, subject, clientID, reason)
		return fsm.User{}, nil, err
	}
	if err != nil {
		return fsm.User{}, nil, fmt.Errorf("password check: %w", err)
	}
	p.metrics.guesses.WithLabelValues("password").Inc()
	if !ok {
		if reason == "" {
			reason = "wrong_password"
			if subject == "" {
				reason = "unknown_account"
			}
		}
		p.recordFailure(ctx, subject, clientID, reason)
		return fsm.User{}, nil, errBadPassword
	}
	if u.DirectoryID == "" {
		p.rehash(ctx, u, secret)
	}
	return u, settle(rules, 2), nil
}

// rehash replaces u's stored hash, just verified with secret, by the
// node's own argon2id hash when it is an imported one (bcrypt, PBKDF2) or
// a weaker argon2id (password.Hasher.NeedsRehash). Best effort: the
// sign-in goes on if it fails, and the next sign-in tries again. The
// command replaces the hash only if it is still the one checked, so a
// password changed meanwhile is never undone.
func (p *Signin) rehash(ctx context.Context, u fsm.User, secret string) {
	if !p.cfg.Hasher.NeedsRehash(u.PasswordHash) {
		return
	}
	scheme := password.Scheme(u.PasswordHash)
	h, err := p.cfg.Hasher.Hash(ctx, secret)
	if err == nil {
		var res fsm.Result
		res, err = p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypeRehashPassword,
			fsm.RehashPassword{UserID: u.ID, Old: u.PasswordHash, New: h, At: p.now()}))
		if err == nil {
			err = res.Err
		}
	}
	if err != nil {
		p.log.Warn("authorize: replace the password hash", "user_id", u.ID, "scheme", scheme, "err", err)
		return
	}
	p.metrics.rehashes.WithLabelValues(scheme).Inc()
	p.log.Info("authorize: password hash replaced by argon2id", "user_id", u.ID, "scheme", scheme)
}

// checkPassword verifies an email and password: against the local
// person's hash, or, for an address no local person holds, against the
// directories (directoryPassword). Every check spends one argon2id
// derivation at the node's cost, whether or not there is a hash to
// compare: a local person's stored hash, or else a decoy
// (password.Hasher.Decoy) for an unknown address, a person without a
// password, a stored hash Verify refuses, and every directory check. So
// the time of a refusal does not tell a local account from an address
// nobody holds, with or without directories. reason names a refusal when
// the directories gave one; err is for a store, context or directory
// (errDirectoryDown) problem.
func (p *Signin) checkPassword(ctx context.Context, email, secret string) (fsm.User, bool, string, error) {
	var u fsm.User
	var err error
	if email != "" && len(email) <= authn.MaxEmailLen {
		u, err = p.cfg.State.UserByEmail(email)
		if err != nil && !errors.Is(err, fsm.ErrNotFound) {
			return fsm.User{}, false, "", err
		}
	} else {
		err = fsm.ErrNotFound
	}
	switch {
	case err == nil && u.DirectoryID != "":
		return p.decoyThenDirectory(ctx, email, secret, &u)
	case errors.Is(err, fsm.ErrNotFound) && email != "" && len(email) <= authn.MaxEmailLen:
		if has, derr := p.cfg.State.HasDirectories(); derr != nil {
			return fsm.User{}, false, "", derr
		} else if has {
			return p.decoyThenDirectory(ctx, email, secret, nil)
		}
	}
	ok, verr := p.localPassword(ctx, u, err == nil, secret)
	return u, ok, "", verr
}

// decoyThenDirectory spends the decoy derivation of a check that has no
// local hash, then asks the directories (directoryPassword). The decoy
// comes first so that a request whose context ends while it waits for a
// slot never reaches a directory.
func (p *Signin) decoyThenDirectory(ctx context.Context, email, secret string, known *fsm.User) (fsm.User, bool, string, error) {
	if err := p.cfg.Hasher.Decoy(ctx, secret); err != nil {
		return fsm.User{}, false, "", err
	}
	return p.directoryPassword(ctx, email, secret, known)
}

// localPassword checks secret against u's stored hash (found: u exists),
// or spends a decoy when there is none to check.
func (p *Signin) localPassword(ctx context.Context, u fsm.User, found bool, secret string) (bool, error) {
	if !found || u.PasswordHash == "" {
		return false, p.cfg.Hasher.Decoy(ctx, secret)
	}
	ok, verr := p.cfg.Hasher.Verify(ctx, secret, u.PasswordHash)
	if errors.Is(verr, password.ErrMalformed) {
		// Refused without a derivation (malformed, or a cost above the
		// caps): spend the decoy instead.
		p.log.Error("authorize: stored password hash malformed", "user_id", u.ID, "err", verr)
		return false, p.cfg.Hasher.Decoy(ctx, secret)
	}
	return ok && verr == nil, verr
}

// startSession opens an SSO session for u after a sign-in by method,
// superseding the browser's usable session if it has one, settling the
// sign-in's throttle reservation, and sets the cookie. ok is false when
// it has answered.
func (f *flow) startSession(u fsm.User, method string, settled *fsm.ThrottleClear) bool {
	supersedes := ""
	if f.hasSession {
		supersedes = f.sess.ID
	}
	s, err := f.p.openSession(f.w, f.r, u, method, supersedes, f.now, settled, f.st.ClientID)
	if errors.Is(err, fsm.ErrNotFound) { // erased while signing in
		f.showSignIn(http.StatusBadRequest, u.Email, f.text(msgBadPassword))
		return false
	}
	if err != nil {
		f.unavailable("start session: " + err.Error())
		return false
	}
	f.p.log.Info("authorize: signed in", "user_id", u.ID, "sso_session", s.ID,
		"supersedes", supersedes, "reference", f.reference())
	f.sess, f.user, f.hasSession = s, u, true
	f.pend.SSOID, f.pend.StepUp = s.ID, false
	f.st.CSRF = f.p.sessions.RotateCSRF(f.w)
	return true
}

// openSession opens an SSO session for u authenticated by method,
// superseding the browser's session supersedes ("" for none), and sets the
// cookie. ErrNotFound: the person was erased meanwhile.
func (p *Signin) openSession(w http.ResponseWriter, r *http.Request, u fsm.User, method, supersedes string, now time.Time, settled *fsm.ThrottleClear, clientID string) (fsm.SSOSession, error) {
	s := fsm.SSOSession{
		ID: uuid.NewString(), UserID: u.ID, AuthTime: now,
		AMR: []string{method}, ACR: acrOf([]string{method}), Verified: map[string]time.Time{method: now},
		CreatedAt: now, LastSeen: now,
	}
	s.IdleExpiresAt, s.ExpiresAt = p.sessions.Lifetimes(now)
	secret := authn.NewID()
	cmd := fsm.StartSSOSession{Session: s, TokenHash: authn.HashToken(secret), Supersedes: supersedes, Settle: settled}
	res, err := p.cfg.Applier.Apply(r.Context(), p.stamp(r.Context(), fsm.MustCommand(fsm.TypeStartSSOSession, cmd),
		p.signinEvent(u.ID, clientID, map[string]string{"method": method, "acr": s.ACR})))
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return s, err
	}
	p.sessions.SetSSOCookie(w, secret, s.ExpiresAt)
	p.metrics.signIns.WithLabelValues(method).Inc()
	return s, nil
}
