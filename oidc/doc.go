// Package oidc serves the OpenID Connect protocol surface
// (docs/openapi/oidc.json): discovery, the key set, authorize with its
// validation, its pipeline, the organization picker and consent
// (authorize*.go, picker.go, consent.go), token, userinfo, introspection,
// revocation and memberships (token.go and friends). The interactive
// sign-in (passwords, second factors, text messages, directories) and
// /account are package signin's, reached through the Steps interface
// declared here; logout lives in package logout.
//
// Invariants:
//   - The discovery document is a function of the issuer alone: it is
//     encoded once, at construction, and served from those bytes. Every
//     endpoint in it is the issuer (without a trailing slash) plus a fixed
//     path, so all nodes of a cluster publish the same document.
//   - The key set comes from a KeySource (package keys) that caches its
//     encoding; the handler adds only headers. It is served with
//     Cache-Control: public, max-age=300, which is why a new key is
//     published longer than that before it signs. When no key set can be
//     read the answer is 503 with no body and is not cached.
//   - A bearer check caches only what a token string cannot change: its
//     signature and claims, once they passed (tokencache.go). Every hit
//     still checks that the signing key is published and exp against the
//     clock, and the live check of the store (revocation, sessions,
//     suspensions) is never cached.
//   - CORS (cors.go): discovery and the key set grant every GET to any
//     origin (*); the token endpoint, userinfo and the membership list
//     grant a preflight to an origin some client lists in its web origins,
//     and an answer, errors included, only to an origin of the client the
//     request names or its token was issued to; introspection and
//     revocation never answer CORS, and no answer allows credentials. The
//     origins are an in-memory index of every client's, rebuilt after a
//     client command or a restore (OnApply): a preflight reads no record
//     and writes nothing.
//   - oidc imports fsm, keys, session (the browser session node hands
//     it: cookies, the sealer of the pending request), webui and internal
//     leaf helpers (what it shares with the sign-in is in internal/authn),
//     never signin, cluster or logout; writes go through a narrow Applier
//     interface.
//   - Only this package redirects to a client's redirect_uri and issues
//     codes: a sign-in Step either answers with its own page or hands the
//     request back with the session it opened.
package oidc
