package oidc

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/oidcd/oidcd/fsm"
)

// introspection is the introspection response (the Introspection schema of
// docs/openapi/oidc.json); inactive tokens get {"active":false} and nothing
// else.
type introspection struct {
	Active   bool   `json:"active"`
	ClientID string `json:"client_id,omitempty"`
	Exp      int64  `json:"exp,omitempty"`
	OrgID    string `json:"organization_id,omitempty"`
	Scope    string `json:"scope,omitempty"`
	SID      string `json:"sid,omitempty"`
	Sub      string `json:"sub,omitempty"`
}

// handleIntrospect is POST /oauth2/introspect (RFC 7662).
// Only confidential clients may call it. A token is active only when it
// passes every bearer check and was minted by the caller or by an app of
// the caller's owning organization; every token problem is 200
// {"active":false}. token_type_hint is ignored: we only have access
// tokens.
func (p *Provider) handleIntrospect(w http.ResponseWriter, r *http.Request) {
	caller, form, ok := p.backchannelClient(w, r, limitIntrospect, false)
	if !ok {
		return
	}
	tok, acc, err := p.checkAccessToken(r.Context(), formParam(form, "token"), p.now(), false)
	switch {
	case errors.Is(err, errTokenInvalid):
		p.inactive(w)
		return
	case errors.Is(err, errUnavailable):
		writeOAuthError(w, errTokUnavailable)
		return
	case err != nil:
		p.logFault(r.Context(), "introspect", err)
		writeOAuthError(w, errTokServer)
		return
	case !sameOwner(caller, fsm.Client{ID: acc.ClientID, OrganizationID: acc.ClientOrgID}):
		p.inactive(w)
		return
	}
	p.metrics.introspections.WithLabelValues("true").Inc()
	writeNoStoreJSON(w, introspection{
		Active: true, ClientID: acc.ClientID, Exp: tok.exp.Unix(), OrgID: tok.org,
		Scope: strings.Join(tok.scopes, " "), SID: tok.sid, Sub: tok.sub,
	})
}

func (p *Provider) inactive(w http.ResponseWriter) {
	p.metrics.introspections.WithLabelValues("false").Inc()
	writeNoStoreJSON(w, introspection{})
}

// sameOwner reports whether caller may see or revoke tokens minted by
// minter: it is the same app, or both are owned by one organization.
func sameOwner(caller, minter fsm.Client) bool {
	return minter.ID != "" && (caller.ID == minter.ID || caller.OrganizationID == minter.OrganizationID)
}

// backchannelClient runs the common start of introspection and
// revocation: read the form, rate-limit and authenticate a confidential
// client (limitAndAuthenticate), require token. On failure it has
// answered. The client it returns holds only what fsm.State.ClientAuth
// reads (ID, Type, OrganizationID, Suspended, SecretHash; and RateLimit
// when the rate limit is on): all that sameOwner, the limit and the
// callers use, without decoding the whole registration on every call.
//
// The built-in client (public) is refused like any public client, except
// where adminOK (revocation of its own tokens).
func (p *Provider) backchannelClient(w http.ResponseWriter, r *http.Request, endpoint string, adminOK bool) (fsm.Client, url.Values, bool) {
	form, ferr := readTokenForm(w, r)
	cred := clientCredentials(r, form)
	lookup := p.cfg.State.ClientAuth
	if p.limiter.on() {
		lookup = p.cfg.State.ClientAuthAndLimit // the limit reads the client's own
	}
	publicOK := adminOK && cred.id == AdminClientID
	client, cerr, ok := p.limitAndAuthenticate(w, r, endpoint, cred, ferr, publicOK, p.withAdmin(lookup))
	if !ok {
		return fsm.Client{}, nil, false
	}
	if cerr != nil {
		if cerr == errTokUnavailable {
			cerr = errTokServer // a server-side fault is 500 here
		}
		writeClientError(w, cred, cerr)
		return fsm.Client{}, nil, false
	}
	if formParam(form, "token") == "" {
		writeClientError(w, cred, errTokNoToken)
		return fsm.Client{}, nil, false
	}
	return client, form, true
}
