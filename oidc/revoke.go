package oidc

import (
	"errors"
	"net/http"

	"github.com/oidcd/oidcd/fsm"
)

// handleRevoke is POST /oauth2/revoke (RFC 7009). Only
// confidential clients may call it, and the built-in client for its own
// tokens (revokeAdmin). It revokes an unexpired access token
// we issued when the caller is its minting app or an app of the same
// owning organization, and answers 200 with no body for every token,
// whether or not anything was revoked. Revoking a token does not end its
// app session: other tokens of the session keep working.
func (p *Provider) handleRevoke(w http.ResponseWriter, r *http.Request) {
	caller, form, ok := p.backchannelClient(w, r, limitRevoke, true)
	if !ok {
		return
	}
	revoke := p.revoke
	if isAdmin(caller) {
		revoke = func(r *http.Request, _ fsm.Client, raw string) *Error { return p.revokeAdmin(r, raw) }
	}
	if e := revoke(r, caller, formParam(form, "token")); e != nil {
		writeOAuthError(w, e)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// revoke revokes raw if caller may; nil when there was nothing to do.
func (p *Provider) revoke(r *http.Request, caller fsm.Client, raw string) *Error {
	tok, err := p.parseAccessTokenCaughtUp(r.Context(), raw, p.now())
	switch {
	case errors.Is(err, errTokenInvalid):
		return nil // not ours, not an access token, or expired: nothing to revoke
	case err != nil:
		p.logFault(r.Context(), "revoke: verify", err)
		return errTokServer
	}
	// The decision below reads the local state: it must include every write
	// acknowledged anywhere, or a lagging node would answer 200 having
	// revoked nothing.
	if err := p.linearize(r.Context()); err != nil {
		return errTokUnavailable
	}
	app, err := p.cfg.State.AppSession(tok.sid)
	if errors.Is(err, fsm.ErrNotFound) {
		return nil // reaped: the token is dead already
	} else if err != nil {
		p.logFault(r.Context(), "revoke: read app session", err)
		return errTokServer
	}
	minter := fsm.Client{ID: app.ClientID, OrganizationID: caller.OrganizationID}
	if app.ClientID != caller.ID {
		if minter, err = p.cfg.State.Client(app.ClientID); errors.Is(err, fsm.ErrNotFound) {
			return nil
		} else if err != nil {
			p.logFault(r.Context(), "revoke: read client", err)
			return errTokServer
		}
	}
	if !sameOwner(caller, minter) {
		return nil
	}
	if done, err := p.cfg.State.Revoked(tok.jti); err == nil && done {
		return nil
	}
	res, err := p.cfg.Applier.Apply(r.Context(), p.stamp(r.Context(), fsm.MustCommand(fsm.TypeRevokeToken, fsm.RevokeToken{JTI: tok.jti, ExpiresAt: tok.exp}),
		fsm.Audit{Type: fsm.EventRevocation, Actor: fsm.ActorClient, ClientID: caller.ID, Detail: map[string]string{"jti": tok.jti}}))
	if err != nil || res.Err != nil {
		p.logFault(r.Context(), "apply revoke_token", errors.Join(err, res.Err))
		return errTokUnavailable
	}
	p.metrics.revocations.Inc()
	return nil
}
