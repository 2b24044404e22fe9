package signin

// The person's side of federation on /account
// (docs/operators/federation.md): the section "Sign-in providers" lists
// their links to upstream providers, with an unlink each, and offers a
// link to every enabled provider they could sign in through that is not
// linked yet: the site's, and those of the organizations they are an
// active member of.
//
// Linking is a credential change (a new way in), so it passes the same
// gate as every other (mayChange). The browser then leaves for the
// upstream as a sign-in does (a fresh state, nonce and PKCE verifier),
// with prompt=login, but what waits in the federation cookie is the account's
// own sealed link (accountLink, its own purpose), bound to this browser's
// CSRF token and to this SSO session. The callback is package oidc's; it
// finds no pending authorization request in the cookie and hands it here
// (AccountLinkCallback), where the binding, the freshness and the gate
// are checked again before the code is exchanged. The FederatedSignIn
// write with AccountUserID makes the link; it opens no session, creates
// no one, and refuses an upstream subject that is someone else's.
//
// Unlinking removes one of the person's own links; the write refuses to
// take their last way in (KeepWayIn) and ends every session opened
// through the link, perhaps this one.

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/oidcd/oidcd/federation"
	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/webui"
)

// The actions of the section (the audit event's detail.action).
const (
	actionIdentityLink   = "identity-link"
	actionIdentityUnlink = "identity-unlink"
)

// Catalog keys (webui/locales/<tag>/account.json) of the section's
// texts.
const (
	keyIdentityLinked       = "account.notice.identity_linked"
	keyIdentityUnlinked     = "account.notice.identity_unlinked"
	keyIdentitySignedOut    = "account.identities.signed_out"
	keyIdentityUnavailable  = "account.error.identity_unavailable"
	keyIdentityHave         = "account.error.identity_have"
	keyIdentityElsewhere    = "account.error.identity_linked_elsewhere"
	keyIdentityExpired      = "account.error.identity_expired"
	keyIdentityUpstream     = "account.error.identity_upstream"
	keyIdentityUpstreamDown = "account.error.identity_upstream_down"
	keyNoIdentity           = "account.error.no_identity"
	keyLastWayIn            = "account.error.last_way_in"
	keyAskAdminFederated    = "account.error.ask_admin_federated"
)

// accountLinkPurpose seals an accountLink; an identity id or a slug
// longer than their limits is no one's.
const (
	accountLinkPurpose = "account-link"
	maxIdentityIDLen   = 64
	maxSlugLen         = 64
)

// accountLink is what the federation cookie holds while the person signs
// in at an upstream to link it from /account: the browser's CSRF token,
// the SSO session and person it was started by, and the upstream request
// (state, nonce, PKCE verifier). It is sealed for accountLinkPurpose, so
// it never opens as a pending authorization request, nor one as it.
type accountLink struct {
	CSRF   string          `json:"csrf"`
	SSOID  string          `json:"sso"`
	UserID string          `json:"user"`
	Fed    authn.Federated `json:"fed"`
}

// identityView is what the section shows: the person's links with their
// providers, and the providers they may link one more of.
type identityView struct {
	links    []linkedIdentity
	linkable []fsm.IdentityProvider
}

type linkedIdentity struct {
	fsm.Identity
	provider fsm.IdentityProvider
}

// identities reads the section: every link of the person (a link whose
// provider is disabled still shows, and may be unlinked), and the
// enabled providers they could sign in through and have no link at: the
// site's, and those of organizations they are an active member of (never
// another organization's). Links are offered only when this node talks to
// upstreams.
func (a *account) identities() (identityView, error) {
	var v identityView
	st := a.p.cfg.State
	if any, err := st.HasIdentityProviders(); err != nil || !any {
		return v, err
	}
	all, err := st.IdentityProviders()
	if err != nil {
		return v, err
	}
	byID := make(map[string]fsm.IdentityProvider, len(all))
	for _, ip := range all {
		byID[ip.ID] = ip
	}
	ids, err := st.Identities(a.user.ID)
	if err != nil {
		return v, err
	}
	linked := map[string]bool{}
	for _, idn := range ids {
		linked[idn.ProviderID] = true
		ip, ok := byID[idn.ProviderID]
		if !ok {
			continue // cannot be: a provider's deletion removes its links
		}
		v.links = append(v.links, linkedIdentity{Identity: idn, provider: ip})
	}
	slices.SortFunc(v.links, func(x, y linkedIdentity) int {
		return strings.Compare(x.provider.DisplayName, y.provider.DisplayName)
	})
	if a.p.cfg.Federation == nil {
		return v, nil
	}
	orgs, err := a.activeOrgs()
	if err != nil {
		return v, err
	}
	for _, ip := range all {
		if ip.Enabled && !linked[ip.ID] && (ip.OrgID == "" || orgs[ip.OrgID]) {
			v.linkable = append(v.linkable, ip)
		}
	}
	slices.SortFunc(v.linkable, func(x, y fsm.IdentityProvider) int { return strings.Compare(x.DisplayName, y.DisplayName) })
	return v, nil
}

// activeOrgs are the organizations the person is an active member of.
func (a *account) activeOrgs() (map[string]bool, error) {
	ms, err := a.p.cfg.State.MembershipsOfUser(a.user.ID)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range ms {
		if m.Status == fsm.MembershipActive && m.Org.Status == fsm.OrgActive {
			out[m.OrgID] = true
		}
	}
	return out, nil
}

// mayLink reports whether the person may link ip: enabled, the site's or
// of an organization they are an active member of.
func (a *account) mayLink(ip fsm.IdentityProvider) (bool, error) {
	if !ip.Enabled || a.p.cfg.Federation == nil {
		return false, nil
	}
	if ip.OrgID == "" {
		return true, nil
	}
	orgs, err := a.activeOrgs()
	return orgs[ip.OrgID], err
}

// identityLines fills the section of page.
func (a *account) identityLines(page *webui.AccountPage) error {
	v, err := a.identities()
	if err != nil {
		return err
	}
	for _, l := range v.links {
		page.Identities = append(page.Identities, webui.IdentityLine{ID: l.ID, Provider: l.provider.DisplayName, Email: l.Email,
			Linked: a.dateTime(l.LinkedAt), Used: a.dateTime(l.LastUsedAt)})
	}
	page.LinkProviders = providerButtons(v.linkable)
	return nil
}

// identityLink starts a link at the provider the form names: the
// browser goes to sign in there, with the account's sealed link in the
// federation cookie, as toUpstream sends a sign-in. prompt=login: the
// person proves at the upstream, now, which account there becomes a way
// into theirs here, whoever was signed in there in this browser before.
func (a *account) identityLink(form url.Values) {
	slug, _ := authn.FormValue(form, "provider")
	v, err := a.identities()
	if err != nil {
		a.unavailable("identities: " + err.Error())
		return
	}
	ip, ok := providerBySlug(v.linkable, slug)
	if !ok || slug == "" || len(slug) > maxSlugLen {
		a.showHome(http.StatusBadRequest, "", a.text(keyIdentityUnavailable))
		return
	}
	up, err := a.p.upstreamOf(ip)
	if err != nil {
		a.unavailable("identity provider " + ip.Slug + ": client secret: " + err.Error())
		return
	}
	ar := federation.NewAuthRequest()
	link := accountLink{CSRF: a.csrf, SSOID: a.sess.ID, UserID: a.user.ID,
		Fed: authn.Federated{ProviderID: ip.ID, Slug: ip.Slug, State: ar.State, Nonce: ar.Nonce, Verifier: ar.Verifier}}
	box, err := a.p.sessions.Box()
	var sealed string
	if err == nil {
		sealed, err = box.Seal(accountLinkPurpose, link, a.now.Add(fedCookieTTL))
	}
	if err != nil {
		a.unavailable("seal account link: " + err.Error())
		return
	}
	to, err := a.p.cfg.Federation.AuthorizeURL(a.r.Context(), up, federation.RedirectURI(a.p.cfg.Issuer, ip.Slug), ar,
		federation.AuthorizeOptions{Prompt: "login"})
	if err != nil {
		a.upstreamFailed(ip, err)
		return
	}
	a.p.sessions.SetFedCookie(a.w, sealed, a.now.Add(fedCookieTTL))
	a.p.log.Info("account: to an upstream provider to link it", "provider", ip.Slug, "user_id", a.user.ID, "sso_session", a.sess.ID)
	http.Redirect(a.w, a.r, to, http.StatusSeeOther)
}

// AccountLinkCallback takes the callback of a link started on /account
// (oidc.AccountLinks): step is the federation cookie's value, which
// package oidc found to hold no pending authorization request. It
// reports false, having answered nothing, when step is not an account
// link either.
func (p *Signin) AccountLinkCallback(w http.ResponseWriter, r *http.Request, step string) bool {
	if step == "" {
		return false
	}
	box, err := p.sessions.Box()
	if err != nil {
		// Not reached: oidc opened the cookie with this very box.
		return false
	}
	a := &account{p: p, w: w, r: r, now: p.now(), action: actionIdentityLink}
	var link accountLink
	if box.Open(accountLinkPurpose, step, a.now, &link) != nil {
		return false
	}
	a.linkBack(link, r.PathValue("slug"), r.URL.Query())
	return true
}

// linkBack finishes a link once the upstream sent the browser back
// (query is the callback's): the cookie must be of this browser (its CSRF
// token) and of this provider, the browser's session the one that
// started it, still fresh and still past the change gate; then the
// state is checked and the code exchanged (upstreamAnswer), and the
// FederatedSignIn write links the upstream subject to this person.
func (a *account) linkBack(link accountLink, slug string, query url.Values) {
	if link.Fed.Slug != slug || !a.p.sessions.CSRFOK(a.r, link.CSRF, link.CSRF) {
		a.p.log.Info("account: link callback of another provider or browser", "provider", link.Fed.Slug)
		a.page(http.StatusBadRequest, a.text(keyIdentityExpired))
		return
	}
	ok, found := a.load()
	if !ok {
		return
	}
	a.csrf = link.CSRF
	if !found || a.sess.ID != link.SSOID || a.user.ID != link.UserID || !a.fresh() {
		// Signed out, or someone else signed in, meanwhile: the link is
		// not theirs to finish.
		a.p.log.Info("account: link callback without the session that started it", "provider", link.Fed.Slug)
		a.showSignIn(http.StatusOK, "")
		return
	}
	if !a.mayChange() {
		return
	}
	ip, err := a.p.cfg.State.IdentityProvider(link.Fed.ProviderID)
	if err != nil && !errors.Is(err, fsm.ErrNotFound) {
		a.unavailable("identity provider: " + err.Error())
		return
	}
	may := false
	if err == nil && ip.Slug == link.Fed.Slug {
		if may, err = a.mayLink(ip); err != nil {
			a.unavailable("memberships: " + err.Error())
			return
		}
	}
	if !may {
		a.showHome(http.StatusBadRequest, "", a.text(keyIdentityUnavailable))
		return
	}
	tok, err := a.p.upstreamAnswer(a.r.Context(), ip, &link.Fed, query)
	switch {
	case errors.Is(err, errForeignState):
		a.p.log.Info("account: link callback state is not this browser's", "provider", ip.Slug)
		a.showHome(http.StatusBadRequest, "", a.text(keyIdentityExpired))
		return
	case errors.Is(err, errProviderSecret):
		a.unavailable("identity provider " + ip.Slug + ": " + err.Error())
		return
	case err != nil:
		a.upstreamFailed(ip, err)
		return
	}
	a.makeLink(ip, tok)
}

// makeLink writes the link of tok's subject at ip to this person.
func (a *account) makeLink(ip fsm.IdentityProvider, tok *federation.IDToken) {
	ids, err := a.p.cfg.State.Identities(a.user.ID)
	if err != nil {
		a.unavailable("identities: " + err.Error())
		return
	}
	for _, idn := range ids {
		if idn.ProviderID == ip.ID && idn.Subject != tok.Subject {
			// Linked at this provider meanwhile (another tab): one link
			// per provider.
			a.showHome(http.StatusConflict, "", a.text(keyIdentityHave, ip.DisplayName))
			return
		}
	}
	orgs := membershipOrgs(ip, tok.Claims)
	cmd := fsm.FederatedSignIn{ProviderID: ip.ID, Subject: tok.Subject, Email: bounded(tok.Email, 254), EmailVerified: tok.EmailVerified,
		IdentityID: uuid.NewString(), UserID: uuid.NewString(), AccountUserID: a.user.ID, OrgIDs: orgs, EndSessions: a.endOthers(), At: a.now}
	for range orgs {
		cmd.MembershipIDs = append(cmd.MembershipIDs, uuid.NewString())
	}
	res, err := a.applyStamped(fsm.MustCommand(fsm.TypeFederatedSignIn, cmd), actionIdentityLink, map[string]string{"provider": ip.Slug})
	var refused *fsm.FederationRefusedError
	switch {
	case errors.As(err, &refused) && refused.Reason == fsm.RefusedLinkedElsewhere:
		a.p.log.Info("account: link refused", "provider", ip.Slug, "user_id", a.user.ID, "reason", refused.Reason)
		a.showHome(http.StatusConflict, "", a.text(keyIdentityElsewhere, ip.DisplayName))
		return
	case errors.As(err, &refused):
		a.p.log.Info("account: link refused", "provider", ip.Slug, "user_id", a.user.ID, "reason", refused.Reason)
		a.showHome(http.StatusForbidden, "", a.text(keyIdentityUnavailable))
		return
	case err != nil:
		a.unavailable("account link: " + err.Error())
		return
	}
	out := res.Value.(fsm.FederatedSignInResult)
	a.p.log.Info("account: linked an upstream provider", "provider", ip.Slug, "user_id", a.user.ID,
		"identity_id", out.Identity.ID, "new", out.Linked)
	a.showHome(http.StatusOK, a.text(keyIdentityLinked, ip.DisplayName), "")
}

// upstreamFailed shows why the upstream's side of a link failed, on the
// account's page, with the status a sign-in's failure has (502 or 504
// for an upstream out of reach, 200 for its refusal, 400 for an answer
// that failed a check; never 500).
func (a *account) upstreamFailed(ip fsm.IdentityProvider, err error) {
	status, _, result := upstreamFailure(a.w, err)
	a.p.log.Warn("account: link at an upstream failed", "provider", ip.Slug, "status", status, "err", err)
	key := keyIdentityUpstream
	if result == "unreachable" {
		key = keyIdentityUpstreamDown
	}
	a.showHome(status, "", a.text(key, ip.DisplayName))
}

// identityUnlink removes one of the person's own links (another's id
// answers as one that does not exist), unless it is their last way in.
// Every session opened through it ends in the same write: when this one
// did, the page asks to sign in again.
func (a *account) identityUnlink(form url.Values) {
	id, _ := authn.FormValue(form, "identity_id")
	var idn fsm.Identity
	found := false
	if id != "" && len(id) <= maxIdentityIDLen {
		ids, err := a.p.cfg.State.Identities(a.user.ID)
		if err != nil {
			a.unavailable("identities: " + err.Error())
			return
		}
		for _, x := range ids {
			if x.ID == id {
				idn, found = x, true
			}
		}
	}
	if !found {
		a.showHome(http.StatusBadRequest, "", a.text(keyNoIdentity))
		return
	}
	name, slug := idn.ProviderID, idn.ProviderID
	if ip, err := a.p.cfg.State.IdentityProvider(idn.ProviderID); err == nil {
		name, slug = ip.DisplayName, ip.Slug
	}
	_, err := a.applyStamped(fsm.MustCommand(fsm.TypeUnlinkIdentity, fsm.UnlinkIdentity{UserID: a.user.ID, IdentityID: idn.ID, KeepWayIn: true, EndSessions: a.endOthers(), At: a.now}),
		actionIdentityUnlink, map[string]string{"provider": slug, "identity_id": idn.ID})
	var refused *fsm.FederationRefusedError
	switch {
	case errors.As(err, &refused) && refused.Reason == fsm.RefusedLastWayIn:
		a.showHome(http.StatusConflict, "", a.text(keyLastWayIn, name))
		return
	case errors.Is(err, fsm.ErrNotFound):
		a.showHome(http.StatusBadRequest, "", a.text(keyNoIdentity))
		return
	case err != nil:
		a.unavailable("unlink identity: " + err.Error())
		return
	}
	a.p.log.Info("account: unlinked an upstream provider", "provider", slug, "user_id", a.user.ID, "identity_id", idn.ID)
	user := a.user
	ok, live := a.load()
	if !ok {
		return
	}
	if !live || a.sess.ID != a.step.SSOID {
		// This browser had signed in through the link: its session ended
		// with it.
		a.p.sessions.ClearSSOCookie(a.w)
		a.sess, a.user, a.lead = fsm.SSOSession{}, user, a.text(keyIdentitySignedOut, name)
		a.showSignIn(http.StatusOK, "")
		return
	}
	a.showHome(http.StatusOK, a.text(keyIdentityUnlinked, name), "")
}
