// Package authn holds the small pieces the authorization flow (package
// oidc) and the interactive sign-in (package signin) must agree on, so
// that neither imports the other: the authentication strength values
// (acr, amr), the CSRF double-submit check, the sign-in part of the
// sealed pending authorization request with its stages, and Step, the one
// turn of the sign-in the flow hands over. The browser's cookies, the
// sealer and the browser key are package session's.
//
// Invariants:
//   - authn is a leaf: it imports only the standard library and other
//     internal leaf helpers (password), never fsm, webui or a surface
//     package. Whatever needs the store stays with its package.
//   - The JSON field names of Pending are part of the sealed step every
//     node opens: renaming one breaks the sign-ins in flight during a
//     rolling upgrade.
//   - A Step can show a page, record a sign-in and reseal the pending
//     request; it holds nothing that issues a code or signs a token.
package authn
