package oidc

// The authorization endpoint and its organization picker.
//
// GET /authorize validates the request in a fixed order
// (validateAuthorize): until client_id, redirect_uri and the rest of
// the page checks have passed, every problem is an error page (status 400 with
// a reference, never a Location). Then the request becomes a pending
// request and runs the pipeline of flow.proceed:
//
//	authenticate -> strength (acr_values) -> organization -> consent -> code
//
// Each stage either passes, answers with a form (sign-in, picker, consent),
// or ends the flow with an error redirected to the client.
// A form posts its sealed step back; the POST handlers check the step and
// CSRF binding, do their stage's work and call proceed again, which
// re-checks everything that could have changed in between (client,
// session, membership) from the store.
//
// Invariants:
//   - Nothing is redirected to a redirect_uri that is not byte for byte a
//     registered URI of a client that is currently not suspended.
//   - Page errors and redirected errors never mix: the former are plain
//     errors from the validators (text to the log only), the latter are
//     *Error values with constant descriptions.
//   - The browser holds only a random SSO secret; the store holds its hash.
//   - A prompt=none request never gets a page once it has been validated.

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/webui"
)

// Paths and limits of the authorization pages.
const (
	pathPicker   = PathAuthorize + "/organization"
	maxPageForm  = authn.MaxPageForm // body of a form post
	maxPickerLen = 64                // q of the organization picker
)

// Catalog keys (webui/locales) of the pages' constant texts (the
// sign-in's own are package signin's).
const (
	msgBadRequest = authn.MsgBadRequest
	msgExpired    = authn.MsgExpired
	msgForbidden  = authn.MsgForbidden
	msgNotFound   = "error.not_found"
	msgPickOrg    = "picker.error.choose"
)

// The errors redirected to the client. Descriptions are
// matched whole by clients: do not reword.
var (
	errLoginRequired   = &Error{Code: "login_required", Description: "The Authorization Server requires End-User authentication."}
	errOrgSelection    = &Error{Code: "interaction_required", Description: "organization_selection_required"}
	errOrgDenied       = &Error{Code: "access_denied", Description: "organization_access_denied"}
	errNoSecondFactor  = &Error{Code: "access_denied", Description: "strong authentication required; no second factor enrolled"}
	errConsentRequired = &Error{Code: "interaction_required", Description: "consent_required"}
	errStepUpRequired  = &Error{Code: "interaction_required", Description: "second_factor_required"}
)

// registerAuthorize mounts /authorize and the sign-in steps.
func (p *Provider) registerAuthorize(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathAuthorize, p.handleAuthorize)
	mux.HandleFunc("POST "+PathAuthorize, p.handleAuthorizePost)
	mux.HandleFunc("GET "+pathPicker, p.handlePicker)
	mux.HandleFunc("POST "+pathPicker, p.handlePickerPost)
	mux.HandleFunc(PathAuthorize+"/", p.handleAuthorizeNotFound)
	mux.HandleFunc("GET "+authn.PathFederation+"{slug}/callback", p.handleFederationCallback)
	// Static answers 405 itself for other methods. The pattern has no
	// method so that an embedder (the test harness) may still mount its
	// own, more specific "GET /static/" without a conflict.
	mux.Handle("/static/", p.cfg.UI.Static())
	// Browsers ask for /favicon.ico on every origin they visit, whatever
	// the page links; the pages link it versioned (webui.FaviconName).
	mux.Handle("/"+webui.FaviconName, p.cfg.UI.Static())
}

// flow is one request's turn through the sign-in pipeline.
type flow struct {
	p    *Provider
	w    http.ResponseWriter
	r    *http.Request
	now  time.Time
	pend *pending

	client fsm.Client

	// The browser's usable SSO session and its person (hasSession).
	sess       fsm.SSOSession
	user       fsm.User
	hasSession bool

	turn authn.Turn // the CSRF token and reference, shared with the sign-in

	// uiLocales is the language the request's ui_locales asked for
	// (i18n.UILocale), kept before the request is known to be valid: the
	// error page of a wrong client or redirect URI is in it too. Once the
	// request is pending, pend.UILocales holds it.
	uiLocales string
}

func (p *Provider) newFlow(w http.ResponseWriter, r *http.Request) *flow {
	return &flow{p: p, w: w, r: r, now: p.now()}
}

// handleAuthorize is GET /authorize.
func (p *Provider) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	f := p.newFlow(w, r)
	q, err := url.ParseQuery(r.URL.RawQuery)
	// ParseQuery keeps what it could parse: even the page of a malformed
	// query is in the language the request asked for.
	f.uiLocales = i18n.UILocale(q.Get("ui_locales"))
	if err != nil {
		f.page(http.StatusBadRequest, msgBadRequest, "query: "+err.Error())
		return
	}
	st := clients{p: p, lookup: p.cfg.State.Client}
	req, client, err := validateAuthorize(st, q)
	if err != nil && !errors.Is(err, errAuthzStore) && p.catchUp(r.Context()) {
		// The client, or its redirect URI, may have been registered a
		// moment ago through another node: catch up once before refusing.
		req, client, err = validateAuthorize(st, q)
	}
	if err != nil {
		f.client = client // known unless the client is: the page wears its branding
		f.pageErr(err)
		return
	}
	req.RequestedAt = f.now
	f.pend, f.client = &pending{Req: req, Pending: authn.Pending{UILocales: f.uiLocales}}, client
	if e := checkACRSupported(req.ACRValues); e != nil {
		f.fail(e)
		return
	}
	if !f.loadSession() {
		return
	}
	f.proceed(false)
}

// handleFederationCallback is GET /federation/{slug}/callback: an
// upstream provider sends the browser back here. The request it belongs to
// waits sealed in the browser's federation cookie (session.FedCookie),
// bound to this browser's CSRF token, so a callback lifted into another
// browser finds no request to go on with (login CSRF); the sign-in
// (Steps) checks the state, exchanges the code and opens the session,
// and the request goes on as after a password. A cookie that holds no
// pending request of ours may hold a link the person started on /account
// (AccountLinks): the sign-in takes that callback whole.
func (p *Provider) handleFederationCallback(w http.ResponseWriter, r *http.Request) {
	f := p.newFlow(w, r)
	step := p.sessions.FedCookie(r)
	p.sessions.ClearFedCookie(w)
	var err error
	f.pend, err = p.openPending(step, f.now, authn.StageFederated)
	switch {
	case errors.Is(err, errStepInvalid):
		if al, ok := p.cfg.Steps.(AccountLinks); ok && al.AccountLinkCallback(w, r, step) {
			return
		}
		f.page(http.StatusBadRequest, msgExpired, "federation callback without a pending request of this browser")
		return
	case err != nil:
		f.unavailable("sealer: " + err.Error())
		return
	}
	if f.pend.Fed == nil || f.pend.Fed.Slug != r.PathValue("slug") || !p.sessions.CSRFOK(r, f.pend.CSRF, f.pend.CSRF) {
		f.page(http.StatusBadRequest, msgExpired, "federation callback of another provider or browser")
		return
	}
	f.turn.CSRF = f.pend.CSRF
	if !f.loadClient() || !f.loadSession() {
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		f.page(http.StatusBadRequest, msgBadRequest, "query: "+err.Error())
		return
	}
	f.step(q, "")
}

// AccountLinks is the part of the sign-in (Steps, when it implements it)
// that links a person's account at an upstream from /account: the
// browser left from there with the sign-in's own sealed link in the
// federation cookie instead of a pending authorization request, and comes
// back through the same callback. AccountLinkCallback reports whether
// step (the cookie's value) was such a link; it has answered then.
type AccountLinks interface {
	AccountLinkCallback(w http.ResponseWriter, r *http.Request, step string) bool
}

// handleAuthorizeNotFound answers unknown paths under /authorize/ with the
// HTML error page (a 404 under /authorize is documented as text/html).
func (p *Provider) handleAuthorizeNotFound(w http.ResponseWriter, r *http.Request) {
	f := p.newFlow(w, r)
	f.uiLocales = i18n.UILocale(r.URL.Query().Get("ui_locales"))
	f.page(http.StatusNotFound, msgNotFound, "no such page: "+r.URL.Path)
}

// handleAuthorizePost is POST /authorize: the sign-in and consent forms.
func (p *Provider) handleAuthorizePost(w http.ResponseWriter, r *http.Request) {
	f := p.newFlow(w, r)
	form, ok := f.openForm(stageSignIn, stageConsent, stageMFA, stageSMSCode)
	if !ok || !f.loadClient() || !f.loadSession() {
		return
	}
	switch f.pend.Stage {
	case stageConsent:
		f.consentDecision(form)
	default: // the sign-in's stages
		f.step(form, "")
	}
}

// step hands one turn to the sign-in (Steps): the posted form of a
// sign-in stage, or with a nil form the page show names (stageSignIn,
// stageMFA). When the sign-in authenticated, the pipeline goes on with
// the session it returns.
func (f *flow) step(form url.Values, show string) {
	st := &authn.Step{
		Pending: &f.pend.Pending, Seal: func() (string, error) { return f.p.sealPending(f.pend) },
		Form: form, Show: show, ClientID: f.client.ID, AppName: f.client.Name,
		Turn: &f.turn, OrgHint: f.pend.Req.OrgHint, Resume: f.pend.Req.resume(),
		LoginHint: f.pend.Req.LoginHint, IdPHint: f.pend.Req.IdPHint, Fresh: f.pend.Req.Prompt.has(promptLogin), MaxAge: -1,
	}
	if f.pend.Req.MaxAge != nil {
		st.MaxAge = *f.pend.Req.MaxAge
	}
	var sess fsm.SSOSession
	if f.hasSession {
		sess = f.sess
	}
	s, u, ok := f.p.cfg.Steps.Step(f.w, f.r, st, sess, f.user)
	if !ok {
		return
	}
	f.sess, f.user, f.hasSession = s, u, s.ID != ""
	f.proceed(false)
}

// openForm parses a posted form, opens its step (one of stages) and checks
// the CSRF binding. On failure it has answered: 400 for a bad body or
// step, 403 for CSRF, 503 without a browser key.
func (f *flow) openForm(stages ...string) (url.Values, bool) {
	f.r.Body = http.MaxBytesReader(f.w, f.r.Body, maxPageForm)
	if err := f.r.ParseForm(); err != nil {
		f.page(http.StatusBadRequest, msgBadRequest, "form: "+err.Error())
		return nil, false
	}
	form := f.r.PostForm
	step, _ := authn.FormValue(form, "step")
	var err error
	f.pend, err = f.p.openPending(step, f.now, stages...)
	switch {
	case errors.Is(err, errStepInvalid):
		f.page(http.StatusBadRequest, msgExpired, "step invalid, expired or of another stage")
		return nil, false
	case err != nil:
		f.unavailable("sealer: " + err.Error())
		return nil, false
	}
	token, _ := authn.FormValue(form, "csrf_token")
	if !f.p.sessions.CSRFOK(f.r, token, f.pend.CSRF) {
		f.page(http.StatusForbidden, msgForbidden, "csrf mismatch")
		return nil, false
	}
	f.turn.CSRF = f.pend.CSRF
	return form, true
}

// loadClient re-reads the pending request's client: it may have been
// suspended or lost the redirect URI since GET /authorize. A form posted
// to another node than the one that showed it may arrive before that node
// has applied the client's registration (an edge replica far from the
// core): a refusal first catches up once, as GET /authorize does.
func (f *flow) loadClient() bool {
	read := func() (fsm.Client, error) {
		c, err := lookupClient(clients{p: f.p, lookup: f.p.cfg.State.Client}, f.pend.Req.ClientID)
		if err == nil {
			err = checkRedirectURI(c, f.pend.Req.RedirectURI)
		}
		return c, err
	}
	c, err := read()
	if err != nil && !errors.Is(err, errAuthzStore) && f.p.catchUp(f.r.Context()) {
		c, err = read()
	}
	if err != nil {
		f.pageErr(err)
		return false
	}
	f.client = c
	return true
}

// loadSession finds the browser's usable SSO session (session.Manager.Live),
// catching up once when the cookie names a session not found. ok is false
// when it has answered 503.
func (f *flow) loadSession() bool {
	s, u, found, err := f.p.sessions.Live(f.r, f.now, func() bool { return f.p.catchUp(f.r.Context()) })
	if err != nil {
		f.unavailable(err.Error())
		return false
	}
	f.sess, f.user, f.hasSession = s, u, found
	return true
}

// proceed runs the pipeline from authentication to the code. grant is the
// person's "allow" on the consent page for this step.
func (f *flow) proceed(grant bool) {
	if !f.authenticate() {
		return
	}
	if !f.strength() {
		return
	}
	if isAdmin(f.client) {
		// The built-in client: no organization, no consent (adminclient.go).
		f.issueAdmin()
		return
	}
	org, ok := f.organization()
	if !ok {
		return
	}
	f.consentAndIssue(org, grant)
}

// authenticate passes when the browser's session satisfies the request; it
// shows the sign-in form otherwise (login_required for prompt=none).
func (f *flow) authenticate() bool {
	if f.pend.SSOID != "" && !f.sameSession() {
		// Signed out or replaced meanwhile: judge afresh, and forget what
		// the earlier person chose.
		f.pend.SSOID, f.pend.OrgID, f.pend.StepUp = "", "", false
	}
	if f.pend.SSOID != "" {
		return true
	}
	if f.hasSession && !needsFreshAuth(f.pend.Req, f.sess, f.now) {
		f.pend.SSOID = f.sess.ID
		return true
	}
	if f.pend.Req.Prompt.has(promptNone) {
		f.fail(errLoginRequired)
		return false
	}
	f.step(nil, stageSignIn)
	return false
}

// sameSession reports whether the browser's usable session is the one that
// authenticated this pending request.
func (f *flow) sameSession() bool { return f.pend.SameSession(f.hasSession, f.sess.ID) }

// needsFreshAuth reports whether session s is too old or not wanted for
// req: prompt=login, or max_age exceeded (max_age=0: always).
func needsFreshAuth(req authzRequest, s fsm.SSOSession, now time.Time) bool {
	if req.Prompt.has(promptLogin) {
		return true
	}
	if req.MaxAge == nil {
		return false
	}
	return *req.MaxAge == 0 || now.Unix()-s.AuthTime.Unix() > *req.MaxAge
}

// strength passes when the session is as strong as acr_values asks.
// Otherwise it asks for a second factor, or ends the flow: access_denied
// when none is enrolled,
// interaction_required for prompt=none.
func (f *flow) strength() bool {
	need := requiredACR(f.pend.Req.ACRValues)
	if isAdmin(f.client) && acrRank(need) < acrRank(f.p.cfg.AdminACR) {
		need = f.p.cfg.AdminACR // an administrator's sign-in is at least this strong
	}
	if need == "" || acrRank(f.sess.ACR) >= acrRank(need) {
		return true
	}
	if f.pend.StepUp {
		// The second step was a recovery code: it proves the person, never
		// the strength asked for. Deny rather than issue a
		// weaker code; the spent code opens /account, where the person
		// sets up a new factor.
		f.refuse(errNoSecondFactor, authn.ReasonRecoveryTooWeak)
		return false
	}
	fac, err := f.p.cfg.State.Factors(f.user.ID)
	if err != nil && !errors.Is(err, fsm.ErrNotFound) {
		f.unavailable("factors: " + err.Error())
		return false
	}
	switch {
	case !fac.HasSecondFactor():
		f.refuse(errNoSecondFactor, authn.ReasonNoSecondFactor)
	case f.pend.Req.Prompt.has(promptNone):
		f.fail(errStepUpRequired)
	default:
		f.step(nil, stageMFA)
	}
	return false
}

// organization decides the organization of this sign-in (each sign-in is
// for exactly one). It returns ok=false when it has answered (picker, error).
func (f *flow) organization() (fsm.Org, bool) {
	if !f.client.MultiOrganization {
		o, ok, err := f.p.memberOrg(f.user.ID, f.client.OrganizationID)
		if err != nil {
			f.unavailable("membership: " + err.Error())
			return fsm.Org{}, false
		}
		if !ok {
			f.fail(errOrgDenied)
			return fsm.Org{}, false
		}
		return o, true
	}
	cands, err := f.p.orgCandidates(f.user.ID, f.client)
	if err != nil {
		f.unavailable("memberships: " + err.Error())
		return fsm.Org{}, false
	}
	if id := f.pend.OrgID; id != "" { // chosen earlier in this flow
		if i := indexOrg(cands, id); i >= 0 {
			return cands[i], true
		}
		f.fail(errOrgDenied)
		return fsm.Org{}, false
	}
	hint := f.pend.Req.OrgHint
	hinted := indexOrg(cands, hint)
	if len(cands) == 0 || (hint != "" && hinted < 0) {
		f.fail(errOrgDenied)
		return fsm.Org{}, false
	}
	if !f.pend.Req.Prompt.has(promptSelectAccount) {
		switch {
		case hinted >= 0:
			return cands[hinted], true
		case len(cands) == 1:
			return cands[0], true
		}
	}
	if f.pend.Req.Prompt.has(promptNone) {
		f.fail(errOrgSelection)
		return fsm.Org{}, false
	}
	f.toPicker()
	return fsm.Org{}, false
}

// memberOrg returns organization orgID when userID is an active member of
// it and it is active.
func (p *Provider) memberOrg(userID, orgID string) (fsm.Org, bool, error) {
	m, err := p.cfg.State.MembershipOf(userID, orgID)
	if errors.Is(err, fsm.ErrNotFound) {
		return fsm.Org{}, false, nil
	}
	if err != nil {
		return fsm.Org{}, false, err
	}
	o, err := p.cfg.State.Org(orgID)
	if errors.Is(err, fsm.ErrNotFound) {
		return fsm.Org{}, false, nil
	}
	if err != nil {
		return fsm.Org{}, false, err
	}
	return o, m.Status == fsm.MembershipActive && o.Status == fsm.OrgActive, nil
}

// orgCandidates lists the organizations userID may sign in to with a
// multi-organization client: active memberships of active organizations
// the client serves (client.Organizations; empty means all), sorted for
// the picker.
func (p *Provider) orgCandidates(userID string, c fsm.Client) ([]fsm.Org, error) {
	ms, err := p.cfg.State.MembershipsOfUser(userID)
	if err != nil {
		return nil, err
	}
	var out []fsm.Org
	for _, m := range ms {
		if m.Status != fsm.MembershipActive || m.Org.Status != fsm.OrgActive {
			continue
		}
		if len(c.Organizations) > 0 && !slices.Contains(c.Organizations, m.OrgID) {
			continue
		}
		out = append(out, m.Org)
	}
	sortOrgs(out)
	return out, nil
}

func indexOrg(orgs []fsm.Org, id string) int {
	if id == "" {
		return -1
	}
	return slices.IndexFunc(orgs, func(o fsm.Org) bool { return o.ID == id })
}

// consentAndIssue asks for consent when it is needed, then issues the code.
func (f *flow) consentAndIssue(org fsm.Org, grant bool) {
	if grant || f.client.SkipConsent {
		f.issue(org, grant)
		return
	}
	covered, err := f.p.consentCovers(f.user.ID, f.client.ID, f.pend.Req.Scopes)
	if err != nil {
		f.unavailable("consent: " + err.Error())
		return
	}
	switch {
	case covered:
		f.issue(org, false)
	case f.pend.Req.Prompt.has(promptNone):
		f.fail(errConsentRequired)
	default:
		f.showConsent(org)
	}
}

// issue stores the code (reusing or opening the app session, recording
// consent when granted) and redirects to the client with it.
func (f *flow) issue(org fsm.Org, grant bool) {
	p, req, s := f.p, f.pend.Req, f.sess
	code := authn.NewID()
	idle := p.sessions.IdleUntil(f.now, s.ExpiresAt)
	cmd := fsm.IssueCode{
		Code: fsm.Code{
			Hash: authn.HashToken(code), ClientID: f.client.ID, RedirectURI: req.RedirectURI,
			UserID: s.UserID, OrgID: org.ID, SSOSessionID: s.ID,
			Scopes: req.Scopes, Nonce: req.Nonce, Challenge: req.Challenge,
			AuthTime: s.AuthTime, AMR: s.AMR, ACR: s.ACR,
			RequestedAt: req.RequestedAt, IssuedAt: f.now, ExpiresAt: f.now.Add(p.cfg.CodeTTL),
		},
		NewSID:        uuid.NewString(),
		IdleExpiresAt: idle,
	}
	if grant {
		scopes, err := p.grantedScopes(s.UserID, f.client.ID, req.Scopes)
		if err != nil {
			f.unavailable("consent: " + err.Error())
			return
		}
		cmd.Consent = &fsm.Consent{UserID: s.UserID, ClientID: f.client.ID, Scopes: scopes, At: f.now}
	}
	res, err := p.cfg.Applier.Apply(f.r.Context(), fsm.MustCommand(fsm.TypeIssueCode, cmd))
	switch {
	case err != nil:
		f.unavailable("issue code: " + err.Error())
		return
	case errors.Is(res.Err, fsm.ErrSessionEnded):
		// Ended between our read and the write: sign in again.
		f.hasSession, f.pend.SSOID = false, ""
		if req.Prompt.has(promptNone) {
			f.fail(errLoginRequired)
		} else {
			f.step(nil, stageSignIn)
		}
		return
	case res.Err != nil:
		f.unavailable("issue code: " + res.Err.Error())
		return
	}
	f.p.log.Info("authorize: code issued", "client_id", f.client.ID, "org_id", org.ID,
		"sid", res.Value, "reference", f.reference())
	// iss (RFC 9207) on every authorization response, success or error:
	// a client of several providers sees which one answered (mix-up).
	f.redirect(httpx.AppendQuery(req.RedirectURI, url.Values{"code": {code}, "state": {req.State}, "iss": {f.p.cfg.Issuer}}))
}

// fail redirects an error to the client.
func (f *flow) fail(e *Error) {
	f.p.log.Info("authorize: error redirected", "error", e.Code, "error_description", e.Description,
		"client_id", f.pend.Req.ClientID, "reference", f.reference())
	f.redirect(httpx.AppendQuery(f.pend.Req.RedirectURI, url.Values{
		"error": {e.Code}, "error_description": {e.Description}, "state": {f.pend.Req.State}, "iss": {f.p.cfg.Issuer},
	}))
}

// redirect ends the flow with a redirect: 302 after a GET, 303 after a
// POST, never cached. The picker cookie has served its purpose.
func (f *flow) redirect(location string) {
	if f.r.Method == http.MethodPost {
		f.redirectTo(location, http.StatusSeeOther)
	} else {
		f.redirectTo(location, http.StatusFound)
	}
}

func (f *flow) redirectTo(location string, status int) {
	if _, err := f.r.Cookie(cookieAuthz); err == nil && location != pathPicker {
		f.p.clearCookie(f.w, cookieAuthz, authzCookiePath)
	}
	h := f.w.Header()
	h.Set("Location", location)
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Referrer-Policy", "no-referrer")
	f.w.WriteHeader(status)
}

// reference is the id quoted on error pages and in the log
// (authn.Turn.Reference).
func (f *flow) reference() string { return f.turn.Reference(f.r) }

// pageErr shows a validation error: 503 for a store problem, else 400.
func (f *flow) pageErr(err error) {
	if errors.Is(err, errAuthzStore) {
		f.unavailable(err.Error())
		return
	}
	var re *requestError
	detail := ""
	if errors.As(err, &re) {
		detail = re.detail
	}
	f.showError(http.StatusBadRequest, msgBadRequest, detail, err.Error())
}

// page shows the error page, never a redirect, with the constant message
// of the catalog key message (and showError the developer's detail, a
// key too), and logs the real reason under the reference it shows.
func (f *flow) page(status int, message, reason string) {
	f.showError(status, message, "", httpx.LogValue(reason))
}

func (f *flow) showError(status int, message, detail, reason string) {
	ref, fr := f.reference(), f.frame()
	f.p.log.Warn("authorize: error page", "status", status, "reason", reason, "reference", ref)
	f.p.cfg.UI.Error(f.w, status, webui.ErrorPage{Frame: fr, Message: f.p.cfg.UI.Text(fr.Lang, message), Detail: f.p.cfg.UI.Text(fr.Lang, detail), Reference: ref})
}

// frame is the language and branding of the flow's pages (Steps.Frame):
// in the pending request's ui_locales language, or before there is one in
// the query's, else as the sign-in chooses (the language picked, then
// Accept-Language).
func (f *flow) frame() webui.Frame {
	ui := f.uiLocales
	if f.pend != nil {
		ui = f.pend.UILocales
	}
	return f.p.cfg.Steps.Frame(f.r, f.client.ID, ui)
}

// unavailable is the 503 page for store and key problems, in the flow's
// language and without branding.
func (f *flow) unavailable(reason string) {
	ref, lang := f.reference(), f.frame().Lang
	f.p.log.Error("authorize: unavailable", "reason", reason, "reference", ref)
	f.p.cfg.UI.Error(f.w, http.StatusServiceUnavailable, webui.ErrorPage{Frame: webui.Frame{Lang: lang},
		Title: f.p.cfg.UI.Text(lang, authn.TitleUnavailable), Message: f.p.cfg.UI.Text(lang, authn.MsgUnavailable), Reference: ref,
	})
}

// common seals the pending request for a form of stage and returns the
// data every form carries. ok is false when it has answered 503.
func (f *flow) common(stage, action string) (webui.Common, bool) {
	csrf := f.p.sessions.Bind(f.w, f.r, &f.turn, &f.pend.Pending, stage)
	step, err := f.p.sealPending(f.pend)
	if err != nil {
		f.unavailable("seal step: " + err.Error())
		return webui.Common{}, false
	}
	return webui.Common{Frame: f.frame(), AppName: f.client.Name, CSRFToken: csrf, Action: action, Step: step}, true
}
