// Package demorp is the oidcd-demo-rp command: a tiny relying party for trying the
// provider on 127.0.0.1, built on github.com/coreos/go-oidc/v3 and
// golang.org/x/oauth2 as a real application would be.
//
// Pages and endpoints, under --addr (default 127.0.0.1:9090):
//   - GET / : "Sign in", or, once signed in, the ID token's claims, the
//     userinfo answer, /api/v1/me/memberships, and "Sign out"; always the
//     back-channel logouts received.
//   - GET /login: authorization request with state, nonce and PKCE S256;
//     state is also set in a cookie, so only the browser that started a
//     sign-in can finish it.
//   - GET /callback: checks state (cookie and server-side, single use),
//     exchanges the code with the verifier, verifies the ID token
//     (signature by the JWKS, iss, aud, exp: go-oidc; nonce and at_hash:
//     here), then calls userinfo (whose sub must match) and memberships.
//   - POST /logout: RP-initiated logout; ends the local session and sends
//     the browser to end_session_endpoint with id_token_hint,
//     post_logout_redirect_uri=<base>/signed-out, client_id and state.
//   - GET /signed-out: where the provider sends the browser back.
//   - POST /backchannel-logout: verifies the logout token (go-oidc's
//     VerifyLogout: signature, iss, exp, the logout event, no nonce, jti,
//     sub or sid; here: aud is exactly the client_id, and a repeated jti
//     does nothing) and ends the session with that sid, or every session
//     of sub for the sub-only shape. The page then says so.
//
// The demo client seeded by `oidcd serve --demo` registers
// <base>/callback and <base>/signed-out as redirect URIs and
// <base>/backchannel-logout as back-channel logout URI, for the default
// base http://127.0.0.1:9090 (node.DemoRedirectURI).
//
// State lives in memory and is bounded (pending sign-ins, sessions, jtis,
// the event list); the provider is discovered on first use, so demo-rp may
// start before the provider.
package demorp
