// Package authn holds the small pieces the authorization flow (package
// oidc) and the interactive sign-in (package signin) must agree on, so
// that neither imports the other: the authentication strength values
// (acr, amr), the names and flags of the browser's cookies, the CSRF
// double-submit token, the sign-in part of the sealed pending
// authorization request with its stages, the lazily loaded browser-key
// Box, and Step, the one turn of the sign-in the flow hands over.
//
// Invariants:
//   - authn is a leaf: it imports only the standard library and other
//     internal leaf helpers (password, seal, kek), never fsm, webui or a
//     surface package. Whatever needs the store stays with its package.
//   - Cookie names, paths and flags are decided here alone (CookieName,
//     Jar): the flow, the sign-in pages and /account set and read the
//     same cookies, HttpOnly and SameSite=Lax, Secure on an https issuer.
//   - The JSON field names of Pending are part of the sealed step every
//     node opens: renaming one breaks the sign-ins in flight during a
//     rolling upgrade.
//   - A Step can show a page, record a sign-in and reseal the pending
//     request; it holds nothing that issues a code or signs a token.
package authn
