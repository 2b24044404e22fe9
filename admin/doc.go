// Package admin is the operator API (docs/openapi/admin.json), served under
// /admin/v1 as one http.Handler: organizations (and who may register
// into them), users, memberships, invitations and address checks by email
// (docs/operators/invitations.md), clients, identity providers and
// people's links to them (federation, docs/operators/federation.md),
// signing keys, the cluster view, backup and restore of the whole state (GET and POST /snapshot),
// and GET /status (leader, members, applied index, key states and pending
// back-channel deliveries at a glance).
//
// Invariants:
//   - Every request is authenticated first, so an unauthenticated caller
//     learns nothing, not even which routes exist. The bearer resolves to
//     one Credential (credential_check.go): the break-glass admin token or
//     an API key (each compared in constant time against a SHA-256 hash;
//     a key names its record, oidcd_ak_<id>_<secret>), or a person's
//     access token issued to ClientID with the required acr and a grant
//     (the widest in force). Grants and keys are read after a read index,
//     so one removed through any node is refused by the next request.
//     Every wrong credential is counted by the Guard before it is
//     compared.
//   - Every write is validated completely before anything is proposed; all
//     problems of a body come back together in one VALIDATION_ERROR. A
//     request that fails validation proposes nothing, so no half-written
//     record exists.
//   - Writes are fsm commands stamped here (ids, times from Config.Now,
//     argon2id hashes) and sent through Config.Applier; the state machine is
//     the final judge of uniqueness and references. An Applier error is
//     answered by applyFailed: a write the cluster's state format cannot
//     take yet (a rolling upgrade, *fsm.FormatError) is 409 CONFLICT
//     naming the members to upgrade; one whose fate is unknown
//     (fsm.ErrMaybeApplied) is 503 saying it may have been applied; any
//     other means the cluster did not commit: 503 SERVICE_UNAVAILABLE.
//   - A create with an Idempotency-Key derives its record's id from the
//     credential, the route and the key (idempotency.go), so a retry
//     meets the record the first try made and answers it again, never
//     making a second; nothing of the key is stored, and a secret shown
//     once is never shown again.
//   - Reads are linearizable: every GET (and HEAD) first waits for
//     Config.ReadIndex, in one place after authentication (linearize.go),
//     so a read on any node sees every write acknowledged before it began;
//     without a leader to vouch, 503 SERVICE_UNAVAILABLE. ?stale=true
//     reads the node's own copy instead. GET /status, GET /cluster and
//     GET /audit/verify describe the answering node and never wait; GET
//     /snapshot takes its own read index.
//   - A route that sends mail commits the message, sealed under the KEK,
//     in the same command as the link it carries (only the link's hash is
//     replicated), or answers 409 when the provider sends no mail
//     (mail.go); the token never leaves the sealed message.
//   - Answers never include a password or secret hash; a confidential
//     client's secret, an API key and a new admin token are shown once, in
//     the 201 of their creation. The audit trail names who acted
//     (detail.credential), never with what.
//   - Errors use the httpx envelope (ErrorResponse). Client input never
//     produces a 500.
//   - The package holds no global state; everything comes through Config.
package admin
