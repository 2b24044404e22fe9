// Package email is the provider's mail to people: what each message says
// (Compose, from the templates under templates/), its body sealed for the
// replicated outbox (Outgoing, Open), and the leader's delivery of the
// outbox through the site's relay or an outbox file (Sender).
//
// A message is committed to the state (fsm.OutgoingEmail, carried by the
// command that makes the link it holds) before it is sent. The body holds
// a link's token, so it is sealed under the operator's key-encryption key
// (internal/kek) before it is proposed: the raft log, the state file and
// snapshots hold ciphertext when --kek-file is given, and the body is
// dropped from the state once the message is sent or has failed for good.
package email
