// Package kek wraps secrets at rest (signing keys, TOTP secrets, the browser
// key) under the operator's key-encryption key (--kek-file) before they are
// proposed to raft, so the raft log, the bbolt file and snapshots hold only
// ciphertext. Every node of a cluster loads the same KEK: raft replicates
// the ciphertext, and each node opens what it reads.
//
// A record is self-describing; its first byte is the format version:
//
//	0x00 | plaintext                                       clear (no KEK)
//	0x01 | key id (4) | nonce (12) | AES-256-GCM(plaintext) sealed
//
// The key id is the first 4 bytes of SHA-256("oidcd kek id" 0x00 KEK): it
// names the KEK a record needs without revealing anything of it, so a node
// started with the wrong KEK, or none, is told which one the record wants.
// The GCM additional data is the 5-byte header followed by the caller's aad,
// which names the record ("signing_key/<kid>", "totp/<user id>"): a sealed
// value moved to another record, or a tampered header, does not open.
//
// Invariants:
//   - A nil *KEK is valid: Seal writes the clear form, Open reads the clear
//     form and refuses a sealed one with ErrNoKEK.
//   - A non-nil KEK always seals, and still opens clear records, so that a
//     KEK can be introduced on a running provider: records written before
//     stay readable (and stay clear until they are rewritten or rotated).
//   - Open never panics on any input; every failure is ErrNoKEK,
//     ErrWrongKEK or ErrInvalid, wrapped with the key ids involved.
//   - The cipher is the standard library's AES-256-GCM with a random 96-bit
//     nonce per record; the number of records sealed under one KEK (keys,
//     TOTP secrets) stays far below the 2^32 bound for random nonces.
package kek
