// Package signin is the interactive sign-in of oidcd and the /account
// self-service page: passwords (local argon2id hashes, imported hashes
// replaced at the first sign-in, and directory (LDAP) people through
// package directory), authenticator-app and recovery codes, passkeys
// (WebAuthn), text-message codes, the replicated brute-force throttle and
// lockouts, and the pages of those steps. With Config.Mail it also serves
// the people's own way in (selfservice.go): a forgotten password and its
// reset, verified addresses and a new address on /account, registration
// and invitations, each by an emailed link.
//
// The authorization flow (package oidc) reaches the steps through one
// interface it declares, oidc.Steps, which *Signin implements with Step:
// the flow hands over a turn (an authn.Step: the shared part of its
// pending request, a function that reseals that request, the posted form
// or the page to show), and gets back either "answered" or the session it
// goes on with. node builds a Signin and hands it to oidc.New; Register
// mounts /account.
//
// What the flow and the sign-in share lives in the leaf package
// internal/authn, not here, so that neither package imports the other:
// the acr and amr values, the CSRF double-submit check, the pending
// request's shared fields and stages. A leaf rather than this package
// because oidc must not import signin, and rather than oidc because
// signin must not import oidc; node only wires the two. The browser
// session itself (cookies, the sealer, the browser key) is package
// session's Manager, which node builds once and hands to both.
//
// Invariants:
//   - signin imports fsm, session, webui, directory, email and internal
//     leaf helpers; never oidc, keys, cluster, logout or node. No sign-in
//     page can issue an authorization code or sign a token: a Step
//     records a session (or a step-up) and hands the request back to the
//     flow, which alone redirects to a client.
//   - Every password check spends exactly one argon2id derivation at the
//     node's cost (password.Hasher.Decoy when there is no hash to check:
//     an unknown address, a person without a password, a malformed hash,
//     a directory person), so the time of a refusal does not tell a local
//     account from an address nobody holds.
//   - Every guess (password, code, passkey assertion, text message sent)
//     is reserved in the replicated throttle before it is evaluated
//     (reserve), so concurrent guesses cannot all pass a check made before
//     any was counted; a locked key is refused before any write.
//   - A sign-in rotates the CSRF token, and every change on /account needs
//     a recent authentication and the strongest credential the person has,
//     verified afresh in this session; each change ends the person's other
//     sessions.
//   - A request that sends mail is one fsm.IssueLink whose limits are
//     counted in the apply before anything is stored or sent. The
//     forgotten-password and registration pages answer an address that
//     has an account and one that has not with the same page and status,
//     after the same work (a message composed and sealed either way) and
//     no sooner than answerFloor; a link's token is in its GET's path
//     only, never in a form, a log line or an audit event, and the GET
//     never uses the link.
//   - Pages, status codes, cookies, metric names (oidcd_*) and audit
//     events are those the sign-in had inside package oidc.
package signin
