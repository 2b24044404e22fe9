package signin

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/webui"
)

// The account page beyond the factors (issue 21): the person's recent
// sign-ins from the audit trail, their sessions with a sign-out for each
// and for every other one, the applications they consented to with a
// revoke, and a password change. Each change is an audit event of type
// account with actor person (and the logouts it causes).

// activityShown is how many recent sign-in events the page lists.
const activityShown = 10

// accountEvent is the audit stamp of a change made on the page.
func (a *account) accountEvent(action string, detail map[string]string) fsm.Audit {
	d := map[string]string{"action": action}
	for k, v := range detail {
		d[k] = v
	}
	return fsm.Audit{Type: fsm.EventAccount, Actor: fsm.ActorPerson, Subject: a.user.ID, Detail: d}
}

// applyStamped applies cmd carrying the account event of action.
func (a *account) applyStamped(cmd fsm.Command, action string, detail map[string]string) (fsm.Result, error) {
	ctx := a.r.Context()
	res, err := a.p.cfg.Applier.Apply(ctx, a.p.stamp(ctx, cmd, a.accountEvent(action, detail)))
	if err == nil {
		err = res.Err
	}
	return res, err
}

// endAction handles the actions that only take something away (a
// session, a consent): a fresh session is enough for them, no second
// factor, since they give no one access.
func (a *account) endAction(action string, form url.Values) {
	switch action {
	case "session-end":
		id, _ := authn.FormValue(form, "session_id")
		if !a.ownSession(id) || id == a.sess.ID {
			a.showHome(http.StatusBadRequest, "", a.text(keyNoSession))
			return
		}
		if !a.endSession(id) {
			return
		}
		a.showHome(http.StatusOK, a.text(keySessionEnded), "")
	case "sessions-end-others":
		sessions, _, err := a.p.cfg.State.SSOSessionsOf(a.user.ID, a.now)
		if err != nil {
			a.unavailable("sessions: " + err.Error())
			return
		}
		n := 0
		for _, s := range sessions {
			if s.ID != a.sess.ID {
				if !a.endSession(s.ID) {
					return
				}
				n++
			}
		}
		a.showHome(http.StatusOK, a.text(keyOthersEnded, n), "")
	case "consent-revoke":
		clientID, _ := authn.FormValue(form, "client_id")
		if clientID == "" || len(clientID) > 256 {
			a.page(http.StatusBadRequest, a.text(authn.MsgBadRequest))
			return
		}
		_, err := a.applyStamped(fsm.MustCommand(fsm.TypeRevokeConsent, fsm.RevokeConsent{UserID: a.user.ID, ClientID: clientID, At: a.now}),
			"consent-revoke", map[string]string{"client_id": clientID})
		switch {
		case errors.Is(err, fsm.ErrNotFound):
			a.showHome(http.StatusBadRequest, "", a.text(keyNoConsent))
		case err != nil:
			a.unavailable("revoke consent: " + err.Error())
		default:
			a.showHome(http.StatusOK, a.text(keyConsentRevoked), "")
		}
	}
}

// ownSession reports whether id is a live session of this person.
func (a *account) ownSession(id string) bool {
	s, err := a.p.cfg.State.SSOSession(id)
	return err == nil && s.UserID == a.user.ID && s.EndedAt.IsZero() && s.Live(a.now)
}

// endSession ends one of the person's sessions as a logout does (its app
// sessions end, logout tokens with sid go out); false when it answered.
func (a *account) endSession(id string) bool {
	_, err := a.applyStamped(fsm.MustCommand(fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: id, At: a.now, Reason: fsm.EndLogout}),
		"session-end", map[string]string{"session": id})
	if err != nil && !errors.Is(err, fsm.ErrNotFound) {
		a.unavailable("end session: " + err.Error())
		return false
	}
	return true
}

// changePassword sets a new password after checking the current one,
// counted by the password throttle before it is checked. Every other
// session of the person ends in the same write.
func (a *account) changePassword(form url.Values) {
	current, _ := authn.FormValue(form, "current_password")
	next, _ := authn.FormValue(form, "new_password")
	if a.user.DirectoryID != "" {
		a.showHome(http.StatusBadRequest, "", a.text(keyPasswordDirectory))
		return
	}
	if a.user.PasswordHash == "" {
		a.showHome(http.StatusBadRequest, "", a.text(keyNoPassword))
		return
	}
	if msg := newPasswordProblem(next); msg != "" {
		a.showHome(http.StatusBadRequest, "", a.text(msg))
		return
	}
	ctx := a.r.Context()
	rules := passwordRules(a.user.Email, remoteIP(a.r))
	if _, err := a.p.reserve(ctx, a.p.lockoutEvent(a.user.ID, ""), rules...); err != nil {
		if errors.Is(err, errLocked) {
			a.showHome(http.StatusTooManyRequests, "", lockout(a.w, err, a.p.now(), a.text))
		} else {
			a.unavailable(err.Error())
		}
		return
	}
	ok, err := a.p.cfg.Hasher.Verify(ctx, current, a.user.PasswordHash)
	if err != nil {
		a.unavailable("password check: " + err.Error())
		return
	}
	if !ok {
		a.p.recordFailure(ctx, a.user.ID, "", "wrong_password")
		a.showHome(http.StatusBadRequest, "", a.text(keyWrongPassword))
		return
	}
	hash, err := a.p.cfg.Hasher.Hash(ctx, next)
	if err != nil {
		a.unavailable("hash: " + err.Error())
		return
	}
	_, err = a.applyStamped(fsm.MustCommand(fsm.TypeUpdateUser, fsm.UpdateUser{ID: a.user.ID, PasswordHash: &hash, At: a.now, EndSessions: a.endOthers()}),
		"password-change", nil)
	if err != nil {
		a.unavailable("change password: " + err.Error())
		return
	}
	// The attempt was right: forget the account's counters, as a sign-in does.
	a.p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypeThrottleClear, *settle(rules, 2)))
	a.user.PasswordHash = hash
	a.showHome(http.StatusOK, a.text(keyPasswordChanged), "")
}

// overview fills the page's activity, sessions and applications, their
// times in the page's language (a.dateTime).
func (a *account) overview(page *webui.AccountPage) error {
	st := a.p.cfg.State
	names := map[string]string{}
	appName := func(id string) string {
		switch id {
		case "":
			return a.text(keyThisPage)
		case adminClientID:
			// The built-in client is no record of the state: it has no
			// name there, and its id means nothing to the person.
			return a.text(keyAdminApp)
		}
		if n, ok := names[id]; ok {
			return n
		}
		n := id
		if c, err := st.Client(id); err == nil && c.Name != "" {
			n = c.Name
		}
		names[id] = n
		return n
	}
	events, err := a.activity()
	if err != nil {
		return err
	}
	for i, e := range events {
		if i > 0 && folded(events[i-1], e) {
			continue
		}
		page.Activity = append(page.Activity, a.activityLine(e, appName))
	}
	sessions, apps, err := st.SSOSessionsOf(a.user.ID, a.now)
	if err != nil {
		return err
	}
	// Newest first, as the activity is.
	slices.SortFunc(sessions, func(x, y fsm.SSOSession) int {
		return cmp.Or(y.CreatedAt.Compare(x.CreatedAt), cmp.Compare(x.ID, y.ID))
	})
	for _, s := range sessions {
		line := webui.SessionLine{ID: s.ID, Started: a.dateTime(s.CreatedAt), Strength: a.strength(s.ACR), Current: s.ID == a.sess.ID}
		for _, app := range apps[s.ID] {
			line.Apps = append(line.Apps, appName(app.ClientID))
		}
		page.Sessions = append(page.Sessions, line)
	}
	consents, err := st.ConsentsOf(a.user.ID)
	if err != nil {
		return err
	}
	for _, c := range consents {
		page.Apps = append(page.Apps, webui.ConsentLine{ClientID: c.ClientID, Name: appName(c.ClientID),
			Scopes: a.scopeList(c.Scopes), Granted: a.dateTime(c.At)})
	}
	page.HasPassword = a.user.PasswordHash != ""
	return nil
}

// scopeList names the scopes an application was allowed as the consent
// page named them, in the page's language (every scope a request may
// name has its text, consent.scope.<scope>).
func (a *account) scopeList(scopes []string) string {
	names := make([]string, len(scopes))
	for i, s := range scopes {
		names[i] = a.text("consent.scope." + s)
	}
	return strings.Join(names, a.text(keyScopeSeparator))
}

// activity is the person's recent sign-in steps and password resets,
// newest first, at most activityShown of them (and one more, which a
// refusal may fold: folded).
func (a *account) activity() ([]fsm.Event, error) {
	st := a.p.cfg.State
	var all []fsm.Event
	for _, typ := range []string{fsm.EventSignin, fsm.EventPasswordReset} {
		evs, err := st.AuditEvents(fsm.AuditQuery{Subject: a.user.ID, Type: typ, Newest: true, Limit: activityShown + 1})
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
	}
	slices.SortFunc(all, func(x, y fsm.Event) int { return cmp.Compare(y.Seq, x.Seq) })
	var out []fsm.Event
	for i, e := range all {
		if len(out) == activityShown && (i == 0 || !folded(all[i-1], e)) {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// refusalReasons are the reasons of a sign-in the authorization flow
// refused after it succeeded here (Signin.Refused): the line says
// refused, not signed in.
var refusalReasons = map[string]bool{authn.ReasonNoSecondFactor: true, authn.ReasonRecoveryTooWeak: true}

// folded reports whether the event older, just before newer in the
// trail, is the first step of the same sign-in: the same person and
// application, from the same address, a moment before, signed in by a
// first factor, where newer is either that sign-in refused (the page
// shows the refusal alone) or its second factor (the page shows one
// line, of two factors, not a password sign-in and then another).
func folded(newer, older fsm.Event) bool {
	if newer.Type != fsm.EventSignin || older.Type != fsm.EventSignin || older.Outcome != fsm.OutcomeSuccess ||
		older.ClientID != newer.ClientID || older.IP != newer.IP || newer.Time.Sub(older.Time) > time.Minute {
		return false
	}
	if newer.Outcome == fsm.OutcomeFailure {
		return refusalReasons[newer.Detail["reason"]]
	}
	return newer.Detail["acr"] == authn.ACRMFA && older.Detail["acr"] != authn.ACRMFA
}

// activityLine is the page's line of the event e.
func (a *account) activityLine(e fsm.Event, appName func(string) string) webui.ActivityLine {
	line := webui.ActivityLine{Time: a.dateTime(e.Time), App: appName(e.ClientID), Address: e.IP,
		Strength: a.strength(e.Detail["acr"]), OK: e.Outcome == fsm.OutcomeSuccess}
	switch {
	case e.Type == fsm.EventPasswordReset:
		line.App, line.Strength = a.text(keyResetPage), ""
		line.Result = a.text(keyResetRequested)
		if e.Detail["action"] == "completed" {
			line.Result = a.text(keyResetCompleted)
		}
	case !line.OK && refusalReasons[e.Detail["reason"]]:
		line.Strength = a.reason(e.Detail["reason"])
		line.Result = a.text(keyRefusedWith, line.Strength)
	case !line.OK:
		line.Strength = a.reason(e.Detail["reason"])
	}
	return line
}

// strength names an acr for a person, in the page's language.
func (a *account) strength(acr string) string {
	switch acr {
	case authn.ACRPwd:
		return a.text("account.strength.pwd")
	case authn.ACRMFA:
		return a.text("account.strength.mfa")
	case authn.ACRPhone:
		return a.text("account.strength.phone")
	}
	return acr
}

// failureReasons are the reasons of failed sign-in events
// (recordFailure) that the page names in the person's language; another
// is shown as recorded, its underscores as spaces.
var failureReasons = map[string]string{
	"wrong_password":            "account.reason.wrong_password",
	"wrong_code":                "account.reason.wrong_code",
	"unknown_account":           "account.reason.unknown_account",
	"directory_refused":         "account.reason.directory_refused",
	"directory_disabled":        "account.reason.directory_disabled",
	"directory_unavailable":     "account.reason.directory_unavailable",
	"address_taken":             "account.reason.address_taken",
	authn.ReasonNoSecondFactor:  "account.reason.no_second_factor",
	authn.ReasonRecoveryTooWeak: "account.reason.recovery_code_too_weak",
}

// reason names a failed sign-in's reason for a person.
func (a *account) reason(r string) string {
	if key, ok := failureReasons[r]; ok {
		return a.text(key)
	}
	return strings.ReplaceAll(r, "_", " ")
}

// dateTime is t as the page shows it: in the page's language, in UTC
// (the zone the page has always named; a server's local zone would
// differ between the nodes of a cluster).
func (a *account) dateTime(t time.Time) string {
	return a.p.cfg.UI.DateTime(a.lang(), t.UTC())
}

// signOut ends this browser's session as a logout does (its app sessions
// end, logout tokens with sid go out), drops its cookie and shows the
// signed-out page. live is false when the browser has no session left
// to end: the page is the same.
func (a *account) signOut(live bool) {
	if live {
		_, err := a.applyStamped(fsm.MustCommand(fsm.TypeEndSSOSession, fsm.EndSSOSession{ID: a.sess.ID, At: a.now, Reason: fsm.EndLogout}),
			webui.ActionSignOut, map[string]string{"session": a.sess.ID})
		if err != nil && !errors.Is(err, fsm.ErrNotFound) {
			a.unavailable("sign out: " + err.Error())
			return
		}
		a.p.log.Info("account: signed out", "user_id", a.user.ID, "sso_session", a.sess.ID)
	}
	a.p.sessions.ClearSSOCookie(a.w)
	a.clearQRCookie()
	if live && a.p.cfg.UpstreamSignOut != nil {
		// A session opened through a provider with end_upstream_session
		// ends there too, as an application's sign-out does; the
		// upstream sends the browser back to the signed-out page.
		if location, ok := a.p.cfg.UpstreamSignOut(a.r, a.sess); ok {
			a.w.Header().Set("Cache-Control", "no-store")
			http.Redirect(a.w, a.r, location, http.StatusSeeOther)
			return
		}
	}
	a.p.cfg.UI.Message(a.w, http.StatusOK, webui.MessagePage{Frame: a.frame(), Title: a.text(keySignedOutTitle), Message: a.text(keySignedOut),
		LinkURL: PathAccount, LinkText: a.text(keySignIn)})
}

// pickLanguage remembers the language the picker posted (Signin.pickLanguage)
// and shows this request's page in it.
func (a *account) pickLanguage(form url.Values) {
	if tag := a.p.pickLanguage(a.w, form, a.now); tag != "" {
		a.language = a.p.language(a.r, tag)
	}
}
