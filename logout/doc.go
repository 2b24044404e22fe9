// Package logout ends sessions on RP-initiated logout (GET and POST /logout)
// and delivers back-channel logout tokens (docs/application-developers.md,
// "Signing out").
//
// End session (endsession.go). GET and POST /logout take id_token_hint
// (required), post_logout_redirect_uri, client_id and state; POST reads
// them from an application/x-www-form-urlencoded body only (a POST with a
// query string is refused, so no parameter is split between the two).
// Other parameters are ignored. The hint must be an ID token of ours:
// RS256 under a published kid (keys.Verify), iss equal to the issuer, exp
// not passed by more than a few seconds, aud a non-empty array (an access
// token's empty aud and a logout token's string aud are refused), a sub
// and a sid. client_id, when sent, must be in aud; the hint's client is
// aud[0], which must exist and not be suspended; post_logout_redirect_uri,
// when sent, must equal one of that client's redirect URIs byte for byte.
// The provider's built-in client of the console and the CLI
// (Config.AdminClientID, which the store never holds) is taken like any
// other, but its hint's sid names the SSO session itself, and it
// registers no post-logout redirect: any post_logout_redirect_uri with
// its hint is refused, and without one the signed-out page is shown.
// Ending that SSO session stops the admin access tokens issued on it at
// once (oidc's CheckAdminToken reads the session after a read index).
// A request that fails any check, or repeats a parameter, is answered 400
// with an error page quoting the correlation id (GET) or the status alone
// (POST), and never redirects.
//
// The browser's SSO session (found from its cookie through the
// session.Manager node hands over, which also clears the cookie) is ended
// with EndSSOSession only when it is the SSO session of the hint's sid
// (the hint's person's) and still live, and its cookie is then cleared. A
// hint of another session ends nothing, but the redirect still happens. Before redirecting,
// a logout that created deliveries waits at most FrontChannelWait (2 s) for
// them to leave the pending state, so that an app rarely sees the browser
// before its back-channel token. state is appended to the redirect, keeping
// the registered URI's query as it is.
//
// The upstream's session (upstream.go). When the SSO session a logout
// ends was opened through an upstream provider with end_upstream_session
// and keeps that upstream's ID token, the browser goes, once the session
// and its app sessions are ended here as above, to the upstream's
// end_session_endpoint (from its discovery document, through the
// Upstreams the node hands in) with id_token_hint, client_id,
// post_logout_redirect_uri = {issuer}/federation/{slug}/logged-out and a
// state sealed under the browser key (session.Manager.Box, purpose
// "logout.upstream", 15 minutes) that holds the provider's slug, the
// client and its already validated post_logout_redirect_uri and state.
// GET /federation/{slug}/logged-out opens that state, checks the slug and
// that the URI is still registered for the client, and redirects there
// with the state, or shows the signed-out page; a state that is missing,
// forged, expired or of another provider gives the signed-out page, never
// a redirect and never an error. An upstream without an
// end_session_endpoint, a discovery that fails (bounded to 5 s), no
// browser key yet or an application state too long to carry (over 2 KiB
// sealed) do not fail the logout: it goes on to the redirect or the page
// with a warning in the log. A session the upstream's own logout token
// ended does not go back there.
//
// Back-channel delivery (sender.go). Deliveries are recorded by the FSM in
// the same command that ends the sessions, so an acknowledged logout
// always has its deliveries on record. Only the leader sends them
// (RunSender); it wakes on Notify (OnApply calls it after a command that
// may create or finish a delivery: Wakes) and every second, posts
// logout_token=<jwt> to each due delivery with at most 16 attempts in
// flight, at most 4 to one client and 4 to one receiving host:port, and
// never two attempts of one delivery at once, so a receiver that hangs
// delays only its own tokens. Its scan of the pending deliveries passes
// over those of a client or host at its cap without reading them, and
// pages on past them within a bound per look. It counts any 2xx as sent
// (a redirect is not followed and counts as a failure), retries after
// 1 s, 2 s, 4 s and 8 s, abandons after the fifth attempt, and records
// outcomes with DeliveryOutcome. A new leader picks up whatever is still
// pending: delivery is at least once, and the logout token's jti is the
// delivery id, so repeats carry the same jti. The token is signed with
// typ logout+jwt; its claims are iss, aud (the client_id as a plain
// string), iat, exp = iat + 120 s, jti, sub, organization_id, sid (absent
// in the sub-only shape) and events with the back-channel logout event
// mapped to an empty object; never a nonce.
//
// logout imports fsm, keys, session, webui and federation, never oidc or
// cluster; writes go through the narrow Applier interface.
package logout
