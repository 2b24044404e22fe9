package oidc

// The built-in client, through which people sign in to administer the
// site (the console and `oidcd admin login`).
//
// It exists on every node without being stored: nothing in the state
// names it, so no operator can alter, suspend or delete it through the
// admin API, and a stored client that happens to carry its id is never
// consulted (every lookup of the protocol resolves the id to the built-in
// one first). Its rules:
//
//   - public: no secret; the code flow with PKCE S256, like every client;
//   - scopes openid, profile and email;
//   - a native application (RFC 8252): its redirect URIs are
//     {issuer}/console/callback and the console's callback on the admin
//     listener when the console is served there
//     (Config.AdminRedirectURIs), both matched byte for byte, and the
//     loopback redirects http://127.0.0.1/callback and
//     http://[::1]/callback, which match on any port with the path
//     exactly /callback and nothing else in the URI by the rule of every
//     native client (internal/redirect.Match, 7.3; `oidcd admin login`
//     picks a free port);
//   - no consent page: it is the provider's own;
//   - no organization: an administrator need not belong to any, so the
//     organization stage is skipped (organization_hint is ignored) and
//     its tokens name none;
//   - every sign-in through it reaches at least Config.AdminACR: a weaker
//     session is asked for its second factor, as acr_values would ask.
//
// Because it names no organization it has no app session (app sessions
// belong to one organization). Its code is a take-once record of the
// replicated challenge store (fsm.Challenge, purpose adminCodePurpose),
// redeemed by the token endpoint's one code exchange (exchangeCode, with
// adminCodes where it differs), and its access token names the SSO
// session (sid) instead: the token is
// live while it is unexpired, unrevoked, its SSO session is live and its
// person exists (CheckAdminToken). Lacking organization_id, such a token
// is refused by every protocol bearer check (userinfo, memberships,
// introspection): it is an admin credential and nothing else.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/authn"
	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/keys"
)

// AdminClientID is the built-in client's client_id.
const AdminClientID = "oidcd-admin"

// Bounds of the built-in client.
const (
	// adminAccessTTL is the lifetime of its access tokens, shortened to
	// the SSO session's end (adminCodes.expiry).
	adminAccessTTL = time.Hour
	// adminCodePurpose marks its codes in the challenge store.
	adminCodePurpose = "admin_code"
)

// adminLoopbacks are the built-in client's loopback redirects, which
// match on any port (checkRedirectURI).
var adminLoopbacks = []string{"http://127.0.0.1/callback", "http://[::1]/callback"}

// AdminCallbackPath is the console's callback, under the issuer and on
// the admin listener.
const AdminCallbackPath = "/console/callback"

// adminClient is the built-in client's registration as the flow reads it.
func (p *Provider) adminClient() fsm.Client {
	uris := []string{p.cfg.Issuer + AdminCallbackPath}
	if p.cfg.AdminRedirectURIs != nil {
		uris = append(uris, p.cfg.AdminRedirectURIs()...)
	}
	uris = append(uris, adminLoopbacks...)
	return fsm.Client{
		ID: AdminClientID, Name: "oidcd administration", Type: fsm.ClientPublic, ApplicationType: fsm.ApplicationNative,
		RedirectURIs: uris, Scopes: []string{ScopeOpenID, ScopeProfile, ScopeEmail},
		SkipConsent: true, AccessTokenTTL: int64(adminAccessTTL / time.Second),
	}
}

// isAdmin reports whether c is the built-in client.
func isAdmin(c fsm.Client) bool { return c.ID == AdminClientID }

// clients resolves client ids for the protocol: the built-in client
// first, then the store.
type clients struct {
	p      *Provider
	lookup func(id string) (fsm.Client, error)
}

// Client returns the client id names (clientSource).
func (c clients) Client(id string) (fsm.Client, error) {
	if id == AdminClientID {
		return c.p.adminClient(), nil
	}
	return c.lookup(id)
}

// withAdmin wraps a client lookup of the store so that the built-in
// client's id resolves to it.
func (p *Provider) withAdmin(lookup func(id string) (fsm.Client, error)) func(id string) (fsm.Client, error) {
	return clients{p: p, lookup: lookup}.Client
}

// adminCode is what the built-in client's code stands for, kept in the
// challenge store under the code's hash until it is taken.
type adminCode struct {
	SSOSessionID string    `json:"sso_session_id"`
	UserID       string    `json:"user_id"`
	RedirectURI  string    `json:"redirect_uri"`
	Challenge    string    `json:"code_challenge"`
	Scopes       []string  `json:"scopes"`
	Nonce        string    `json:"nonce,omitempty"`
	AuthTime     time.Time `json:"auth_time"`
	AMR          []string  `json:"amr,omitempty"`
	ACR          string    `json:"acr"`
	RequestedAt  time.Time `json:"rat"`
}

// issueAdmin stores a code of the built-in client and redirects with it.
// There is no app session and no consent to record; the SSO session was
// found live by loadSession.
func (f *flow) issueAdmin() {
	p, req, s := f.p, f.pend.Req, f.sess
	code := authn.NewID()
	data, err := json.Marshal(adminCode{
		SSOSessionID: s.ID, UserID: s.UserID, RedirectURI: req.RedirectURI, Challenge: req.Challenge,
		Scopes: req.Scopes, Nonce: req.Nonce, AuthTime: s.AuthTime, AMR: s.AMR, ACR: s.ACR, RequestedAt: req.RequestedAt,
	})
	if err != nil {
		f.unavailable("admin code: " + err.Error())
		return
	}
	res, err := p.cfg.Applier.Apply(f.r.Context(), fsm.MustCommand(fsm.TypePutChallenge, fsm.PutChallenge{Challenge: fsm.Challenge{
		ID: authn.HashToken(code), UserID: AdminClientID, Purpose: adminCodePurpose, Data: data, ExpiresAt: f.now.Add(p.cfg.CodeTTL),
	}}))
	if err == nil {
		err = res.Err
	}
	if err != nil {
		f.unavailable("issue admin code: " + err.Error())
		return
	}
	p.log.Info("authorize: code issued", "client_id", AdminClientID, "reference", f.reference())
	f.redirect(httpx.AppendQuery(req.RedirectURI, url.Values{"code": {code}, "state": {req.State}, "iss": {p.cfg.Issuer}}))
}

// code is the code record c stands for, as exchangeCode reads every
// code: the built-in client's, with no organization, whose sid is the
// SSO session (there is no app session), until expires.
func (c adminCode) code(expires time.Time) fsm.Code {
	return fsm.Code{
		ClientID: AdminClientID, RedirectURI: c.RedirectURI, UserID: c.UserID, SID: c.SSOSessionID, SSOSessionID: c.SSOSessionID,
		Scopes: c.Scopes, Nonce: c.Nonce, Challenge: c.Challenge, AuthTime: c.AuthTime, AMR: c.AMR, ACR: c.ACR,
		RequestedAt: c.RequestedAt, ExpiresAt: expires,
	}
}

// adminCodes are the built-in client's codes for exchangeCode: take-once
// records of the challenge store, whose access tokens name the SSO
// session and the client, and live no longer than that session.
type adminCodes struct{ p *Provider }

var _ codeGrant = adminCodes{}

// load takes the code (reads and deletes it) through the log first, so
// that it works at most once whatever follows: a wrong verifier or
// redirect URI spends it too. The take is the token event of the audit
// trail.
func (g adminCodes) load(r *http.Request, raw string, now time.Time) (fsm.Code, *Error) {
	p := g.p
	res, err := p.cfg.Applier.Apply(r.Context(), p.stamp(r.Context(), fsm.MustCommand(fsm.TypeTakeChallenge, fsm.TakeChallenge{
		ID: authn.HashToken(raw), UserID: AdminClientID, Purpose: adminCodePurpose, At: now,
	}), fsm.Audit{Type: fsm.EventToken, Actor: fsm.ActorClient, ClientID: AdminClientID, FailOnError: true}))
	if err != nil {
		p.logFault(r.Context(), "apply take admin code", err)
		return fsm.Code{}, errTokUnavailable
	}
	if res.Err != nil {
		return fsm.Code{}, errTokGrant
	}
	ch, ok := res.Value.(fsm.Challenge)
	var code adminCode
	if !ok || json.Unmarshal(ch.Data, &code) != nil {
		p.logFault(r.Context(), "admin code", errors.New("unreadable record"))
		return fsm.Code{}, errTokGrant
	}
	return code.code(ch.ExpiresAt), nil
}

// expiry requires the SSO session to be live now and its person to
// exist (read linearizably), and ends the token no later than the
// session would without another sign-in: its absolute end and its idle
// deadline (a sign-in through the built-in client opens no app session,
// so it does not extend it).
func (g adminCodes) expiry(r *http.Request, code fsm.Code, now, want time.Time) (time.Time, *Error) {
	p := g.p
	if err := p.linearize(r.Context()); err != nil {
		return time.Time{}, errTokUnavailable
	}
	sess, err := p.liveAdminSession(code.SSOSessionID, code.UserID, now)
	switch {
	case errors.Is(err, errTokenInvalid):
		return time.Time{}, errTokAccessChanged
	case err != nil:
		p.logFault(r.Context(), "admin code: session", err)
		return time.Time{}, errTokUnavailable
	}
	exp := want
	for _, end := range []time.Time{sess.ExpiresAt, sess.IdleExpiresAt} {
		if end = end.Truncate(time.Second); end.Before(exp) {
			exp = end
		}
	}
	if exp.Sub(now.Truncate(time.Second)) < time.Second {
		return time.Time{}, errTokAccessChanged
	}
	return exp, nil
}

// accessClaims are an access token's without organization_id, whose sid
// names the SSO session, with the client named (CheckAdminToken).
func (g adminCodes) accessClaims(code fsm.Code, jti string, iat, exp time.Time) accessClaims {
	c := newAccessClaims(g.p.cfg.Issuer, code, jti, iat, exp)
	c.ClientID = AdminClientID
	return c
}

// redeem has nothing left to do: load took the code.
func (adminCodes) redeem(*http.Request, fsm.Code, time.Time, string, time.Time) *Error { return nil }

// liveAdminSession returns SSO session sid when it is live at now and
// belongs to sub, who still exists; errTokenInvalid otherwise, another
// error when the store could not be read. The caller has linearized.
func (p *Provider) liveAdminSession(sid, sub string, now time.Time) (fsm.SSOSession, error) {
	s, err := p.cfg.State.SSOSession(sid)
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return s, errTokenInvalid
	case err != nil:
		return s, err
	case !s.Live(now) || s.UserID != sub:
		return s, errTokenInvalid
	}
	if _, err := p.cfg.State.User(sub); errors.Is(err, fsm.ErrNotFound) {
		return s, errTokenInvalid
	} else if err != nil {
		return s, err
	}
	return s, nil
}

// AdminToken is what the provider says of a bearer access token presented
// to the admin API (CheckAdminToken). Active is false for a token it does
// not honour now: malformed, not ours, expired, revoked, of an ended
// session, of a person who no longer exists.
type AdminToken struct {
	Active   bool
	Sub      string
	ClientID string // the client it was issued to (AdminClientID for the built-in client)
	ACR      string // how strongly the person signed in for it
}

// adminCheckClaims are what CheckAdminToken reads of an access token of
// either kind.
type adminCheckClaims struct {
	bearerClaims
	ACR      string `json:"acr"`
	ClientID string `json:"client_id"`
}

// CheckAdminToken says whether raw is an access token this provider
// honours now, and whose, for which client, at which acr. The check is
// linearizable like the protocol's bearer checks: a revocation, a logout
// or an erased person acknowledged anywhere before the call is seen. A
// token of the built-in client is live while its SSO session is; a token
// of any other client while its app session is (the protocol's own
// rules), and it is reported with that client's id, for the caller to
// refuse. The error is for a cluster or store that cannot answer
// (errUnavailable's text: no quorum), never for a bad token.
func (p *Provider) CheckAdminToken(ctx context.Context, raw string) (AdminToken, error) {
	now := p.now()
	if raw == "" || len(raw) > keys.MaxTokenSize {
		return AdminToken{}, nil
	}
	payload, _, err := p.cfg.Keys.VerifyKid([]byte(raw))
	if errors.Is(err, keys.ErrUnknownKey) && p.catchUp(ctx) {
		payload, _, err = p.cfg.Keys.VerifyKid([]byte(raw))
	}
	switch {
	case errors.Is(err, keys.ErrUnknownKey), errors.Is(err, keys.ErrInvalidToken):
		return AdminToken{}, nil
	case err != nil:
		return AdminToken{}, err
	}
	var c adminCheckClaims
	if json.Unmarshal(payload, &c) != nil || c.Iss != p.cfg.Issuer || !noAudience(c.Aud) ||
		c.JTI == "" || c.Sub == "" || c.SID == "" || c.Scp == nil {
		return AdminToken{}, nil
	}
	if c.Org != "" {
		// An access token of an application: the protocol's own check.
		_, acc, err := p.checkAccessToken(ctx, raw, now, false)
		switch {
		case errors.Is(err, errTokenInvalid):
			return AdminToken{}, nil
		case err != nil:
			return AdminToken{}, err
		}
		return AdminToken{Active: true, Sub: acc.UserID, ClientID: acc.ClientID, ACR: c.ACR}, nil
	}
	if c.ClientID != AdminClientID {
		return AdminToken{}, nil
	}
	if exp := numericDate(c.Exp); exp.IsZero() || !now.Before(exp.Add(clockSkew)) {
		return AdminToken{}, nil
	}
	if err := p.linearize(ctx); err != nil {
		return AdminToken{}, err
	}
	if revoked, err := p.cfg.State.Revoked(c.JTI); err != nil {
		return AdminToken{}, err
	} else if revoked {
		return AdminToken{}, nil
	}
	if _, err := p.liveAdminSession(c.SID, c.Sub, now); errors.Is(err, errTokenInvalid) {
		return AdminToken{}, nil
	} else if err != nil {
		return AdminToken{}, err
	}
	return AdminToken{Active: true, Sub: c.Sub, ClientID: AdminClientID, ACR: c.ACR}, nil
}

// revokeAdmin revokes raw when it is an unexpired access token of the
// built-in client: the one revocation a public client may ask for, of
// its own tokens (RFC 7009; `oidcd admin logout`). Anything else is
// nothing to do.
func (p *Provider) revokeAdmin(r *http.Request, raw string) *Error {
	now := p.now()
	payload, _, err := p.cfg.Keys.VerifyKid([]byte(raw))
	switch {
	case errors.Is(err, keys.ErrUnknownKey), errors.Is(err, keys.ErrInvalidToken):
		return nil
	case err != nil:
		p.logFault(r.Context(), "revoke: verify", err)
		return errTokServer
	}
	var c adminCheckClaims
	if json.Unmarshal(payload, &c) != nil || c.Iss != p.cfg.Issuer || c.Org != "" || c.ClientID != AdminClientID || c.JTI == "" {
		return nil
	}
	exp := numericDate(c.Exp)
	if exp.IsZero() || !now.Before(exp.Add(clockSkew)) {
		return nil
	}
	res, err := p.cfg.Applier.Apply(r.Context(), p.stamp(r.Context(), fsm.MustCommand(fsm.TypeRevokeToken, fsm.RevokeToken{JTI: c.JTI, ExpiresAt: exp.Add(clockSkew)}),
		fsm.Audit{Type: fsm.EventRevocation, Actor: fsm.ActorClient, ClientID: AdminClientID, Subject: c.Sub, Detail: map[string]string{"jti": c.JTI}}))
	if err != nil || res.Err != nil {
		p.logFault(r.Context(), "apply revoke_token", errors.Join(err, res.Err))
		return errTokUnavailable
	}
	p.metrics.revocations.Inc()
	return nil
}
