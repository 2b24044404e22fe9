// Package cli is `oidcd admin`: a thin command-line client over the
// admin API (docs/openapi/admin.json, base path /admin/v1).
//
// Run parses `<noun> <verb> [flags] [args]` (or `status [flags]`, a noun
// that is its own command), turns it into exactly one HTTP call, and prints
// the answer as a table (or, with --json, the server's JSON body
// pretty-printed). It keeps no state and knows nothing of the server's
// internals: the wire contract is its only dependency, so any node of any
// version that honours the contract can be driven by it.
//
// Invariants:
//
//   - One invocation, one request, but for the verbs that say otherwise
//     (login, audit tail and verify, the grants' verbs, and every verb
//     given a person's address instead of their user ID, which looks the
//     address up first: people.go). Every request carries
//     `Authorization: Bearer <token>`, a fresh X-Correlation-ID and, when it
//     has a body, `Content-Type: application/json`. Update verbs send only the
//     fields whose flags were given on the command line.
//   - The exit code is a contract for scripts: ExitOK (0) success,
//     ExitServerError (1) the server answered with an error, ExitUsage (2)
//     bad flags or arguments (nothing was sent), ExitUnreachable (3) no
//     answer (connection refused, timeout), ExitAuth (4) authentication
//     failed (HTTP 401, or no token to send), ExitNoLeader (5) only for
//     `status`: the node answered but knows no leader.
//   - Data goes to stdout, diagnostics and "shown only once" notes go to
//     stderr, so `--json` output can be piped straight into jq.
//   - No package-level mutable state: the environment, stdin, stdout and
//     stderr are all parameters of Run, so tests run it in-process.
package cli
