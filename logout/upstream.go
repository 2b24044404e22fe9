package logout

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/oidcd/oidcd/federation"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
)

// Upstreams builds the end-session URL of an upstream provider (OpenID
// Connect RP-Initiated Logout 1.0): node hands in the federation client
// the sign-in uses, so both share its cached discovery documents.
type Upstreams interface {
	EndSessionURL(ctx context.Context, up federation.Upstream, idTokenHint, postLogoutRedirectURI, state string) (string, bool, error)
}

var _ Upstreams = (*federation.Client)(nil)

// Ending the upstream's session too (CONTRACT section 12,
// end_upstream_session).
const (
	// upstreamPurpose names the sealed state of the trip through the
	// upstream, so no other sealed value of the browser key opens as it.
	upstreamPurpose = "logout.upstream"
	// upstreamStateTTL is how long the person may take at the upstream
	// (its confirmation page) before coming back: after it, the signed-out
	// page is shown instead of the redirect to the application.
	upstreamStateTTL = 15 * time.Minute
	// upstreamWait bounds the reading of the upstream's discovery document
	// (usually cached): a sign-out waits on it, and an upstream that does
	// not answer must not hold it for the client's whole timeout.
	upstreamWait = 5 * time.Second
	// maxUpstreamState bounds the sealed state sent to the upstream, which
	// holds the application's own state: a longer one might not survive
	// the upstream's URL limits, so the sign-out goes straight on instead.
	maxUpstreamState = 2 << 10
)

// loggedOutPattern is the route the upstream sends the browser back to.
const loggedOutPattern = "GET " + authn.PathFederation + "{slug}/logged-out"

// LoggedOutURI is where the upstream provider of slug sends the browser
// back after its end session, {issuer}/federation/{slug}/logged-out: the
// post-logout redirect URI to register at the upstream (admin prints the
// same).
func LoggedOutURI(issuer, slug string) string {
	return strings.TrimSuffix(issuer, "/") + authn.PathFederation + url.PathEscape(slug) + "/logged-out"
}

// afterUpstream is where a sign-out goes once the upstream has ended its
// session, sealed into the state of the trip: the provider it went to,
// the application whose sign-out it is, and that application's validated
// post_logout_redirect_uri with its state ("" for the signed-out page).
type afterUpstream struct {
	Slug        string `json:"p"`
	ClientID    string `json:"c,omitempty"`
	RedirectURI string `json:"r,omitempty"`
	State       string `json:"s,omitempty"`
}

// upstreamLogout is where to send the browser to end the session at the
// upstream too, when the SSO session this sign-out ended (sso) was opened
// through a provider with end_upstream_session and kept its ID token; ok
// is false otherwise, and when the upstream cannot be asked (no
// end_session_endpoint, discovery failing, no browser key yet): the
// sign-out here is done and goes on as without, with a warning in the
// log. A session the upstream itself ended (its logout token) does not
// go back there.
func (s *Service) upstreamLogout(r *http.Request, req logoutRequest, sso fsm.SSOSession) (location string, ok bool) {
	if s.cfg.Upstreams == nil || sso.ProviderID == "" || sso.UpstreamIDToken == "" || sso.EndReason == fsm.EndUpstreamLogout {
		return "", false
	}
	warn := func(msg string, args ...any) {
		s.log.Warn("logout: the upstream's session is not ended: "+msg,
			append(args, "provider_id", sso.ProviderID, "sso_session", sso.ID, "reference", reference(r))...)
	}
	ip, err := s.cfg.State.IdentityProvider(sso.ProviderID)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return "", false // deleted since: its sessions ended with it
	case err != nil:
		warn("reading the provider", "err", err)
		return "", false
	case !ip.EndUpstreamSession:
		return "", false
	}
	box, err := s.cfg.Sessions.Box()
	if err != nil {
		warn("no browser key", "err", err)
		return "", false
	}
	after := afterUpstream{Slug: ip.Slug, ClientID: req.client.ID, RedirectURI: req.redirectURI}
	if req.redirectURI != "" {
		after.State = req.state
	}
	state, err := box.Seal(upstreamPurpose, after, s.now().Add(upstreamStateTTL))
	if err != nil {
		warn("sealing the state", "err", err)
		return "", false
	}
	if len(state) > maxUpstreamState {
		warn("the application's state is too long to carry through the upstream", "bytes", len(req.state))
		return "", false
	}
	ctx, cancel := context.WithTimeout(r.Context(), upstreamWait)
	defer cancel()
	up := federation.Upstream{Issuer: ip.Issuer, ClientID: ip.ClientID, Scopes: ip.Scopes}
	location, ok, err = s.cfg.Upstreams.EndSessionURL(ctx, up, sso.UpstreamIDToken, LoggedOutURI(s.cfg.Issuer, ip.Slug), state)
	switch {
	case err != nil:
		warn("the upstream's discovery failed", "provider", ip.Slug, "err", err)
		return "", false
	case !ok:
		warn("the upstream has no end_session_endpoint", "provider", ip.Slug)
		return "", false
	}
	s.log.Info("logout: ending the upstream's session too", "provider", ip.Slug, "client_id", req.client.ID, "reference", reference(r))
	return location, true
}

// UpstreamSignOut is where a sign-out that ended the SSO session sso
// outside /logout (the person's own, on /account) goes on: through the
// upstream's end session as upstreamLogout decides, and back to the
// signed-out page, since no application asked for it.
func (s *Service) UpstreamSignOut(r *http.Request, sso fsm.SSOSession) (location string, ok bool) {
	return s.upstreamLogout(r, logoutRequest{}, sso)
}

// handleLoggedOut is GET /federation/{slug}/logged-out, where the
// upstream sends the browser back after ending its session: the sealed
// state says where the sign-out goes on, the application's
// post_logout_redirect_uri (with its state) or the signed-out page. The
// URI was validated before it was sealed and is checked again against the
// client's registration now; a state that is missing, forged, expired or
// of another provider, or a URI no longer registered, gives the
// signed-out page, never a redirect and never an error page: the session
// here ended on the way out.
func (s *Service) handleLoggedOut(w http.ResponseWriter, r *http.Request) {
	after, reason := s.openAfterUpstream(r)
	if reason != "" {
		s.log.Warn("logout: back from the upstream without a usable state", "provider", httpx.LogValue(r.PathValue("slug")),
			"reason", reason, "reference", reference(r))
		s.signedOut(w, r, "", false)
		return
	}
	s.log.Info("logout: back from the upstream", "provider", after.Slug, "client_id", after.ClientID,
		"redirect", after.RedirectURI != "", "reference", reference(r))
	if after.RedirectURI == "" {
		s.signedOut(w, r, after.ClientID, true)
		return
	}
	s.redirect(w, after.RedirectURI, after.State)
}

// openAfterUpstream opens the state the upstream sent back and checks it;
// reason says why it cannot be used ("" when it can).
func (s *Service) openAfterUpstream(r *http.Request) (after afterUpstream, reason string) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	switch {
	case err != nil:
		return after, "query: " + err.Error()
	case len(q[paramState]) != 1:
		return after, "not one state"
	}
	box, err := s.cfg.Sessions.Box()
	if err != nil {
		return after, "browser key: " + err.Error()
	}
	if err := box.Open(upstreamPurpose, q.Get(paramState), s.now(), &after); err != nil {
		return after, "state: " + err.Error()
	}
	if after.Slug != r.PathValue("slug") {
		return after, "state of provider " + after.Slug
	}
	if after.RedirectURI == "" {
		return after, ""
	}
	client, rerr := s.hintClient(after.ClientID)
	switch {
	case rerr != nil:
		return after, rerr.reason
	case !slices.Contains(client.RedirectURIs, after.RedirectURI):
		return after, "post_logout_redirect_uri no longer registered for " + client.ID
	}
	return after, ""
}
