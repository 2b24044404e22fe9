// Package admin is the operator API (docs/openapi/admin.json), served under
// /admin/v1 as one http.Handler: organizations, users, memberships, clients,
// signing keys, the cluster view, backup and restore of the whole state
// (GET and POST /snapshot), and GET /status (leader, members, applied
// index, key states and pending back-channel deliveries at a glance).
//
// Invariants:
//   - Every request is authenticated first (Authorization: Bearer <admin
//     token>, compared in constant time against a SHA-256 hash), so an
//     unauthenticated caller learns nothing, not even which routes exist.
//   - Every write is validated completely before anything is proposed; all
//     problems of a body come back together in one VALIDATION_ERROR. A
//     request that fails validation proposes nothing, so no half-written
//     record exists.
//   - Writes are fsm commands stamped here (ids, times from Config.Now,
//     argon2id hashes) and sent through Config.Applier; the state machine is
//     the final judge of uniqueness and references. An Applier error means
//     the cluster did not commit: 503 SERVICE_UNAVAILABLE.
//   - Reads are linearizable: every GET (and HEAD) first waits for
//     Config.ReadIndex, in one place after authentication (linearize.go),
//     so a read on any node sees every write acknowledged before it began;
//     without a leader to vouch, 503 SERVICE_UNAVAILABLE. ?stale=true
//     reads the node's own copy instead. GET /status, GET /cluster and
//     GET /audit/verify describe the answering node and never wait; GET
//     /snapshot takes its own read index.
//   - Answers never include a password or secret hash; a confidential
//     client's secret is shown once, in the 201 of its creation.
//   - Errors use the httpx envelope (ErrorResponse). Client input never
//     produces a 500.
//   - The package holds no global state; everything comes through Config.
package admin
