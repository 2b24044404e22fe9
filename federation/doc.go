// Package federation is oidcd's client of upstream OpenID providers (Entra
// ID, AD FS, Google, Keycloak, another oidcd): the relying-party half of
// federated sign-in. It reads an upstream's discovery document and key
// set, builds the authorization request, redeems the code, checks the ID
// token, checks a back-channel logout token and builds the end-session
// URL. It holds no records: the caller (the sign-in, the logout endpoint)
// hands in each upstream as a plain Upstream read from its own records,
// keeps the AuthRequest between the redirect and the callback, and stores
// the logout tokens' jtis; this package caches only what the upstream
// publishes. It imports nothing of oidcd's rooms.
//
// # What it trusts
//
// The configured issuer, client id and secret, and TLS to reach the
// upstream. Everything else comes from the network and is checked: the
// discovery document is the upstream's only when it names the configured
// issuer exactly (else a document could make us accept another issuer's
// tokens); a key is the upstream's only when its JWKS, named by that
// document, lists it (a key a token header names or carries, jwk, jku,
// x5u, x5c, is never used). The browser is trusted with nothing: the
// callback's state must be the AuthRequest's, its iss the issuer.
//
// # Why each check
//
//   - Only https, or http at 127.0.0.1, ::1 or localhost when the issuer
//     itself is such a development upstream: codes, secrets and tokens
//     never cross a network in the clear.
//   - The code flow with PKCE S256 and a fresh state and nonce of 256
//     bits: state binds the answer to the browser that asked (CSRF), the
//     verifier makes a code stolen on its way back useless to anyone else,
//     the nonce binds the ID token to this request (no replay of an older
//     token). An upstream that lists code_challenge_methods_supported
//     without S256, or lacks the code response type, is refused.
//   - RFC 9207 iss in the authorization response, checked before the code
//     goes anywhere, and required when the upstream says it sends it: the
//     mix-up attack passes one upstream's answer off as another's.
//   - The token endpoint's redirects are not followed and other GETs
//     follow only same-host ones: a secret and a code go only where the
//     discovery document said.
//   - Signatures by RS256, PS256 or ES256 only, the algorithm taken from
//     the token and held to the key's type (and the key's alg when the
//     JWKS gives one). none is no signature; HS256 would be keyed by our
//     client secret, which the upstream and anyone who learns it could
//     then mint tokens with; RSA keys under 2048 bits and curves other
//     than P-256 are skipped.
//   - A kid the cached key set lacks fetches the set once more, at most
//     once per 30 seconds per set: keys rotate, but invented kids must not
//     make us hammer the upstream.
//   - iss, aud holding our client_id, azp naming us (required when aud
//     holds several clients), exp ahead, iat at most 2 minutes ahead and at
//     most 15 minutes old, nonce: OpenID Connect Core 1.0, 3.1.3.7, so a
//     token for another client, an old one or another request's cannot
//     sign a person in.
//   - A logout token must carry the back-channel logout event and no
//     nonce, a jti and a sid or sub, and typ logout+jwt when it has a typ:
//     an ID token must never end sessions, nor a logout token sign in.
//
// # Caching and failure
//
// Each node caches an upstream's discovery document and key set for as
// long as their Cache-Control max-age says, within 1 minute and 24 hours
// (1 hour without one). When refreshing fails, the cached copy is served
// for up to 6 hours after its fetch and the upstream is asked again only
// after 10 seconds, so a flapping upstream neither stops sign-ins nor
// makes each wait out a timeout. One fetch per document runs at a time.
// Every call to an upstream is bounded in time (Options.Timeout, 10 s) and
// in size (Options.MaxBody, 1 MiB, read through io.LimitReader).
//
// Errors say whose the fault is, for the page and the status: see
// ErrUnreachable, ErrInvalid, ErrUpstream (*UpstreamError) and ErrConfig.
package federation
