package signin

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/federation"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/promreg"
	"github.com/oidcd/oidcd/webui"
)

// Sign-in through the site's other identity providers
// (docs/operators/federation.md). The sign-in page offers a button per
// provider of the sign-in; the button, an idp_hint naming one, or an
// address of a provider's email domains (typed, or sent as login_hint)
// sends the browser to the upstream with the code flow and PKCE. The
// pending request goes with it sealed in the federation cookie, with the
// state, nonce and verifier: nothing is replicated before the person comes
// back. The callback (package oidc hands it here as the StageFederated
// step) checks the state against the cookie's, has the federation client
// exchange the code and check the ID token, and opens the session in one
// FederatedSignIn write, whose apply decides who the person is.

// adminClientID is the built-in console client (package oidc's
// AdminClientID), whose sign-in offers no upstream provider.
const adminClientID = "oidcd-admin"

// fedCookieTTL bounds a sign-in at an upstream: the sealed request
// expires as soon anyway (oidc's pendingTTL).
const fedCookieTTL = 10 * time.Minute

// fedMetrics are the federation's own metrics.
type fedMetrics struct {
	signIns *prometheus.CounterVec   // callbacks by provider and result
	latency *prometheus.HistogramVec // the upstream's token exchange, by provider
}

func newFedMetrics(reg prometheus.Registerer) *fedMetrics {
	m := &fedMetrics{
		signIns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oidcd_federation_signins_total",
			Help: "Sign-ins through an upstream provider, by provider slug and result (ok, refused, upstream_error, invalid, unreachable).",
		}, []string{"provider", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oidcd_federation_upstream_seconds",
			Help:    "Time the upstream took to exchange a code and answer with keys, by provider slug.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"provider"}),
	}
	if reg != nil {
		m.signIns = promreg.MustRegister(reg, m.signIns)
		m.latency = promreg.MustRegister(reg, m.latency)
	}
	return m
}

// signinProviders are the enabled providers of the sign-in for clientID:
// the site's, and those of the client's organization (for a
// multi-organization client, of the request's organization_hint). The
// built-in console client has none: administrators sign in here, with
// their own second factor.
func (p *Signin) signinProviders(clientID, orgHint string) ([]fsm.IdentityProvider, error) {
	if p.cfg.Federation == nil || clientID == "" || clientID == adminClientID {
		return nil, nil
	}
	if any, err := p.cfg.State.HasIdentityProviders(); err != nil || !any {
		return nil, err
	}
	c, err := p.cfg.State.Client(clientID)
	if err != nil {
		return nil, err
	}
	org := c.OrganizationID
	if c.MultiOrganization {
		org = orgHint
	}
	all, err := p.cfg.State.IdentityProviders()
	if err != nil {
		return nil, err
	}
	var out []fsm.IdentityProvider
	for _, ip := range all {
		if ip.Enabled && (ip.OrgID == "" || ip.OrgID == org) {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, func(a, b fsm.IdentityProvider) int { return strings.Compare(a.DisplayName, b.DisplayName) })
	return out, nil
}

// providerButtons are the sign-in page's buttons for ips.
func providerButtons(ips []fsm.IdentityProvider) []webui.ProviderButton {
	out := make([]webui.ProviderButton, 0, len(ips))
	for _, ip := range ips {
		out = append(out, webui.ProviderButton{Slug: ip.Slug, DisplayName: ip.DisplayName})
	}
	return out
}

// providerBySlug is the provider of ips with slug.
func providerBySlug(ips []fsm.IdentityProvider, slug string) (fsm.IdentityProvider, bool) {
	for _, ip := range ips {
		if ip.Slug == slug {
			return ip, true
		}
	}
	return fsm.IdentityProvider{}, false
}

// providerForAddress is the provider of ips authoritative for address's
// domain, if any.
func providerForAddress(ips []fsm.IdentityProvider, address string) (fsm.IdentityProvider, bool) {
	if !strings.Contains(address, "@") {
		return fsm.IdentityProvider{}, false
	}
	for _, ip := range ips {
		if ip.InEmailDomains(address) {
			return ip, true
		}
	}
	return fsm.IdentityProvider{}, false
}

// upstreamOf is ip as the federation client takes it: its client secret
// opened with the KEK.
func (p *Signin) upstreamOf(ip fsm.IdentityProvider) (federation.Upstream, error) {
	up := federation.Upstream{Issuer: ip.Issuer, ClientID: ip.ClientID, Scopes: ip.Scopes}
	if len(ip.ClientSecret) > 0 {
		secret, err := p.cfg.KEK.Open(ip.ClientSecret, fsm.IdentityProviderAAD(ip.ID))
		if err != nil {
			return up, err
		}
		up.ClientSecret = string(secret)
	}
	return up, nil
}

// routeToProvider sends the first sign-in page of a request straight to
// a provider when the request says which: idp_hint naming one of the
// sign-in's, or a login_hint in one's email domains. It reports whether
// it answered.
func (f *flow) routeToProvider(ips []fsm.IdentityProvider) bool {
	if ip, ok := providerBySlug(ips, f.st.IdPHint); ok && f.st.IdPHint != "" {
		f.toUpstream(ip, f.st.LoginHint)
		return true
	}
	if ip, ok := providerForAddress(ips, f.st.LoginHint); ok {
		f.toUpstream(ip, f.st.LoginHint)
		return true
	}
	return false
}

// toUpstream sends the browser to sign in at ip: a fresh state, nonce and
// PKCE verifier sealed with the pending request into the federation
// cookie, and a redirect to the upstream's authorization endpoint with
// prompt=login and max_age passed on when the request asked for a fresh
// sign-in.
func (f *flow) toUpstream(ip fsm.IdentityProvider, loginHint string) {
	up, err := f.p.upstreamOf(ip)
	if err != nil {
		f.unavailable("identity provider " + ip.Slug + ": client secret: " + err.Error())
		return
	}
	ar := federation.NewAuthRequest()
	f.pend.Fed = &authn.Federated{ProviderID: ip.ID, Slug: ip.Slug, State: ar.State, Nonce: ar.Nonce, Verifier: ar.Verifier, Sent: f.now.Unix()}
	f.pend.SSOID, f.pend.OrgID, f.pend.StepUp = "", "", false
	c, ok := f.common(authn.StageFederated, "")
	if !ok {
		return
	}
	opts := federation.AuthorizeOptions{LoginHint: loginHint}
	if f.st.Fresh {
		opts.Prompt = "login"
	}
	if f.st.MaxAge >= 0 {
		m := int(min(f.st.MaxAge, 1<<31-1))
		opts.MaxAge = &m
	}
	to, err := f.p.cfg.Federation.AuthorizeURL(f.r.Context(), up, federation.RedirectURI(f.p.cfg.Issuer, ip.Slug), ar, opts)
	if err != nil {
		f.upstreamFailed(ip, err)
		return
	}
	f.p.sessions.SetFedCookie(f.w, c.Step, f.now.Add(fedCookieTTL))
	f.p.log.Info("authorize: to an upstream provider", "provider", ip.Slug, "reference", f.reference())
	http.Redirect(f.w, f.r, to, http.StatusSeeOther)
}

// federated handles the upstream's answer brought back to the callback
// (form is its query): the state must be this browser's, the code is
// exchanged and the ID token checked by the federation client, and the
// FederatedSignIn write opens the session.
func (f *flow) federated(form map[string][]string) {
	fed := f.pend.Fed
	if fed == nil {
		f.page(http.StatusBadRequest, authn.MsgExpired, "federated step without an upstream request")
		return
	}
	ip, err := f.p.cfg.State.IdentityProvider(fed.ProviderID)
	if err != nil || !ip.Enabled || ip.Slug != fed.Slug {
		f.page(http.StatusBadRequest, authn.MsgExpired, "identity provider gone, disabled or renamed during the sign-in")
		return
	}
	tok, err := f.p.upstreamAnswer(f.r.Context(), ip, fed, form)
	switch {
	case errors.Is(err, errForeignState):
		f.fedCount(ip, "invalid")
		f.page(http.StatusBadRequest, authn.MsgExpired, err.Error())
		return
	case errors.Is(err, errProviderSecret):
		f.unavailable("identity provider " + ip.Slug + ": " + err.Error())
		return
	case err != nil:
		f.upstreamFailed(ip, err)
		return
	}
	var sent time.Time // zero for a request sealed before Sent existed
	if fed.Sent > 0 {
		sent = time.Unix(fed.Sent, 0)
	}
	if why := staleUpstream(tok.AuthTime, sent, f.now, f.st.Fresh, f.st.MaxAge); why != "" {
		f.fedCount(ip, "refused")
		f.tryAgainPage(http.StatusForbidden, f.text("signin.error.not_fresh", ip.DisplayName), "identity provider "+ip.Slug+": "+why)
		return
	}
	f.openFederated(ip, tok)
}

// authTimeSkew is the clock difference between an upstream and us that
// staleUpstream allows.
const authTimeSkew = 2 * time.Minute

// staleUpstream says why an upstream's sign-in is older than the request
// asked ("" when it is not): with prompt=login (fresh) the upstream's
// auth_time must not precede the browser's departure (sent), and with
// max_age it must lie within max_age of now. An upstream that sends no
// auth_time is taken at its word (Entra ID sends it only as an optional
// claim, and OpenID Connect requires it only with max_age): its sign-in
// counts from now, as this provider's sessions always did.
func staleUpstream(authTime, sent, now time.Time, fresh bool, maxAge int64) string {
	if authTime.IsZero() {
		return ""
	}
	if fresh && !sent.IsZero() && authTime.Before(sent.Add(-authTimeSkew)) {
		return "prompt=login: the upstream's auth_time " + authTime.UTC().Format(time.RFC3339) + " precedes the request"
	}
	if maxAge >= 0 && now.Sub(authTime) > time.Duration(min(maxAge, 1<<31))*time.Second+authTimeSkew {
		return "max_age: the upstream's auth_time " + authTime.UTC().Format(time.RFC3339) + " is older than max_age"
	}
	return ""
}

// Why upstreamAnswer took no ID token, besides the federation client's
// errors: errForeignState, the callback's state is not the one sealed
// when the browser left (another browser's answer, or a forged one), and
// nothing was sent to the upstream for it; errProviderSecret, the
// provider's client secret would not open (answer 503).
var (
	errForeignState   = errors.New("federation callback state is not this browser's")
	errProviderSecret = errors.New("client secret")
)

// upstreamAnswer checks the upstream's answer brought back to the
// callback (form, its query) against fed, the request sealed when the
// browser left for ip, and has the federation client exchange its code
// and check the ID token. Both the sign-in (federated) and a link made on
// /account come back through it.
func (p *Signin) upstreamAnswer(ctx context.Context, ip fsm.IdentityProvider, fed *authn.Federated, form url.Values) (*federation.IDToken, error) {
	cb, err := federation.ParseCallback(form)
	if subtle.ConstantTimeCompare([]byte(cb.State), []byte(fed.State)) != 1 {
		return nil, errForeignState
	}
	if err != nil {
		return nil, err
	}
	up, err := p.upstreamOf(ip)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errProviderSecret, err)
	}
	started := time.Now()
	tok, err := p.cfg.Federation.Exchange(ctx, up, federation.RedirectURI(p.cfg.Issuer, ip.Slug),
		federation.AuthRequest{State: fed.State, Nonce: fed.Nonce, Verifier: fed.Verifier}, cb)
	p.fed.latency.WithLabelValues(ip.Slug).Observe(time.Since(started).Seconds())
	return tok, err
}

// fedCount counts a callback of ip with result.
func (f *flow) fedCount(ip fsm.IdentityProvider, result string) {
	f.p.fed.signIns.WithLabelValues(ip.Slug, result).Inc()
}

// upstreamFailed answers a failed sign-in at ip with a page from which the
// person may try again or sign in another way: 502 or 504 when the
// upstream could not be reached or was too slow, 200 when it refused (the
// person declined), 400 for an answer that failed a check, 502 for our
// configuration of it (never a 500).
func (f *flow) upstreamFailed(ip fsm.IdentityProvider, err error) {
	status, msg, result := upstreamFailure(f.w, err)
	f.fedCount(ip, result)
	f.tryAgainPage(status, f.text(msg, ip.DisplayName), "identity provider "+ip.Slug+": "+err.Error())
}

// upstreamFailure is how a failed call to an upstream is answered: the
// page's status, its message key (signin.error.upstream or
// upstream_down, whose argument is the provider's name) and the metric's
// result; an unreachable upstream's answer says when to retry (w's
// Retry-After).
func upstreamFailure(w http.ResponseWriter, err error) (status int, msg, result string) {
	status, msg, result = http.StatusBadRequest, "signin.error.upstream", "invalid"
	switch {
	case errors.Is(err, federation.ErrUnreachable):
		status, msg, result = http.StatusBadGateway, "signin.error.upstream_down", "unreachable"
		if errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusGatewayTimeout
		}
		w.Header().Set("Retry-After", "30")
	case errors.Is(err, federation.ErrUpstream):
		status, result = http.StatusOK, "upstream_error"
	case errors.Is(err, federation.ErrConfig):
		status, result = http.StatusBadGateway, "config"
	}
	return status, msg, result
}

// tryAgainPage is the error page of a failed upstream sign-in, with a
// link that asks for the request again (its sign-in page).
func (f *flow) tryAgainPage(status int, message, reason string) {
	ref := f.reference()
	f.p.log.Warn("authorize: federated sign-in failed", "status", status, "reason", reason, "reference", ref)
	page := webui.ErrorPage{Frame: f.frame(), Message: message, Reference: ref}
	if f.st.Resume != "" {
		page.LinkURL, page.LinkText = authn.PathAuthorize+"?"+f.st.Resume, f.text("signin.try_again")
	}
	f.p.cfg.UI.Error(f.w, status, page)
}

// openFederated opens the session of the person tok names at ip, in one
// FederatedSignIn write, and lets the flow go on.
func (f *flow) openFederated(ip fsm.IdentityProvider, tok *federation.IDToken) {
	now := f.now
	amr := upstreamAMR(tok.AMR)
	acr := authn.ACRPwd
	if ip.TrustMFA && upstreamMFA(tok.AMR) {
		acr = authn.ACRMFA
	}
	// Verified stays empty: the upstream's pwd or otp is not this
	// person's password or authenticator here, so /account asks for
	// those afresh before a credential of theirs changes (an upstream
	// cannot vouch its way into changing a local password).
	s := fsm.SSOSession{ID: uuid.NewString(), AuthTime: now, AMR: amr, ACR: acr,
		CreatedAt: now, LastSeen: now, UpstreamSID: bounded(tok.SID, 512)}
	s.IdleExpiresAt, s.ExpiresAt = f.p.sessions.Lifetimes(now)
	if ip.EndUpstreamSession && len(tok.Raw) <= 8<<10 {
		s.UpstreamIDToken = tok.Raw
	}
	supersedes := ""
	if f.hasSession {
		supersedes = f.sess.ID
	}
	secret := authn.NewID()
	orgs := membershipOrgs(ip, tok.Claims)
	cmd := fsm.FederatedSignIn{ProviderID: ip.ID, Subject: tok.Subject, Email: bounded(tok.Email, 254), EmailVerified: tok.EmailVerified,
		IdentityID: uuid.NewString(), UserID: uuid.NewString(), OrgIDs: orgs, At: now,
		Session: &fsm.StartSSOSession{Session: s, TokenHash: authn.HashToken(secret), Supersedes: supersedes}}
	for range orgs {
		cmd.MembershipIDs = append(cmd.MembershipIDs, uuid.NewString())
	}
	ev := f.p.signinEvent("", f.st.ClientID, map[string]string{"method": "federation", "provider": ip.Slug, "acr": acr})
	res, err := f.p.cfg.Applier.Apply(f.r.Context(), f.p.stamp(f.r.Context(), fsm.MustCommand(fsm.TypeFederatedSignIn, cmd), ev))
	if err == nil {
		err = res.Err
	}
	var refused *fsm.FederationRefusedError
	switch {
	case errors.As(err, &refused):
		f.fedCount(ip, "refused")
		msg := f.text("signin.error." + refused.Reason)
		if refused.Reason == fsm.RefusedAddressTaken {
			msg = f.text("signin.error.address_taken", cmd.Email)
		}
		if refused.Reason == fsm.RefusedDisabled {
			msg = f.text("signin.error.upstream", ip.DisplayName)
		}
		f.tryAgainPage(http.StatusForbidden, msg, "identity provider "+ip.Slug+": "+refused.Reason)
		return
	case err != nil:
		f.unavailable("federated sign-in: " + err.Error())
		return
	}
	out := res.Value.(fsm.FederatedSignInResult)
	f.p.sessions.SetSSOCookie(f.w, secret, s.ExpiresAt)
	f.p.metrics.signIns.WithLabelValues("federation").Inc()
	f.fedCount(ip, "ok")
	s.UserID, s.IdentityID, s.ProviderID = out.User.ID, out.Identity.ID, ip.ID
	f.p.log.Info("authorize: signed in through an upstream provider", "provider", ip.Slug, "user_id", out.User.ID,
		"created", out.Created, "linked", out.Linked, "sso_session", s.ID, "supersedes", supersedes, "reference", f.reference())
	f.sess, f.user, f.hasSession = s, out.User, true
	f.pend.SSOID, f.pend.StepUp, f.pend.Fed = s.ID, false, nil
	f.st.CSRF = f.p.sessions.RotateCSRF(f.w)
	f.proceed()
}

// upstreamAMR is the upstream's amr values among those oidcd's own tokens
// use (pwd, hwk, otp, rcv, sms: docs/reference.md), in that order; pwd
// when it names none of them.
func upstreamAMR(amr []string) []string {
	var out []string
	for _, m := range []string{authn.AMRPassword, authn.AMRPasskey, authn.AMROTP, authn.AMRRecovery, authn.AMRSMS} {
		if slices.Contains(amr, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		out = []string{authn.AMRPassword}
	}
	return out
}

// upstreamMFA reports whether the upstream's amr says the person used
// more than one factor there: mfa, or two different methods (RFC 8176).
func upstreamMFA(amr []string) bool {
	if slices.Contains(amr, "mfa") {
		return true
	}
	seen := map[string]bool{}
	for _, m := range amr {
		if m != "" {
			seen[m] = true
		}
	}
	return len(seen) >= 2
}

// membershipOrgs are the organizations a sign-in through ip makes the
// person an active member of: the provider's memberships organization (or
// its own), and the organization of each group of the groups claim that
// the provider maps.
func membershipOrgs(ip fsm.IdentityProvider, claims map[string]any) []string {
	var out []string
	add := func(id string) {
		if id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	add(cmp.Or(ip.Memberships.OrgID, ip.OrgID))
	if ip.Memberships.GroupsClaim != "" {
		for _, g := range federation.StringsClaim(claims, ip.Memberships.GroupsClaim) {
			add(ip.Memberships.GroupOrgs[g])
		}
	}
	return out
}

// bounded is s when at most n bytes, "" otherwise (an upstream's value
// too long to keep is not cut into another one).
func bounded(s string, n int) string {
	if len(s) > n {
		return ""
	}
	return s
}

// maxLogoutBody bounds the body of an upstream's back-channel logout
// request: one form field holding one token.
const maxLogoutBody = 64 << 10

// handleUpstreamLogout is POST /federation/{slug}/backchannel-logout: an
// upstream's logout token (OpenID Back-Channel Logout 1.0). A valid one
// (checked by the federation client: signature, iss, aud, iat, the
// event, no nonce, a jti, sid and/or sub) ends the sessions opened
// through that upstream session or subject, each app session with its
// own logout token from the replicated outbox; its jti is kept until the
// token would be refused anyway, so a replay is refused. 200 for a valid
// token, also when it matches no session; 400 otherwise.
func (p *Signin) handleUpstreamLogout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	refuse := func(reason string) {
		p.log.Info("upstream logout refused", "provider", httpx.LogValue(r.PathValue("slug")), "reason", reason)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_request"}`))
	}
	ip, err := p.cfg.State.IdentityProviderBySlug(r.PathValue("slug"))
	if errors.Is(err, fsm.ErrNotFound) || (err == nil && (!ip.Enabled || !ip.BackchannelLogout)) {
		refuse("no provider of this slug takes logout tokens")
		return
	}
	if err != nil {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLogoutBody)
	if err := r.ParseForm(); err != nil {
		refuse("form: " + err.Error())
		return
	}
	raw, ok := authn.FormValue(r.PostForm, "logout_token")
	if !ok || raw == "" {
		refuse("no single logout_token")
		return
	}
	up, err := p.upstreamOf(ip)
	if err != nil {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	tok, err := p.cfg.Federation.VerifyLogoutToken(r.Context(), up, raw)
	if errors.Is(err, federation.ErrUnreachable) {
		// The keys could not be fetched: the upstream retries a 5xx.
		p.log.Warn("upstream logout: keys unreachable", "provider", ip.Slug, "err", err)
		http.Error(w, "upstream keys unreachable", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		refuse(err.Error())
		return
	}
	cmd := fsm.UpstreamLogout{ProviderID: ip.ID, JTI: tok.JTI, ExpiresAt: tok.ReplayUntil, SID: bounded(tok.SID, 512), Subject: bounded(tok.Subject, 255), At: p.now()}
	if cmd.SID == "" && cmd.Subject == "" {
		refuse("sid and sub too long to be ours")
		return
	}
	ev := fsm.Audit{Type: fsm.EventLogout, Actor: fsm.ActorSystem, Detail: map[string]string{"cause": fsm.EndUpstreamLogout, "provider": ip.Slug}}
	res, err := p.cfg.Applier.Apply(r.Context(), p.stamp(r.Context(), fsm.MustCommand(fsm.TypeUpstreamLogout, cmd), ev))
	if err == nil {
		err = res.Err
	}
	switch {
	case errors.Is(err, fsm.ErrConflict):
		refuse("jti replayed")
		return
	case err != nil:
		p.log.Error("upstream logout not recorded", "provider", ip.Slug, "err", err)
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	ended := res.Value.(fsm.EndedApps)
	p.log.Info("upstream logout", "provider", ip.Slug, "app_sessions_ended", len(ended.Apps))
	w.WriteHeader(http.StatusOK)
}
