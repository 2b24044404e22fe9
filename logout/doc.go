// Package logout ends sessions on RP-initiated logout (SPEC.md 4.10, 4.11)
// and delivers back-channel logout tokens (SPEC.md section 6).
//
// Deliveries are recorded by the FSM in the same command that ends the
// sessions; only the leader sends them, and a new leader picks up whatever
// is still pending. logout imports fsm, keys and webui, never oidc or
// cluster.
package logout
