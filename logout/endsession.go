package logout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/keys"
	"github.com/oidcd/oidcd/webui"
)

// Path is the end-session endpoint (GET and POST).
const Path = "/logout"

// Parameters of the end-session request.
const (
	paramHint        = "id_token_hint"
	paramRedirectURI = "post_logout_redirect_uri"
	paramClientID    = "client_id"
	paramState       = "state"
)

// Limits of the end-session request.
const (
	// maxForm bounds a POST body: a hint (at most keys.MaxTokenSize) and
	// three short fields.
	maxForm = keys.MaxTokenSize + 8<<10
	// hintSkew is how far past exp a hint is still accepted.
	hintSkew = 5 * time.Second
)

// Catalog keys (webui/locales) of the pages' constant texts, translated
// into the page's language; details go to the log with the reference.
const (
	titleSignedOut   = "logout.title"
	msgSignedOut     = "logout.done"
	msgOtherSession  = "logout.other_session"
	titleInvalid     = "logout.invalid.title"
	msgInvalid       = "logout.invalid"
	titleUnavailable = "error.unavailable.title"
	msgUnavailable   = "error.unavailable"
	msgInternal      = "logout.internal"
)

// eventBackchannelLogout is the key of the events claim (OpenID Connect
// Back-Channel Logout 1.0).
const eventBackchannelLogout = "http://schemas.openid.net/event/backchannel-logout"

// logoutRequest is a parsed and validated end-session request.
type logoutRequest struct {
	hint        hint
	client      fsm.Client
	redirectURI string // "" when none was sent
	state       string
}

// hint is what logout uses of a validated id_token_hint.
type hint struct {
	sub string
	sid string
	aud []string
}

// requestError is a request that cannot be honoured; status is 400, 500 or
// 503 and reason goes to the log only.
type requestError struct {
	status int
	reason string
}

func (e *requestError) Error() string { return e.reason }

func invalid(format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, reason: fmt.Sprintf(format, args...)}
}

func unavailable(format string, args ...any) *requestError {
	return &requestError{status: http.StatusServiceUnavailable, reason: fmt.Sprintf(format, args...)}
}

// handleGet is GET /logout: answers are pages.
func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.fail(w, r, "", invalid("query: %v", err))
		return
	}
	s.endSession(w, r, q)
}

// handlePost is POST /logout: the same fields in a form body, answers
// without a body.
func (s *Service) handlePost(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r)
	if err != nil {
		s.fail(w, r, "", err)
		return
	}
	s.endSession(w, r, form)
}

// readForm reads a POST's form body. The parameters must all be in the
// body: a query string on the POST is refused rather than merged, so that
// a parameter cannot be split or doubled between the two.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	if r.URL.RawQuery != "" {
		return nil, invalid("POST with a query string")
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, invalid("Content-Type %q: want application/x-www-form-urlencoded", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxForm))
	if err != nil {
		return nil, invalid("body: %v", err)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, invalid("body: %v", err)
	}
	return form, nil
}

// endSession validates the request, ends the browser's SSO session when
// the hint belongs to it, and answers.
func (s *Service) endSession(w http.ResponseWriter, r *http.Request, params url.Values) {
	now := s.now()
	req, rerr := s.validate(params, now)
	if rerr != nil {
		s.fail(w, r, "", rerr)
		return
	}
	ended, sso, endedHere, rerr := s.endBrowserSession(w, r, req, now)
	if rerr != nil {
		s.fail(w, r, req.client.ID, rerr)
		return
	}
	s.log.Info("logout", "client_id", req.client.ID, "sid", req.hint.sid, "ended", endedHere,
		"app_sessions", len(ended.Apps), "deliveries", len(ended.Deliveries), "reference", reference(r))
	// The session here has ended; a session opened through an upstream
	// with end_upstream_session goes through the upstream's end session
	// first, and comes back to handleLoggedOut for what follows.
	upstream, toUpstream := "", false
	if endedHere {
		upstream, toUpstream = s.upstreamLogout(r, req, sso)
	}
	if req.redirectURI == "" && !toUpstream {
		s.signedOut(w, r, req.client.ID, endedHere)
		return
	}
	if req.redirectURI != "" && len(ended.Deliveries) > 0 {
		s.awaitDeliveries(r.Context(), ended.Index)
	}
	if toUpstream {
		s.redirect(w, upstream, "")
		return
	}
	s.redirect(w, req.redirectURI, req.state)
}

// redirect answers 302 to location, with state appended when not empty
// (the location's own query kept as it is).
func (s *Service) redirect(w http.ResponseWriter, location, state string) {
	if state != "" {
		location = httpx.AppendQuery(location, url.Values{paramState: {state}})
	}
	h := w.Header()
	h.Set("Location", location)
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusFound)
}

// validate runs the end-session checks in order: single
// parameters, the hint (ours, an ID token, unexpired), client_id against
// its audience, the hint's client, and the redirect URI against that
// client's registration.
func (s *Service) validate(params url.Values, now time.Time) (logoutRequest, *requestError) {
	var req logoutRequest
	for k, v := range params {
		if len(v) > 1 {
			return req, invalid("parameter %q repeated", k)
		}
	}
	raw := params.Get(paramHint)
	if raw == "" {
		return req, invalid("id_token_hint missing")
	}
	h, rerr := s.checkHint(raw, now)
	if rerr != nil {
		return req, rerr
	}
	req.hint = h
	if id := params.Get(paramClientID); id != "" && !slices.Contains(h.aud, id) {
		return req, invalid("client_id %q not in the hint's audience %q", id, h.aud)
	}
	client, rerr := s.hintClient(h.aud[0])
	if rerr != nil {
		return req, rerr
	}
	req.client = client
	if uri := params.Get(paramRedirectURI); uri != "" {
		if !slices.Contains(client.RedirectURIs, uri) {
			return req, invalid("post_logout_redirect_uri %q not registered for %q", uri, client.ID)
		}
		req.redirectURI = uri
	}
	req.state = params.Get(paramState)
	return req, nil
}

// hintClient is the registration of the client a hint was issued to: the
// built-in client (Config.AdminClientID), which registers no redirect of
// any kind here, or a client of the store that is not suspended.
func (s *Service) hintClient(id string) (fsm.Client, *requestError) {
	if s.isAdmin(id) {
		return fsm.Client{ID: id}, nil
	}
	client, err := s.cfg.State.Client(id)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return client, invalid("hint audience %q: unknown client", id)
	case err != nil:
		return client, unavailable("client: %v", err)
	case client.Suspended:
		return client, invalid("client %q suspended", client.ID)
	}
	return client, nil
}

// isAdmin reports whether clientID is the built-in client.
func (s *Service) isAdmin(clientID string) bool {
	return s.cfg.AdminClientID != "" && clientID == s.cfg.AdminClientID
}

// hintClaims are the claims of an id_token_hint that logout checks. Aud
// and Events are kept raw to check their JSON shape: an ID token's aud is
// an array (an access token's is empty, a logout token's a string), and
// only a logout token has events.
type hintClaims struct {
	Iss    string          `json:"iss"`
	Sub    string          `json:"sub"`
	Aud    json.RawMessage `json:"aud"`
	Exp    *float64        `json:"exp"`
	SID    string          `json:"sid"`
	Events json.RawMessage `json:"events"`
}

// checkHint accepts only an ID token of ours: signed by a published key
// with RS256 (keys.Verify rejects alg none, foreign keys and unknown kids),
// our issuer, unexpired, a non-empty aud array, a sub and a sid.
func (s *Service) checkHint(raw string, now time.Time) (hint, *requestError) {
	var h hint
	payload, err := s.cfg.Keys.Verify([]byte(raw))
	if err != nil {
		if errors.Is(err, keys.ErrInvalidToken) {
			return h, invalid("id_token_hint: %v", err)
		}
		return h, unavailable("id_token_hint: keys: %v", err)
	}
	var c hintClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return h, invalid("id_token_hint claims: %v", err)
	}
	switch {
	case c.Iss != s.cfg.Issuer:
		return h, invalid("id_token_hint iss %q: not the issuer", c.Iss)
	case c.Exp == nil:
		return h, invalid("id_token_hint without exp")
	case !now.Before(time.Unix(int64(*c.Exp), 0).Add(hintSkew)):
		return h, invalid("id_token_hint expired at %d", int64(*c.Exp))
	case len(c.Events) > 0:
		return h, invalid("id_token_hint is a logout token")
	case c.Sub == "" || c.SID == "":
		return h, invalid("id_token_hint without sub or sid")
	}
	if err := json.Unmarshal(c.Aud, &h.aud); err != nil || len(h.aud) == 0 || slices.Contains(h.aud, "") {
		return h, invalid("id_token_hint aud %s: want a non-empty array of client ids", c.Aud)
	}
	h.sub, h.sid = c.Sub, c.SID
	return h, nil
}

// endBrowserSession ends the browser's SSO session when it is the one the
// hint's app session belongs to, and clears its cookie. A hint of another
// session, or a browser without a session, ends nothing (the redirect still
// happens). endedHere reports that the browser's session was the hint's;
// sess is then that session as it was before this logout.
func (s *Service) endBrowserSession(w http.ResponseWriter, r *http.Request, req logoutRequest, now time.Time) (ended fsm.EndedApps, sess fsm.SSOSession, endedHere bool, rerr *requestError) {
	if s.cfg.ReadIndex != nil {
		if err := s.cfg.ReadIndex(r.Context()); err != nil {
			return ended, sess, false, unavailable("read index: %v", err)
		}
	}
	ssoID, rerr := s.hintSSOSession(r, req)
	if rerr != nil || ssoID == "" {
		return ended, sess, false, rerr
	}
	sess, found, err := s.cfg.Sessions.Named(r)
	switch {
	case err != nil:
		return ended, sess, false, unavailable("sso session: %v", err)
	case !found || sess.ID != ssoID:
		return ended, sess, false, nil
	}
	if sess.Live(now) {
		// Plain expiry is not a logout: an expired session is not ended
		// here, so it never causes a back-channel token.
		cmd := fsm.EndSSOSession{ID: sess.ID, At: now, Reason: fsm.EndLogout}
		// The logout events of the app sessions it ends come from the
		// apply; the stamp gives them this node, the address and the actor.
		stamped := fsm.StampIn(r.Context(), fsm.MustCommand(fsm.TypeEndSSOSession, cmd), now, fsm.Audit{Actor: fsm.ActorPerson})
		res, err := s.cfg.Applier.Apply(r.Context(), stamped)
		if err != nil {
			return ended, sess, false, unavailable("end sso session: %v", err)
		}
		switch {
		case errors.Is(res.Err, fsm.ErrNotFound): // reaped meanwhile
		case res.Err != nil:
			return ended, sess, false, &requestError{status: http.StatusInternalServerError, reason: "end sso session: " + res.Err.Error()}
		default:
			ended, _ = res.Value.(fsm.EndedApps)
		}
	}
	s.cfg.Sessions.ClearSSOCookie(w)
	return ended, sess, true, nil
}

// hintSSOSession is the id of the SSO session the hint was issued under
// ("" when there is none left to end). An application's hint names its
// app session, which names the SSO session; the built-in client's names
// the SSO session itself. Either must be the hint's person's (and the
// app session the hint's client's).
func (s *Service) hintSSOSession(r *http.Request, req logoutRequest) (string, *requestError) {
	if s.isAdmin(req.client.ID) {
		sess, err := s.cfg.State.SSOSession(req.hint.sid)
		switch {
		case errors.Is(err, fsm.ErrNotFound):
			return "", nil // reaped long ago: nothing left to end
		case err != nil:
			return "", unavailable("sso session: %v", err)
		case sess.UserID != req.hint.sub:
			s.log.Warn("logout: hint's sid names another person's session", "sid", sess.ID, "reference", reference(r))
			return "", nil
		}
		return sess.ID, nil
	}
	app, err := s.cfg.State.AppSession(req.hint.sid)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return "", nil // reaped long ago: nothing left to end
	case err != nil:
		return "", unavailable("app session: %v", err)
	case app.ClientID != req.client.ID || app.UserID != req.hint.sub:
		s.log.Warn("logout: hint's sid names another app or person", "sid", app.ID, "reference", reference(r))
		return "", nil
	}
	return app.SSOSessionID, nil
}

// awaitDeliveries waits, at most FrontChannelWait, until every delivery
// the logout at index created has left the pending state, so that an app
// rarely sees the browser come back before its back-channel token. It
// wakes on Notify and polls as a fallback.
func (s *Service) awaitDeliveries(ctx context.Context, index uint64) {
	if s.cfg.FrontChannelWait < 0 {
		return
	}
	deadline := time.NewTimer(s.cfg.FrontChannelWait)
	defer deadline.Stop()
	poll := time.NewTicker(s.pollEvery)
	defer poll.Stop()
	for {
		changed := s.changes()
		ds, err := s.cfg.State.DeliveriesOf(index)
		if err != nil || !anyPending(ds) {
			return
		}
		select {
		case <-changed:
		case <-poll.C:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func anyPending(ds []fsm.Delivery) bool {
	for _, d := range ds {
		if d.State == fsm.DeliveryPending {
			return true
		}
	}
	return false
}

// signedOut answers a logout without a redirect: the signed-out page, in
// the branding of the client clientID that asked for it, or 200 without a
// body to a POST.
func (s *Service) signedOut(w http.ResponseWriter, r *http.Request, clientID string, endedHere bool) {
	if r.Method == http.MethodPost {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		return
	}
	msg := msgSignedOut
	if !endedHere && s.browserHasLiveSession(r) {
		msg = msgOtherSession
	}
	fr := s.frame(r, clientID)
	s.cfg.UI.Message(w, http.StatusOK, webui.MessagePage{Frame: fr, Title: s.cfg.UI.Text(fr.Lang, titleSignedOut), Message: s.cfg.UI.Text(fr.Lang, msg)})
}

// frame is the language and branding of a page for clientID ("" for the
// site's).
func (s *Service) frame(r *http.Request, clientID string) webui.Frame {
	if s.cfg.Frame == nil {
		return webui.Frame{}
	}
	return s.cfg.Frame(r, clientID)
}

// browserHasLiveSession reports whether the browser's cookie names a live
// SSO session (a read problem counts as no).
func (s *Service) browserHasLiveSession(r *http.Request) bool {
	sess, found, err := s.cfg.Sessions.Named(r)
	return err == nil && found && sess.Live(s.now())
}

// fail answers a request that cannot be honoured: an error page with a
// reference to a GET (in the branding of clientID, the validated
// request's client, "" before), the status alone to a POST; never a
// redirect.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, clientID string, err error) {
	rerr, ok := err.(*requestError)
	if !ok {
		rerr = invalid("%v", err)
	}
	ref := reference(r)
	if rerr.status == http.StatusBadRequest {
		s.log.Warn("logout: request refused", "reason", httpx.LogValue(rerr.reason), "method", r.Method, "reference", ref)
	} else {
		s.log.Error("logout: failed", "status", rerr.status, "reason", httpx.LogValue(rerr.reason), "method", r.Method, "reference", ref)
	}
	if r.Method == http.MethodPost {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(rerr.status)
		return
	}
	title, msg := titleInvalid, msgInvalid
	switch rerr.status {
	case http.StatusServiceUnavailable:
		title, msg = titleUnavailable, msgUnavailable
	case http.StatusInternalServerError:
		title, msg = "", msgInternal
	}
	fr := s.frame(r, clientID)
	s.cfg.UI.Error(w, rerr.status, webui.ErrorPage{Frame: fr, Title: s.cfg.UI.Text(fr.Lang, title), Message: s.cfg.UI.Text(fr.Lang, msg), Reference: ref})
}

// reference is the id quoted on error pages and in the log: the request's
// correlation id, or a fresh one outside the correlation middleware.
func reference(r *http.Request) string {
	if id := httpx.CorrelationID(r.Context()); id != "" {
		return id
	}
	return httpx.NewID()[:12]
}
