// Package console is the operator's admin console in the browser, served
// under /console/ on every node: organizations (with their name and who
// may register themselves), people (with their second factors:
// authenticator-app and recovery-code enrollment, lockout clearing; and a
// link to prove their address), memberships, invitations, clients,
// signing keys, directories, the audit trail and cluster health. Without
// mail (admin.Config.Mail) what would send some is not offered. Pages are server-rendered HTML forms without
// script, like the sign-in pages.
//
// How it reaches the data: New builds a private instance of the admin API
// (the admin package) from the node's own admin.Config, whose only accepted
// bearer token is a random value generated in memory (besides a person's
// access token, checked by the node's admin.Config.People), and every page calls
// that handler in-process with JSON, exactly as `oidcd admin` calls the API
// over HTTP. So validation, id and time stamping, the replicated write
// path and the error envelope are the API's own; the console only turns
// forms into JSON and envelopes (with their field details) back into the
// form. Cluster health is the API's GET /status.
//
// Two ways in. A person signs in through the provider itself, as the
// built-in public client admin.ClientID (code flow, PKCE S256, state and
// nonce; person.go): the session then holds their access token and every
// call of the API carries it as the bearer, so the API's own check
// (liveness, acr, grant) decides each request, and a refusal of the person
// (401, or 403 with a bearer challenge) ends the console session. The
// admin token, the break-glass credential, is the other way: its session
// calls with the private token.
//
// Invariants:
//   - A person's sign-in keeps its state, nonce and PKCE verifier in a
//     flow cookie sealed like the session (its own purpose), HttpOnly,
//     SameSite=Lax (the provider's redirect may come from another site),
//     ten minutes, cleared by the first callback. The callback checks the
//     state, the ID token's nonce, audience and issuer, and that the API
//     accepts the person before it sets the session (as long as the
//     access token lives, at most SessionLifetime).
//   - The token form takes the admin token once (a password field), checked in
//     constant time against the token's stored hash. The session cookie
//     (HttpOnly, SameSite=Strict, 8 hours; Secure, with the __Host- prefix
//     and Path=/, when the browser speaks https on the console's listener,
//     else Path=/console/, see secureFor) is sealed with the cluster's browser key (internal/seal,
//     its own purpose) and holds neither the token nor its hash: only a
//     fingerprint derived from the hash, so any node accepts it and a
//     changed admin token ends every console session. (A person's session
//     holds their access token, with a fingerprint keyed over it.) Each token
//     attempt is
//     counted per client address before the token is compared, in the
//     node's admin.Guard, the one the admin API counts in: a guess costs
//     the same on either, and an address refused by one (429, with
//     Retry-After) is refused by the other.
//   - CSRF: double submit. Every POST carries csrf_token equal to the
//     oidcd_console_csrf cookie, and a session is bound to that value.
//   - Every answer has a CSP without 'unsafe-inline' (stylesheet from
//     /console/static only, no script, form-action 'self'), no-store, and
//     DENY framing. Secrets (a client secret, a TOTP secret, recovery
//     codes) appear once, in the answer to the POST that made them.
//   - Every visible input has a <label>; text-like inputs carry
//     autocomplete (chrometest.CheckForm runs on every page in the tests).
package console
